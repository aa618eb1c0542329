"""``sim``: the embedded robot -- PyBullet in DIRECT mode (no display), Franka Panda or UR5 on the world's table.

How it moves. The arm is position-controlled kinematically: every control tick sets the joints to the next point of
a planned path and steps the physics, so loose objects the arm touches are pushed, fall and settle under gravity
(under ``grasp: contact`` the joints are set with the velocity that reaches the next point and velocity motors
carry them there through the physics steps, so the contact solver sees the hand move).
Plans are straight joint-space paths checked for collisions at every tick (the robot and what it carries against
every model), with an "up, over and down" detour when the straight path is blocked; Cartesian motions follow the
line by inverse kinematics at 1 cm spacing. An unreachable pose or a blocked path raises PlanningError.

How it grasps (``grasp``, one of GRASP_MODES; the ``contact`` half lives in ``sim_contact.py``):

* ``contact`` (the default): the two fingers, coupled as one actuator drives them, close under velocity control
  with a bounded force (the gripper's continuous grip force, GRIP_FORCE_N) at the gripper's speed until they stall,
  and the arm is driven through each tick of its path by
  velocity motors (its joints are set to the planned point and move to the next one inside the physics step), so a
  loose object between the fingers is lifted and carried by PyBullet's contact model alone -- the fingers' squeeze
  and friction. It can slip, rotate in the hand, be dropped or knocked over; an object no finger is within
  HOLD_GAP_M of any longer is no longer held (recorded in ``slipped``). Opening after a grasp lets go to the stall
  width plus RELEASE_MARGIN_M a finger, and the hand backs out along its approach axis before going home.
* ``rigid`` (the debugging option): closing moves each finger until
  it touches something; when both fingers touch the same loose object it follows the tool frame rigidly until the
  gripper opens, as Gazebo's grasp plugin does.

In both, when the fingers pinch a drawer's or door's handle, the part follows the hand along its joint -- pulled
out along a prismatic axis, swung about a hinge, within the joint's limits -- and the grasp slips when the hand
leaves the handle by more than 2.5 cm (pulling the wrong way loses the handle).
"""

from __future__ import annotations

import math
import random
import time

import numpy as np

from robot.backends import sim_cameras
from robot.backends.arms import HOME_OFFSET, load_arm
from robot.backends.base import JointState, RobotBackend
from robot.backends.sim_ghosts import GhostScene
from robot.backends.sim_motion import MotionPlanner
from robot.backends.sim_contact import GRASP_MODES, ContactGrip
from robot.backends.sim_scene import SceneBuilder, SimModel
from robot.contract.catalog import load_catalog
from robot.contract.tool_api import Pose
from robot.contract.world import World
from robot.errors import BackendUnavailable, ToolArgumentError

SLIP_M = 0.025
RETREAT_M = 0.05
SETTLE_STEPS = 240


def _import_pybullet():
    try:
        import pybullet
    except ImportError:
        raise BackendUnavailable("the sim backend needs PyBullet, which is not installed.",
                                 hint="pip install pybullet==3.2.7 (pinned in pyproject.toml).") from None
    return pybullet


def _quat_rotate(q, v) -> np.ndarray:
    x, y, z, w = q
    u = np.array([x, y, z])
    v = np.asarray(v, dtype=float)
    return 2 * np.dot(u, v) * u + (w * w - np.dot(u, u)) * v + 2 * w * np.cross(u, v)


def _axis_angle_quat(axis, angle: float) -> list[float]:
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    s = math.sin(angle / 2)
    return [*(axis * s), math.cos(angle / 2)]


class _Held:
    """What the gripper holds: a loose body (rigid relative transform) or a cabinet part (joint coupling)."""

    def __init__(self, name: str, model: SimModel, rel=None, joint=None, grip_local=None, v0=0.0, tool0=None):
        self.name, self.model, self.rel = name, model, rel
        self.joint, self.grip_local, self.v0, self.tool0 = joint, grip_local, v0, tool0


class SimBackend(ContactGrip, RobotBackend):
    name = "sim"

    def __init__(self, arm: str = "panda", time_step: float = 1 / 240, substeps: int = 2, grasp: str = "contact"):
        if grasp not in GRASP_MODES:
            raise ValueError(f"grasp must be one of {', '.join(GRASP_MODES)}, got {grasp!r}")
        pb = _import_pybullet()
        self.pb = pb
        self.client = pb.connect(pb.DIRECT)
        pb.setGravity(0, 0, -9.81, physicsClientId=self.client)
        pb.setTimeStep(time_step, physicsClientId=self.client)
        self.substeps = substeps
        self.time_step = time_step
        self.arm = arm
        self.grasp = grasp
        self.robot = load_arm(pb, self.client, arm)
        if grasp == "contact":
            self._contact_hand()
        self.gripper_max_opening = self.robot.max_opening
        self.catalog = load_catalog()
        self.builder = SceneBuilder(pb, self.client, self.catalog)
        self.planner = MotionPlanner(self)
        self._world: World | None = None
        self._models: dict[str, SimModel] = {}
        self._joints: dict[str, tuple[int, int, object]] = {}  # part -> (body, joint index, world Joint)
        self._saved: int | None = None
        self._held: _Held | None = None
        self._finger_values: list[float] = [self.robot.finger_open] * len(self.robot.fingers)
        self._squeezing = False
        """Under ``contact``: the gripper was closed and its motors squeeze (until it opens)."""
        self._let_go = False
        """Under ``contact``: the gripper has just opened from a closing that stalled on something, and the arm has
        not moved since (going home backs out first: ``should_back_out``)."""
        self._attached: set[str] = set()
        self._attached_at: dict[str, Pose] = {}  # the tool pose when each attached object was attached
        self._released: tuple[str, np.ndarray] | None = None
        self.slipped: list[str] = []
        self.ghosts = GhostScene(pb, self.client)
        self.perceived_scene = False
        """True while the planner avoids the perceived planning scene instead of the true bodies."""
        self._segments: dict[tuple[int, int], int] = {}
        self._labels: tuple[str, ...] = ()

    # ------------------------------------------------------------------------------------------------ scene

    def load_world(self, world: World) -> None:
        pb = self.pb
        for model in {m.body for m in self._models.values()}:
            pb.removeBody(model, physicsClientId=self.client)
        if self._saved is not None:
            pb.removeState(self._saved, physicsClientId=self.client)
        self._world, self._held, self._attached, self._attached_at = world, None, set(), {}
        self._released = None
        base = (world.robot.base_x, world.robot.base_y, world.table.height)
        pb.resetBasePositionAndOrientation(self.robot.body, base, (0, 0, 0, 1), physicsClientId=self.client)
        self._models = self.builder.build(world)
        sim_cameras.paint(pb, self.client, self._models, world, self.robot.body)
        self._labels = (*self._models, sim_cameras.ROBOT_LABEL)
        self._segments = {(m.body, m.link): i for i, m in enumerate(self._models.values())}
        for link in range(-1, pb.getNumJoints(self.robot.body, physicsClientId=self.client)):
            self._segments[(self.robot.body, link)] = len(self._labels) - 1
        self.set_planning_scene(None)
        self._joints = {}
        for joint in world.joints:
            part = self._models[joint.part]
            self._joints[joint.part] = (part.body, part.link, joint)
            pb.resetJointState(part.body, part.link, joint.value, physicsClientId=self.client)
        self._set_home()
        self._set_q(self.robot.home)
        self._squeezing, self._let_go = False, False
        self._set_fingers(self.robot.finger_open)
        if self.grasp == "contact":
            self._hold_arm(self.robot.home)
        self._step(60)
        self._saved = pb.saveState(physicsClientId=self.client)

    def _set_home(self) -> None:
        """The home configuration: the Panda's ready pose; for the UR5, IK to the same tool pose."""
        if self.arm == "panda":
            return
        base = self.world.robot
        target = (base.base_x + HOME_OFFSET[0], base.base_y + HOME_OFFSET[1], self.world.table.height + HOME_OFFSET[2])
        q = self.planner.ik(Pose(target, (1.0, 0.0, 0.0, 0.0)), self.robot.home)
        if q is not None:
            self.robot.home = q

    def reset(self, seed: int, jitter_m: float = 0.0) -> None:
        pb = self.pb
        self.set_planning_scene(None)  # before restoring: the saved state knows no ghost bodies
        pb.restoreState(self._saved, physicsClientId=self.client)
        self._held, self._attached, self._attached_at, self.slipped = None, set(), {}, []
        self._released = None
        if jitter_m > 0:
            rng = random.Random(seed)
            for model in self.world.models:
                if model.parent != "table" or model.kind not in ("object", "container"):
                    continue
                dx, dy = rng.uniform(-jitter_m, jitter_m), rng.uniform(-jitter_m, jitter_m)
                for name in [model.name, *(m.name for m in self.world.models if m.parent == model.name)]:
                    sim = self._models[name]
                    pos, orn = pb.getBasePositionAndOrientation(sim.body, physicsClientId=self.client)
                    pb.resetBasePositionAndOrientation(sim.body, (pos[0] + dx, pos[1] + dy, pos[2]), orn,
                                                       physicsClientId=self.client)
        self._set_q(self.robot.home)
        self._squeezing, self._let_go = False, False
        self._set_fingers(self.robot.finger_open)
        if self.grasp == "contact":
            self._hold_arm(self.robot.home)
        self._step(30)

    def sim_model(self, name: str) -> SimModel:
        try:
            return self._models[name]
        except KeyError:
            raise ToolArgumentError(f"there is no object named {name!r} in the scene; known: "
                                    f"{', '.join(self.model_names())}") from None

    def model_names(self) -> list[str]:
        return ["table", *(m.name for m in self.world.models)]

    # ------------------------------------------------------------------------------------------------ sensing

    def capture(self, cameras, rng=None, depth_noise_m: float = 0.0):
        stamp = time.time()
        with self.ghosts.hidden():
            return [sim_cameras.render(self.pb, self.client, spec, self._segments, self._labels, rng, depth_noise_m,
                                       stamp) for spec in cameras]

    def render_state(self) -> bytes:
        """What :meth:`capture` renders, exactly: every body but the planning scene's ghosts (hidden while the
        cameras render) with its base pose, joint values and the link frames the renderer draws, and the labels of
        the segmentation. The perception memo (robot/perception/shared.py) shares a capture only under the same
        render state, cameras and generator state. The colours and shapes are the world's, painted once per load:
        a memo lives within one goal, whose world does not change."""
        pb, client = self.pb, self.client
        ghosts = {m.body for m in self.ghosts.models().values()}
        state: list = [self._labels]
        for index in range(pb.getNumBodies(physicsClientId=client)):
            body = pb.getBodyUniqueId(index, physicsClientId=client)
            if body in ghosts:
                continue
            joints = range(pb.getNumJoints(body, physicsClientId=client))
            state.append((body, pb.getBasePositionAndOrientation(body, physicsClientId=client),
                          [s[0] for s in pb.getJointStates(body, joints, physicsClientId=client)] if joints else [],
                          [s[4:6] for s in pb.getLinkStates(body, joints, physicsClientId=client)] if joints else []))
        return repr(state).encode()

    def robot_link_boxes(self) -> np.ndarray:
        pb = self.pb
        links = range(-1, pb.getNumJoints(self.robot.body, physicsClientId=self.client))
        boxes = [np.concatenate(pb.getAABB(self.robot.body, link, physicsClientId=self.client)) for link in links]
        if self._held is not None and self._held.joint is None:  # MoveIt filters attached bodies too
            boxes.append(self.model_box(self._held.name))
        return np.array(boxes)

    # ------------------------------------------------------------------------------------------------ planning scene

    def set_planning_scene(self, scene) -> None:
        if scene is None:
            self.ghosts.clear()
            self.perceived_scene = False
            return
        self.ghosts.replace(scene)
        self.perceived_scene = True

    def collision_objects(self) -> dict[str, SimModel]:
        """What the planner avoids: the true bodies, or the table and the perceived planning scene's pieces."""
        if not self.perceived_scene:
            return self._models
        return {"table": self._models["table"], **self.ghosts.models()}

    def obstacle_box(self, name: str) -> np.ndarray:
        if self.perceived_scene and name in self.ghosts:
            return self.ghosts.box(name)
        return self.model_box(name)

    def _body_pose(self, model: SimModel) -> tuple[np.ndarray, tuple]:
        pb = self.pb
        if model.link >= 0:
            state = pb.getLinkState(model.body, model.link, computeForwardKinematics=True, physicsClientId=self.client)
            return np.array(state[4]), state[5]
        pos, orn = pb.getBasePositionAndOrientation(model.body, physicsClientId=self.client)
        return np.array(pos), orn

    def model_box(self, name: str) -> np.ndarray:
        model = self.sim_model(name)
        if name == "table" or model.shape == "cabinet":
            source = self.world.table if name == "table" else None
            if source is not None:
                x0, y0, x1, y1 = source.bounds()
                return np.array([x0, y0, 0.0, x1, y1, source.height])
            return np.array(self.world.model(name).bbox.as_list())
        if model.shape == "part":
            return self._part_box(name)
        pos, orn = self._body_pose(model)
        if model.shape == "sphere":
            return np.concatenate([pos - model.half, pos + model.half])
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * model.half
        world = np.array([_quat_rotate(orn, c) for c in corners]) + pos
        return np.concatenate([world.min(axis=0), world.max(axis=0)])

    def _part_box(self, name: str) -> np.ndarray:
        """A drawer, door or handle's box: its world-file box carried along by its joint's current value."""
        box = np.array(self.world.model(name).bbox.as_list())
        joint = next((j for j in self.world.joints if name in (j.part, j.handle)), None)
        if joint is None:
            return box
        value = self._joint_value(joint.part)
        if joint.type == "prismatic":
            shift = np.array(joint.axis) * (value - joint.value)
            return box + np.concatenate([shift, shift])
        corners = np.array([[box[i], box[j], box[k]] for i in (0, 3) for j in (1, 4) for k in (2, 5)])
        q = _axis_angle_quat(joint.axis, value - joint.value)
        origin = np.array(joint.origin)
        moved = np.array([_quat_rotate(q, c - origin) for c in corners]) + origin
        return np.concatenate([moved.min(axis=0), moved.max(axis=0)])

    def model_pose(self, name: str) -> Pose:
        model = self.sim_model(name)
        box = self.model_box(name)
        centre = tuple(float(v) for v in (box[:3] + box[3:]) / 2)
        if model.shape in ("table", "cabinet"):
            return Pose(centre, (0.0, 0.0, 0.0, 1.0))
        _, orn = self._body_pose(model)
        return Pose(centre, tuple(float(v) for v in orn))

    def _joint_value(self, part: str) -> float:
        body, index, _ = self._joints[part]
        return float(self.pb.getJointState(body, index, physicsClientId=self.client)[0])

    def joint_states(self) -> list[JointState]:
        out = []
        for part, (_, _, joint) in self._joints.items():
            value = self._joint_value(part)
            if joint.type == "prismatic":
                origin = np.array(joint.origin) + np.array(joint.axis) * (value - joint.value)
            else:
                origin = np.array(joint.origin)
            out.append(JointState(part, joint.handle, joint.type, np.array(joint.axis, dtype=float), origin, value,
                                  joint.lower, joint.upper))
        return out

    # ------------------------------------------------------------------------------------------------ low level

    def _step(self, n: int = 1) -> None:
        coupled = self.grasp == "contact" and self._squeezing  # a closed gripper keeps its fingers together
        for _ in range(n):
            if coupled:
                self._squeeze()
            self.pb.stepSimulation(physicsClientId=self.client)

    def q(self) -> np.ndarray:
        pb = self.pb
        body, client = self.robot.body, self.client
        return np.array([state[0] for state in pb.getJointStates(body, self.robot.joints, physicsClientId=client)])

    def _reset_joints(self, joints: list[int], values) -> None:
        """Joint positions at once, velocities zero: one PyBullet call (what resetJointState does joint by joint;
        the IK solver sets the arm thousands of times an episode)."""
        values = [float(v) for v in values]
        if len(values) != len(joints):
            raise ValueError(f"{len(values)} values for {len(joints)} joints")
        self.pb.resetJointStatesMultiDof(self.robot.body, joints, targetValues=[[v] for v in values],
                                         targetVelocities=[[0.0]] * len(joints), physicsClientId=self.client)

    def _set_q(self, q) -> None:
        self._reset_joints(self.robot.joints, q)

    def _set_fingers(self, value: float | list[float]) -> None:
        values = [value] * len(self.robot.fingers) if isinstance(value, float) else list(value)
        self._finger_values = values
        self._reset_joints(self.robot.fingers, values)
        if self.grasp == "contact" and not self._squeezing:  # a closed gripper keeps squeezing
            self._drive_fingers(values)

    # ------------------------------------------------------------------------------------------------ motors (contact)

    def _relative_to_tool(self, model: SimModel):
        pb = self.pb
        tool = self.tool_pose()
        pos, orn = pb.getBasePositionAndOrientation(model.body, physicsClientId=self.client)
        inv = pb.invertTransform(tool.position, tool.orientation)
        return pb.multiplyTransforms(inv[0], inv[1], pos, orn)

    def tool_pose(self) -> Pose:
        state = self.pb.getLinkState(self.robot.body, self.robot.tool_link, computeForwardKinematics=True,
                                     physicsClientId=self.client)
        return Pose(tuple(float(v) for v in state[4]), tuple(float(v) for v in state[5]))

    def execute(self, path: list[np.ndarray]) -> None:
        """Play a joint path tick by tick: set the joints, carry what is held, step the physics. Under ``contact``
        the arm is driven through each tick instead (``_drive_tick``) and what it holds is carried by the contacts."""
        if self.grasp == "contact":
            self._execute_driven(path)
            return
        for q in path:
            if self.interrupt is not None:
                self.interrupt()
            self._set_q(q)
            self._set_fingers(self._finger_values)  # the fingers hold their opening whatever pushes them
            self._carry()
            self._step(self.substeps)

    def _carry(self) -> None:
        held = self._held
        if held is None or (held.joint is None and self.grasp == "contact"):
            return
        pb = self.pb
        tool = self.tool_pose()
        if held.joint is None:
            pos, orn = pb.multiplyTransforms(tool.position, tool.orientation, *held.rel)
            pb.resetBasePositionAndOrientation(held.model.body, pos, orn, physicsClientId=self.client)
            pb.resetBaseVelocity(held.model.body, (0, 0, 0), (0, 0, 0), physicsClientId=self.client)
            return
        body, index, joint = self._joints[held.joint]
        hand = np.array(tool.position)
        axis = np.array(joint.axis, dtype=float)
        if joint.type == "prismatic":
            value = held.v0 + float(np.dot(hand - held.tool0, axis))
        else:
            origin = np.array(joint.origin)
            a = held.tool0 - origin
            b = hand - origin
            a -= np.dot(a, axis) * axis
            b -= np.dot(b, axis) * axis
            value = held.v0 + math.atan2(float(np.dot(np.cross(a, b), axis)), float(np.dot(a, b)))
        value = min(max(value, joint.lower), joint.upper)
        pb.resetJointState(body, index, value, physicsClientId=self.client)
        link = pb.getLinkState(body, held.model.link, computeForwardKinematics=True, physicsClientId=self.client)
        grip = np.array(pb.multiplyTransforms(link[4], link[5], held.grip_local, (0, 0, 0, 1))[0])
        if np.linalg.norm(grip - hand) > SLIP_M:
            self.slipped.append(held.name)
            self._held = None

    # ------------------------------------------------------------------------------------------------ arm

    def reachable(self, pose: Pose, ignore: frozenset[str] | None = None) -> bool:
        return self.planner.ik(pose, self.q(), ignore=ignore) is not None

    def go_home(self) -> None:
        self.planner.move_joints(self.robot.home, frozenset())

    def move_to(self, pose: Pose, ignore: frozenset[str] = frozenset()) -> None:
        self.planner.move_to(pose, ignore)

    def move_cartesian(self, waypoints: list[Pose], ignore: frozenset[str] = frozenset()) -> tuple[float, str]:
        return self.planner.cartesian(waypoints, ignore)

    def approach(self, pre: Pose, target: Pose, ignore: frozenset[str] = frozenset()) -> tuple[float, str]:
        return self.planner.approach(pre, target, ignore)

    # ------------------------------------------------------------------------------------------------ gripper

    @property
    def held(self) -> str | None:
        return None if self._held is None else self._held.name

    def gripper_opening(self) -> float:
        return float(sum(self._finger_values)) / (2 * self.robot.finger_open) * self.robot.max_opening

    @property
    def attached(self) -> frozenset[str]:
        return frozenset(self._attached)

    def attach(self, name: str) -> None:
        self.sim_model(name)
        self._attached.add(name)
        self._attached_at[name] = self.tool_pose()

    def detach(self, name: str) -> None:
        self.sim_model(name)
        self._attached.discard(name)
        then = self._attached_at.pop(name, None)
        if then is not None and self.perceived_scene:
            self.ghosts.carry(name, then, self.tool_pose())
            self._released = (name, np.array(self.tool_pose().position))

    def just_released(self) -> str | None:
        """The object the hand let go of last while it is still within RETREAT_M of where it let go: plans may
        touch it (its perceived occupancy hugs the fingers), as a place pipeline's retreat may in MoveIt."""
        if self._released is None:
            return None
        name, where = self._released
        if np.linalg.norm(np.array(self.tool_pose().position) - where) > RETREAT_M:
            self._released = None
            return None
        return name

    def _finger_contacts(self, finger: int, within: float = 0.0008) -> set[tuple[int, int]]:
        """(body, link) of the models a finger is closer to than ``within`` (negative: penetrating that deep)."""
        pb = self.pb
        out = set()
        for model in self._models.values():
            points = pb.getClosestPoints(self.robot.body, model.body, max(within, 0.0), linkIndexA=finger,
                                         linkIndexB=model.link, physicsClientId=self.client)
            if any(p[8] <= within for p in points):
                out.add((model.body, model.link))
        return out

    def open_gripper(self) -> None:
        pb = self.pb
        self._held = None
        if self.grasp == "contact":
            self._open_driven()
            self.settle()
            return
        current = pb.getJointState(self.robot.body, self.robot.fingers[0], physicsClientId=self.client)[0]
        for value in np.linspace(current, self.robot.finger_open, 8):
            self._set_fingers(float(value))
            self._step(self.substeps)
        self.settle()

    def settle(self, max_steps: int = SETTLE_STEPS) -> None:
        """Step until loose bodies are still (or max_steps)."""
        pb = self.pb
        dynamic = [m.body for m in self._models.values() if m.dynamic]
        for i in range(0, max_steps, 10):
            self._step(10)
            if i >= 30 and all(np.linalg.norm(pb.getBaseVelocity(b, physicsClientId=self.client)[0]) < 2e-3
                               for b in dynamic):
                break

    def close_gripper(self) -> str | None:
        if self.grasp == "contact":
            return self._close_contact()
        pb = self.pb
        fingers = self.robot.fingers
        values = list(self._finger_values)
        # A body a finger is already inside was wider than the opening: the finger landed on it, it cannot be held.
        blocked = self._finger_contacts(fingers[0], -0.003) | self._finger_contacts(fingers[1], -0.003)
        touching: list[set] = [set(), set()]
        moving = [True, True]
        while any(moving):
            for i, finger in enumerate(fingers):
                if not moving[i]:
                    continue
                contacts = self._finger_contacts(finger)
                if contacts:
                    touching[i], moving[i] = contacts, False
                    continue
                values[i] = max(0.0, values[i] - 0.0015)
                pb.resetJointState(self.robot.body, finger, values[i], physicsClientId=self.client)
                if values[i] <= 0.0:
                    moving[i] = False
                    touching[i] = self._finger_contacts(finger)
        self._finger_values = values
        self._held = None
        target = self._holdable(touching, blocked)
        if target is not None:
            self._grab(target)
        self._step(self.substeps)
        return self.held

    def _holdable(self, touching: list[set], blocked: set) -> str | None:
        """What closing fingers hold: a loose body both fingers touch (and neither was already inside), or a
        cabinet handle that one finger touches while the other touches the handle or the drawer/door it is on
        (a flush pull is pinched against its front)."""
        names = [{self._name_of(b, link) for b, link in t} - {None} for t in touching]
        loose = [n for n in names[0] & names[1] if self._models[n].dynamic and
                 (self._models[n].body, self._models[n].link) not in blocked]
        if loose:
            return sorted(loose)[0]
        for joint in self.world.joints:
            for a, b in ((0, 1), (1, 0)):
                if joint.handle in names[a] and names[b] & {joint.handle, joint.part}:
                    return joint.handle
        return None

    def _name_of(self, body: int, link: int) -> str | None:
        for model in self._models.values():
            if model.body == body and model.link == link:
                return model.name
        return None

    def _grab(self, name: str) -> None:
        pb = self.pb
        model = self._models[name]
        tool = self.tool_pose()
        if model.dynamic:
            self._held = _Held(name, model, rel=self._relative_to_tool(model))
            return
        joint = next((j for j in self.world.joints if name in (j.part, j.handle)), None)
        if joint is None:
            return
        link = pb.getLinkState(model.body, model.link, computeForwardKinematics=True, physicsClientId=self.client)
        inv = pb.invertTransform(link[4], link[5])
        grip_local = pb.multiplyTransforms(inv[0], inv[1], tool.position, (0, 0, 0, 1))[0]
        self._held = _Held(name, model, joint=joint.part, grip_local=grip_local, v0=self._joint_value(joint.part),
                           tool0=np.array(tool.position))

    def restart(self) -> None:
        """A new physics client with the robot reloaded (~0.3 s): PyBullet's restoreState brings back poses and
        velocities, not everything a previous goal left behind (solver caches, body ids, motor targets)."""
        arm, time_step, substeps, grasp = self.arm, self.pb.getPhysicsEngineParameters(
            physicsClientId=self.client)["fixedTimeStep"], self.substeps, self.grasp
        self.close()
        self.__init__(arm, time_step, substeps, grasp)

    def twin(self) -> SimBackend:
        """A simulator of its own (its own physics client), built as :meth:`restart` rebuilds this one."""
        time_step = self.pb.getPhysicsEngineParameters(physicsClientId=self.client)["fixedTimeStep"]
        return SimBackend(self.arm, time_step, self.substeps, self.grasp)

    def close(self) -> None:
        try:
            self.pb.disconnect(physicsClientId=self.client)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.builder.close()
