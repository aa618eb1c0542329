"""How a repeat of generated code can end on a runner, and what a motion tool does when the robot cannot carry it out:
the one vocabulary runners report, the sandbox sets ``grammatical`` from and the scoring reads.

Grammar follows the public RoboScript evaluator (``instruct_to_policy/scripts/src/eval/evaluator.py``, ``run_eval``
of github.com/SgtVincent/RoboScript): a repeat is grammatical exactly when the code ran to its end without an
exception escaping it. That is status ``ok`` only. Under the default :data:`MOTION_FAILURE` (``return_false``) a
motion the robot cannot plan or execute returns ``False`` and the code goes on, as the public motion tools do, so it
does not end the repeat; under ``raise`` it raises ``RobotError``, the repeat ends ``robot_error`` and -- an
exception reached ``exec``, as publicly -- it is not grammatical.
"""

from __future__ import annotations

GRAMMATICAL = ("ok",)
"""The statuses the public evaluator goes on to evaluate; every other status scores 0 on all four metrics."""
STATUSES = ("ok", "robot_error", "code_error", "refused", "timeout", "memory", "crashed", "cancelled")

MOTION_FAILURE_MODES = ("return_false", "raise")
"""What a motion tool (grasp, move_to_pose, move_in_direction, follow_path, reset_to_default_pose) does when it
cannot plan or execute: ``return_false`` -- the public contract: it returns False, the code continues and the
repeat is scored on the final state; ``raise`` -- the stricter option: it raises RobotError."""
MOTION_FAILURE = "return_false"


def is_grammatical(status: str) -> bool:
    """Whether a repeat that ended with ``status`` counts for grammar (and is evaluated at all)."""
    if status not in STATUSES and status != "not_run":
        raise ValueError(f"unknown repeat status {status!r}; known: {', '.join(STATUSES)}")
    return status in GRAMMATICAL
