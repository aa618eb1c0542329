"""Scoring: evaluation items checked on the final world state, and the paper's four metrics per task.

Items are those of ``tasks/roboscript/benchmark_tasks.yaml`` (``on_receptacle``, ``in_receptacle``, ``near_start``,
``joint_opened``,
checked by ``tasks.roboscript.benchmark.check_item``) plus ``placed_at`` for the object-shape study (the object
rests on the table within ``tolerance`` of ``position`` [x, y]).

Aggregation over the N repeats of a task (paper V-A, Table II), as computed by :func:`task_metrics`:

* **grammar correctness** -- the code passed the code check and no repeat ended in an error of the code itself
  (an exception from the code or a ToolArgumentError, a time-out, the memory limit, a crash). A robot that cannot
  execute a well-formed request (RobotError: unreachable, blocked, outside the workspace) does not make code
  ungrammatical.
* **semantic correctness** -- at least one repeat completed the whole task ("determined by the success of any of
  the 10 trials"; the paper's extra manual check of snippets that fail every trial is not automated).
* **finished steps ratio** -- the mean over repeats of the share of the task's evaluation items that hold at the
  end (the items are the task's pre-defined steps; a repeat that stopped early keeps the steps it finished).
* **finished whole task** -- the share of repeats in which every item holds.

Repeats a runner could not run at all (the goal failed on every runner) are reported, not counted.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from robot.sandbox import GRAMMATICAL
from tasks.errors import DataError
from tasks.roboscript.benchmark import ITEM_TYPES, EvalItem, WorldState, check_item, initial_state
from tasks.roboscript.world import World

METRICS = ("grammar_correct", "semantic_correct", "finished_steps_ratio", "finished_whole_task")
METRIC_LABELS = {"grammar_correct": "grammar correctness", "semantic_correct": "semantic correctness",
                 "finished_steps_ratio": "finished steps ratio", "finished_whole_task": "finished whole task"}


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


def _placed_at(item: PlacedAt, world: World, state: WorldState) -> tuple[bool, str]:
    box = state.boxes.get(item.object)
    if box is None:
        return False, f"{item.describe()}: the object is missing"
    cx, cy, _ = box.center
    dist = math.hypot(cx - item.position[0], cy - item.position[1])
    on_table = abs(box.z0 - world.table.height) <= 0.02
    return dist <= item.tolerance and on_table, (f"{item.describe()}: {dist:.3f} m away, bottom "
                                                 f"{box.z0:.3f} (table {world.table.height:.3f})")


def check_items(items: list, world: World, state: WorldState) -> list[dict]:
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


def task_metrics(result: dict | None, n_items: int) -> dict:
    """The four metrics of one task from a runner's result (``None``: no runner could run it)."""
    if not result or not result.get("ok"):
        return {"grammar_correct": None, "semantic_correct": None, "finished_steps_ratio": None,
                "finished_whole_task": None, "repeats": 0, "statuses": {},
                "error": (result or {}).get("error") or "not run"}
    repeats = result.get("repeats", [])
    policy_ok = bool(result.get("policy", {}).get("ok"))
    statuses = Counter(r["status"] for r in repeats)
    steps = [sum(i["ok"] for i in r["items"]) / n_items if n_items else 0.0 for r in repeats]
    wins = [bool(r.get("success")) for r in repeats]
    n = len(repeats)
    return {
        "grammar_correct": policy_ok and n > 0 and all(r["status"] in GRAMMATICAL for r in repeats),
        "semantic_correct": any(wins),
        "finished_steps_ratio": round(sum(steps) / n, 4) if n else 0.0,
        "finished_whole_task": round(sum(wins) / n, 4) if n else 0.0,
        "repeats": n,
        "statuses": dict(sorted(statuses.items())),
        "mean_repeat_wall_s": round(sum(r["wall_s"] for r in repeats) / n, 4) if n else None,
        "error": None,
    }


def summary(per_task: dict[str, dict]) -> dict:
    """Means over the tasks that ran (booleans count as 0/1)."""
    ran = [m for m in per_task.values() if m["grammar_correct"] is not None]
    out: dict[str, Any] = {"tasks": len(per_task), "tasks_run": len(ran)}
    for key in METRICS:
        out[key] = round(sum(float(m[key]) for m in ran) / len(ran), 4) if ran else None
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}"


def table2_markdown(per_model: dict[str, dict[str, dict]], task_ids: list[str], title: str = "") -> str:
    """The paper's Table II layout: one block of four metric rows per model, one column per task."""
    lines = []
    if title:
        lines += [title, ""]
    lines.append("| LLM | metric | " + " | ".join(task_ids) + " |")
    lines.append("| --- | --- | " + " | ".join("---" for _ in task_ids) + " |")
    for model, per_task in per_model.items():
        for i, key in enumerate(METRICS):
            cells = [_cell(per_task.get(t, {}).get(key)) for t in task_ids]
            lines.append(f"| {model if i == 0 else ''} | {METRIC_LABELS[key]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
