"""MLflow runs of the evaluation: one run per (agent, split), written with batched logging, read back for the
leaderboard.

A run holds

* params -- agent, label, model, adapter, protocol, grammar (the protocol's, played), data_grammar (the episodes'),
  renderer, dataset, dataset_version, episodes_sha256, split, the stop rules (``max_steps``, ``loop_stop``,
  ``max_invalid_streak``), seed;
* metrics -- the rates of :mod:`tasks.muep.eval.metrics` for the split (``sr``, ``is_success``, ``is_all``, ``gcs``,
  ``gcs_alfworld``, ``lc``, ``rdi``, ``pr``) and per task type (``sr/<task type>``...), plus the tallies they come
  from (``n/<field>`` and ``n/<field>/<task type>``), so that splits add up exactly to overall figures; and where
  the time went (``time/<part>_s`` per agent-episode), which the result files never hold;
* tags -- ``agent``, ``agent_label``, ``split``, ``dataset``, ``dataset_version``, ``stop_rules``, ``stage``, and
  ``eval_fingerprint`` (what was evaluated, under which code and rules);
* metrics, too -- ``<rate>_ci_low`` / ``<rate>_ci_high``: the 95 % bootstrap interval of SR, GCS, PR and LC over the
  split's episodes (:func:`tasks.muep.eval.metrics.intervals`, the definition every table uses);
* artifacts -- ``trajectories/<split>.jsonl``: one line per episode, every step; ``outcomes/<split>.json``: per
  episode id, its success, sub-goals met / total and progress, from which the leaderboard computes intervals over
  any set of splits and pairs agents that played the same episodes (:func:`load_outcomes`).

Runs are written by :func:`tasks.tracking.log_run` (batched calls, FAILED on an error half-way). A run whose
``eval_fingerprint`` already has a finished run is not logged again, so a resumed evaluation adds no duplicate; an
unfinished one (a run killed while it was being logged) is deleted first.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from core.io import atomic_path
from tasks import paths
from tasks.muep import layout
from tasks.muep.eval.metrics import EpisodeMetrics, Tally, episode_metrics, intervals
from tasks.muep.eval.protocol import PROTOCOLS
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


def metric_values(total: Tally, by_type: dict[str, Tally],
                  episodes: Sequence[EpisodeMetrics] = ()) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, interval in intervals(episodes).items() if episodes else ():
        if interval is not None:
            out |= {f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high}
    for suffix, t in [("", total)] + [(f"/{k}", v) for k, v in sorted(by_type.items())]:
        out |= {f"{name}{suffix}": float(v) for name, v in t.rates().items() if v is not None}
        out |= {f"n/{name}{suffix}": float(v) for name, v in t.counts().items()}
    return out


def write_results(path: Path, results: Sequence[EpisodeResult]) -> Path:
    """One JSON line per episode (trajectory and metrics), by episode id; atomic. No timings: a DVC output that must
    be the same bytes for the same inputs (where the time went is in MLflow and the run facts)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
        for r in sorted(results, key=lambda r: r.episode_id):
            line = r.to_json() | {"metrics": episode_metrics(r).__dict__}
            stream.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


def stop_rules(params: EvalParams) -> str:
    """The stop rules an evaluation played by, in words: the paper's cap, then the optional ones that are on."""
    rules = [f"protocol={params.protocol}", f"max_steps={params.max_steps}"]
    if params.loop_stop:
        rules.append("loop_stop")
    if params.max_invalid_streak is not None:
        rules.append(f"invalid_streak={params.max_invalid_streak}")
    return ", ".join(rules)


def run_fields(agent: str, info, params: EvalParams, split: str, episodes: int, version: str, episodes_sha: str,
               grammar: str, dataset: str = "muep-demos", fingerprint: str = "") -> tuple[dict, dict[str, str]]:
    """The params and tags of one (agent, split) run: what was evaluated, on which data, under which rules."""
    streak = params.max_invalid_streak
    run_params = {"agent": agent, "label": info.label, "model": info.model, "adapter": info.adapter,
                  "grammar": PROTOCOLS[params.protocol].grammar, "data_grammar": grammar,
                  "protocol": params.protocol, "renderer": params.renderer if info.multimodal else "none",
                  "dataset": dataset,
                  "dataset_version": version, "episodes_sha256": episodes_sha, "split": split, "episodes": episodes,
                  "max_steps": params.max_steps, "loop_stop": params.loop_stop,
                  "max_invalid_streak": "off" if streak is None else streak, "seed": params.seed}
    if agent == "openai":
        o = params.openai
        run_params |= {"base_url": o.base_url or "", "temperature": o.temperature, "max_tokens": o.max_tokens,
                       "few_shot": o.few_shot, "max_calls_per_episode": o.max_calls_per_episode}
    tags = {"agent": agent, "agent_label": info.label, "split": split, "dataset": dataset, "dataset_version": version,
            "stop_rules": stop_rules(params), "stage": STAGE, "eval_fingerprint": fingerprint}
    return run_params, tags


def timing_values(timings: Sequence[dict]) -> dict[str, float]:
    """``time/<part>_s``: mean seconds per agent-episode of the given timing records (``EpisodeTiming`` fields)."""
    if not timings:
        return {}
    parts = ("load_s", "game_s", "agent_s", "metrics_s", "total_s")
    return {f"time/{p}": sum(t[p] for t in timings) / len(timings) for p in parts} | {
        "time/steps_per_s": sum(t["steps"] for t in timings) / max(1e-9, sum(t["game_s"] for t in timings))}


def finished_run(tracking: TrackingParams, fingerprint: str) -> str | None:
    """The id of a finished run logged under ``fingerprint``, if any; unfinished ones (a logging interrupted by a
    kill) are deleted so that the run is logged once, completely."""
    from mlflow import MlflowClient

    from tasks.tracking import setup, tracking_uri

    if not fingerprint:
        return None
    experiment_id = setup(tracking, EXPERIMENT)
    client = MlflowClient(tracking_uri(tracking))
    found = None
    for run in client.search_runs([experiment_id], filter_string=f"tags.eval_fingerprint = '{fingerprint}'",
                                  max_results=100):
        if run.info.status == "FINISHED" and found is None:
            found = run.info.run_id
        elif run.info.status != "FINISHED":
            client.delete_run(run.info.run_id)
    return found


def log_run(tracking: TrackingParams, label: str, split: str, params: dict[str, str], tags: dict[str, str],
            results: Sequence[EpisodeResult], trajectories: Path, timings: Sequence[dict] = (),
            viewer: Path | None = None) -> tuple[str, float, bool]:
    """One finished run for (agent, split), unless one with the same ``eval_fingerprint`` tag exists. Returns the
    run id, the seconds the logging took, and whether it logged a new run. ``viewer``: a folder of episode pages
    (tasks/viewer) logged as the run's ``viewer/`` artifact."""
    start = time.perf_counter()
    existing = finished_run(tracking, tags.get("eval_fingerprint", ""))
    if existing is not None:
        return existing, time.perf_counter() - start, False
    source = layout.ALFWORLD if tags.get("dataset") == "muep-alfworld" else layout.DEMOS
    dataset = DatasetRef(f"muep-{split}", tags["dataset_version"].split(":")[-1], paths.rel(source),
                         "evaluation", len(results))
    ordered = sorted(results, key=lambda r: r.episode_id)
    metrics = metric_values(*split_tallies(results), [episode_metrics(r) for r in ordered]) | timing_values(timings)
    with tempfile.TemporaryDirectory(prefix="embp-outcomes-") as tmp:
        outcomes = Path(tmp) / f"{split}.json"
        outcomes.write_text(json.dumps(outcome_records(ordered), sort_keys=True) + "\n", encoding="utf-8")
        run_id = log_tracked_run(tracking, EXPERIMENT, f"{label} | {split}", run_params=params, tags=tags,
                                 metrics=metrics, artifacts=[("trajectories", trajectories), ("outcomes", outcomes)]
                                 + ([viewer] if viewer else []), dataset=dataset)
    return run_id, time.perf_counter() - start, True


def outcome_records(results: Sequence[EpisodeResult]) -> dict[str, list]:
    """Per episode id, what the intervals and paired tests need: success, sub-goals met and total, progress."""
    out = {}
    for r in results:
        m = episode_metrics(r)
        out[r.episode_id] = [m.success, m.goals_met, m.goals_total, m.progress]
    return out


def load_outcomes(client, run_id: str, split: str) -> dict[str, EpisodeMetrics] | None:
    """A run's per-episode outcomes (``outcomes/<split>.json``), as :class:`EpisodeMetrics` with the fields the
    intervals use (the others zero); None for a run logged before the artifact existed."""
    with tempfile.TemporaryDirectory(prefix="embp-outcomes-") as tmp:
        try:
            local = client.download_artifacts(run_id, f"outcomes/{split}.json", tmp)
        except Exception:          # noqa: BLE001 -- MLflow raises several kinds for a missing artifact
            return None
        data = json.loads(Path(local).read_text(encoding="utf-8"))
    return {episode: EpisodeMetrics(success=bool(v[0]), steps=0, valid=0, goals_met=int(v[1]), goals_total=int(v[2]),
                                    conditions_met=0, conditions_total=0, progress=float(v[3]), disoriented=False)
            for episode, v in sorted(data.items())}


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
    dataset: str = "muep-demos"
    stop_rules: str = ""

    @property
    def protocol(self) -> str:
        """The protocol the run played by, from its ``stop_rules`` tag (:func:`stop_rules`); "" when the tag does
        not name one (runs logged before protocols existed)."""
        found = re.search(r"(?:^|, )protocol=([\w.-]+)", self.stop_rules)
        return found.group(1) if found else ""


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
                              total=_tally(metrics, ""), by_type={t: _tally(metrics, f"/{t}") for t in types},
                              dataset=tags.get("dataset", "muep-demos"), stop_rules=tags.get("stop_rules", "")))
    return out
