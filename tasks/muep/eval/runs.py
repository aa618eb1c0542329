"""MLflow runs of the evaluation: one run per (agent, split), written with batched logging, read back for the
leaderboard.

A run holds

* params -- agent, label, model, adapter, grammar, renderer, dataset_version, episodes_sha256, split, the caps;
* metrics -- the rates of :mod:`tasks.muep.eval.metrics` for the split (``sr``, ``is_success``, ``is_all``, ``gcs``,
  ``lc``, ``rdi``, ``pr``) and per task type (``sr/<task type>``...), plus the tallies they come from
  (``n/<field>`` and ``n/<field>/<task type>``), so that splits add up exactly to overall figures;
* tags -- ``agent``, ``agent_label``, ``split``, ``dataset_version``, ``stage``;
* artifact -- ``trajectories/<agent>_<split>.jsonl``: one line per episode, every step.

Everything but the artifact goes in :meth:`MlflowClient.log_batch` calls (MLflow caps a call at 1000 metrics and
100 params; larger sets are cut into several calls).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from tasks.muep.eval.metrics import Tally, episode_metrics
from tasks.muep.eval.records import EpisodeResult

STAGE = "muep-eval"
EXPERIMENT = "muep-eval"
_MAX_METRICS, _MAX_PARAMS = 1000, 100


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


def log_run(client, experiment_id: str, label: str, split: str, params: dict[str, str], tags: dict[str, str],
            results: Sequence[EpisodeResult], trajectories: Path) -> tuple[str, float]:
    """Create, fill and finish one run. Returns its id and the seconds the logging took."""
    from mlflow.entities import Metric, Param, RunTag

    start = time.perf_counter()
    run = client.create_run(experiment_id, run_name=f"{label} | {split}",
                            tags={"mlflow.runName": f"{label} | {split}"} | tags)
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in metric_values(*split_tallies(results)).items()]
        plist = [Param(k, str(v)[:6000]) for k, v in sorted(params.items())]
        client.log_batch(run_id, metrics=metrics[:_MAX_METRICS], params=plist[:_MAX_PARAMS],
                         tags=[RunTag(k, v) for k, v in sorted(tags.items())])
        for k in range(_MAX_METRICS, len(metrics), _MAX_METRICS):
            client.log_batch(run_id, metrics=metrics[k:k + _MAX_METRICS])
        for k in range(_MAX_PARAMS, len(plist), _MAX_PARAMS):
            client.log_batch(run_id, params=plist[k:k + _MAX_PARAMS])
        client.log_artifact(run_id, str(trajectories), artifact_path="trajectories")
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
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
