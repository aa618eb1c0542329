"""What every robot backend provides to the tool implementation (``robot/tools_impl.py``).

The tools (perception, grasp and place poses, arcs, argument checks) are written once over these primitives; a
backend only knows its robot: the simulated arm in PyBullet (``sim``) or MoveIt driving a real arm or Gazebo
(``moveit``). Positions are world-frame metres, orientations unit quaternions (x, y, z, w); the tool frame is the
point between the fingertips, its z axis the approach direction and its y axis the direction the fingers close.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robot.contract.items import TabletopState
from robot.contract.tool_api import Pose
from robot.contract.world import Model, World

if TYPE_CHECKING:  # the perception package imports this module
    from robot.perception.cameras import CameraFrame, CameraSpec
    from robot.perception.scene import PlanningScene


@dataclass(frozen=True)
class WorkspaceLimits:
    """Where the tool frame may go: a box over the table and a horizontal reach around the robot's base."""

    x: tuple[float, float]
    y: tuple[float, float]
    z: tuple[float, float]
    base: tuple[float, float, float]
    reach: float

    @classmethod
    def of_world(cls, world: World, height_above_table: float = 0.7, reach: float | None = None) -> WorkspaceLimits:
        x0, y0, x1, y1 = world.table.bounds()
        top = world.table.height
        base = (world.robot.base_x, world.robot.base_y, top)
        # Furniture on the floor beside the table (the public benchmark's cabinet behind the robot): the hand may go
        # over its footprint (and as far as its drawers pull out), still no lower than the table top -- parts below
        # it (cabinet_1076's two bottom drawers) stay out of the workspace; the reach limit still applies.
        floor = {m.name for m in world.models if m.parent == "floor"}
        for m in (m for m in world.models if m.name in floor or m.parent in floor):
            b = m.bbox
            x0, y0, x1, y1 = min(x0, b.x0), min(y0, b.y0), max(x1, b.x1), max(y1, b.y1)
        for j in (j for j in world.joints if j.type == "prismatic" and world.model(j.part).parent in floor):
            x0, x1 = min(x0, j.origin[0] + j.axis[0] * j.upper), max(x1, j.origin[0] + j.axis[0] * j.upper)
            y0, y1 = min(y0, j.origin[1] + j.axis[1] * j.upper), max(y1, j.origin[1] + j.axis[1] * j.upper)
        return cls((x0, x1), (y0, y1), (top, top + height_above_table), base, reach or world.robot.reach)

    def violation(self, position: np.ndarray) -> str | None:
        """Why a tool-frame position is outside the workspace, or None when it is inside."""
        x, y, z = (float(v) for v in position)
        for axis, value, (lo, hi) in (("x", x, self.x), ("y", y, self.y), ("z", z, self.z)):
            if not lo - 1e-9 <= value <= hi + 1e-9:
                return f"{axis} = {value:.3f} m is outside the workspace [{lo:.3f}, {hi:.3f}]"
        dist = math.hypot(x - self.base[0], y - self.base[1])
        if dist > self.reach + 1e-9:
            return f"{dist:.3f} m from the robot's base is beyond its reach of {self.reach:.3f} m"
        return None

    def as_dict(self) -> dict:
        return {"x": list(self.x), "y": list(self.y), "z": list(self.z), "reach": self.reach}


@dataclass(frozen=True)
class JointState:
    """An articulated joint of a cabinet part, as it is now."""

    part: str
    handle: str
    type: str
    """prismatic | revolute"""
    axis: np.ndarray
    """Prismatic: the world direction the part opens along. Revolute: the hinge axis (right-hand rule)."""
    origin: np.ndarray
    """Prismatic: the handle's centre now. Revolute: a point on the hinge axis."""
    value: float
    lower: float
    upper: float


class RobotBackend(ABC):
    """One robot and its scene. Motion methods raise :class:`~robot.errors.PlanningError` when they cannot plan."""

    name: str = "backend"
    arm: str = "panda"
    gripper_max_opening: float = 0.07
    finger_reach: float = 0.011
    """How far the fingertips reach beyond the tool frame along the approach direction (m)."""

    #: Called with no arguments between control ticks; raising from it aborts the motion (cancellation).
    interrupt: Callable[[], None] | None = None

    # ------------------------------------------------------------------------------------------------ scene

    def restart(self) -> None:
        """Start the next goal from a fresh backend, so that a goal's outcome depends on the goal alone -- not on
        which runner of a pool took it nor on what that runner ran before. A simulator rebuilds its physics world;
        a real robot has nothing to reset here (the default)."""

    def twin(self) -> RobotBackend | None:
        """Another backend built as this one was, to run beside it in the same process (the variants of a goal,
        robot/episode.py), or None where there can be only one (a real robot: the default)."""
        return None

    @abstractmethod
    def load_world(self, world: World) -> None:
        """Build (sim) or bind (real robot) the scene of a world definition."""

    @abstractmethod
    def reset(self, seed: int, jitter_m: float = 0.0) -> None:
        """Back to the world's initial state for a new repeat; the sim displaces loose objects by up to jitter_m."""

    _world: World | None = None  # set by load_world

    @property
    def world(self) -> World:
        if self._world is None:
            raise RuntimeError("no world loaded")
        return self._world

    @property
    def workspace(self) -> WorkspaceLimits:
        return WorkspaceLimits.of_world(self.world)

    def model(self, name: str) -> Model:
        return self.world.model(name)

    @abstractmethod
    def model_names(self) -> list[str]:
        """Every model name, the table first."""

    @abstractmethod
    def model_box(self, name: str) -> np.ndarray:
        """Ground-truth axis-aligned bounding box [x0, y0, z0, x1, y1, z1] now."""

    @abstractmethod
    def model_pose(self, name: str) -> Pose:
        """Ground-truth pose (bounding-box centre, orientation) now."""

    @abstractmethod
    def joint_states(self) -> list[JointState]: ...

    def world_state(self) -> TabletopState:
        """What the evaluation items are checked against."""
        from robot.contract.geometry import Box

        boxes = {name: Box.of(self.model_box(name).tolist()) for name in self.model_names() if name != "table"}
        return TabletopState(boxes, {j.part: j.value for j in self.joint_states()})

    # ------------------------------------------------------------------------------------------------ sensing

    @abstractmethod
    def capture(self, cameras: list[CameraSpec], rng: np.random.Generator | None = None,
                depth_noise_m: float = 0.0) -> list[CameraFrame]:
        """One RGB-D frame from each calibrated camera, now (the perception pipeline's input)."""

    def render_state(self) -> bytes | None:
        """Everything :meth:`capture` depends on besides the cameras and the noise generator, exactly, or None where
        the backend cannot say (real cameras: their frames are never shared; robot/perception/shared.py)."""
        return None

    @abstractmethod
    def robot_link_boxes(self) -> np.ndarray:
        """(L, 6) world boxes around the robot's links (and what it holds) now: the self filter's volumes."""

    @abstractmethod
    def set_planning_scene(self, scene: PlanningScene | None) -> None:
        """What the motion planner avoids from now on: a perceived planning scene, or None for the backend's own
        (the simulator's true geometry; a real robot's configured static scene)."""

    # ------------------------------------------------------------------------------------------------ arm

    @abstractmethod
    def tool_pose(self) -> Pose: ...

    def reachable(self, pose: Pose, ignore: frozenset[str] | None = None) -> bool:
        """Whether inverse kinematics finds the pose -- collisions aside, or, with ``ignore`` given, a solution
        free of collisions except with those models; lets grasp tools pick a reachable one."""
        return True

    @abstractmethod
    def go_home(self) -> None: ...

    @abstractmethod
    def move_to(self, pose: Pose, ignore: frozenset[str] = frozenset()) -> None:
        """Plan a collision-free motion to a tool pose (models in ``ignore`` may be touched) and execute it."""

    @abstractmethod
    def move_cartesian(self, waypoints: list[Pose], ignore: frozenset[str] = frozenset()) -> tuple[float, str]:
        """Move the tool frame along straight segments through the waypoints, as far as it can (like MoveIt's
        Cartesian planning); returns the fraction of the path done and why it stopped short ("" when it did not).
        Raises PlanningError when not even the first step is possible."""

    def approach(self, pre: Pose, target: Pose, ignore: frozenset[str] = frozenset()) -> tuple[float, str]:
        """Move to a pre-grasp pose, then straight to the grasp pose (``ignore``: what the fingers may touch)."""
        self.move_to(pre)
        return self.move_cartesian([target], ignore)

    @abstractmethod
    def open_gripper(self) -> None: ...

    @abstractmethod
    def close_gripper(self) -> str | None:
        """Close until the fingers hold something; returns the held model's name or None."""

    @property
    @abstractmethod
    def held(self) -> str | None: ...

    def gripper_opening(self) -> float:
        """Distance between the fingers now (m)."""
        return self.gripper_max_opening

    @abstractmethod
    def attach(self, name: str) -> None: ...

    @abstractmethod
    def detach(self, name: str) -> None: ...

    @property
    @abstractmethod
    def attached(self) -> frozenset[str]: ...

    def close(self) -> None:
        """Release the backend's resources."""
