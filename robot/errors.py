"""Errors of the robot side. Two families reach generated code, and the scoring tells them apart:

* :class:`ToolArgumentError` -- the code called a tool wrongly (an unknown object name, a NaN pose, a string where
  a vector belongs). The code is at fault: the repeat counts as *not grammatically correct*, as a ``TypeError``
  would.
* :class:`RobotError` -- the call was well formed but the robot could not or would not carry it out: a pose outside
  the workspace (:class:`WorkspaceError`), no inverse-kinematics solution or no collision-free path
  (:class:`PlanningError`), an object perception did not find (:class:`ObjectNotFound`). The motion tools catch it
  and return False by default (the public RoboScript contract, ``roboscript.eval.motion_failure: return_false``);
  where one reaches the code and ends it uncaught, the repeat is ``robot_error`` and, like any repeat that raised,
  is not evaluated (docs/robot.md, "Scoring").

Both derive from ``Exception`` so that generated code may catch them with ``except Exception``.
"""

from __future__ import annotations

from core.errors import PipelineError


class ToolArgumentError(Exception):
    """A tool was called with an argument it cannot use."""


class RobotError(Exception):
    """A well-formed request the robot could not carry out."""


class WorkspaceError(RobotError):
    """A target pose lies outside the workspace limits; the motion is refused before planning."""


class PlanningError(RobotError):
    """No inverse-kinematics solution or no collision-free path."""


class ObjectNotFound(RobotError):
    """Perception did not find an object (or a joint) the code asked about: a robot failure, not a code error."""


class GoalError(PipelineError):
    """A runner goal that cannot be run: malformed JSON, a missing field, an unknown world."""


class BackendUnavailable(PipelineError):
    """A robot backend whose software is not installed here (MoveIt, PyBullet)."""


#: Exception classes that cross the sandbox boundary by name (child process -> tool server and back).
TOOL_EXCEPTIONS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (ToolArgumentError, RobotError, WorkspaceError, PlanningError, ObjectNotFound)
}
