"""Scoring: evaluation items checked on the final world state, and the paper's four metrics per task.

Items are those of ``tasks/roboscript/benchmark_tasks.yaml`` (``on_receptacle``, ``in_receptacle``, ``near_start``;
checked by ``robot.contract.items.check_item`` as the public evaluator checks them) plus ``joint_opened`` and
``placed_at`` for the object-shape study.

Aggregation over the N requested repeats of a task, as the public RoboScript table script does
(``instruct_to_policy/scripts/src/eval/print_table.py``, ``fill_df_from_json_files`` l. 11-51, of
github.com/SgtVincent/RoboScript), restated:

* a repeat that **raised** (the public evaluator's ``exec`` raised, evaluator.py l. 108-113) is not evaluated at all:
  it counts 0 for grammar, 0 finished steps and 0 for the whole task -- steps it finished before the exception count
  for nothing. Here that is every repeat whose status is not grammatical (``robot.contract.outcomes``, the one
  definition the sandbox uses too): an exception of the code, a refused snippet, a time-out, the memory limit, a
  crash, and a robot failure that raised (``robot_error``). A motion the robot cannot carry out returns False by
  default, as the public motion tools do, so it leaves the repeat ``ok`` and scored on its final state; only the
  ``motion_failure: raise`` option turns it into ``robot_error`` (see docs/robot.md, "Scoring");
* a repeat that **never ran** counts 0 as well: the denominator is always the number of repeats asked for (l. 28-40:
  a query whose code could not be generated gets ``repeat_times`` zeros);
* **grammar correctness** = at least one repeat ran without an exception (``np.any``, l. 48);
* **semantic correctness** = at least one repeat satisfied every item (``np.any`` of the whole-task flags, l. 49);
  the paper adds a manual check of snippets that fail every trial, which is not automated;
* **finished steps ratio** = the mean over the N repeats of the share of items that hold (l. 50);
* **finished whole task** = the share of the N repeats in which every item holds (l. 51).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import DataError
from robot.contract.outcomes import is_grammatical
from tasks import stats

METRICS = ("grammar_correct", "semantic_correct", "finished_steps_ratio", "finished_whole_task")
METRIC_LABELS = {"grammar_correct": "grammar correctness", "semantic_correct": "semantic correctness",
                 "finished_steps_ratio": "finished steps ratio", "finished_whole_task": "finished whole task"}


def repeat_scores(repeat: dict, n_items: int) -> tuple[int, float, int]:
    """(grammar_k, steps_k, whole_k) of one repeat: all 0 when it raised, else 1, the share of items held and whether
    all of them held."""
    if not is_grammatical(repeat.get("status", "")):
        return 0, 0.0, 0
    held = [bool(i["ok"]) for i in repeat.get("items") or []]
    if n_items and len(held) != n_items:
        raise ValueError(f"a repeat reports {len(held)} item result(s), the task has {n_items}")
    return 1, (sum(held) / len(held) if held else 0.0), int(bool(held) and all(held))


def task_metrics(result: dict | None, n_items: int, repeats: int | None = None) -> dict:
    """The four metrics of one task from a runner's result (``None``: no runner could run it).

    ``repeats``: how many repeats were asked for (the denominator); None = as many as the result holds."""
    ran = list((result or {}).get("repeats") or []) if (result or {}).get("ok") else []
    n = max(repeats if repeats is not None else len(ran), len(ran))
    scores = [repeat_scores(r, n_items) for r in ran]
    statuses = Counter(r["status"] for r in ran)
    if n > len(ran):
        statuses["not_run"] = n - len(ran)
    error = None
    if not (result or {}).get("ok"):
        error = (result or {}).get("error") or "not run"
    return {
        "grammar_correct": any(g for g, _, _ in scores),
        "semantic_correct": any(w for _, _, w in scores),
        "finished_steps_ratio": round(sum(s for _, s, _ in scores) / n, 4) if n else 0.0,
        "finished_whole_task": round(sum(w for _, _, w in scores) / n, 4) if n else 0.0,
        "repeats": n,
        "repeats_run": len(ran),
        "statuses": dict(sorted(statuses.items())),
        "failed_motions": sum(len(r.get("failed_motions") or []) for r in ran),
        "error": error,
    }


INTERVAL_METRICS = ("finished_steps_ratio", "finished_whole_task")
"""The metrics of each repeat (a share of items, all items held), which get a 95 % interval over repeats."""


def repeat_units(result: dict | None, n_items: int, repeats: int | None = None) -> list[tuple[float, int]]:
    """(steps_k, whole_k) of every repeat asked for, as :func:`task_metrics` averages them: a repeat that never ran
    counts 0 for both."""
    ran = list((result or {}).get("repeats") or []) if (result or {}).get("ok") else []
    n = max(repeats if repeats is not None else len(ran), len(ran))
    units = [(steps, whole) for _, steps, whole in (repeat_scores(r, n_items) for r in ran)]
    return units + [(0.0, 0)] * (n - len(units))


def intervals(units: dict[str, list[tuple[float, int]]]) -> dict[str, Any]:
    """The 95 % bootstrap intervals of the finished-steps ratio and whole-task rate over all tasks (:mod:`tasks.stats`):
    repeats resampled within each task, so every task keeps its N repeats and the statistic is the mean over tasks
    of each task's mean, as the summary computes it. ``indicative`` when there are fewer than 30 repeats in all."""
    strata = [task for task, rows in sorted(units.items()) for _ in rows]
    out: dict[str, Any] = {}
    for index, key in enumerate(INTERVAL_METRICS):
        values = [row[index] for task, rows in sorted(units.items()) for row in rows]
        interval = stats.bootstrap(values, strata=strata) if values else None
        out[key] = None if interval is None else [round(interval.low, 4), round(interval.high, 4)]
    return out | {"level": stats.LEVEL, "units": "repeats, resampled within each task",
                  "indicative": len(strata) < stats.INDICATIVE_BELOW}


def task_values(per_task: dict[str, dict], key: str) -> list[float]:
    """``key``'s value of every task that has one (booleans as 0/1), in the tasks' order."""
    return [float(m[key]) for m in per_task.values() if m.get(key) is not None]


def task_intervals(per_task: dict[str, dict]) -> dict[str, Any]:
    """The 95 % bootstrap intervals of all four metrics' means over *tasks* (:mod:`tasks.stats`): each task's figure
    is one unit, tasks are resampled. This is the uncertainty that decides whether two code writers differ on the
    benchmark (a deterministic sim makes the intervals over repeats narrow; eight tasks make these wide), and the
    one a published row gets too, from its per-task figures. Always ``indicative`` below 30 tasks."""
    out: dict[str, Any] = {}
    n = 0
    for key in METRICS:
        values = task_values(per_task, key)
        interval = stats.bootstrap(values) if values else None
        out[key] = None if interval is None else [round(interval.low, 4), round(interval.high, 4)]
        n = max(n, len(values))
    return out | {"level": stats.LEVEL, "units": "tasks", "indicative": n < stats.INDICATIVE_BELOW}


def summary(per_task: dict[str, dict]) -> dict:
    """Means over all tasks (booleans count as 0/1; a task that could not run counts 0, as in the public table)."""
    tasks = list(per_task.values())
    out: dict[str, Any] = {"tasks": len(tasks), "tasks_run": sum(bool(m.get("repeats_run")) for m in tasks)}
    for key in METRICS:
        out[key] = round(sum(float(m[key]) for m in tasks) / len(tasks), 4) if tasks else None
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}"


@dataclass(frozen=True)
class Table2Block:
    """One block of Table II rows: who wrote the code, what it is, where the figures come from."""

    name: str
    kind: str
    """"LLM", or what else wrote the code (a rule-based program is never shown as a model)."""
    source: str
    per_task: dict[str, dict]
    intervals: dict[str, Any] = field(default_factory=dict)
    """``{metric: [low, high]}`` over all tasks (:func:`intervals`); empty for the published rows."""


def table2_markdown(blocks: list[Table2Block], task_ids: list[str], title: str = "") -> str:
    """The paper's Table II layout: one block of four metric rows per code writer (and source), one column per
    task; the kind and source columns say what wrote the code and where the figures come from."""
    lines = []
    if title:
        lines += [title, ""]
    lines.append("| code writer | kind | source | metric | " + " | ".join(task_ids)
                 + " | mean of its tasks [95% CI over repeats] | 95% CI over tasks |")
    lines.append("| --- | --- | --- | --- | " + " | ".join("---" for _ in task_ids) + " | --- | --- |")
    for block in blocks:
        over_tasks = task_intervals({t: block.per_task.get(t, {}) for t in task_ids})
        for i, key in enumerate(METRICS):
            interval = over_tasks[key]
            cells = [_cell(block.per_task.get(t, {}).get(key)) for t in task_ids] + [
                _mean_cell(block, key, task_ids),
                "n/a" if interval is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"]
            head = f"{block.name} | {block.kind} | {block.source}" if i == 0 else " |  | "
            lines.append(f"| {head} | {METRIC_LABELS[key]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PAIRED_METRICS = ("grammar_correct", "semantic_correct")
"""The per-task flags two code writers are compared on, task by task."""


def paired_markdown(blocks: list[Table2Block], task_ids: list[str]) -> str:
    """Whether two code writers differ, task by task: McNemar's exact test (:func:`tasks.stats.mcnemar`) on each
    per-task flag over the tasks both have figures for, for every pair with at least one of our rows (the published
    rows are compared with ours, not with each other). Empty when there is no such pair."""
    ours = [b for b in blocks if not b.source.startswith("published")]
    pairs = [(a, b) for i, a in enumerate(blocks) for b in blocks[i + 1:] if a in ours or b in ours]
    rows = []
    for a, b in pairs:
        cells = []
        for key in PAIRED_METRICS:
            shared = [t for t in task_ids if a.per_task.get(t, {}).get(key) is not None
                      and b.per_task.get(t, {}).get(key) is not None]
            if not shared:
                cells.append("n/a")
                continue
            test = stats.mcnemar([bool(a.per_task[t][key]) for t in shared], [bool(b.per_task[t][key]) for t in shared])
            verdict = "differ" if test.differ else "not shown to differ"
            cells.append(f"{test.only_a} / {test.only_b} of {test.episodes}, p = {stats.fmt_p(test.p)}: {verdict}")
        rows.append(f"| {a.name} | {b.name} | " + " | ".join(cells) + " |")
    if not rows:
        return ""
    return "\n".join([
        "## Paired comparisons over tasks",
        "",
        "Each pair of code writers on the tasks both have figures for: how many tasks only the first / only the second "
        "got the flag, and McNemar's exact two-sided test on those tasks (\"differ\" at p < 0.05). Few tasks separate "
        "only wide margins: on Table I's eight, even 5 / 0 gives p = 0.062.",
        "",
        "| A | B | " + " | ".join(f"{METRIC_LABELS[k]}: only A / only B" for k in PAIRED_METRICS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in PAIRED_METRICS) + " |",
        *rows,
    ]) + "\n"


def _mean_cell(block: Table2Block, key: str, task_ids: list[str]) -> str:
    """The mean over the tasks this block has figures for (as its run's summary: a slice of the tasks is averaged over
    that slice), with its interval over repeats where the block has one."""
    values = [float(v) for t in task_ids if (v := block.per_task.get(t, {}).get(key)) is not None]
    if not values:
        return "n/a"
    mean = sum(values) / len(values)
    interval = block.intervals.get(key)
    if interval:
        return f"{mean:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"
    return f"{mean:.2f}"


PUBLISHED_FILE = Path(__file__).with_name("published_table2.yaml")


def load_published(path: Path = PUBLISHED_FILE) -> tuple[list[Table2Block], dict]:
    """The paper's published Table II (``published_table2.yaml``) as blocks labelled "published", and the file's
    header fields (source, repeats)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the published Table II {path}: {exc}.") from None
    where = Path(path).name
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not isinstance(data.get("models"),
                                                                                              dict):
        raise DataError(f"{where}: needs 'tasks' (a list) and 'models' (a mapping).")
    tasks = [str(t) for t in data["tasks"]]
    blocks = []
    for model, metrics in data["models"].items():
        if not isinstance(metrics, dict) or set(metrics) != set(METRICS):
            raise DataError(f"{where}: models.{model} must give exactly {', '.join(METRICS)}.")
        per_task: dict[str, dict] = {t: {} for t in tasks}
        for key in METRICS:
            values = metrics[key]
            if not isinstance(values, list) or len(values) != len(tasks):
                raise DataError(f"{where}: models.{model}.{key} must list {len(tasks)} values, one per task.")
            for task, value in zip(tasks, values, strict=True):
                boolean = key in ("grammar_correct", "semantic_correct")
                if boolean != isinstance(value, bool) or not (boolean or 0 <= value <= 1):
                    kind = "true/false" if boolean else "a number from 0 to 1"
                    raise DataError(f"{where}: models.{model}.{key} for {task} must be {kind}, got {value!r}.")
                per_task[task][key] = value
        blocks.append(Table2Block(str(model), "LLM", f"published ({data.get('repeats', '?')} repeats)", per_task))
    return blocks, {"source": data.get("source", ""), "repeats": data.get("repeats")}
