"""MLflow runs of the evaluation: one run per (agent, split), written with batched logging, read back for the
leaderboard.

A run holds

* params -- agent, label, model, adapter, grammar, renderer, dataset_version, episodes_sha256, split, the caps;
* metrics -- the rates of :mod:`tasks.muep.eval.metrics` for the split (``sr``, ``is_success``, ``is_all``, ``gcs``,
  ``lc``, ``rdi``, ``pr``) and per task type (``sr/<task type>``...), plus the tallies they come from
  (``n/<field>`` and ``n/<field>/<task type>``), so that splits add up exactly to overall figures;
* tags -- ``agent``, ``agent_label``, ``split``, ``dataset_version``, ``stage``;
* artifact -- ``trajectories/<agent>_<split>.jsonl``: one line per episode, every step.

Runs are written by :func:`tasks.tracking.log_run` (batched calls, FAILED on an error half-way).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from core.io import atomic_path
from tasks import paths
from tasks.muep import layout
from tasks.muep.eval.metrics import Tally, episode_metrics
from tasks.muep.eval.records import EpisodeResult
from tasks.params import EvalParams, TrackingParams
from tasks.tracking import DatasetRef
from tasks.tracking import log_run as log_tracked_run

STAGE = "muep-eval"
EXPERIMENT = "muep-eval"


def split_tallies(results: Sequence[EpisodeResult]) -> tuple[Tally, dict[str, Tally]]:
    total, by_type = Tally(), {}
    for r in results:
        m = episode_metrics(r)
        total.add(m)
        by_type.setdefault(r.task_type, Tally()).add(m)
    return total, by_type


def metric_values(total: Tally, by_type: dict[str, Tally]) -> dict[str, float]:
    out: dict[str, float] = {}
    for suffix, t in [("", total)] + [(f"/{k}", v) for k, v in sorted(by_type.items())]:
        out |= {f"{name}{suffix}": float(v) for name, v in t.rates().items() if v is not None}
        out |= {f"n/{name}{suffix}": float(v) for name, v in t.counts().items()}
    return out


def write_results(path: Path, results: Sequence[EpisodeResult], timings: bool = True) -> Path:
    """One JSON line per episode (trajectory and metrics), by episode id; atomic. ``timings=False`` leaves out each
    episode's wall seconds (a DVC output that must be the same bytes for the same inputs)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
        for r in sorted(results, key=lambda r: r.episode_id):
            line = r.to_json() | {"metrics": episode_metrics(r).__dict__}
            if not timings:
                line.pop("wall_s")
            stream.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


def run_fields(agent: str, info, params: EvalParams, split: str, episodes: int, version: str, episodes_sha: str,
               grammar: str) -> tuple[dict, dict[str, str]]:
    """The params and tags of one (agent, split) run: what was evaluated, on which data, under which caps."""
    run_params = {"agent": agent, "label": info.label, "model": info.model, "adapter": info.adapter,
                  "grammar": grammar, "renderer": params.renderer if info.multimodal else "none",
                  "dataset_version": version, "episodes_sha256": episodes_sha, "split": split, "episodes": episodes,
                  "max_steps": params.max_steps, "max_invalid_streak": params.max_invalid_streak, "seed": params.seed}
    if agent == "openai":
        o = params.openai
        run_params |= {"base_url": o.base_url or "", "temperature": o.temperature, "max_tokens": o.max_tokens,
                       "few_shot": o.few_shot, "max_calls_per_episode": o.max_calls_per_episode}
    tags = {"agent": agent, "agent_label": info.label, "split": split, "dataset_version": version, "stage": STAGE}
    return run_params, tags


def log_run(tracking: TrackingParams, label: str, split: str, params: dict[str, str], tags: dict[str, str],
            results: Sequence[EpisodeResult], trajectories: Path) -> tuple[str, float]:
    """One finished run for (agent, split). Returns its id and the seconds the logging took."""
    start = time.perf_counter()
    dataset = DatasetRef(f"muep-{split}", tags["dataset_version"].split(":")[-1], paths.rel(layout.DEMOS),
                         "evaluation", len(results))
    run_id = log_tracked_run(tracking, EXPERIMENT, f"{label} | {split}", run_params=params, tags=tags,
                             metrics=metric_values(*split_tallies(results)), artifacts=[("trajectories", trajectories)],
                             dataset=dataset)
    return run_id, time.perf_counter() - start


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    label: str
    agent: str
    split: str
    dataset_version: str
    start_time: int
    total: Tally
    by_type: dict[str, Tally]


def _tally(metrics: dict[str, float], suffix: str) -> Tally:
    counts = {f.name: metrics.get(f"n/{f.name}{suffix}", 0.0) for f in fields(Tally)}
    return Tally.from_counts(counts)


def read_runs(client, experiment_id: str) -> list[RunSummary]:
    """Every finished evaluation run of the experiment, newest first."""
    out = []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=5000):
        tags, metrics = run.data.tags, run.data.metrics
        if tags.get("stage") != STAGE or "split" not in tags:
            continue
        types = sorted({k.split("/", 2)[2] for k in metrics if k.startswith("n/episodes/")})
        out.append(RunSummary(run_id=run.info.run_id, label=tags.get("agent_label", tags.get("agent", "?")),
                              agent=tags.get("agent", "?"), split=tags["split"],
                              dataset_version=tags.get("dataset_version", ""), start_time=run.info.start_time,
                              total=_tally(metrics, ""), by_type={t: _tally(metrics, f"/{t}") for t in types}))
    return out
