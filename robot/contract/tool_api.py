"""The perception and motion tool API that generated robot code calls: the single source of truth.

Every tool is an abstract method of :class:`ToolAPI` with its signature and doc string. Three things are derived
from this class and nothing else:

* :data:`TOOL_SPECS` -- a machine-readable table (name, group, parameters, return annotation, doc) read by the code
  checker (``robot/contract/code_policy.py``) to verify names, arity and keyword names of every tool call;
* :func:`tool_docs` -- the tool section of the code-generation system prompt (``tasks/roboscript/codegen.py``);
* the robot backends (Gazebo simulation, real arm) of the ROS runner, which subclass :class:`ToolAPI`.

Tools are grouped as in RoboScript (appendix VI-B): *perception* tools turn sensor data into object-centric facts
(positions, boxes, joints, grasp poses) keyed by object names; *motion* tools move the arm and the gripper. Positions
and directions are ``numpy`` arrays in the world frame, in metres; poses are :class:`Pose`, shaped like ROS's
``geometry_msgs/Pose`` (``pose.position.x``, ``pose.orientation.w``) as the public RoboScript code reads them.

:data:`VALUE_TYPES` declares the value types generated code receives from tools or builds itself (``Pose``,
``Point``, ``Quaternion``): their public attributes and constructor parameters, for a static check that allows
attribute access by name.
"""

from __future__ import annotations

import dataclasses
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


class _Vector:
    """A message-like value of named float fields (``geometry_msgs``-style): read and assign ``.x``, ``.y`` ...;
    it is also a read-only sequence of those numbers, so ``np.array(pose.position)`` and ``pose.position[2]`` work."""

    __slots__: tuple[str, ...] = ()
    _DEFAULTS: tuple[float, ...] = ()

    def __init__(self, *args: float, **kwargs: float) -> None:
        fields = self.__slots__
        if len(args) == 1 and not kwargs and not isinstance(args[0], (int, float)):
            args = tuple(args[0])  # one sequence: Point((x, y, z)), Quaternion(q_array)
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes at most {len(fields)} values ({', '.join(fields)}), "
                            f"got {len(args)}")
        unknown = sorted(set(kwargs) - set(fields))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {unknown}; fields: {', '.join(fields)}")
        values = dict(zip(fields, self._DEFAULTS, strict=True))
        values.update(zip(fields, args, strict=False))
        for name in kwargs:
            if name in fields[:len(args)]:
                raise TypeError(f"{type(self).__name__} got two values for {name}")
        values.update(kwargs)
        for name in fields:
            object.__setattr__(self, name, float(values[name]))

    def __setattr__(self, name: str, value: float) -> None:
        if name not in self.__slots__:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}; fields: {', '.join(self.__slots__)}")
        object.__setattr__(self, name, float(value))

    def __iter__(self):
        return iter(tuple(getattr(self, f) for f in self.__slots__))

    def __len__(self) -> int:
        return len(self.__slots__)

    def __getitem__(self, index):
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_Vector, tuple, list)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a message

    def __getstate__(self) -> tuple[float, ...]:
        return tuple(self)

    def __setstate__(self, state: tuple[float, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f):.6g}' for f in self.__slots__)})"


class Point(_Vector):
    """A position (x, y, z) in metres, world frame (``geometry_msgs/Point``'s fields)."""

    __slots__ = ("x", "y", "z")
    _DEFAULTS = (0.0, 0.0, 0.0)


class Quaternion(_Vector):
    """An orientation as a quaternion (x, y, z, w) (``geometry_msgs/Quaternion``'s fields). The default is the
    identity rotation (0, 0, 0, 1), not ROS's all-zero message, which is no rotation at all."""

    __slots__ = ("x", "y", "z", "w")
    _DEFAULTS = (0.0, 0.0, 0.0, 1.0)


class Pose:
    """An end-effector or object pose in the world frame, shaped like ``geometry_msgs/Pose``: ``pose.position``
    is a :class:`Point` (``.x .y .z``, metres) and ``pose.orientation`` a :class:`Quaternion` (``.x .y .z .w``).
    Both fields can be read and assigned (``pose.position.z += 0.05``). ``Pose(position, orientation)`` accepts
    Point / Quaternion objects or plain sequences of 3 / 4 numbers."""

    __slots__ = ("position", "orientation")

    def __init__(self, position: Point | tuple | list | None = None,
                 orientation: Quaternion | tuple | list | None = None) -> None:
        self.position = position  # type: ignore[assignment]  # converted by __setattr__
        self.orientation = orientation  # type: ignore[assignment]

    def __setattr__(self, name: str, value: object) -> None:
        # assigning copies the numbers (a Point or any 3 numbers; a Quaternion or any 4)
        if name == "position":
            value = Point() if value is None else Point(*value)  # type: ignore[misc]
        elif name == "orientation":
            value = Quaternion() if value is None else Quaternion(*value)  # type: ignore[misc]
        else:
            raise AttributeError(f"Pose has no field {name!r}; fields: position, orientation")
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pose):
            return NotImplemented
        return self.position == other.position and self.orientation == other.orientation

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return tuple(self.position), tuple(self.orientation)

    def __setstate__(self, state) -> None:
        self.position, self.orientation = state

    def __repr__(self) -> str:
        return f"Pose(position={self.position!r}, orientation={self.orientation!r})"


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
    def get_object_joint_info(self, object_name: str, position: np.ndarray, type: str = "any") -> dict:  # noqa: A002
        """The articulated joint of an object (drawer slide, door hinge) closest to a position.

        Args:
            object_name: name of the articulated object or of one of its parts, e.g. 'cabinet.drawer_0'.
            position: np.ndarray [x, y, z]; the joint closest to it is returned (use the handle position).
            type: 'any', 'prismatic' (drawers) or 'revolute' (doors).
        Returns:
            dict {'joint_position': np.ndarray [x, y, z], 'joint_axis': np.ndarray [ax, ay, az], 'type': str}. For
            a prismatic joint the axis is the direction in which the part opens.
        """

    @tool("perception")
    def get_plane_normal(self, object_name: str, position: np.ndarray) -> np.ndarray:
        """Outward unit normal of the planar surface of an object closest to a position.

        Args:
            object_name: name of the object.
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
        description: str | None = None,
    ) -> Pose:
        """A grasp pose predicted from the object's segmented point cloud; works for most shapes, including handles
        and objects with openings.

        Args:
            object_name: name of the object to grasp.
            preferred_position: np.ndarray [x, y, z] or None; grasps whose gripper tip is near it are preferred.
            preferred_approach_direction: np.ndarray or None; grasps approaching along it are preferred.
            preferred_plane_normal: np.ndarray or None; grasps whose gripper plane has this normal are preferred.
            description: free text saying which grasp is wanted ('grasp the bowl by its rim'); it is recorded with
                the step and does not steer the grasp -- use the preferences for that.
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
    def parse_horizontal_grasp_pose(self, object_name: str, approach_direction: np.ndarray | None = None) -> Pose:
        """A grasp with the gripper held horizontally, approaching from the side; good for upright objects such as
        bottles and tall boxes, and for handles on a vertical face (drawers, doors).

        Args:
            object_name: name of the object to grasp.
            approach_direction: np.ndarray [x, y, z] or None; the horizontal direction the gripper moves in along
                while grasping (for a drawer handle: the negative of the drawer's joint axis). None: from the robot
                towards the object (for a handle: straight at its face).
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
            receptacle_name: name of the receptacle ('container_b', 'cabinet.drawer_1', 'table') or None.
            position: np.ndarray [x, y, z] (or a Point) or None; where to put the object when no receptacle is
                given.
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
    def grasp(self, grasp_pose: Pose) -> bool:
        """Move to a pre-grasp pose 0.1 m back along the gripper's approach direction, then straight to the grasp
        pose. Does not close the gripper.

        Args:
            grasp_pose: Pose from one of the parse_*_grasp_pose tools.

        Returns:
            True when the gripper reached the grasp pose; False when the motion could not be planned or executed
            (the arm stays where it stopped and the code goes on).
        """

    @tool("motion")
    def move_to_pose(self, pose: Pose) -> bool:
        """Plan a collision-free motion of the gripper to a pose and execute it.

        Args:
            pose: target Pose of the gripper.

        Returns:
            True on success; False when no motion could be planned or executed (the arm does not move).
        """

    @tool("motion")
    def move_in_direction(self, axis: np.ndarray, distance: float) -> bool:
        """Move the gripper along a straight line. A joint axis or a plane normal makes a good direction.

        Args:
            axis: np.ndarray [x, y, z], the direction (it is normalised).
            distance: length of the motion in metres.

        Returns:
            True when the gripper moved (possibly stopping short where the path is blocked); False when the line
            cannot be started.
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
    def follow_path(self, path: list[Pose]) -> bool:
        """Move the gripper through a list of poses along a Cartesian path.

        Args:
            path: list of Pose, e.g. from generate_arc_path_around_joint.

        Returns:
            True when the gripper moved (possibly stopping short where the path is blocked); False when the path
            cannot be started.
        """

    @tool("motion")
    def get_gripper_pose(self) -> Pose:
        """The gripper's current pose. No arguments.

        Returns:
            Pose of the gripper.
        """

    @tool("motion")
    def reset_to_default_pose(self) -> bool:
        """Move the arm back to its default pose above the table, out of the camera views. No arguments.
        Returns True on success, False when no motion could be planned."""


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


@dataclass(frozen=True)
class ValueTypeSpec:
    """A value type generated code receives from the tools or builds itself."""

    name: str
    cls: type
    attributes: tuple[str, ...]
    """Public attributes code may read and assign (``pose.position.x = 0.4``)."""
    constructor: tuple[ParamSpec, ...]
    """Parameters of ``<name>(...)``, positional or by keyword."""
    doc: str

    def signature(self) -> str:
        return f"{self.name}({', '.join(f'{p.name}={p.default}' for p in self.constructor)})"


def _value_type(cls: type, attributes: tuple[str, ...], defaults: tuple[Any, ...], annotation: str) -> ValueTypeSpec:
    params = tuple(ParamSpec(a, annotation, False, repr(d)) for a, d in zip(attributes, defaults, strict=True))
    return ValueTypeSpec(cls.__name__, cls, attributes, params, inspect.getdoc(cls) or "")


#: The value types of the tool API by name, with their public attributes and constructors: what code may build and
#: which attributes it may touch on what the tools return (``get_gripper_pose().position.z``).
VALUE_TYPES: dict[str, ValueTypeSpec] = {
    "Pose": _value_type(Pose, ("position", "orientation"), (None, None), "Point | Quaternion | None"),
    "Point": _value_type(Point, ("x", "y", "z"), (0.0, 0.0, 0.0), "float"),
    "Quaternion": _value_type(Quaternion, ("x", "y", "z", "w"), (0.0, 0.0, 0.0, 1.0), "float"),
}

#: The classes of :data:`VALUE_TYPES`: what the sandbox's guards let code read, assign and (by name) build, and what
#: crosses the sandbox boundary field by field (robot/sandbox/wire.py; tests/test_robot_sandbox_hostile.py checks
#: every entry).
VALUE_CLASSES: tuple[type, ...] = tuple(spec.cls for spec in VALUE_TYPES.values())


def value_fields(cls: type) -> tuple[str, ...]:
    """The fields of a value type, in order: a dataclass's ``__init__`` fields, or the public names in its
    ``__slots__`` (``Point`` -> x, y, z). Code may read and assign these; they are what crosses the sandbox."""
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)
    slots = getattr(cls, "__slots__", ())
    return tuple(s for s in ((slots,) if isinstance(slots, str) else slots) if not s.startswith("_"))


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
