"""The sandbox: refused escapes, limits (time, memory), error classes, restricted globals -- no ROS, no simulator."""

from __future__ import annotations

import numpy as np
import pytest

from robot.contract.tool_api import Pose
from robot.errors import RobotError, ToolArgumentError, WorkspaceError
from robot.sandbox import Limits, run_code


class FakeTools:
    """Three tools with fixed answers and a log of calls, enough to exercise the proxy protocol."""

    def __init__(self):
        self.calls = []
        self.notes = []

    def get_gripper_pose(self):
        self.calls.append("get_gripper_pose")
        return Pose((0.3, 0.0, 1.2), (1.0, 0.0, 0.0, 0.0))

    def get_object_center_position(self, object_name):
        self.calls.append(("center", object_name))
        if object_name != "apple":
            raise ToolArgumentError(f"there is no object named {object_name!r}")
        return np.array([0.4, -0.3, 0.8])

    def move_to_pose(self, pose):
        self.calls.append("move_to_pose")
        if pose.position[0] > 1.0:
            raise WorkspaceError("move_to_pose refused: x is outside the workspace")


LIMITS = Limits(timeout_s=3.0, memory_mb=256)


@pytest.mark.parametrize("code, reason", [
    ("import os\nos.system('true')", "forbidden_import"),
    ("data = open('/etc/passwd').read()", "forbidden_name"),
    ("classes = ().__class__.__bases__[0].__subclasses__()", "dunder_access"),
    ("f = get_gripper_pose.__globals__", "dunder_access"),
    ("x = eval('1 + 1')", "forbidden_name"),
    ("m = np.load('/etc/passwd')", "unknown_module_attribute"),
])
def test_escape_attempts_are_refused_before_running(code, reason):
    tools = FakeTools()
    outcome = run_code(code, tools, LIMITS)
    assert outcome.status == "refused" and not outcome.grammatical
    assert reason in outcome.reasons
    assert tools.calls == []  # nothing ran


def test_checked_code_runs_with_tools_and_restricted_numpy():
    tools = FakeTools()
    steps = []
    code = ("pose = get_gripper_pose()\n"
            "centre = get_object_center_position('apple')\n"
            "print(round(float(np.linalg.norm(centre - np.array(pose.position))), 3))\n"
            "move_to_pose(pose)\n")
    outcome = run_code(code, tools, LIMITS, on_step=steps.append)
    assert outcome.status == "ok", outcome.error
    assert outcome.stdout.strip() == "0.51"
    assert [s["tool"] for s in steps] == ["get_gripper_pose", "get_object_center_position", "move_to_pose"]
    assert outcome.steps == 3 and all(s["ok"] for s in steps)


def test_runtime_namespace_has_only_allowed_builtins_and_numpy_attributes():
    # `sorted` is allowed; __import__ is not reachable even through the builtins the code may use.
    outcome = run_code("names = sorted(['b', 'a'])\nprint(names)", FakeTools(), LIMITS)
    assert outcome.status == "ok" and outcome.stdout.strip() == "['a', 'b']"


def test_endless_loop_times_out_and_memory_bomb_hits_the_limit():
    loop = run_code("total = 0\nfor i in range(10 ** 12):\n    total = total + i\n", FakeTools(),
                    Limits(timeout_s=1.5, memory_mb=256))
    assert loop.status == "timeout" and not loop.grammatical
    assert 1.4 < loop.wall_s < 5.0
    bomb = run_code("blocks = []\nfor i in range(100000):\n    blocks.append([0] * 10000000)\n", FakeTools(),
                    Limits(timeout_s=20, memory_mb=128))
    assert bomb.status == "memory", (bomb.status, bomb.error)


def test_errors_are_classified_as_the_paper_counts_them():
    bad_name = run_code("p = get_object_center_position('unicorn')", FakeTools(), LIMITS)
    assert bad_name.status == "code_error" and "ToolArgumentError" in bad_name.error and "line 1" in bad_name.error
    crash = run_code("x = [1, 2][5]", FakeTools(), LIMITS)
    assert crash.status == "code_error" and "IndexError" in crash.error
    # A robot error that reaches the code ends the repeat robot_error; an exception reached exec, so the public
    # evaluator would not count it grammatical (robot/contract/outcomes.py).
    tools = FakeTools()
    tools.get_gripper_pose = lambda: Pose((2.0, 0.0, 1.0))  # type: ignore[method-assign]
    outcome = run_code("move_to_pose(get_gripper_pose())", tools, LIMITS)
    assert outcome.status == "robot_error" and not outcome.grammatical and "WorkspaceError" in outcome.error
    caught = run_code("try:\n    move_to_pose(get_gripper_pose())\nexcept Exception:\n    print('handled')",
                      tools, LIMITS)
    assert caught.status == "ok" and caught.stdout.strip() == "handled"
    assert issubclass(WorkspaceError, RobotError)


def test_cancellation_stops_the_code_promptly():
    flag = {"stop": False}

    def on_step(step):
        flag["stop"] = True

    outcome = run_code("p = get_gripper_pose()\nfor i in range(10 ** 12):\n    x = i\n", FakeTools(),
                       Limits(timeout_s=30), on_step=on_step, should_stop=lambda: flag["stop"])
    assert outcome.status == "cancelled" and outcome.wall_s < 5
