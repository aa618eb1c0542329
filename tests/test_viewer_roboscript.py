"""Code tests of what the RoboScript episode pages show: the sandbox records each tool call with the snippet's line,
its arguments and its result or error (no times), and the pages render code, calls, items and the world before and
after from eval_details.json."""

from __future__ import annotations

import re

import numpy as np

from robot.contract.tool_api import Pose
from robot.errors import ToolArgumentError
from robot.sandbox import Limits, run_code


class Tools:
    notes: list = []

    def get_gripper_pose(self):
        return Pose((0.3, 0.0, 1.2), (1.0, 0.0, 0.0, 0.0))

    def get_object_center_position(self, object_name):
        if object_name != "apple":
            raise ToolArgumentError(f"there is no object named {object_name!r}")
        return np.array([0.4, -0.3, 0.8])


def test_the_sandbox_records_each_call_with_its_line_arguments_and_result():
    code = ("def centre(name):\n"
            "    return get_object_center_position(name)\n"
            "pose = get_gripper_pose()\n"
            "a = centre('apple')\n"
            "b = get_object_center_position(object_name='pear')\n")
    outcome = run_code(code, Tools(), Limits(timeout_s=5.0, memory_mb=256))
    assert outcome.status == "code_error" and "(line 5)" in outcome.error, outcome
    first, second, third = outcome.calls
    assert (first["tool"], first["line"], first["args"], first["ok"]) == ("get_gripper_pose", 3, "", True)
    assert first["result"].startswith("Pose(")
    assert (second["line"], second["args"], second["result"]) == (2, "'apple'", "array([ 0.4, -0.3,  0.8])")
    assert third["args"] == "object_name='pear'" and not third["ok"] and "no object named 'pear'" in third["error"]
    assert [c["step"] for c in outcome.calls] == [1, 2, 3]
    assert not any(re.search(r"(^t$|_s$|time)", k) for c in outcome.calls for k in c)  # a DVC output's content
