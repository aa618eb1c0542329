"""The tool API accepts the calls the public RoboScript code makes -- ``get_object_joint_info(object_name=...)``,
``parse_horizontal_grasp_pose(..., approach_direction=...)``, ``description=``, poses read as ``pose.position.x`` /
``pose.orientation.w`` (geometry_msgs) -- and snippets written that way pass the code check and run on the sim."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from robot_goals import goal, run_once

from robot.contract.code_policy import DEFAULT_POLICY
from robot.contract.tool_api import TOOL_SPECS, VALUE_TYPES, Point, Pose, Quaternion
from tasks.roboscript.eval.scoring import task_metrics

# Written for this test in the public prompts' style: the drawer by its prismatic joint, a horizontal grasp against
# the joint axis, then the mug in; poses read field by field.
PUBLIC_STYLE_DRAWER = """\
# Detailed planning:
# Step 1: find the second drawer's joint from its handle position
# Step 2: grasp the handle against the joint axis and pull
# Step 3: put the mug into the opened drawer
drawer_name = 'cabinet.drawer_1'
drawer_handle_name = 'cabinet.handle_1'
detect_objects(object_list=[drawer_name, drawer_handle_name, 'white_and_yellow_mug'])
drawer_handle_position = get_object_center_position(drawer_handle_name)
drawer_joint_info = get_object_joint_info(object_name=drawer_name, position=drawer_handle_position, type="prismatic")
drawer_joint_axis = drawer_joint_info["joint_axis"]

open_gripper()
grasp_pose = parse_horizontal_grasp_pose(object_name=drawer_handle_name, approach_direction=-drawer_joint_axis)
grasp(grasp_pose)
close_gripper()
attach_object(drawer_handle_name)
move_in_direction(drawer_joint_axis, distance=0.2)
open_gripper()
detach_object(drawer_handle_name)
reset_to_default_pose()

open_gripper()
grasp_pose = parse_adaptive_shape_grasp_pose(object_name='white_and_yellow_mug', description='grasp the mug by its rim')
print('grasp at', grasp_pose.position.x, grasp_pose.position.y, grasp_pose.position.z, grasp_pose.orientation.w)
grasp(grasp_pose)
close_gripper()
attach_object('white_and_yellow_mug')
place_pose = parse_place_pose(object_name='white_and_yellow_mug', receptacle_name=drawer_name)
move_to_pose(place_pose)
open_gripper()
detach_object('white_and_yellow_mug')
gripper_pose = get_gripper_pose()
gripper_pose.position.z = gripper_pose.position.z + 0.05
move_to_pose(gripper_pose)
reset_to_default_pose()
"""

# Written for this test in the public text few-shots' style (message_tabletop_text_few_shot.py): names from
# get_object_name_list, positions saved before moving, a list as a direction, move_in_direction(direction,
# distance=...), the motion tools' True/False checked the way the public code may check it, a place pose nudged
# field by field. The first place target lies beyond the arm's reach: publicly move_to_pose returns False and the
# script goes on -- here too, so the repeat stays grammatical and is scored on its final state.
PUBLIC_STYLE_FRUITS = """\
# Detailed planning:
# Step 1: Find the fruits on the table and the white plate
# Step 2: For each fruit, grasp it, lift it, and move it over the plate
# Step 3: Release the fruit on the plate
objects = get_object_name_list()
fruits = [name for name in objects if name in ['apple', 'banana', 'orange']]
plate_position = get_object_center_position('white_ceramic_plate')
failed = []
for fruit in fruits:
    # Grasp the fruit
    open_gripper()
    grasp_pose = parse_adaptive_shape_grasp_pose(object_name=fruit)
    if not grasp(grasp_pose):
        failed.append('grasp ' + fruit)
    close_gripper()
    attach_object(fruit)
    # Lift the fruit
    direction = [0, 0, 1]  # (x, y, z)
    move_in_direction(direction, distance=0.1)
    # A first try far beyond the table: the robot cannot get there, the code goes on
    far_pose = parse_place_pose(object_name=fruit, position=plate_position + np.array([1.5, 0.0, 0.0]))
    if not move_to_pose(far_pose):
        failed.append('far ' + fruit)
    # Move the fruit over the plate and release it
    place_pose = parse_place_pose(object_name=fruit, receptacle_name='white_ceramic_plate')
    place_pose.position.z += 0.01
    if not move_to_pose(place_pose):
        failed.append('place ' + fruit)
    open_gripper()
    detach_object(fruit)
    reset_to_default_pose()
print(failed)
"""


def test_the_public_keywords_are_part_of_the_signatures():
    assert TOOL_SPECS["get_object_joint_info"].param_names[:3] == ("object_name", "position", "type")
    assert TOOL_SPECS["get_plane_normal"].param_names == ("object_name", "position")
    assert "approach_direction" in TOOL_SPECS["parse_horizontal_grasp_pose"].param_names
    assert "description" in TOOL_SPECS["parse_adaptive_shape_grasp_pose"].param_names
    verdict = DEFAULT_POLICY.check(PUBLIC_STYLE_DRAWER)
    assert verdict.ok, verdict.messages()


def test_poses_are_shaped_like_geometry_msgs():
    pose = Pose((0.4, -0.1, 1.0), (1.0, 0.0, 0.0, 0.0))
    assert (pose.position.x, pose.position.y, pose.position.z) == (0.4, -0.1, 1.0)
    assert (pose.orientation.x, pose.orientation.w) == (1.0, 0.0)
    pose.position.z += 0.05
    assert pose.position[2] == pytest.approx(1.05) and np.allclose(np.array(pose.position), [0.4, -0.1, 1.05])
    built = Pose(position=Point(x=0.4, y=-0.1, z=1.05), orientation=Quaternion(1.0, 0.0, 0.0, 0.0))
    assert built == pose and pickle.loads(pickle.dumps(built)) == built  # crosses the sandbox's pipe
    assert Pose().orientation == (0.0, 0.0, 0.0, 1.0)  # identity, not ROS's all-zero quaternion
    with pytest.raises(AttributeError, match="fields: x, y, z"):
        pose.position.w = 1.0
    with pytest.raises(TypeError, match="at most 3 values"):
        Point(1, 2, 3, 4)
    assert VALUE_TYPES["Pose"].attributes == ("position", "orientation")
    assert VALUE_TYPES["Quaternion"].signature() == "Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)"
    assert VALUE_TYPES["Point"].cls is Point


@pytest.mark.sim
def test_public_style_code_opens_the_drawer_and_places_the_mug_on_the_sim(tasks):
    result, repeat = run_once(tasks["Moderate_2"], PUBLIC_STYLE_DRAWER, "public-api")
    assert repeat["status"] == "ok", repeat["error"]
    assert "grasp at 0." in repeat["stdout"]
    assert repeat["state"]["joints"]["cabinet.drawer_1"] > 0.15
    assert task_metrics(result, 1)["finished_whole_task"] == 1.0, repeat["items"]


@pytest.mark.sim
def test_approach_direction_steers_a_horizontal_grasp(tasks):
    from robot import grasps
    from robot.backends import create_backend
    from robot.contract.params import NoiseParams
    from robot.errors import ToolArgumentError
    from robot.perception import create_perception
    from robot.tools_impl import RobotTools

    backend = create_backend("sim", arm="panda")
    try:
        backend.load_world(tasks["Simple_1"].world)
        backend.reset(0)
        tools = RobotTools(backend, create_perception("ground_truth", backend, NoiseParams(), 0))
        sideways = tools.parse_horizontal_grasp_pose("brown_ceramic_cup", approach_direction=np.array([0.0, -1.0, 0.3]))
        assert np.allclose(grasps.approach_of(sideways), [0.0, -1.0, 0.0], atol=1e-6)  # levelled, then normalised
        default = tools.parse_horizontal_grasp_pose("brown_ceramic_cup")
        assert not np.allclose(grasps.approach_of(default), [0.0, -1.0, 0.0], atol=1e-3)
        with pytest.raises(ToolArgumentError, match="mostly horizontal"):
            tools.parse_horizontal_grasp_pose("brown_ceramic_cup", approach_direction=[0.0, 0.0, -1.0])
        tools.parse_adaptive_shape_grasp_pose("brown_ceramic_cup", description="by the rim")
        assert any("by the rim" in note for note in tools.notes)
        with pytest.raises(ToolArgumentError, match="description must be text"):
            tools.parse_adaptive_shape_grasp_pose("brown_ceramic_cup", description=3)
    finally:
        backend.close()


@pytest.mark.sim
def test_public_style_code_that_meets_a_failed_motion_goes_on_and_scores_as_publicly(tasks):
    """A motion the robot cannot carry out returns False (the public contract, the default): the code checks it and
    goes on, the repeat ends ``ok`` -- grammatical, evaluated on its final state -- and the result lists the failed
    motions; under ``motion_failure: raise`` the same code ends at the first one and scores 0, as a snippet that
    raised does in the public evaluator."""
    from robot.backends import create_backend
    from robot.episode import EpisodeRunner

    task = tasks["Hard_0"]
    assert DEFAULT_POLICY.check(PUBLIC_STYLE_FRUITS).ok
    runner = EpisodeRunner(create_backend("sim", arm="panda"), "public-api")
    try:
        result = runner.run(goal(task, PUBLIC_STYLE_FRUITS, repeats=1))
        strict = runner.run(goal(task, PUBLIC_STYLE_FRUITS, repeats=1, motion_failure="raise"))
    finally:
        runner.backend.close()
    repeat = result["repeats"][0]
    assert repeat["status"] == "ok" and repeat["grammatical"], repeat["error"]
    fruits = [n for n in task.world.object_names() if n in ("apple", "banana", "orange")]
    assert repeat["stdout"].strip() == str([f"far {f}" for f in fruits])
    assert [m["tool"] for m in repeat["failed_motions"]] == ["move_to_pose"] * len(fruits)
    metrics = task_metrics(result, len(task.evaluation))
    assert metrics["grammar_correct"] and metrics["finished_whole_task"] == 1.0, repeat["items"]
    raised = strict["repeats"][0]
    assert raised["status"] == "robot_error" and "WorkspaceError" in raised["error"]
    assert len(raised["failed_motions"]) == 1
    assert task_metrics(strict, len(task.evaluation)) | {"statuses": None, "repeats": None} == {
        "grammar_correct": False, "semantic_correct": False, "finished_steps_ratio": 0.0, "finished_whole_task": 0.0,
        "repeats": None, "repeats_run": 1, "statuses": None, "error": None, "failed_motions": 1}
