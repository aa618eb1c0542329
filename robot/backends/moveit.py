"""``moveit``: the same primitives over ``moveit_commander``, for a real arm or a Gazebo simulation.

Needs a running MoveIt ``move_group`` for the arm (``panda_arm`` / ``manipulator``), its Python API
(``moveit_commander``, not packaged in Debian 12: install ROS Noetic's ``ros-noetic-moveit`` on Ubuntu 20.04 or build
MoveIt 1 from source) and, for the ground-truth scene and resets in Gazebo, ``gazebo_msgs``. Where they are absent,
creating the backend raises :class:`~robot.errors.BackendUnavailable` naming what is missing.

What it maps to: motions are ``MoveGroupCommander.go`` (OMPL; the paper uses RRT*) and
``compute_cartesian_path`` (executing the fraction it achieves); the gripper is the hand group's named targets
``open`` / ``close``; attach/detach go to the planning scene; the world's models are added to the planning scene as
boxes at ``load_world`` (the paper's ground-truth planning scene), or the perceived scene's pieces as collision objects
of boxes. Poses of objects come from Gazebo's ``/gazebo/get_model_state`` when Gazebo is up, else from the world
file; with ``perception: perceived`` they come from the perception pipeline fed by the robot's camera topics
(``robot/perception/ros_cameras.py``). ``reset`` puts Gazebo models back; on a real robot a person resets the
scene, and the runner only returns the arm home.
"""

from __future__ import annotations

import importlib

import numpy as np

from robot.backends.base import JointState, RobotBackend
from robot.contract.tool_api import Pose
from robot.contract.world import World
from robot.errors import BackendUnavailable, PlanningError, ToolArgumentError

LINK_RADIUS = 0.08
"""Half the thickness the self filter gives the arm's links (m)."""

GROUPS = {"panda": ("panda_arm", "panda_hand", "panda_hand_tcp"), "ur5": ("manipulator", "gripper", "tool0")}


def _require(module: str, what: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BackendUnavailable(
            f"the moveit backend needs {what} (Python module {module!r}), which is not installed here.",
            hint="Run the runner on a machine with ROS Noetic + MoveIt (ros-noetic-moveit) and a move_group for the "
                 "arm, or use backend: sim.") from None


class MoveItBackend(RobotBackend):
    name = "moveit"
    camera_ns = "/cameras"
    """Where the robot's camera drivers publish (``<ns>/<camera>/color/image_raw`` etc.)."""

    def __init__(self, arm: str = "panda", arm_group: str | None = None, hand_group: str | None = None,
                 tool_link: str | None = None):
        self.commander = _require("moveit_commander", "MoveIt's Python API")
        self.rospy = _require("rospy", "rospy")
        groups = GROUPS.get(arm, GROUPS["panda"])
        self.arm = arm
        self.group = self.commander.MoveGroupCommander(arm_group or groups[0])
        self.hand = self.commander.MoveGroupCommander(hand_group or groups[1])
        self.tool_link = tool_link or groups[2]
        self.scene = self.commander.PlanningSceneInterface(synchronous=True)
        self.group.set_planner_id("RRTstarkConfigDefault")
        try:
            self.gazebo = importlib.import_module("gazebo_msgs.srv")
        except ImportError:
            self.gazebo = None
        self._world: World | None = None
        self._attached: set[str] = set()
        self._held: str | None = None
        self._cameras = None
        self._perceived: list[str] = []

    # ------------------------------------------------------------------------------------------------ scene

    def load_world(self, world: World) -> None:
        self._world = world
        for name in self.scene.get_known_object_names():
            self.scene.remove_world_object(name)
        self._add_world_boxes()

    def _add_world_boxes(self) -> None:
        """The ground-truth planning scene: every model of the world file as a box."""
        from geometry_msgs.msg import PoseStamped

        frame = self.group.get_planning_frame()
        for model in self.world.models:
            stamped = PoseStamped()
            stamped.header.frame_id = frame
            stamped.pose.position.x, stamped.pose.position.y, stamped.pose.position.z = model.position
            stamped.pose.orientation.w = 1.0
            self.scene.add_box(model.name, stamped, size=tuple(model.size))

    # ------------------------------------------------------------------------------------------------ sensing

    def capture(self, cameras, rng=None, depth_noise_m: float = 0.0):
        """The robot's cameras from their ROS topics (``robot/perception/ros_cameras.py``), frames newer than now."""
        from robot.perception.ros_cameras import CameraTopics

        if self._cameras is None or [c.name for c in self._cameras.specs] != [c.name for c in cameras]:
            self._cameras = CameraTopics(cameras, self.camera_ns)
        return self._cameras.capture(since=self.rospy.get_time())

    def robot_link_boxes(self) -> np.ndarray:
        """Boxes around each pair of consecutive link origins, grown by LINK_RADIUS (the arm's links are about that
        thick); the attached object's box too."""
        robot = self.commander.RobotCommander()
        origins = []
        for name in robot.get_link_names():
            p = robot.get_link(name).pose().pose.position
            origins.append(np.array([p.x, p.y, p.z]))
        boxes = [np.concatenate([np.minimum(a, b) - LINK_RADIUS, np.maximum(a, b) + LINK_RADIUS])
                 for a, b in zip(origins, origins[1:], strict=False)]
        if self._held is not None:
            boxes.append(self.model_box(self._held))
        return np.array(boxes)

    def set_planning_scene(self, scene) -> None:
        """A perceived scene replaces the world's boxes with one collision object of boxes per piece; None puts the
        world's boxes back."""
        for name in self._perceived:
            self.scene.remove_world_object(name)
        self._perceived = []
        if scene is None:
            self._add_world_boxes()
            return
        from geometry_msgs.msg import Pose as PoseMsg
        from moveit_msgs.msg import CollisionObject
        from shape_msgs.msg import SolidPrimitive

        for model in self.world.models:
            self.scene.remove_world_object(model.name)
        frame = self.group.get_planning_frame()
        for piece in scene.pieces:
            obj = CollisionObject(id=f"perceived/{piece.name}", operation=CollisionObject.ADD)
            obj.header.frame_id = frame
            for box in piece.boxes:
                obj.primitives.append(SolidPrimitive(type=SolidPrimitive.BOX, dimensions=list(box[3:] - box[:3])))
                pose = PoseMsg()
                pose.position.x, pose.position.y, pose.position.z = ((box[:3] + box[3:]) / 2).tolist()
                pose.orientation.w = 1.0
                obj.primitive_poses.append(pose)
            self.scene.add_object(obj)
            self._perceived.append(obj.id)

    def reset(self, seed: int, jitter_m: float = 0.0) -> None:
        if self.gazebo is not None:
            self._gazebo_reset()
        self._attached.clear()
        self._held = None
        self.open_gripper()
        self.go_home()

    def _gazebo_reset(self) -> None:
        from gazebo_msgs.msg import ModelState

        set_state = self.rospy.ServiceProxy("/gazebo/set_model_state", self.gazebo.SetModelState)
        for model in self.world.models:
            if model.kind not in ("object", "container"):
                continue
            state = ModelState(model_name=model.name, reference_frame="world")
            state.pose.position.x, state.pose.position.y, state.pose.position.z = model.position
            state.pose.orientation.z, state.pose.orientation.w = model.orientation()[2:]
            set_state(state)

    def model_names(self) -> list[str]:
        return ["table", *(m.name for m in self.world.models)]

    def _gazebo_pose(self, name: str):
        if self.gazebo is None or name == "table" or "." in name:
            return None
        try:
            get_state = self.rospy.ServiceProxy("/gazebo/get_model_state", self.gazebo.GetModelState)
            reply = get_state(model_name=name, relative_entity_name="world")
        except Exception:  # noqa: BLE001 - Gazebo not running: fall back to the world file
            return None
        return reply.pose if reply.success else None

    def model_box(self, name: str) -> np.ndarray:
        if name == "table":
            x0, y0, x1, y1 = self.world.table.bounds()
            return np.array([x0, y0, 0.0, x1, y1, self.world.table.height])
        if name not in {m.name for m in self.world.models}:
            raise ToolArgumentError(f"there is no object named {name!r}")
        model = self.world.model(name)
        box = np.array(model.bbox.as_list())
        pose = self._gazebo_pose(name)
        if pose is not None:
            shift = np.array([pose.position.x, pose.position.y, pose.position.z]) - np.array(model.position)
            box = box + np.concatenate([shift, shift])
        return box

    def model_pose(self, name: str) -> Pose:
        box = self.model_box(name)
        pose = self._gazebo_pose(name)
        orientation = (0.0, 0.0, 0.0, 1.0) if pose is None else (pose.orientation.x, pose.orientation.y,
                                                                  pose.orientation.z, pose.orientation.w)
        return Pose(tuple(float(v) for v in (box[:3] + box[3:]) / 2), orientation)

    def joint_states(self) -> list[JointState]:
        return [JointState(j.part, j.handle, j.type, np.array(j.axis, dtype=float), np.array(j.origin, dtype=float),
                           j.value, j.lower, j.upper) for j in self.world.joints]

    # ------------------------------------------------------------------------------------------------ arm

    def _pose_msg(self, pose: Pose):
        from geometry_msgs.msg import Pose as PoseMsg

        msg = PoseMsg()
        msg.position.x, msg.position.y, msg.position.z = pose.position
        (msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w) = pose.orientation
        return msg

    def tool_pose(self) -> Pose:
        p = self.group.get_current_pose(self.tool_link).pose
        return Pose((p.position.x, p.position.y, p.position.z),
                    (p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w))

    def go_home(self) -> None:
        self.group.set_named_target("ready")
        if not self.group.go(wait=True):
            raise PlanningError("MoveIt could not plan to the 'ready' pose")
        self.group.stop()

    def move_to(self, pose: Pose, ignore: frozenset[str] = frozenset()) -> None:
        self.group.set_pose_target(self._pose_msg(pose), self.tool_link)
        ok = self.group.go(wait=True)
        self.group.stop()
        self.group.clear_pose_targets()
        if not ok:
            raise PlanningError(f"MoveIt found no plan to {np.round(pose.position, 3).tolist()}")

    def move_cartesian(self, waypoints: list[Pose], ignore: frozenset[str] = frozenset()) -> tuple[float, str]:
        plan, fraction = self.group.compute_cartesian_path([self._pose_msg(p) for p in waypoints], 0.01, 0.0)
        if fraction <= 0.0:
            raise PlanningError("MoveIt's Cartesian planner achieved none of the path")
        self.group.execute(plan, wait=True)
        return float(fraction), "" if fraction >= 0.999 else "MoveIt's Cartesian planner stopped short"

    # ------------------------------------------------------------------------------------------------ gripper

    @property
    def held(self) -> str | None:
        return self._held

    @property
    def attached(self) -> frozenset[str]:
        return frozenset(self._attached)

    def open_gripper(self) -> None:
        self.hand.set_named_target("open")
        self.hand.go(wait=True)
        self._held = None

    def close_gripper(self) -> str | None:
        self.hand.set_named_target("close")
        self.hand.go(wait=True)
        width = sum(self.hand.get_current_joint_values())
        self._held = "object" if width > 0.004 else None  # the fingers stopped on something
        return self._held

    def attach(self, name: str) -> None:
        self.scene.attach_box(self.tool_link, name, touch_links=self.robot_links())
        self._attached.add(name)

    def detach(self, name: str) -> None:
        self.scene.remove_attached_object(self.tool_link, name=name)
        self._attached.discard(name)

    def robot_links(self) -> list[str]:
        return self.commander.RobotCommander().get_link_names(group=self.hand.get_name())
