"""The RoboScript part of the leaderboard: the paper's Table II, read from the MLflow runs of `roboscript-eval`.

Each run logs ``<task>.<metric>`` metrics (tasks/roboscript/eval/evaluation.py); the newest finished run per model (its run name)
gives one block of rows.
"""

from __future__ import annotations

import html
from collections import defaultdict

from tasks.roboscript.eval.scoring import INTERVAL_METRICS, METRICS, Table2Block, table2_markdown

EXPERIMENT = "roboscript-eval"


def kinds_from_runs(runs) -> dict[str, str]:
    """What wrote the code of each model's runs (the ``kind`` tag; runs from before the tag: judged by the name)."""
    from tasks.roboscript.eval.evaluation import coder_kind

    out: dict[str, str] = {}
    for run in runs:
        model = run.data.tags.get("model") or run.info.run_name
        kind = run.data.tags.get("kind")
        if kind is None and str(model).startswith("offline"):
            kind = coder_kind("rules:")  # the offline backend is the template program, whatever a run called it
        out.setdefault(model, kind or coder_kind(str(model)))
    return out


def newest_runs(runs) -> dict[str, object]:
    """The newest finished run of each model (its ``model`` tag, else its name)."""
    chosen: dict[str, object] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        if run.info.status != "FINISHED":
            continue
        model = run.data.tags.get("model") or run.info.run_name
        chosen.setdefault(model, run)
    return chosen


def intervals_from_runs(runs) -> dict[str, dict[str, list[float]]]:
    """Per model, the intervals over all tasks its newest run logged (``mean.<metric>_ci_low`` / ``_ci_high``)."""
    out: dict[str, dict[str, list[float]]] = {}
    for model, run in newest_runs(runs).items():
        m = run.data.metrics
        out[model] = {k: [m[f"mean.{k}_ci_low"], m[f"mean.{k}_ci_high"]] for k in INTERVAL_METRICS
                      if f"mean.{k}_ci_low" in m and f"mean.{k}_ci_high" in m}
    return out


def per_model_from_runs(runs) -> dict[str, dict[str, dict[str, float]]]:
    """``runs``: MLflow ``Run`` objects, any order. The newest finished run of each model wins."""
    chosen = newest_runs(runs)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for model, run in chosen.items():
        per_task: dict[str, dict[str, float]] = defaultdict(dict)
        for key, value in run.data.metrics.items():
            task, _, metric = key.rpartition(".")
            if task and task != "mean" and metric in METRICS:
                per_task[task][metric] = value
        table[model] = dict(per_task)
    return table


def section_markdown(client, experiment_name: str) -> str | None:
    """The Table II section, or None when the store has no RoboScript evaluation run."""
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        return None
    runs = client.search_runs([experiment.experiment_id], max_results=200)
    table = per_model_from_runs(runs)
    if not table:
        return None
    kinds = kinds_from_runs(runs)
    level = {"Simple": 0, "Moderate": 1, "Hard": 2}   # Table I's order: Simple_0 ... Hard_2
    task_ids = sorted({t for per_task in table.values() for t in per_task},
                      key=lambda t: (level.get(t.split("_")[0], 3), t))
    # by name, not by which run is newest: stages that log here may finish in either order (embp run runs
    # roboscript-eval and roboscript-real side by side), and the report must not change with it
    ci = intervals_from_runs(runs)
    blocks = [Table2Block(model, kinds.get(model, "LLM"), "MLflow, newest run", table[model], ci.get(model, {}))
              for model in sorted(table)]
    return table2_markdown(blocks, task_ids, f"## RoboScript benchmark (Table II)\n\nFrom MLflow experiment "
                                             f"`{experiment_name}`, the newest run per code writer; definitions in "
                                             "docs/robot.md; the next-to-last column is the mean over the tasks the row "
                                             "ran, with its 95 % bootstrap interval over repeats (resampled within "
                                             "each task) where the run logged one, the last its 95 % interval over "
                                             "tasks; the paper's published figures are beside "
                                             "our runs in the RoboScript table2.md report.")


def markdown_table_to_html(markdown: str, links: dict[str, str] | None = None) -> str:
    """The small subset we write: a title paragraph and one pipe table. ``links``: code writer -> the href of its
    episode pages (tasks/viewer), linked from its rows' first cell."""
    links = links or {}

    def first(cell: str) -> str:
        href = links.get(cell)
        return html.escape(cell) + (f" <small><a class='episodes' href='{html.escape(href)}'>episodes</a></small>"
                                    if href else "")

    out, rows = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-", ":", " "} for c in cells):
                rows.append(cells)
        elif line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    if rows:
        head, *body = rows
        out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr></thead><tbody>")
        out += ["<tr><td>" + first(r[0]) + "</td>" + "".join(f"<td>{html.escape(c)}</td>" for c in r[1:]) + "</tr>"
                for r in body]
        out.append("</tbody></table>")
    return "\n".join(out)
