"""The tool API (``robot/contract/tool_api.py``) implemented over a robot backend and a perception mode.

Every argument is checked before anything moves: object names must exist, vectors and poses must be finite numbers
of the right length, quaternions non-zero, distances and counts in range -- a bad argument raises
:class:`~robot.errors.ToolArgumentError` (the code's fault). Every target of a motion is checked against the
backend's workspace limits -- outside them the motion is refused with :class:`~robot.errors.WorkspaceError`
before it is planned.

A motion the robot cannot carry out (a refused target, no inverse-kinematics solution, no collision-free path, an
approach that stops short of the grasp pose) follows the public RoboScript contract by default: the motion tool
returns ``False``, the arm stays where it stopped, the code goes on, and :attr:`RobotTools.failed_motions` records the
call and why. ``motion_failure="raise"`` (``robot.contract.outcomes``) raises the RobotError instead.
"""

from __future__ import annotations

import math
from numbers import Real
from collections.abc import Callable
from typing import Any

import numpy as np

from robot import grasps
from robot.backends.base import JointState, RobotBackend
from robot.contract.catalog import Catalog, load_catalog
from robot.contract.outcomes import MOTION_FAILURE, MOTION_FAILURE_MODES
from robot.contract.tool_api import Pose, ToolAPI
from robot.contract.world import CABINET
from robot.errors import ObjectNotFound, PlanningError, ToolArgumentError, WorkspaceError
from robot.perception import Perception
from robot.perception.grasp_backends import GraspRequest, create_grasp_backend

PRE_GRASP_M = 0.1
DRAWER_PANEL, DRAWER_WALL = 0.02, 0.01
"""A drawer's front panel and its other walls and floor (robot/backends/urdf.py builds them so)."""
WALL_CLEARANCE = 0.005
"""Kept between a placed object and a drawer's walls: a box from perception is off by a few millimetres."""
PLACE_CANDIDATES = 32
"""Place spots parse_place_pose tries against the arm's reach and collisions, best first (a 1 cm grid around the
best spot: ~3 cm each way; a refused spot costs one collision-aware IK, ~80 ms)."""
APPROACH_DONE = 0.9
"""A grasp whose straight approach covers more than this share of its path succeeded, as the public grasp's
Cartesian approach does (moveit_gazebo_env.py, move_to_pose: a Cartesian plan counts when its fraction is > 0.9);
less returns False."""
MAX_STRAIGHT_M = 1.0
MAX_WAYPOINTS = 200


def _finite(values: Any, n: int, what: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ToolArgumentError(f"{what} must be {n} numbers, got {values!r}") from None
    if arr.shape != (n,):
        raise ToolArgumentError(f"{what} must be {n} numbers, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ToolArgumentError(f"{what} must be finite numbers, got {arr.tolist()}")
    return arr


def check_pose(pose: Any, what: str = "pose") -> Pose:
    if not isinstance(pose, Pose):
        raise ToolArgumentError(f"{what} must be a Pose (from a parse_*_pose tool or get_gripper_pose), "
                                f"got {type(pose).__name__}")
    position = _finite(pose.position, 3, f"{what}.position")
    orientation = _finite(pose.orientation, 4, f"{what}.orientation")
    norm = float(np.linalg.norm(orientation))
    if norm < 1e-6:
        raise ToolArgumentError(f"{what}.orientation is not a rotation (all zeros)")
    return Pose(tuple(float(v) for v in position), tuple(float(v) for v in orientation / norm))


def _number(value: Any, what: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (Real, np.number)):
        raise ToolArgumentError(f"{what} must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or not lo <= number <= hi:
        raise ToolArgumentError(f"{what} must be between {lo} and {hi}, got {number}")
    return number


def _rotate(vector: np.ndarray, axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' rotation of ``vector`` about unit ``axis``."""
    return (vector * math.cos(angle) + np.cross(axis, vector) * math.sin(angle)
            + axis * np.dot(axis, vector) * (1 - math.cos(angle)))


def _quat_about(axis: np.ndarray, angle: float) -> np.ndarray:
    return np.array([*(axis * math.sin(angle / 2)), math.cos(angle / 2)])


def _quat_mul(a, b) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


class RobotTools(ToolAPI):
    def __init__(self, backend: RobotBackend, perception: Perception, catalog: Catalog | None = None,
                 motion_failure: str = MOTION_FAILURE):
        if motion_failure not in MOTION_FAILURE_MODES:
            raise ValueError(f"motion_failure must be one of {', '.join(MOTION_FAILURE_MODES)}, got {motion_failure!r}")
        self.backend = backend
        self.perception = perception
        self.catalog = catalog or load_catalog()
        self.motion_failure = motion_failure
        self._grasper = None
        self.notes: list[str] = []
        """Things a caller should know about the last calls (a Cartesian motion that stopped short); the sandbox
        reports them in the step feedback and clears them."""
        self.failed_motions: list[dict] = []
        """Every motion call that returned False (``return_false``) or raised (``raise``): call number among the
        motion calls, tool name, error class and text. The runner puts it in the repeat's result."""
        self._motion_calls = 0

    def _motion(self, tool: str, run: Callable[[], str | None]) -> bool:
        """Run one motion; ``run`` returns None when it reached its target, else why not (a motion that stopped
        short). A refused or impossible motion (WorkspaceError, PlanningError) or one that stopped short returns
        False under ``return_false`` and raises under ``raise``; either way it is recorded."""
        self._motion_calls += 1
        try:
            short = run()
            error: Exception | None = PlanningError(short) if short else None
        except (WorkspaceError, PlanningError) as exc:
            error = exc
        if error is None:
            return True
        self.failed_motions.append({"call": self._motion_calls, "tool": tool, "error": type(error).__name__,
                                    "text": str(error)[:300]})
        if self.motion_failure == "raise":
            raise error
        self.notes.append(f"{tool} failed and returned False: {error}")
        return False

    # ------------------------------------------------------------------------------------------------ helpers

    def _name(self, name: Any, what: str = "object_name") -> str:
        if not isinstance(name, str):
            raise ToolArgumentError(f"{what} must be an object name (a string), got {type(name).__name__}")
        if name not in self.perception.names():
            raise ToolArgumentError(f"there is no object named {name!r}; get_object_name_list() lists them")
        return name

    def _reachable(self, pose: Pose, what: str) -> None:
        problem = self.backend.workspace.violation(np.array(pose.position))
        if problem:
            raise WorkspaceError(f"{what} refused: {problem}")

    @property
    def _hand(self) -> grasps.Hand:
        return grasps.Hand(self.backend.gripper_max_opening, self.backend.finger_reach,
                           self.backend.workspace.base)

    def _joints_of(self, name: str) -> list[JointState]:
        joints = self.perception.joints()
        if name == CABINET:
            return joints
        return [j for j in joints if name in (j.part, j.handle)]

    def _outward(self, name: str) -> np.ndarray:
        """Outward horizontal normal of the cabinet face a part or handle is on."""
        for joint in self._joints_of(name):
            if joint.type == "prismatic":
                return joint.axis
            part = self.perception.box(joint.part)
            centre = (part[:3] + part[3:]) / 2
            hinge_to_part = centre - joint.origin
            normal = np.cross(joint.axis, hinge_to_part)  # the door's swing direction at the part's centre
            normal[2] = 0.0
            return normal / max(np.linalg.norm(normal), 1e-9)
        return np.array([-1.0, 0.0, 0.0])

    # ------------------------------------------------------------------------------------------------ perception

    def detect_objects(self, object_list: list[str] | None = None) -> None:
        if object_list is not None:
            if isinstance(object_list, str) or not isinstance(object_list, (list, tuple)):
                raise ToolArgumentError(f"object_list must be a list of names or None, got {object_list!r}")
            object_list = [self._name(n, "object_list item") for n in object_list]
        self.perception.detect(object_list)

    def get_object_name_list(self) -> list[str]:
        return list(self.perception.names())

    def get_object_center_position(self, object_name: str) -> np.ndarray:
        box = self.perception.box(self._name(object_name))
        return (box[:3] + box[3:]) / 2

    def get_object_pose(self, object_name: str) -> Pose:
        return self.perception.pose(self._name(object_name))

    def get_3d_bbox(self, object_name: str) -> np.ndarray:
        return self.perception.box(self._name(object_name))

    def get_object_joint_info(self, object_name: str, position: np.ndarray, type: str = "any") -> dict:  # noqa: A002
        name = self._name(object_name)
        point = _finite(position, 3, "position")
        if type not in ("any", "prismatic", "revolute"):
            raise ToolArgumentError(f"type must be 'any', 'prismatic' or 'revolute', got {type!r}")
        joints = [j for j in self._joints_of(name) if type in ("any", j.type)]
        if not joints and self.perception.missing_joint(name):
            raise ObjectNotFound(f"perception did not find the joint of {name} (its part or handle was not seen)")
        if not joints:
            kind = "" if type == "any" else f"{type} "
            raise ToolArgumentError(f"{name} has no {kind}joint (drawers are prismatic, doors revolute)")
        best = min(joints, key=lambda j: float(np.linalg.norm(j.origin - point)))
        return {"joint_position": best.origin.copy(), "joint_axis": best.axis.copy(), "type": best.type}

    def get_plane_normal(self, object_name: str, position: np.ndarray) -> np.ndarray:
        name = self._name(object_name)
        point = _finite(position, 3, "position")
        fitted = self.perception.plane_normal(name, point)
        if fitted is not None:
            return fitted
        box = self.perception.box(name)
        faces = []
        for axis in range(3):
            for sign, bound in ((-1.0, box[axis]), (1.0, box[3 + axis])):
                normal = np.zeros(3)
                normal[axis] = sign
                faces.append((abs(point[axis] - bound), normal))
        return min(faces, key=lambda f: f[0])[1]

    def _grasp_box(self, name: str) -> tuple[str, np.ndarray]:
        model = self.backend.model(name) if name != "table" else None
        if model is None or model.kind == "cabinet":
            raise ToolArgumentError(f"{name} cannot be grasped")
        if model.kind == "part" and model.category in ("drawer", "door"):
            joint = self._joints_of(name)
            if joint:  # grasping a drawer or door means grasping its handle
                return joint[0].handle, self.perception.box(joint[0].handle)
        return name, self.perception.box(name)

    def parse_adaptive_shape_grasp_pose(self, object_name: str, preferred_position: np.ndarray | None = None,
                                        preferred_approach_direction: np.ndarray | None = None,
                                        preferred_plane_normal: np.ndarray | None = None,
                                        description: str | None = None) -> Pose:
        name, box = self._grasp_box(self._name(object_name))
        if description is not None:
            if not isinstance(description, str):
                raise ToolArgumentError(f"description must be text, got {type(description).__name__}")
            self.notes.append(f"grasp description (recorded, not used to choose the grasp): {description[:200]}")
        model = self.backend.model(name)
        prefs = {}
        for key, value in (("preferred_position", preferred_position),
                           ("preferred_approach", preferred_approach_direction),
                           ("preferred_normal", preferred_plane_normal)):
            if value is not None:
                vector = _finite(value, 3, key)
                if key != "preferred_position" and np.linalg.norm(vector) < 1e-9:
                    raise ToolArgumentError(f"{key} must not be the zero vector")
                prefs[key] = vector
        kind = "handle" if model.category == "handle" else model.kind
        if kind == "handle":
            return self._handle_grasp(name, box)
        asset = self.catalog.assets.get(model.asset)
        opening = asset.opening if asset is not None and asset.opening else None
        if opening and round(model.yaw_deg) % 180 == 90:
            opening = (opening[1], opening[0])
        seen = self.perception.points(name)
        if seen is not None:  # a perceived object: the grasp backend works on its points
            request = GraspRequest(seen[0], seen[1], box, self.perception.scene_points(),
                                   self.perception.support_height(), self._hand, kind, opening,
                                   prefs.get("preferred_position"), prefs.get("preferred_approach"),
                                   prefs.get("preferred_normal"),
                                   reachable=lambda p: self.backend.reachable(p, self._touching(np.array(p.position))))
            pose = self._grasp_backend().grasp(request)
            if pose is not None:
                return pose
            self.notes.append(f"no grasp found on the perceived points of {name}; the box heuristic is used")
        return grasps.adaptive(box, self._hand, kind, opening, **prefs)

    def _grasp_backend(self):
        if self._grasper is None:
            self._grasper = create_grasp_backend(self.perception.pipeline.grasp)
        return self._grasper

    def _handle_grasp(self, name: str, box: np.ndarray, approach: np.ndarray | None = None) -> Pose:
        """The first handle grasp whose grasp and pre-grasp poses the arm reaches without collisions (contact with
        what the fingers close on allowed; the level one if none). ``approach``: the horizontal direction to come
        in along (default: against the face's outward normal)."""
        outward = self._outward(name) if approach is None else -approach
        candidates = grasps.handle_grasps(box, outward, self._hand)
        for pose in candidates:
            pre = Pose(tuple(float(v) for v in np.array(pose.position) - PRE_GRASP_M * grasps.approach_of(pose)),
                       pose.orientation)
            touching = self._touching(np.array(pose.position))
            if self.backend.reachable(pre, frozenset()) and self.backend.reachable(pose, touching):
                return pose
        return candidates[0]

    def parse_central_lift_grasp_pose(self, object_name: str, description: str = "center") -> Pose:
        if description not in ("center", "top"):
            raise ToolArgumentError(f"description must be 'center' or 'top', got {description!r}")
        _, box = self._grasp_box(self._name(object_name))
        return grasps.central_lift(box, self._hand, description)

    def parse_horizontal_grasp_pose(self, object_name: str, approach_direction: np.ndarray | None = None) -> Pose:
        name, box = self._grasp_box(self._name(object_name))
        approach = None
        if approach_direction is not None:
            vector = _finite(approach_direction, 3, "approach_direction")
            level = np.array([vector[0], vector[1], 0.0])
            if np.linalg.norm(level) < 0.5 * max(np.linalg.norm(vector), 1e-12):
                raise ToolArgumentError(f"approach_direction must be mostly horizontal for a horizontal grasp, got "
                                        f"{vector.tolist()}")
            approach = level / np.linalg.norm(level)
        if self.backend.model(name).category == "handle":
            return self._handle_grasp(name, box, approach)
        return grasps.horizontal(box, self._hand, approach)

    # ------------------------------------------------------------------------------------------------ placing

    def _receptacle_region(self, name: str, box: np.ndarray) -> tuple[tuple[float, float, float, float], float]:
        """(x0, y0, x1, y1) where things can go in or on a receptacle, and the height of its floor."""
        model = self.backend.model(name) if name != "table" else None
        if model is not None and model.category == "drawer":
            joints = self._joints_of(name)
            inset_front, inset = DRAWER_PANEL + WALL_CLEARANCE, DRAWER_WALL + WALL_CLEARANCE
            if joints and joints[0].axis[0] > 0:  # a cabinet turned round (front to +x): the panel is at +x
                front = self.perception.box(CABINET)[3]
                x0 = max(box[0], front) if box[3] > front + DRAWER_PANEL else box[0]
                return (x0 + inset, box[1] + inset, box[3] - inset_front, box[4] - inset), box[2] + DRAWER_WALL
            front = self.perception.box(CABINET)[0] if joints else box[3]
            x1 = min(box[3], front) if box[0] < front - DRAWER_PANEL else box[3]
            return (box[0] + inset_front, box[1] + inset, x1 - inset, box[4] - inset), box[2] + DRAWER_WALL
        if model is not None and model.container:
            asset = self.catalog.assets.get(model.asset)
            if asset is not None and asset.opening:
                ox, oy = asset.opening if round(model.yaw_deg) % 180 == 0 else asset.opening[::-1]
                cx, cy = (box[0] + box[3]) / 2, (box[1] + box[4]) / 2
                return (cx - ox / 2, cy - oy / 2, cx + ox / 2, cy + oy / 2), box[2] + asset.floor
        return (box[0], box[1], box[3], box[4]), box[5]

    def _occupants(self, exclude: set[str], region, floor: float) -> list[np.ndarray]:
        out = []
        for name, box in self.perception.boxes().items():
            if name in exclude or name == "table" or name.startswith(CABINET):
                continue
            overlaps = box[0] < region[2] and box[3] > region[0] and box[1] < region[3] and box[4] > region[1]
            if overlaps and box[5] > floor + 0.002:
                out.append(box)
        return out

    def _support_height(self, x: float, y: float, exclude: set[str]) -> float:
        top = self.backend.workspace.z[0]
        for name, box in self.perception.boxes().items():
            if name in exclude or name == "table":
                continue
            if box[0] <= x <= box[3] and box[1] <= y <= box[4]:
                top = max(top, float(box[5]))
        return top

    def parse_place_pose(self, object_name: str, receptacle_name: str | None = None,
                         position: np.ndarray | None = None) -> Pose:
        name = self._name(object_name)
        obj = self.perception.box(name)
        tool = self.backend.tool_pose()
        hang = max(tool.position[2] - obj[2], self.backend.finger_reach)
        footprint = (obj[3] - obj[0], obj[4] - obj[1])
        if receptacle_name is not None:
            receptacle = self._name(receptacle_name, "receptacle_name")
            if receptacle == name:
                raise ToolArgumentError("an object cannot be placed in itself")
            rbox = self.perception.box(receptacle)
            if receptacle == "table":
                base = np.array(self.backend.workspace.base)
                reach = self.backend.workspace.reach * 0.75
                rbox = np.array([max(rbox[0], base[0] + 0.3), max(rbox[1], base[1] - reach),
                                 rbox[2], min(rbox[3], base[0] + reach), min(rbox[4], base[1] + reach), rbox[5]])
            region, floor = self._receptacle_region(receptacle, rbox)
            occupied = self._occupants({name, receptacle}, region, floor)
            if receptacle == "table":
                occupied = [b for n, b in self.perception.boxes().items()
                            if n not in (name, "table") and not n.startswith(CABINET + ".")]
            rim = float(rbox[5])
            deep = grasps.release_height(floor, rim) < rim  # the object's bottom, and the fingers, go below the rim
            here = ((obj[0] + obj[3]) / 2, (obj[1] + obj[4]) / 2)
            # shallow (plates, trays): pack from the corner nearest the object; deep (bowls, baskets, drawers):
            # fingers inside, hand above -- from the middle of the side facing the robot (the x edge nearer the
            # base), away from what stands behind the receptacle (a cabinet's face above an open drawer)
            near_x = min(region[0], region[2], key=lambda v: abs(v - self.backend.workspace.base[0]))
            anchor = (near_x, (region[1] + region[3]) / 2) if deep else min(
                ((region[i], region[j]) for i in (0, 2) for j in (1, 3)),
                key=lambda c: math.hypot(c[0] - here[0], c[1] - here[1]))
            # The hand as it holds the object; then turned a quarter about the vertical, object and all, for when no
            # spot of the first suits the arm (a drawer under another drawer leaves room for a hand across its
            # opening, not along it).
            dx, dy = tool.position[0] - here[0], tool.position[1] - here[1]
            candidates: list[Pose] = []
            for turn in (0.0, math.pi / 2):
                q = _quat_mul(_quat_about(np.array([0.0, 0.0, 1.0]), turn), tool.orientation) if turn else \
                    np.asarray(tool.orientation, dtype=float)
                fp = footprint if not turn else (footprint[1], footprint[0])
                ox, oy = (dx, dy) if not turn else (-dy, dx)
                rotation = grasps.matrix_from_quat(q)
                closing, side = np.abs(rotation[:2, 1]), np.abs(rotation[:2, 0])
                across = float(closing @ np.array(fp))  # the object's extent between the fingers
                along = float(side @ np.array(fp))
                reach = max(grasps.FINGER_PAD, (self.backend.gripper_opening() - across) / 2 + grasps.FINGER_PAD)
                width = max(0.0, grasps.FINGER_WIDTH / 2 - along / 2)  # fingers wider than a small object
                pad = tuple(float(v) for v in closing * reach + side * width)
                spots = grasps.free_spots(region, fp, occupied, anchor, pad, fingers_inside=deep)
                release = grasps.release_height(floor, rim)
                candidates += [Pose((x + ox, y + oy, release + hang), tuple(float(v) for v in q))
                               for x, y in spots[:PLACE_CANDIDATES]]
            return self._first_reachable(candidates)
        elif position is not None:
            x, y = (float(v) for v in _finite(position, 3, "position")[:2])
            floor = self._support_height(x, y, {name})
            rim = floor
            spots = [(x, y)]  # the caller chose the spot: no alternatives
        else:
            raise ToolArgumentError("parse_place_pose needs a receptacle_name or a position")
        # the tool frame sits above the object's footprint centre by the same offset it has now
        dx, dy = tool.position[0] - (obj[0] + obj[3]) / 2, tool.position[1] - (obj[1] + obj[4]) / 2
        release = grasps.release_height(floor, rim)
        return self._first_reachable([Pose((x + dx, y + dy, release + hang), tool.orientation) for x, y in spots])

    def _first_reachable(self, poses: list[Pose]) -> Pose:
        """The best spot by the boxes alone can put the fingers into a wall the boxes place a few millimetres off
        (a perceived drawer): take the first pose the arm reaches without collision, as a planner would; with none,
        the first, whose motion then fails with its reason (a pose outside the workspace too: the public
        parse_place_pose only computes a pose, the motion to it is what fails)."""
        if len(poses) > 1:
            for pose in poses:
                if not self.backend.workspace.violation(np.array(pose.position)) and \
                        self.backend.reachable(pose, frozenset()):
                    return pose
        return poses[0]

    # ------------------------------------------------------------------------------------------------ motion

    def open_gripper(self) -> None:
        self.backend.open_gripper()

    def close_gripper(self) -> None:
        self.backend.close_gripper()

    def attach_object(self, object_id: str) -> None:
        self.backend.attach(self._name(object_id, "object_id"))

    def detach_object(self, object_id: str) -> None:
        self.backend.detach(self._name(object_id, "object_id"))

    def _cartesian(self, waypoints: list[Pose], what: str, ignore: frozenset[str] = frozenset()) -> None:
        fraction, problem = self.backend.move_cartesian(waypoints, ignore)
        if fraction < 0.999:
            self.notes.append(f"{what} stopped after {fraction:.0%} of the path: {problem}")

    def _touching(self, point: np.ndarray, margin: float = 0.015) -> frozenset[str]:
        """Models whose box (grown by ``margin``) contains a point: what a grasp may touch on its way in."""
        out = set()
        for name, box in self.perception.boxes().items():
            if name == "table":
                continue
            if np.all(point >= box[:3] - margin) and np.all(point <= box[3:] + margin):
                out.add(name)
                for joint in self._joints_of(name):
                    out |= {joint.part, joint.handle}
        return frozenset(out)

    def grasp(self, grasp_pose: Pose) -> bool:
        pose = check_pose(grasp_pose, "grasp_pose")
        approach = grasps.approach_of(pose)
        pre = Pose(tuple(float(v) for v in np.array(pose.position) - PRE_GRASP_M * approach), pose.orientation)

        def run() -> str | None:
            self._reachable(pose, "the grasp pose")
            self._reachable(pre, "the pre-grasp pose")
            fraction, problem = self.backend.approach(pre, pose, self._touching(np.array(pose.position)))
            if fraction >= 0.999:
                return None
            text = f"grasp's approach stopped after {fraction:.0%} of the path: {problem}"
            if fraction > APPROACH_DONE:
                self.notes.append(text)
                return None
            return text

        return self._motion("grasp", run)

    def move_to_pose(self, pose: Pose) -> bool:
        target = check_pose(pose)

        def run() -> None:
            self._reachable(target, "move_to_pose")
            self.backend.move_to(target)

        return self._motion("move_to_pose", run)

    def move_in_direction(self, axis: np.ndarray, distance: float) -> bool:
        direction = _finite(axis, 3, "axis")
        norm = float(np.linalg.norm(direction))
        if norm < 1e-9:
            raise ToolArgumentError("axis must not be the zero vector")
        length = _number(distance, "distance", -MAX_STRAIGHT_M, MAX_STRAIGHT_M)
        tool = self.backend.tool_pose()
        target = Pose(tuple(float(v) for v in np.array(tool.position) + direction / norm * length), tool.orientation)

        def run() -> None:
            self._reachable(target, "move_in_direction")
            self._cartesian([target], "move_in_direction")

        return self._motion("move_in_direction", run)

    def generate_arc_path_around_joint(self, current_pose: Pose, joint_axis: np.ndarray, joint_position: np.ndarray,
                                       n: int, angle: float) -> list[Pose]:
        start = check_pose(current_pose, "current_pose")
        axis = _finite(joint_axis, 3, "joint_axis")
        if np.linalg.norm(axis) < 1e-9:
            raise ToolArgumentError("joint_axis must not be the zero vector")
        axis = axis / np.linalg.norm(axis)
        centre = _finite(joint_position, 3, "joint_position")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= int(n) <= MAX_WAYPOINTS:
            raise ToolArgumentError(f"n must be a whole number from 1 to {MAX_WAYPOINTS}, got {n!r}")
        total = math.radians(_number(angle, "angle", -360.0, 360.0))
        out = []
        for i in range(1, int(n) + 1):
            theta = total * i / int(n)
            position = centre + _rotate(np.array(start.position) - centre, axis, theta)
            orientation = _quat_mul(_quat_about(axis, theta), start.orientation)
            out.append(Pose(tuple(float(v) for v in position), tuple(float(v) for v in orientation)))
        return out

    def follow_path(self, path: list[Pose]) -> bool:
        if not isinstance(path, (list, tuple)) or not path:
            raise ToolArgumentError("path must be a non-empty list of Pose")
        if len(path) > MAX_WAYPOINTS:
            raise ToolArgumentError(f"path has {len(path)} poses; at most {MAX_WAYPOINTS}")
        poses = [check_pose(p, f"path[{i}]") for i, p in enumerate(path)]

        def run() -> None:
            for i, pose in enumerate(poses):
                self._reachable(pose, f"follow_path (waypoint {i})")
            self._cartesian(poses, "follow_path")

        return self._motion("follow_path", run)

    def get_gripper_pose(self) -> Pose:
        return self.backend.tool_pose()

    def reset_to_default_pose(self) -> bool:
        return self._motion("reset_to_default_pose", self.backend.go_home)
