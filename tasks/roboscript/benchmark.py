"""The benchmark tasks of ``benchmark_tasks.yaml`` (paper Table I): loading, their worlds, and checking the
evaluation items against a world state.

A world state is what the simulator reports at the end of an episode -- each model's bounding box and each joint's
value; :func:`initial_state` gives the state a task starts from. Every item's check returns whether it holds and a
sentence with the measured numbers, so an evaluation report can say why a task failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tasks.errors import DataError
from tasks.roboscript.catalog import Catalog
from tasks.roboscript.geometry import Box
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.world import Model, World, cabinet_models, model_of
from tasks.roboscript.worlds import world_problems

BENCHMARK_FILE = Path(__file__).with_name("benchmark_tasks.yaml")
ITEM_TYPES = ("on_receptacle", "in_receptacle", "near_start", "joint_opened")
REASONING = ("category_understanding", "object_selection", "spatial_relationship", "property_reasoning")


@dataclass(frozen=True)
class EvalItem:
    type: str
    object: str | None = None
    receptacle: str | None = None
    of: str | None = None
    part: str | None = None
    min_value: float = 0.0
    min_overlap: float = 0.5
    tolerance: float | None = None

    def describe(self) -> str:
        if self.type == "near_start":
            return f"{self.object} is where {self.of} started"
        if self.type == "joint_opened":
            return f"{self.part} is open by at least {self.min_value}"
        return f"{self.object} is {self.type.removesuffix('_receptacle')} {self.receptacle}"


@dataclass(frozen=True)
class BenchmarkTask:
    id: str
    instruction: str
    reasoning: tuple[str, ...]
    world: World
    evaluation: tuple[EvalItem, ...]


@dataclass
class WorldState:
    boxes: dict[str, Box]
    joints: dict[str, float] = field(default_factory=dict)
    """Joint value by cabinet part name (``cabinet.drawer_1``)."""


@dataclass(frozen=True)
class ItemResult:
    item: EvalItem
    ok: bool
    detail: str


def initial_state(world: World) -> WorldState:
    return WorldState({m.name: m.bbox for m in world.models}, {j.part: j.value for j in world.joints})


def check_item(item: EvalItem, state: WorldState, start: WorldState) -> ItemResult:
    def box(name: str | None, where: WorldState) -> Box:
        if name not in where.boxes:
            raise DataError(f"the world state has no model {name!r} (needed by '{item.describe()}').")
        return where.boxes[name]

    if item.type in ("on_receptacle", "in_receptacle"):
        obj, rec = box(item.object, state), box(item.receptacle, state)
        tol = 0.03 if item.tolerance is None else item.tolerance
        overlap = obj.xy_overlap_ratio(rec)
        if item.type == "on_receptacle":
            height_ok = rec.z0 - tol <= obj.z0 <= rec.z1 + tol
            where = f"bottom {obj.z0:.3f} vs receptacle {rec.z0:.3f}..{rec.z1 + tol:.3f}"
        else:
            height_ok = rec.z0 - tol <= obj.z0 < rec.z1
            where = f"bottom {obj.z0:.3f} vs receptacle bottom {rec.z0:.3f} and top {rec.z1:.3f}"
        ok = overlap >= item.min_overlap and height_ok
        return ItemResult(item, ok, f"{item.describe()}: overlap {overlap:.2f} (need {item.min_overlap}), {where}")
    if item.type == "near_start":
        now, then = box(item.object, state).center, box(item.of, start).center
        tol = 0.06 if item.tolerance is None else item.tolerance
        dist = math.hypot(now[0] - then[0], now[1] - then[1])
        return ItemResult(item, dist <= tol, f"{item.describe()}: {dist:.3f} m away (tolerance {tol})")
    value = state.joints.get(str(item.part))
    if value is None:
        raise DataError(f"the world state has no joint for {item.part!r}.")
    return ItemResult(item, value >= item.min_value, f"{item.describe()}: value {value:.3f}")


def evaluate(task: BenchmarkTask, state: WorldState) -> list[ItemResult]:
    start = initial_state(task.world)
    return [check_item(item, state, start) for item in task.evaluation]


# ------------------------------------------------------------------------------------------------------------------
# Loading


class _TaskReader:
    def __init__(self, source: str, catalog: Catalog, params: WorldsParams, raw: Any, index: int):
        self.source, self.catalog, self.params, self.raw = source, catalog, params, raw
        self.label = raw.get("id", f"#{index + 1}") if isinstance(raw, dict) else f"#{index + 1}"

    def fail(self, message: str) -> DataError:
        return DataError(f"{self.source}: task {self.label}: {message}.")

    def asset(self, name: Any, where: str):
        if not isinstance(name, str) or name not in self.catalog.assets:
            raise self.fail(f"{where}: unknown asset {name!r}")
        return self.catalog.assets[name]

    def xy(self, value: Any, where: str) -> tuple[float, float]:
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)):
            raise self.fail(f"{where}: 'at' must be [x, y], got {value!r}")
        return float(value[0]), float(value[1])

    def world(self) -> World:
        spec = self.raw.get("world")
        if not isinstance(spec, dict):
            raise self.fail("needs a 'world' mapping")
        table_z = self.params.table.height
        models: list[Model] = []
        joints = []
        if spec.get("cabinet"):
            cab = spec["cabinet"]
            asset = self.asset(cab.get("asset"), "cabinet")
            if asset.kind != "cabinet":
                raise self.fail(f"cabinet: {asset.name} is a {asset.kind}, not a cabinet")
            models, joints = cabinet_models(asset, self.xy(cab.get("at"), "cabinet"), table_z)
        by_name = {m.name: m for m in models}
        for i, entry in enumerate(spec.get("models") or [], start=1):
            where = f"world.models[{i}]"
            asset = self.asset(entry.get("asset"), where)
            yaw = float(entry.get("yaw", 0))
            if yaw not in (0.0, 90.0):
                raise self.fail(f"{where}: yaw must be 0 or 90, got {yaw}")
            at = self.xy(entry.get("at"), where)
            if "in" in entry:
                parent = by_name.get(entry["in"])
                container = self.catalog.assets.get(str(entry["in"]))
                if parent is None or container is None or not container.is_container:
                    raise self.fail(f"{where}: 'in' names {entry['in']!r}, which is no container listed before it")
                model = model_of(asset, asset.name, (parent.position[0] + at[0], parent.position[1] + at[1]),
                                 parent.bbox.z0 + container.floor, yaw, parent.name, "in")
            else:
                model = model_of(asset, asset.name, at, table_z, yaw, "table", "on")
            models.append(model)
            by_name[model.name] = model
        world = World(str(self.label), "benchmark", self.params.table, self.params.robot, models, joints)
        problems = world_problems(world)
        if problems:
            raise self.fail("its world breaks the placement rules: " + "; ".join(problems))
        return world

    def items(self, world: World) -> tuple[EvalItem, ...]:
        raw_items = self.raw.get("evaluation")
        if not isinstance(raw_items, list) or not raw_items:
            raise self.fail("needs a non-empty 'evaluation' list")
        names = {m.name for m in world.models}
        parts = {j.part for j in world.joints}
        items = []
        for i, raw in enumerate(raw_items, start=1):
            where = f"evaluation[{i}]"
            if not isinstance(raw, dict) or raw.get("type") not in ITEM_TYPES:
                got = raw.get("type") if isinstance(raw, dict) else raw
                hint = " (YAML reads a bare on/off/yes/no as true/false)" if isinstance(got, bool) else ""
                raise self.fail(f"{where}: type must be one of {', '.join(ITEM_TYPES)}, got {got!r}{hint}")
            try:
                item = EvalItem(**raw)
            except TypeError as exc:
                raise self.fail(f"{where}: {exc}") from None
            needed = {"on_receptacle": ("object", "receptacle"), "in_receptacle": ("object", "receptacle"),
                      "near_start": ("object", "of"), "joint_opened": ("part",)}[item.type]
            for key in needed:
                value = getattr(item, key)
                known = parts if key == "part" else names
                if value not in known:
                    raise self.fail(f"{where}: {key} {value!r} is not in the task's world")
            items.append(item)
        return tuple(items)

    def task(self) -> BenchmarkTask:
        if not isinstance(self.raw, dict) or not isinstance(self.raw.get("instruction"), str):
            raise self.fail("needs an 'id' and an 'instruction'")
        reasoning = tuple(self.raw.get("reasoning") or ())
        unknown = [r for r in reasoning if r not in REASONING]
        if unknown:
            raise self.fail(f"unknown reasoning challenge(s) {unknown}; known: {', '.join(REASONING)}")
        world = self.world()
        return BenchmarkTask(str(self.label), self.raw["instruction"], reasoning, world, self.items(world))


def load_benchmark(catalog: Catalog, params: WorldsParams, path: Path | None = None) -> list[BenchmarkTask]:
    path = Path(path) if path is not None else BENCHMARK_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the benchmark tasks {path}: {exc}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise DataError(f"{path} must hold a list under 'tasks'.")
    tasks = [_TaskReader(path.name, catalog, params, raw, i).task() for i, raw in enumerate(data["tasks"])]
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: task ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}.")
    return tasks
