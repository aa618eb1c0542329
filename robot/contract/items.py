"""Evaluation items: what must hold in a tabletop world at the end of an episode, checked on a world state.

A world state (:class:`TabletopState`) is what the simulator reports at the end of an episode -- each model's bounding
box and each joint's value; :func:`initial_state` gives the state a task starts from. The runner checks a goal's
items itself, on its own state, after each repeat (so generated code cannot report its own success); evaluation
aggregates the results into the paper's metrics (``tasks.roboscript.eval.scoring``). Every check returns whether it
holds and a sentence with the measured numbers, so a report can say why a task failed.

The three benchmark checks are the public RoboScript evaluator's (``instruct_to_policy/scripts/src/eval/evaluator.py``
of github.com/SgtVincent/RoboScript; line numbers there), restated:

* ``on_receptacle`` -- ``check_relation_on`` (l. 158-192): more than ``min_overlap`` (0.8) of the object's footprint
  lies over the receptacle's footprint (area of the two xy rectangles' intersection / the object's own xy area,
  ``calc_2d_bbox_iob1``), and the object's top is above the receptacle's bottom.
* ``in_receptacle`` -- ``check_relation_in`` (l. 195-224): more than ``min_overlap`` (0.8) of the object's box volume
  lies inside the receptacle's box (``calc_3d_bbox_iob1``); nothing else -- no separate height test.
* ``near_start`` -- ``check_object_position`` with ``"start_position: <of>"`` (l. 248-274): the 3-D distance between
  the object's position now and the position ``of`` had at the start is below ``tolerance`` (0.1 m). The public
  code compares Gazebo model origins, and every loose model of the public world files has its origin at its base:
  in world_1_table_sort.world the apple, the banana, the plate and two boxes of different heights all stand at
  z = 0.8137-0.8153. A position here
  is therefore :func:`model_origin`, the centre of the box's bottom face -- not the box centre, which carried half
  the height difference of two swapped objects into the distance.

``joint_opened`` has no public benchmark item; it is the drawer study's joint test (the public drawer script accepts
a drawer pulled out by more than 0.75 x the pull distance), kept for ``tasks/roboscript/eval/shapes.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from core.errors import DataError
from robot.contract.geometry import Box
from robot.contract.world import World

ITEM_TYPES = ("on_receptacle", "in_receptacle", "near_start", "joint_opened")
OVERLAP_THRESHOLD = 0.8
"""Public ``iob_threshold`` of check_relation_on / check_relation_in (evaluator.py l. 158, 195)."""
POSITION_THRESHOLD_M = 0.1
"""Public ``position_threshold`` of check_object_position (evaluator.py l. 248)."""


@dataclass(frozen=True)
class EvalItem:
    type: str
    object: str | None = None
    receptacle: str | None = None
    of: str | None = None
    part: str | None = None
    min_value: float = 0.0
    min_overlap: float = OVERLAP_THRESHOLD
    """on / in: the share of the object (footprint / volume) that must overlap the receptacle, strictly more."""
    tolerance: float = POSITION_THRESHOLD_M
    """near_start: the 3-D distance (m) that must not be reached."""

    def describe(self) -> str:
        if self.type == "near_start":
            return f"{self.object} is where {self.of} started"
        if self.type == "joint_opened":
            return f"{self.part} is open by at least {self.min_value}"
        return f"{self.object} is {self.type.removesuffix('_receptacle')} {self.receptacle}"


@dataclass
class TabletopState:
    boxes: dict[str, Box]
    joints: dict[str, float] = field(default_factory=dict)
    """Joint value by cabinet part name (``cabinet.drawer_1``)."""


@dataclass(frozen=True)
class ItemResult:
    item: EvalItem
    ok: bool
    detail: str


def initial_state(world: World) -> TabletopState:
    return TabletopState({m.name: m.bbox for m in world.models}, {j.part: j.value for j in world.joints})


def model_origin(b: Box) -> tuple[float, float, float]:
    """Where a public world file puts a loose model's origin: the centre of its base (box centre in x and y, the
    box's bottom in z)."""
    cx, cy, _ = b.center
    return cx, cy, b.z0


def check_item(item: EvalItem, state: TabletopState, start: TabletopState) -> ItemResult:
    def box(name: str | None, where: TabletopState) -> Box:
        if name not in where.boxes:
            raise DataError(f"the world state has no model {name!r} (needed by '{item.describe()}').")
        return where.boxes[name]

    if item.type == "on_receptacle":
        obj, rec = box(item.object, state), box(item.receptacle, state)
        overlap = obj.xy_overlap_ratio(rec)
        above = obj.z1 > rec.z0
        return ItemResult(item, overlap > item.min_overlap and above,
                          f"{item.describe()}: footprint overlap {overlap:.2f} (need > {item.min_overlap}), top "
                          f"{obj.z1:.3f} vs receptacle bottom {rec.z0:.3f}")
    if item.type == "in_receptacle":
        obj, rec = box(item.object, state), box(item.receptacle, state)
        overlap = obj.volume_overlap_ratio(rec)
        return ItemResult(item, overlap > item.min_overlap,
                          f"{item.describe()}: volume inside {overlap:.2f} (need > {item.min_overlap})")
    if item.type == "near_start":
        now, then = model_origin(box(item.object, state)), model_origin(box(item.of, start))
        dist = math.dist(now, then)
        return ItemResult(item, dist < item.tolerance,
                          f"{item.describe()}: {dist:.3f} m away in 3-D (need < {item.tolerance})")
    value = state.joints.get(str(item.part))
    if value is None:
        raise DataError(f"the world state has no joint for {item.part!r}.")
    return ItemResult(item, value >= item.min_value, f"{item.describe()}: value {value:.3f}")


@dataclass(frozen=True)
class PlacedAt:
    object: str
    position: tuple[float, float]
    tolerance: float = 0.05
    type: str = "placed_at"

    def describe(self) -> str:
        return f"{self.object} is on the table within {self.tolerance} m of {list(self.position)}"


def parse_items(raw: list[Any], world: World) -> list:
    names = {m.name for m in world.models}
    parts = {j.part for j in world.joints}
    items: list = []
    for i, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict) or entry.get("type") not in (*ITEM_TYPES, "placed_at"):
            raise DataError(f"evaluation item {i}: type must be one of {', '.join((*ITEM_TYPES, 'placed_at'))}.")
        try:
            if entry["type"] == "placed_at":
                pos = entry.get("position")
                if not (isinstance(pos, list) and len(pos) == 2 and all(isinstance(v, (int, float)) for v in pos)):
                    raise DataError(f"evaluation item {i}: placed_at needs position [x, y].")
                item: Any = PlacedAt(entry["object"], (float(pos[0]), float(pos[1])),
                                     float(entry.get("tolerance", 0.05)))
            else:
                item = EvalItem(**entry)
        except (TypeError, KeyError) as exc:
            raise DataError(f"evaluation item {i}: {exc}.") from None
        for key in ("object", "receptacle", "of"):
            value = getattr(item, key, None)
            if value is not None and value not in names:
                raise DataError(f"evaluation item {i}: {key} {value!r} is not in the world.")
        if getattr(item, "part", None) is not None and item.part not in parts:
            raise DataError(f"evaluation item {i}: part {item.part!r} has no joint in the world.")
        items.append(item)
    return items


def _placed_at(item: PlacedAt, world: World, state: TabletopState) -> tuple[bool, str]:
    box = state.boxes.get(item.object)
    if box is None:
        return False, f"{item.describe()}: the object is missing"
    cx, cy, _ = box.center
    dist = math.hypot(cx - item.position[0], cy - item.position[1])
    on_table = abs(box.z0 - world.table.height) <= 0.02
    return dist <= item.tolerance and on_table, (f"{item.describe()}: {dist:.3f} m away, bottom "
                                                 f"{box.z0:.3f} (table {world.table.height:.3f})")


def check_items(items: list, world: World, state: TabletopState) -> list[dict]:
    start = initial_state(world)
    out = []
    for item in items:
        if isinstance(item, PlacedAt):
            ok, detail = _placed_at(item, world, state)
        else:
            result = check_item(item, state, start)
            ok, detail = result.ok, result.detail
        out.append({"description": item.describe(), "ok": bool(ok), "detail": detail})
    return out
