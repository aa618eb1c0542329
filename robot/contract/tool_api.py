"""The perception and motion tool API that generated robot code calls: the single source of truth.

Every tool is an abstract method of :class:`ToolAPI` with its signature and doc string. Three things are derived
from this class and nothing else:

* :data:`TOOL_SPECS` -- a machine-readable table (name, group, parameters, return annotation, doc) read by the code
  checker (``robot/contract/code_policy.py``) to verify names, arity and keyword names of every tool call;
* :func:`tool_docs` -- the tool section of the code-generation system prompt (``tasks/roboscript/codegen.py``);
* the robot backends (Gazebo simulation, real arm) of the ROS runner, which subclass :class:`ToolAPI`.

Tools are grouped as in RoboScript (appendix VI-B): *perception* tools turn sensor data into object-centric facts
(positions, boxes, joints, grasp poses) keyed by object names; *motion* tools move the arm and the gripper. Positions
and directions are ``numpy`` arrays in the world frame, in metres; poses are :class:`Pose`.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:  # annotations only: this module must import without numpy or ROS
    import numpy as np

ToolGroup = Literal["perception", "motion"]
GROUPS: tuple[ToolGroup, ...] = ("perception", "motion")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Pose:
    """An end-effector or object pose in the world frame: position (x, y, z) in metres and orientation as a unit
    quaternion (x, y, z, w)."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)


def tool(group: ToolGroup) -> Callable[[F], F]:
    """Mark an abstract method of :class:`ToolAPI` as a tool of ``group``."""
    if group not in GROUPS:
        raise ValueError(f"unknown tool group {group!r}; known: {', '.join(GROUPS)}")

    def mark(func: F) -> F:
        func.__tool_group__ = group  # type: ignore[attr-defined]
        return abstractmethod(func)

    return mark


class ToolAPI(ABC):
    """What a robot backend provides to generated code. Each method is one tool; a backend implements all of them."""

    # ------------------------------------------------------------------------------------------------ perception

    @tool("perception")
    def detect_objects(self, object_list: list[str] | None = None) -> None:
        """Run the perception pipeline and refresh what is known about the named objects (all objects when
        object_list is None); the results also enter the motion planner's collision scene. Call it before acting on
        objects, and again after the scene has changed (an opened drawer, a moved object).

        Args:
            object_list: names of the objects the task involves, or None for every object.
        """

    @tool("perception")
    def get_object_name_list(self) -> list[str]:
        """Names of the objects present in the scene, including furniture parts such as 'cabinet.drawer_0'.

        Returns:
            list of object names.
        """

    @tool("perception")
    def get_object_center_position(self, object_name: str) -> np.ndarray:
        """Centre of an object's 3D bounding box in the world frame.

        Args:
            object_name: name of the object.
        Returns:
            np.ndarray [x, y, z] in metres.
        """

    @tool("perception")
    def get_object_pose(self, object_name: str) -> Pose:
        """Pose of an object in the world frame.

        Args:
            object_name: name of the object.
        Returns:
            Pose of the object.
        """

    @tool("perception")
    def get_3d_bbox(self, object_name: str) -> np.ndarray:
        """Axis-aligned 3D bounding box of an object in the world frame.

        Args:
            object_name: name of the object.
        Returns:
            np.ndarray [x_min, y_min, z_min, x_max, y_max, z_max] in metres.
        """

    @tool("perception")
    def get_object_joint_info(self, obj_name: str, position: np.ndarray, type: str = "any") -> dict:  # noqa: A002
        """The articulated joint of an object (drawer slide, door hinge) closest to a position.

        Args:
            obj_name: name of the articulated object or of one of its parts, e.g. 'cabinet.drawer_0'.
            position: np.ndarray [x, y, z]; the joint closest to it is returned (use the handle position).
            type: 'any', 'prismatic' (drawers) or 'revolute' (doors).
        Returns:
            dict {'joint_position': np.ndarray [x, y, z], 'joint_axis': np.ndarray [ax, ay, az], 'type': str}. For
            a prismatic joint the axis is the direction in which the part opens.
        """

    @tool("perception")
    def get_plane_normal(self, obj_name: str, position: np.ndarray) -> np.ndarray:
        """Outward unit normal of the planar surface of an object closest to a position.

        Args:
            obj_name: name of the object.
            position: np.ndarray [x, y, z]; the plane closest to it is used.
        Returns:
            np.ndarray [nx, ny, nz].
        """

    @tool("perception")
    def parse_adaptive_shape_grasp_pose(
        self,
        object_name: str,
        preferred_position: np.ndarray | None = None,
        preferred_approach_direction: np.ndarray | None = None,
        preferred_plane_normal: np.ndarray | None = None,
    ) -> Pose:
        """A grasp pose predicted from the object's segmented point cloud; works for most shapes, including handles
        and objects with openings.

        Args:
            object_name: name of the object to grasp.
            preferred_position: np.ndarray [x, y, z] or None; grasps whose gripper tip is near it are preferred.
            preferred_approach_direction: np.ndarray or None; grasps approaching along it are preferred.
            preferred_plane_normal: np.ndarray or None; grasps whose gripper plane has this normal are preferred.
        Returns:
            Pose of the gripper for the grasp.
        """

    @tool("perception")
    def parse_central_lift_grasp_pose(self, object_name: str, description: str = "center") -> Pose:
        """A top-down grasp closing at the object's centre. Good for compact round or box-like objects without
        openings; poor for long, thin or hollow ones, since the gripper opening is small.

        Args:
            object_name: name of the object to grasp.
            description: 'center' (close at the centre height) or 'top' (close near the top).
        Returns:
            Pose of the gripper for the grasp.
        """

    @tool("perception")
    def parse_horizontal_grasp_pose(self, object_name: str) -> Pose:
        """A grasp with the gripper held horizontally, approaching from the side; good for upright objects such as
        bottles and tall boxes, and for handles.

        Args:
            object_name: name of the object to grasp.
        Returns:
            Pose of the gripper for the grasp.
        """

    # ------------------------------------------------------------------------------------------------ motion

    @tool("motion")
    def parse_place_pose(
        self, object_name: str, receptacle_name: str | None = None, position: np.ndarray | None = None
    ) -> Pose:
        """Gripper pose that puts the held object down in or on a receptacle, or at a position on the table. Uses
        the bounding boxes of object and receptacle and inverse kinematics, so the pose is reachable.

        Args:
            object_name: name of the object in the gripper.
            receptacle_name: name of the receptacle ('white_plate', 'cabinet.drawer_1', 'table') or None.
            position: np.ndarray [x, y, z] or None; where to put the object when no receptacle is given.
        Returns:
            Pose of the gripper for placing.
        """

    @tool("motion")
    def open_gripper(self) -> None:
        """Open the gripper fully. No arguments."""

    @tool("motion")
    def close_gripper(self) -> None:
        """Close the gripper until it holds what is between its fingers. No arguments."""

    @tool("motion")
    def attach_object(self, object_id: str) -> None:
        """Attach an object to the gripper in the planning scene, so planned motions carry it. Call it right after
        close_gripper.

        Args:
            object_id: name of the grasped object.
        """

    @tool("motion")
    def detach_object(self, object_id: str) -> None:
        """Detach an object from the gripper in the planning scene. Call it right after open_gripper.

        Args:
            object_id: name of the released object.
        """

    @tool("motion")
    def grasp(self, grasp_pose: Pose) -> None:
        """Move to a pre-grasp pose 0.1 m back along the gripper's approach direction, then straight to the grasp
        pose. Does not close the gripper.

        Args:
            grasp_pose: Pose from one of the parse_*_grasp_pose tools.
        """

    @tool("motion")
    def move_to_pose(self, pose: Pose) -> None:
        """Plan a collision-free motion of the gripper to a pose and execute it.

        Args:
            pose: target Pose of the gripper.
        """

    @tool("motion")
    def move_in_direction(self, axis: np.ndarray, distance: float) -> None:
        """Move the gripper along a straight line. A joint axis or a plane normal makes a good direction.

        Args:
            axis: np.ndarray [x, y, z], the direction (it is normalised).
            distance: length of the motion in metres.
        """

    @tool("motion")
    def generate_arc_path_around_joint(
        self, current_pose: Pose, joint_axis: np.ndarray, joint_position: np.ndarray, n: int, angle: float
    ) -> list[Pose]:
        """Waypoints of a circular gripper path around a revolute joint, e.g. to swing a door open.

        Args:
            current_pose: the gripper's current Pose (from get_gripper_pose).
            joint_axis: np.ndarray, axis of the revolute joint.
            joint_position: np.ndarray, a point on the joint axis.
            n: number of waypoints.
            angle: rotation in degrees; the sign follows the right-hand rule about joint_axis.
        Returns:
            list of Pose.
        """

    @tool("motion")
    def follow_path(self, path: list[Pose]) -> None:
        """Move the gripper through a list of poses along a Cartesian path.

        Args:
            path: list of Pose, e.g. from generate_arc_path_around_joint.
        """

    @tool("motion")
    def get_gripper_pose(self) -> Pose:
        """The gripper's current pose. No arguments.

        Returns:
            Pose of the gripper.
        """

    @tool("motion")
    def reset_to_default_pose(self) -> None:
        """Move the arm back to its default pose above the table, out of the camera views. No arguments."""


# --------------------------------------------------------------------------------------------------------------------
# Machine-readable specs, derived from ToolAPI by inspection.


@dataclass(frozen=True)
class ParamSpec:
    name: str
    annotation: str
    required: bool
    default: str | None
    """``repr`` of the default value, None when the parameter is required."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    group: ToolGroup
    params: tuple[ParamSpec, ...]
    returns: str
    doc: str

    @property
    def n_required(self) -> int:
        return sum(p.required for p in self.params)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def signature(self) -> str:
        parts = []
        for p in self.params:
            text = f"{p.name}: {p.annotation}" if p.annotation else p.name
            parts.append(text if p.required else f"{text} = {p.default}")
        arrow = f" -> {self.returns}" if self.returns else ""
        return f"{self.name}({', '.join(parts)}){arrow}"


def _annotation(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return ""
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _spec(name: str, func: Callable[..., Any]) -> ToolSpec:
    signature = inspect.signature(func)
    params = []
    for param in list(signature.parameters.values())[1:]:  # drop self
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(f"tool {name}: parameter {param.name} must be a plain named parameter")
        required = param.default is inspect.Parameter.empty
        params.append(ParamSpec(param.name, _annotation(param.annotation), required,
                                None if required else repr(param.default)))
    doc = inspect.getdoc(func)
    if not doc:
        raise TypeError(f"tool {name} has no doc string: the prompt would not describe it")
    return ToolSpec(name, func.__tool_group__, tuple(params), _annotation(signature.return_annotation), doc)


def _collect() -> dict[str, ToolSpec]:
    specs = {}
    for name, member in vars(ToolAPI).items():
        if callable(member) and hasattr(member, "__tool_group__"):
            specs[name] = _spec(name, member)
    return specs


#: Every tool, by name, in the order of the class body (perception first, then motion).
TOOL_SPECS: dict[str, ToolSpec] = _collect()
TOOL_NAMES: frozenset[str] = frozenset(TOOL_SPECS)

#: The value types that tools take or return besides numbers, strings, plain containers and numpy arrays. Generated
#: code may read their public (non-underscore) attributes, and they cross the sandbox boundary field by field, so
#: each must be a dataclass whose fields hold numbers, strings, tuples, lists, numpy arrays or other value types
#: listed here (robot/sandbox/wire.py; tests/test_robot_sandbox_hostile.py checks every entry).
VALUE_TYPES: tuple[type, ...] = (Pose,)


def tool_docs(groups: tuple[ToolGroup, ...] = GROUPS) -> str:
    """The tool section of a code-generation prompt: each tool's signature and doc string, grouped."""
    titles = {"perception": "Perception tools", "motion": "Motion tools"}
    blocks = []
    for group in groups:
        lines = [f"# {titles[group]}"]
        for spec in TOOL_SPECS.values():
            if spec.group != group:
                continue
            lines.append(f"def {spec.signature()}:")
            doc = "\n".join(f"    {line}" if line else "" for line in spec.doc.splitlines())
            lines.append('    """' + doc.lstrip() + '"""')
            lines.append("")
        blocks.append("\n".join(lines).rstrip())
    return "\n\n".join(blocks)
