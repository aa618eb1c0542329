"""The robot flows' goal results kept for a rerun (``tasks.roboscript.eval.evaluation``'s goal helpers): a result is
found again only under the same key and fingerprint, only goals that ran are kept, and what the fingerprint covers.
The flow-level rerun on a real runner pool is in tests/test_robot_ros.py."""

from __future__ import annotations

from tasks.roboscript.eval.evaluation import (
    goal_fingerprint,
    store_result,
    stored_result,
)
from tasks.roboscript.params import RobotEvalParams


def test_a_goal_result_comes_back_only_under_its_key_and_fingerprint(tmp_path):
    ran = {"ok": True, "repeats": [{"status": "ok", "success": True}]}
    assert store_result(tmp_path, "pick_place/apple", "fp1", ran | {"runner": "/runner1"})
    assert stored_result(tmp_path, "pick_place/apple", "fp1") == ran
    assert stored_result(tmp_path, "pick_place/apple", "fp2") is None          # another goal, robot or code
    assert stored_result(tmp_path, "pick_place/pear", "fp1") is None
    assert not store_result(tmp_path, "drawer/apple", "fp1", {"ok": False, "error": "no runner is alive"})
    assert stored_result(tmp_path, "drawer/apple", "fp1") is None               # a failed run is tried again
    for path in tmp_path.glob("*.json"):
        path.write_text('{"key": "pick_place/apple", "fingerpr')                 # cut off: ignored, run again
    assert stored_result(tmp_path, "pick_place/apple", "fp1") is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_fingerprint_covers_the_goal_the_robot_and_the_code():
    goal = {"episode_id": "Simple_0", "code": "pick()", "repeats": 2}
    ep = RobotEvalParams()
    base = goal_fingerprint(goal, ep, "code1")
    assert base == goal_fingerprint(dict(goal), RobotEvalParams(), "code1")
    assert base != goal_fingerprint(goal | {"repeats": 3}, ep, "code1")
    assert base != goal_fingerprint(goal, RobotEvalParams(arm="ur5"), "code1")
    assert base != goal_fingerprint(goal, ep, "code2")
    assert base == goal_fingerprint(goal, RobotEvalParams(runners=4), "code1")  # how many runners does not matter


def test_the_stored_result_is_the_same_bytes_whichever_runner_ran_it_and_however_long(tmp_path):
    def result(runner, seconds):
        return {"ok": True, "runner": runner, "attempts": 1, "runner_errors": [], "wall_s": seconds,
                "warnings": [f"{runner}: isolation none"],
                "repeats": [{"status": "ok", "success": True, "wall_s": seconds / 2, "steps": 7,
                             "perception": {"objects": 3, "timings": {"fuse": seconds / 10},
                                            "detections": [{"found": ["apple"], "capture_s": seconds / 20}]}}]}
    store_result(tmp_path / "a", "g", "fp", result("/runner1", 3.2))
    store_result(tmp_path / "b", "g", "fp", result("/runner2", 9.7))
    (a,), (b,) = (tmp_path / "a").glob("*.json"), (tmp_path / "b").glob("*.json")
    assert a.read_bytes() == b.read_bytes()
    kept = stored_result(tmp_path / "a", "g", "fp")
    assert kept["repeats"][0]["steps"] == 7
    assert kept["repeats"][0]["perception"] == {"objects": 3, "detections": [{"found": ["apple"]}]}
