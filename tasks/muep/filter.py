"""Stage 3, task filtering: the paper's four criteria, each a named reason code, plus duplicates.

Checked in this order; a rejected task carries the first criterion it fails and a sentence saying why:

1. ``room_incompatible`` -- the task type needs an appliance the room lacks (heat: Microwave, cool: Fridge,
   clean: SinkBasin -- ALFWorld's domain cleans in sink basins only --, look in light: DeskLamp or FloorLamp).
2. ``invalid_item`` -- an object, receptacle or lamp that is no AI2-THOR type or is not in this scene (or, for a
   pick-two task, fewer than two instances of the object).
3. ``inadequate_attributes`` -- the item lacks the attribute the task needs: the object is not pickupable, the
   target is not a fixed receptacle or cannot hold that object type (ALFWorld's ``VAL_RECEPTACLE_OBJECTS``), the object
   cannot be heated / cooled / cleaned, the lamp cannot be switched on.
4. ``already_satisfied`` -- the goal the game checks already holds in the initial state: pick & place, an object
   of the type in a receptacle of the target type; pick two, two objects of the type in *one* receptacle of the
   target type (ALFWorld's goal names a single receptacle); heat / cool / clean, one object both in a target
   receptacle and hot / cold / clean (ALFRED's real states have objects that start cold in the fridge); look in
   light never, since it needs the object in hand and hands start empty.
5. ``duplicate`` -- the same (scene, type, object, target) as a task accepted before it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass

import pandas as pd

from tasks.muep.generate import TaskRecord
from tasks.muep.vocab import TASK_TYPES, catalog, phrase

REASONS = ("room_incompatible", "invalid_item", "inadequate_attributes", "already_satisfied", "duplicate")


@dataclass(frozen=True)
class RejectedTask(TaskRecord):
    reason: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Placed:
    """An object instance as it starts: the receptacles it is in and its state marks."""

    name: str
    receptacles: tuple[tuple[str, str], ...]  # (receptacle name, receptacle type)
    marks: frozenset[str] = frozenset()

    def in_type(self, receptacle_type: str) -> list[str]:
        return [name for name, rtype in self.receptacles if rtype == receptacle_type]


@dataclass
class SceneFacts:
    scene: str
    room_type: str
    counts: dict[str, int]
    placements: dict[str, list[Placed]]
    """object type -> its instances, where each starts and its initial marks."""


def scene_facts(scenes: pd.DataFrame, object_types: pd.DataFrame, instances: pd.DataFrame,
                receptacles: pd.DataFrame | None = None) -> dict[str, SceneFacts]:
    """Per scene: the types with instances and every instance's start. ``receptacles`` gives the types of an
    instance's further receptacles (``also_in``); without it only the first receptacle is known."""
    facts = {row.scene: SceneFacts(row.scene, row.room_type, {}, defaultdict(list))
             for row in scenes.itertuples(index=False)}
    for row in object_types.itertuples(index=False):
        if row.scene in facts and int(row.count) > 0:
            facts[row.scene].counts[row.object_type] = int(row.count)
    rtype: dict[tuple[str, str], str] = {}
    if receptacles is not None:
        rtype = {(r.scene, r.name): r.receptacle_type for r in receptacles.itertuples(index=False)}
    for row in instances.itertuples(index=False):
        if row.scene in facts:
            where = [(row.parent, row.parent_type)]
            where += [(r, rtype[(row.scene, r)]) for r in getattr(row, "also_in", ()) if (row.scene, r) in rtype]
            marks = frozenset(getattr(row, "initial_marks", ()))
            facts[row.scene].placements[row.object_type].append(Placed(row.name, tuple(where), marks))
    return facts


def _room(task: TaskRecord, facts: SceneFacts) -> str | None:
    spec = TASK_TYPES[task.task_type]
    if spec.appliances and not any(a in facts.counts for a in spec.appliances):
        need = " or ".join(spec.appliances)
        return f"a {spec.label} task needs a {need}; {facts.scene} ({phrase(facts.room_type)}) has none"
    return None


def _items(task: TaskRecord, facts: SceneFacts) -> str | None:
    spec = TASK_TYPES[task.task_type]
    named = [("object", task.object_name, task.object_type)]
    named.append(("lamp", task.light_name, task.light_type) if not spec.needs_receptacle
                 else ("receptacle", task.receptacle_name, task.receptacle_type))
    for role, name, obj_type in named:
        if obj_type is None:
            return f"the {role} {name!r} is not an AI2-THOR object type"
        if obj_type not in facts.counts:
            return f"there is no {phrase(obj_type)} in {facts.scene}"
    if spec.n_objects > 1 and facts.counts.get(task.object_type, 0) < spec.n_objects:
        return f"the task needs {spec.n_objects} {phrase(task.object_type)}s; {facts.scene} has " \
               f"{facts.counts.get(task.object_type, 0)}"
    return None


def _attributes(task: TaskRecord, facts: SceneFacts) -> str | None:
    cat = catalog()
    spec = TASK_TYPES[task.task_type]
    obj = task.object_type
    if obj not in cat.pickupable:
        return f"a {phrase(obj)} cannot be picked up"
    if spec.object_attribute and obj not in getattr(cat, spec.object_attribute):
        return f"a {phrase(obj)} is not {spec.object_attribute}"
    if spec.needs_receptacle:
        target = task.receptacle_type
        if target in cat.movable_receptacles:
            return (f"a {phrase(target)} is a movable receptacle: ALFWorld's six task types place objects in fixed "
                    "receptacles (its seventh type, with movable receptacles, is not part of MuEP)")
        if target not in cat.static_receptacles:
            return f"a {phrase(target)} is not a receptacle"
        if not cat.holds(target, obj):
            return f"a {phrase(target)} cannot hold a {phrase(obj)}"
    elif task.light_type not in cat.toggleable:
        return f"a {phrase(task.light_type)} cannot be switched on"
    return None


def _satisfied(task: TaskRecord, facts: SceneFacts) -> str | None:
    """Criterion 4 on the goal the game checks (``pddl.Problem.adl_goal``), evaluated on the initial state."""
    spec = TASK_TYPES[task.task_type]
    if not spec.needs_receptacle:
        return None  # look in light needs the object in hand: hands start empty, so it never starts satisfied
    placed = facts.placements.get(task.object_type, [])
    if spec.n_objects == 2:
        per_receptacle = Counter(r for p in placed for r in set(p.in_type(task.receptacle_type)))
        full = sorted(r for r, n in per_receptacle.items() if n >= 2)
        if full:
            return f"two {phrase(task.object_type)}s already start in {full[0]}"
        return None
    for p in placed:
        where = p.in_type(task.receptacle_type)
        if not where:
            continue
        if spec.state_predicate is None:
            return f"{p.name} already starts in {where[0]}"
        if spec.state_predicate in p.marks:
            state = {"isHot": "hot", "isCool": "cold", "isClean": "clean"}[spec.state_predicate]
            return f"{p.name} already starts {state} in {where[0]}"
    return None


CRITERIA = (("room_incompatible", _room), ("invalid_item", _items), ("inadequate_attributes", _attributes),
            ("already_satisfied", _satisfied))


def dedupe_key(task: TaskRecord) -> tuple:
    return (task.scene, task.task_type, task.object_type, task.receptacle_type or task.light_type)


def filter_tasks(
    tasks: list[TaskRecord], facts: dict[str, SceneFacts], drop_duplicates: bool = True
) -> tuple[list[TaskRecord], list[RejectedTask], dict]:
    accepted: list[TaskRecord] = []
    rejected: list[RejectedTask] = []
    seen: set[tuple] = set()
    for task in tasks:
        reason = detail = None
        scene = facts.get(task.scene)
        if scene is None:
            reason, detail = "invalid_item", f"scene {task.scene} is not in the metadata"
        else:
            for code, check in CRITERIA:
                found = check(task, scene)
                if found:
                    reason, detail = code, found
                    break
        if reason is None and drop_duplicates:
            key = dedupe_key(task)
            if key in seen:
                reason, detail = "duplicate", "same scene, task type, object and target as an accepted task"
            seen.add(key)
        if reason is None:
            accepted.append(task)
        else:
            rejected.append(RejectedTask(**dataclasses.asdict(task), reason=reason, detail=detail))
    by_reason = Counter(r.reason for r in rejected)
    report = {
        "proposed": len(tasks),
        "accepted": len(accepted),
        "rejected": len(rejected),
        "acceptance_rate": round(len(accepted) / len(tasks), 4) if tasks else 0.0,
        "rejected_by_reason": {code: by_reason.get(code, 0) for code in REASONS},
        "accepted_by_type": dict(sorted(Counter(t.task_type for t in accepted).items())),
        "accepted_by_split": dict(sorted(Counter(t.split for t in accepted).items())),
        "accepted_by_room": dict(sorted(Counter(t.room_type for t in accepted).items())),
    }
    return accepted, rejected, report
