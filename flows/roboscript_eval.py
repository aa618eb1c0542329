"""RoboScript robot evaluation: the Table I tasks' code run on a pool of ROS runners, Table II metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from flows._runtime import main
from robot import evaluation
from tasks import paths, tracking
from tasks.io import write_json, write_text
from tasks.params import load_params
from tasks.progress import Progress, StageLog
from tasks.roboscript.benchmark import load_benchmark
from tasks.roboscript.catalog import load_catalog

STAGE = "roboscript-eval"
EXPERIMENT = "roboscript-eval"
log = logging.getLogger("embp")
_POOLS: dict[str, object] = {}
"""Pools of the running flows, by key: Prefect tasks get the key, never the pool itself."""


@task(name="prepare-code", cache_policy=NO_CACHE)
def prepare_code(params, tasks) -> tuple[dict, str]:
    ep = params.roboscript.eval
    if ep.code == "snippets":
        source = Path(ep.snippets_file)
        return evaluation.load_snippets(source if source.is_absolute() else paths.ROOT / source, tasks)
    return evaluation.generate_code(tasks, params)


@task(name="run-episode", cache_policy=NO_CACHE)
def run_episode(request: dict, pool_key: str) -> dict:
    """One task's repeats on the next free runner (a runner that dies mid-episode hands it to another)."""
    return _POOLS[pool_key].run(request)  # type: ignore[attr-defined]


@flow(name=STAGE)
def _eval_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    ep = params.roboscript.eval
    with StageLog(STAGE) as slog:
        tasks = evaluation.select_tasks(load_benchmark(load_catalog(), params.roboscript.worlds), ep.tasks)
        slog.read("tasks/roboscript/benchmark_tasks.yaml", f"{len(tasks)} tasks")
        codes, model = prepare_code(params, tasks)
        started = time.monotonic()
        results: dict[str, dict] = {}
        with evaluation.runner_pool(ep) as (pool, pool_info):
            key = f"{id(pool)}"
            _POOLS[key] = pool
            log.info("[%s] %d tasks x %d repeats on %d runner(s) %s", STAGE, len(tasks), ep.repeats, pool.size,
                     " ".join(pool_info["runners"]))
            try:
                with Progress(len(tasks), f"{STAGE}: episodes", unit="tasks") as progress:
                    futures = {run_episode.submit(evaluation.goal_for(t, codes[t.id].code, ep), key): t.id
                               for t in tasks if t.id in codes}
                    for future in as_completed(list(futures)):
                        results[futures[future]] = future.result()
                        progress.advance(1)
            finally:
                _POOLS.pop(key, None)
        report, details = evaluation.build_report(tasks, codes, results, model, ep, pool_info,
                                                  time.monotonic() - started)
        reports = evaluation.REPORTS
        write_json(reports / "eval.json", report)
        slog.wrote(reports / "eval.json")
        write_json(reports / "eval_details.json", details)
        slog.wrote(reports / "eval_details.json")
        write_text(reports / "table2.md", evaluation.table2(report))
        slog.wrote(reports / "table2.md")
        _log_mlflow(params, report, reports)
        return report["summary"]


def _log_mlflow(params, report: dict, reports: Path) -> None:
    import mlflow

    experiment_id = tracking.setup(params.tracking, EXPERIMENT)
    ep = params.roboscript.eval
    with mlflow.start_run(experiment_id=experiment_id, run_name=report["model"]):
        mlflow.set_tags({"stage": STAGE, "model": report["model"], "backend": ep.backend, "arm": ep.arm})
        mlflow.log_params({"model": report["model"], "llm_backend": params.llm.backend, "code": ep.code,
                           "repeats": ep.repeats, "perception": ep.perception, "arm": ep.arm, "backend": ep.backend,
                           "runners": report["settings"]["runners"], "pose_jitter_m": ep.pose_jitter_m,
                           "seed": ep.seed, "tasks": ",".join(report["tasks"])})
        mlflow.log_metrics(evaluation.mlflow_metrics(report))
        mlflow.log_artifact(str(reports / "eval.json"))
        mlflow.log_artifact(str(reports / "eval_details.json"))
        mlflow.log_artifact(str(reports / "table2.md"))


def roboscript_eval(params_file: str | None = None) -> dict:
    """RoboScript robot evaluation: the Table I tasks' code run on a pool of ROS runners, Table II metrics."""
    from prefect.task_runners import ThreadPoolTaskRunner

    ep = load_params(params_file).roboscript.eval
    workers = evaluation.pool_size(ep)  # one goal in flight per runner
    return _eval_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=workers))(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, roboscript_eval)
