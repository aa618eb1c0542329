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

from collections import Counter
from typing import Any

from robot.contract.outcomes import GRAMMATICAL

METRICS = ("grammar_correct", "semantic_correct", "finished_steps_ratio", "finished_whole_task")
METRIC_LABELS = {"grammar_correct": "grammar correctness", "semantic_correct": "semantic correctness",
                 "finished_steps_ratio": "finished steps ratio", "finished_whole_task": "finished whole task"}


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
