"""The benchmark tasks of ``benchmark_tasks.yaml`` (paper Table I): loading, their worlds, and checking the
evaluation items against a world state.

Each task keeps its Table I name and instruction and records the public RoboScript task it follows (``public_label``,
``public_world``: github.com/SgtVincent/RoboScript, ``instruct_to_policy/data/benchmark/``), whose evaluation items
it carries; ``hint`` is the extra sentence the public task query adds to the instruction, in our words.

A world state is what the simulator reports at the end of an episode -- each model's bounding box and each joint's
value; :func:`initial_state` gives the state a task starts from. Every item's check returns whether it holds and a
sentence with the measured numbers, so an evaluation report can say why a task failed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from core.errors import DataError
from robot.contract.catalog import Catalog
from robot.contract.items import (
    ITEM_TYPES,
    EvalItem,
    ItemResult,
    TabletopState,
    check_item,
    initial_state,
)
from robot.contract.world import Model, World, cabinet_models, model_of
from robot.contract.params import RobotParams, TableParams
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.worlds import world_problems

BENCHMARK_FILE = Path(__file__).with_name("benchmark_tasks.yaml")
REASONING = ("category_understanding", "object_selection", "spatial_relationship", "property_reasoning")


PUBLIC_LABELS = ("simple_0", "simple_1", "hard_0", "hard_1", "hard_2", "hard_3", "hard_4", "hard_5")


@dataclass(frozen=True)
class BenchmarkTask:
    id: str
    instruction: str
    reasoning: tuple[str, ...]
    world: World
    evaluation: tuple[EvalItem, ...]
    hint: str | None = None
    public_label: str | None = None
    public_world: str | None = None

    @property
    def prompt_instruction(self) -> str:
        """What the code generator is asked: the instruction, then the hint."""
        return f"{self.instruction} {self.hint}" if self.hint else self.instruction


def evaluate(task: BenchmarkTask, state: TabletopState) -> list[ItemResult]:
    start = initial_state(task.world)
    return [check_item(item, state, start) for item in task.evaluation]


# ------------------------------------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True)
class Layout:
    """Which of a task's worlds to build and the table and robot it stands in."""
    name: str
    world_key: str
    table: TableParams
    robot: RobotParams


def _layout(data: dict[str, Any], params: WorldsParams, source: str) -> Layout:
    if params.benchmark_worlds == "ours":
        return Layout("ours", "world", params.table, params.robot)
    spec = (data.get("layouts") or {}).get("public")
    if not isinstance(spec, dict):
        raise DataError(f"{source}: benchmark_worlds is 'public' but there is no 'layouts: public:' mapping.")
    try:
        table = TableParams(**spec.get("table", {}))
        robot = RobotParams(**(params.robot.model_dump() | spec.get("robot", {})))
    except (TypeError, ValueError) as exc:
        raise DataError(f"{source}: layouts.public: {exc}") from None
    return Layout("public", "public_world", table, robot)


class _TaskReader:
    def __init__(self, source: str, catalog: Catalog, layout: Layout, raw: Any, index: int):
        self.source, self.catalog, self.layout, self.raw = source, catalog, layout, raw
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

    def scaled(self, asset, value: Any, where: str):
        """An object asset at another size (the public worlds spawn some models scaled): size x s, mass x s^3.
        Containers keep the catalog's size, since their openings and floors are the catalog's too."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.2 <= value <= 3.0:
            raise self.fail(f"{where}: scale must be a number from 0.2 to 3, got {value!r}")
        if asset.kind != "object":
            raise self.fail(f"{where}: scale applies to objects only; {asset.name} is a {asset.kind} (add a catalog "
                            "entry of the size wanted instead)")
        return replace(asset, size=tuple(round(v * value, 4) for v in asset.size),
                       mass=round(asset.mass * value ** 3, 4))

    def world(self) -> World:
        key = self.layout.world_key
        spec = self.raw.get(key)
        if not isinstance(spec, dict):
            raise self.fail(f"needs a '{key}' mapping")
        table_z = self.layout.table.height
        models: list[Model] = []
        joints = []
        if spec.get("cabinet"):
            cab = spec["cabinet"]
            asset = self.asset(cab.get("asset"), f"{key}.cabinet")
            if asset.kind != "cabinet":
                raise self.fail(f"{key}.cabinet: {asset.name} is a {asset.kind}, not a cabinet")
            cab_yaw = cab.get("yaw", 0)
            if cab_yaw not in (0, 180):
                raise self.fail(f"{key}.cabinet: yaw must be 0 (front to the robot, on the table) or 180 (turned "
                                f"round, behind the robot), got {cab_yaw!r}")
            base_z = 0.0 if asset.stands == "floor" else table_z
            models, joints = cabinet_models(asset, self.xy(cab.get("at"), f"{key}.cabinet"), base_z, float(cab_yaw))
        by_name = {m.name: m for m in models}
        for i, entry in enumerate(spec.get("models") or [], start=1):
            where = f"{key}.models[{i}]"
            asset = self.asset(entry.get("asset"), where)
            yaw = float(entry.get("yaw", 0))
            if yaw not in (0.0, 90.0):
                raise self.fail(f"{where}: yaw must be 0 or 90, got {yaw}")
            at = self.xy(entry.get("at"), where)
            if "scale" in entry:
                asset = self.scaled(asset, entry["scale"], where)
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
        world = World(str(self.label), "benchmark", self.layout.table, self.layout.robot, models, joints)
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
        unknown_keys = sorted(set(self.raw) - {"id", "instruction", "hint", "reasoning", "public", "world",
                                               "public_world", "evaluation"})
        if unknown_keys:
            raise self.fail(f"unknown key(s) {unknown_keys}")
        hint = self.raw.get("hint")
        if hint is not None and (not isinstance(hint, str) or not hint.strip()):
            raise self.fail(f"hint must be a sentence, got {hint!r}")
        public = self.raw.get("public") or {}
        if not isinstance(public, dict) or public.get("label") not in PUBLIC_LABELS or \
                not isinstance(public.get("world"), str):
            raise self.fail(f"public must be {{label: <one of {', '.join(PUBLIC_LABELS)}>, world: <public world "
                            f"file>}}, got {public!r}")
        world = self.world()
        return BenchmarkTask(str(self.label), self.raw["instruction"], reasoning, world, self.items(world),
                             hint.strip() if hint else None, public["label"], public["world"])


def load_benchmark(catalog: Catalog, params: WorldsParams, path: Path | None = None) -> list[BenchmarkTask]:
    """The benchmark's tasks, each in the world of ``params.benchmark_worlds`` (ours | public)."""
    path = Path(path) if path is not None else BENCHMARK_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the benchmark tasks {path}: {exc}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise DataError(f"{path} must hold a list under 'tasks'.")
    layout = _layout(data, params, path.name)
    tasks = [_TaskReader(path.name, catalog, layout, raw, i).task() for i, raw in enumerate(data["tasks"])]
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: task ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}.")
    labels = [t.public_label for t in tasks]
    if len(set(labels)) != len(labels):
        raise DataError(f"{path}: public labels repeat: {sorted({x for x in labels if labels.count(x) > 1})}.")
    return tasks
