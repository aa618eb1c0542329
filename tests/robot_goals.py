"""What the robot tests share: the verified Simple_0 snippet and a runner goal for a benchmark task."""

from __future__ import annotations

import json
from dataclasses import asdict

SIMPLE_0 = """\
# Verified: pick the apple with a top-down grasp and put it into the footed bowl.
detect_objects(object_list=['apple', 'footed_bowl'])
open_gripper()
grasp_pose = parse_central_lift_grasp_pose(object_name='apple')
grasp(grasp_pose)
close_gripper()
attach_object('apple')
place_pose = parse_place_pose(object_name='apple', receptacle_name='footed_bowl')
move_to_pose(place_pose)
open_gripper()
detach_object('apple')
reset_to_default_pose()
"""


def request(task, code: str, repeats: int = 1, jitter_m: float = 0.01, **extra) -> dict:
    """The goal JSON (as a dict) running ``code`` on a benchmark task's world with its evaluation items."""
    items = [{k: v for k, v in asdict(i).items() if v is not None} for i in task.evaluation]
    return {"episode_id": task.id, "task_id": task.id, "world": task.world.to_json(), "code": code,
            "repeats": repeats, "evaluation": items, "pose_jitter_m": jitter_m} | extra


def goal(task, code: str, repeats: int = 1, **extra):
    """The same, parsed as a runner would."""
    from robot.episode import parse_goal

    return parse_goal(json.dumps(request(task, code, repeats, **extra)))


def run_once(task, code: str, caller: str) -> tuple[dict, dict]:
    """One repeat of ``code`` on a fresh in-process Panda sim runner: (the result, its repeat)."""
    from robot.backends import create_backend
    from robot.episode import EpisodeRunner

    runner = EpisodeRunner(create_backend("sim", arm="panda"), caller)
    try:
        result = runner.run(goal(task, code, repeats=1))
    finally:
        runner.backend.close()
    return result, result["repeats"][0]
