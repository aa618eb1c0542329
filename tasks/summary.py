"""The short summary a run ends with: per pipeline, one line per stage with its headline numbers and the report
they come from. Read from the stages' own report files (``reports/``), so it shows what the last run wrote; a stage
that has not run shows a dash. The full metrics stay a command away (``dvc metrics show --json``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import paths
from tasks.muep import layout as muep
from tasks.roboscript import layout as robo


@dataclass(frozen=True)
class Line:
    stage: str
    headline: str
    report: str


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _line(stage: str, path: Path, headline: Callable[[dict], str]) -> Line:
    report = _read(path)
    text = "-" if report is None else headline(report)
    return Line(stage, text, paths.rel(path))


def _eval_lines() -> list[Line]:
    out = []
    for path in sorted(muep.REPORTS.glob("eval_*.json")):
        report = _read(path) or {}
        splits = report.get("by_split", {})
        cells = []
        for split, metrics in splits.items():
            cells.append(f"{split} SR {_num(metrics.get('sr'))} GCS {_num(metrics.get('gcs'))}")
        label = report.get("label", path.stem.removeprefix("eval_"))
        out.append(Line(f"muep-eval ({label})", "; ".join(cells) or "-", paths.rel(path)))
    return out or [Line("muep-eval", "-", paths.rel(muep.REPORTS / "eval_<agent>.json"))]


def _train_lines() -> list[Line]:
    return [_line(f"muep-train ({path.stem})", path,
                  lambda r: f"loss {_num(r.get('first_loss'))} -> {_num(r.get('final_loss'))}, "
                            f"eval loss {_num(r.get('eval_loss'))}")
            for path in sorted(muep.TRAIN_REPORTS.glob("*.json"))]


def muep_lines() -> list[Line]:
    r = muep.REPORTS
    return [
        _line("muep-metadata", r / "metadata.json",
              lambda d: f"{d.get('scenes')} scenes, {d.get('object_instances')} object instances"),
        _line("muep-generate", r / "generate.json",
              lambda d: f"{d.get('tasks_parsed')} tasks proposed by {d.get('backend')}:{d.get('model')}, "
                        f"{d.get('lines_rejected')} lines rejected"),
        _line("muep-filter", r / "filter.json",
              lambda d: f"{d.get('accepted')} accepted, {d.get('rejected')} rejected"),
        _line("muep-demos", r / "demos.json",
              lambda d: f"{d.get('episodes')} of {d.get('episodes_attempted')} episodes, "
                        f"{d.get('image_text_pairs')} image-text pairs"),
        _line("muep-sft", r / "sft.json", lambda d: f"{d.get('records')} records"),
        *_eval_lines(),
        *_train_lines(),
        Line("muep-leaderboard", "Tables 2-4 and RoboScript Table II" if muep.LEADERBOARD_MD.exists() else "-",
             paths.rel(muep.LEADERBOARD_MD)),
    ]


def _means(d: dict) -> str:
    means = d.get("mean", {})
    if not means:
        return ""
    studies = list(next(iter(means.values())))
    return f"success ({' / '.join(studies)}): " + ", ".join(
        f"{setting} {'/'.join(_num(per.get(s)) for s in studies)}" for setting, per in means.items())


def roboscript_lines() -> list[Line]:
    r = robo.REPORTS
    return [
        _line("roboscript-worlds", r / "worlds.json",
              lambda d: f"{d.get('objects')} objects and {d.get('containers')} containers placed, "
                        f"{d.get('benchmark_tasks')} benchmark tasks"),
        _line("roboscript-queries", r / "queries.json",
              lambda d: f"{d.get('queries')} queries from {d.get('backend')}:{d.get('model')}"),
        _line("roboscript-codegen", r / "codegen.json",
              lambda d: f"{d.get('passing')} of {d.get('snippets')} snippets pass the code check"),
        _line("roboscript-eval", r / "eval.json",
              lambda d: f"{d.get('model')}: " + ", ".join(
                  f"{k.replace('_', ' ')} {_num(v)}" for k, v in d.get("summary", {}).items()
                  if k not in ("tasks", "tasks_run"))),
        _line("roboscript-shapes", r / "shapes.json",
              lambda d: ", ".join(f"{s} {_num(v)}" for s, v in d.get("mean", {}).items()) or "-"),
        _line("roboscript-perception", r / "perception.json", lambda d: _means(d) or "-"),
    ]


def _took(stage: str) -> str:
    """The stage's last wall time (``reports/timings/<stage>.json``, written by every stage; "-" if none)."""
    facts = _read(paths.REPORTS / "timings" / f"{stage.split(' ')[0]}.json")
    if not facts or "wall_s" not in facts:
        return "-"
    seconds = float(facts["wall_s"])
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def pipelines() -> dict[str, list[Line]]:
    return {"MuEP": muep_lines(), "RoboScript": roboscript_lines()}


def render(width: int = 120) -> str:
    """The summary as rich tables at most ``width`` columns wide (plain text, for a terminal or a log)."""
    import io

    from rich.console import Console
    from rich.table import Table

    console = Console(file=io.StringIO(), width=width, record=True, force_terminal=False, color_system=None)
    for name, lines in pipelines().items():
        table = Table(title=name, title_justify="left", expand=False, show_lines=False)
        table.add_column("stage", no_wrap=True)
        table.add_column("headline")
        table.add_column("took", no_wrap=True, justify="right")
        table.add_column("report", overflow="fold")
        for line in lines:
            table.add_row(line.stage, line.headline, _took(line.stage), line.report)
        console.print(table)
    console.print("Full metrics: dvc metrics show --json; runs in MLflow's UI: embp ui; stage times: reports/timings/")
    return console.export_text()
