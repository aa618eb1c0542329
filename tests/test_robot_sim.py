"""The embedded sim backend and the tool API on it, without ROS: a verified Simple_0 snippet succeeds in most
repeats and a wrong one fails its evaluation item; workspace limits, NaN arguments, the cabinet's drawer joint,
noisy perception, the UR5, and MoveIt's clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from robot_goals import SIMPLE_0, goal

from robot.backends import create_backend
from robot.contract.params import NoiseParams
from robot.contract.tool_api import Pose
from robot.episode import EpisodeRunner, parse_goal
from robot.errors import (
    BackendUnavailable,
    GoalError,
    ToolArgumentError,
    WorkspaceError,
)
from robot.perception import create_perception
from robot.tools_impl import RobotTools
from tasks.roboscript.eval import shapes
from tasks.roboscript.eval.scoring import task_metrics
from tasks.roboscript.params import RobotEvalParams, WorldsParams

pytestmark = pytest.mark.sim

WRONG = SIMPLE_0.replace("receptacle_name='footed_bowl'", "receptacle_name='table'")


@pytest.fixture(scope="module")
def runner():
    runner = EpisodeRunner(create_backend("sim", arm="panda"), "test")
    yield runner
    runner.backend.close()


def test_verified_simple_0_succeeds_in_most_repeats_and_a_wrong_snippet_fails(runner, tasks):
    task = tasks["Simple_0"]
    result = runner.run(goal(task, SIMPLE_0, repeats=5))
    metrics = task_metrics(result, len(task.evaluation))
    assert metrics["grammar_correct"] and metrics["semantic_correct"]
    assert metrics["finished_whole_task"] >= 0.8, [r["items"] for r in result["repeats"]]
    assert len({tuple(r["state"]["boxes"]["apple"]) for r in result["repeats"]}) > 1  # the repeats differ
    wrong = runner.run(goal(task, WRONG, repeats=2))
    assert all(r["status"] == "ok" for r in wrong["repeats"])  # it runs fine ...
    assert task_metrics(wrong, 1)["finished_whole_task"] == 0.0  # ... but the apple is not in the bowl
    assert not wrong["repeats"][0]["items"][0]["ok"] and "footed_bowl" in wrong["repeats"][0]["items"][0]["detail"]


def test_noisy_perception_still_mostly_succeeds(runner, tasks):
    result = runner.run(goal(tasks["Simple_0"], SIMPLE_0, repeats=3, perception="noisy",
                              noise={"position_m": 0.004, "size_m": 0.004}))
    assert result["perception"] == "noisy"
    assert sum(r["success"] for r in result["repeats"]) >= 2


def test_workspace_limits_refuse_an_out_of_range_pose_before_moving(runner, tasks):
    backend = runner.backend
    backend.load_world(tasks["Simple_0"].world)
    runner._world_key = None
    backend.reset(0)
    perception = create_perception("ground_truth", backend, NoiseParams(), 0)
    strict = RobotTools(backend, perception, motion_failure="raise")
    tools = RobotTools(backend, perception)  # the default: the public contract, a failed motion returns False
    before = backend.q()
    down = (1.0, 0.0, 0.0, 0.0)
    far = (((1.5, 0.0, 1.0), "x = 1.500"), ((0.4, 0.0, 2.0), "z = 2.000"), ((0.85, 0.45, 1.0), "beyond its reach"))
    for position, words in far:
        with pytest.raises(WorkspaceError, match=words):
            strict.move_to_pose(Pose(position, down))
        assert tools.move_to_pose(Pose(position, down)) is False
        assert words in tools.failed_motions[-1]["text"] and tools.failed_motions[-1]["error"] == "WorkspaceError"
    with pytest.raises(WorkspaceError):
        strict.move_in_direction(np.array([0.0, 0.0, 1.0]), 0.9)
    assert tools.move_in_direction(np.array([0.0, 0.0, 1.0]), 0.9) is False
    assert [(m["call"], m["tool"]) for m in tools.failed_motions] == [(1, "move_to_pose"), (2, "move_to_pose"),
                                                                      (3, "move_to_pose"), (4, "move_in_direction")]
    assert len(strict.failed_motions) == 4  # raised, and recorded all the same
    assert np.allclose(backend.q(), before)  # refused before planning: the arm never moved
    with pytest.raises(ToolArgumentError):  # a bad argument is the code's fault in either mode: it raises
        tools.move_in_direction(np.array([0.0, 0.0, 0.0]), 0.1)
    with pytest.raises(ValueError, match="motion_failure"):
        RobotTools(backend, perception, motion_failure="ignore")
    assert tools.move_to_pose(Pose((0.45, -0.1, 1.0), down)) is True  # inside: it moves
    assert len(tools.failed_motions) == 4
    assert np.linalg.norm(np.subtract(backend.tool_pose().position, (0.45, -0.1, 1.0))) < 0.01


def test_a_place_spot_the_arm_cannot_take_gives_way_to_the_next_free_one(runner, tasks, monkeypatch):
    """parse_place_pose ranks spots by the boxes alone; when the planning scene blocks the best one (here a post
    at a fingertip that no box shows), it returns the best spot the arm reaches without collision."""
    from robot import grasps, tools_impl
    from robot.perception.scene import PlanningScene, ScenePiece

    backend = runner.backend
    backend.load_world(tasks["Simple_0"].world)
    runner._world_key = None
    backend.reset(0)
    tools = RobotTools(backend, create_perception("ground_truth", backend, NoiseParams(), 0))
    namespace = {name: getattr(tools, name) for name in dir(tools) if not name.startswith("_")}
    exec(SIMPLE_0.split("place_pose =")[0], namespace)  # detect, grasp and hold the apple
    monkeypatch.setattr(tools_impl, "PLACE_CANDIDATES", 1)
    best = tools.parse_place_pose("apple", receptacle_name="footed_bowl")
    assert backend.reachable(best, frozenset())
    closing = grasps.matrix_from_quat(best.orientation)[:, 1]
    tip = np.array(best.position) + closing * (backend.gripper_opening() / 2 + 0.006)
    backend.set_planning_scene(PlanningScene([ScenePiece("post", np.array([[*(tip - 0.004), *(tip + 0.004)]]))]))
    try:
        turned = tools.parse_place_pose("apple", receptacle_name="footed_bowl")  # one spot per hand orientation:
        assert not backend.reachable(best, frozenset())  # the way round is the hand turned a quarter
        assert turned.orientation != best.orientation and backend.reachable(turned, frozenset())
        monkeypatch.undo()
        chosen = tools.parse_place_pose("apple", receptacle_name="footed_bowl")
        assert chosen != best and backend.reachable(chosen, frozenset())
        assert chosen.orientation == best.orientation and chosen.position[2] == pytest.approx(best.position[2])
        assert np.linalg.norm(np.subtract(chosen.position, best.position)) < 0.05  # a neighbouring spot
        tools.move_to_pose(chosen)
    finally:
        backend.set_planning_scene(None)


def test_after_pulling_a_drawer_to_the_arms_inner_limit_the_hand_slides_off_the_handle_and_goes_home(runner, tasks):
    """Moderate_2's cabinet: pulling its drawer 20 cm leaves the hand where it can neither back out nor rise; the
    straight way home sweeps a finger through the handle. Going home first slides the hand off the bar."""
    backend = runner.backend
    backend.load_world(tasks["Moderate_2"].world)
    runner._world_key = None
    backend.reset(0)
    tools = RobotTools(backend, create_perception("ground_truth", backend, NoiseParams(), 0))
    namespace = {name: getattr(tools, name) for name in dir(tools) if not name.startswith("_")} | {"np": np}
    opening = shapes.DRAWER_CODE.format(drawer=shapes.DRAWER, handle=shapes.HANDLE, name="", phrase="", pull=shapes.PULL_M)
    exec(opening.split("reset_to_default_pose()")[0], namespace)  # grasp the handle, pull, let go
    drawer = {j.part: j for j in backend.joint_states()}[shapes.DRAWER]
    assert drawer.value >= 0.1
    tools.reset_to_default_pose()
    assert np.abs(backend.q() - backend.robot.home).max() < 1e-3
    assert {j.part: j for j in backend.joint_states()}[shapes.DRAWER].value == pytest.approx(drawer.value, abs=0.005)


def test_nan_and_malformed_arguments_are_argument_errors(runner, tasks):
    backend = runner.backend
    backend.load_world(tasks["Simple_0"].world)
    runner._world_key = None
    tools = RobotTools(backend, create_perception("ground_truth", backend, NoiseParams(), 0))
    with pytest.raises(ToolArgumentError, match="finite"):
        tools.move_to_pose(Pose((float("nan"), 0.0, 1.0)))
    with pytest.raises(ToolArgumentError, match="finite"):
        tools.parse_place_pose("apple", position=np.array([0.4, np.inf, 0.8]))
    with pytest.raises(ToolArgumentError, match="Pose"):
        tools.grasp([0.4, 0.0, 0.8])
    with pytest.raises(ToolArgumentError, match="no object named"):
        tools.get_3d_bbox("unicorn")
    with pytest.raises(ToolArgumentError, match="zero vector"):
        tools.move_in_direction(np.zeros(3), 0.1)
    result = runner.run(goal(tasks["Simple_0"], "move_to_pose(get_gripper_pose())\nx = 1 / 0\n", repeats=1))
    assert result["repeats"][0]["status"] == "code_error" and "ZeroDivisionError" in result["repeats"][0]["error"]


def test_bad_goals_are_clear_errors(tasks):
    with pytest.raises(GoalError, match="not valid JSON"):
        parse_goal("{'world': 1")
    with pytest.raises(GoalError, match="unknown world"):
        parse_goal(json.dumps({"world_file": "/nonexistent/world.json", "code": "x = 1"}))
    with pytest.raises(GoalError, match="repeats"):
        parse_goal(json.dumps({"world": tasks["Simple_0"].world.to_json(), "code": "x = 1", "repeats": 0}))
    with pytest.raises(GoalError, match="perception"):
        parse_goal(json.dumps({"world": tasks["Simple_0"].world.to_json(), "code": "x = 1", "perception": "xray"}))


def test_cabinet_drawer_opens_by_its_handle_and_takes_an_object(runner, catalog):
    ep = RobotEvalParams(shapes={"objects": ["gelatin_box"], "studies": ["drawer"], "repeats": 1})
    trials, skipped = shapes.trials(catalog, WorldsParams(), ep)
    assert skipped == [] and len(trials) == 1
    result = runner.run(parse_goal(json.dumps(shapes.goal(trials[0], ep))))
    repeat = result["repeats"][0]
    assert repeat["status"] == "ok", repeat["error"]
    assert repeat["state"]["joints"]["cabinet.drawer_1"] >= 0.1  # pulled out along its prismatic joint
    assert repeat["success"], repeat["items"]


def test_ur5_runs_simple_0(tasks):
    runner = EpisodeRunner(create_backend("sim", arm="ur5"), "ur5")
    try:
        result = runner.run(goal(tasks["Simple_0"], SIMPLE_0, repeats=1))
    finally:
        runner.backend.close()
    assert result["arm"] == "ur5" and result["repeats"][0]["success"], result["repeats"][0]


def test_moveit_backend_says_what_is_missing():
    with pytest.raises(BackendUnavailable, match="moveit_commander"):
        create_backend("moveit")


def test_cabinet_door_swings_open_along_an_arc_about_its_hinge(catalog):
    import numpy as np

    from robot.contract.world import World, cabinet_models

    worlds = WorldsParams()
    parts, joints = cabinet_models(catalog["cabinet_2_drawers_1_door"], (0.72, 0.0), worlds.table.height)
    assert [j.type for j in joints] == ["prismatic", "prismatic", "revolute"]
    backend = create_backend("sim")
    try:
        backend.load_world(World("door", "test", worlds.table, worlds.robot, parts, joints))
        backend.reset(0)
        tools = RobotTools(backend, create_perception("ground_truth", backend, NoiseParams(), 0))
        tools.open_gripper()
        tools.grasp(tools.parse_adaptive_shape_grasp_pose("cabinet.door_handle_0"))
        tools.close_gripper()
        assert backend.held == "cabinet.door_handle_0"
        info = tools.get_object_joint_info("cabinet.door_0", tools.get_object_center_position("cabinet.door_handle_0"),
                                           type="revolute")
        assert info["type"] == "revolute" and np.allclose(info["joint_axis"], [0, 0, -1])
        tools.follow_path(tools.generate_arc_path_around_joint(tools.get_gripper_pose(), info["joint_axis"],
                                                               info["joint_position"], 10, 40))
        assert backend.joint_states()[2].value > 0.2  # swung out towards the robot (radians)
    finally:
        backend.close()


FAILED_MOTION_THEN_PLACE = """
move_to_pose(parse_place_pose('apple', position=np.array([1.5, 0.0, 0.9])))
""" + SIMPLE_0


def test_a_failed_motion_returns_false_the_code_goes_on_and_the_repeat_is_scored_on_its_final_state(runner, tasks):
    task = tasks["Simple_0"]
    ok = runner.run(goal(task, FAILED_MOTION_THEN_PLACE, repeats=1))["repeats"][0]
    assert ok["status"] == "ok" and ok["grammatical"] and ok["success"], ok["error"]
    assert [(m["call"], m["tool"], m["error"]) for m in ok["failed_motions"]] == [(1, "move_to_pose",
                                                                                  "WorkspaceError")]
    strict = runner.run(goal(task, FAILED_MOTION_THEN_PLACE, repeats=1, motion_failure="raise"))["repeats"][0]
    assert strict["status"] == "robot_error" and not strict["grammatical"] and not strict["success"]
    assert strict["failed_motions"] == ok["failed_motions"]
    assert task_metrics({"ok": True, "repeats": [strict]}, 1)["grammar_correct"] is False
    with pytest.raises(GoalError, match="motion_failure"):
        parse_goal(json.dumps({"world": task.world.to_json(), "code": "", "motion_failure": "ignore"}))
