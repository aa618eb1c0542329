"""RoboScript robot evaluation: the Table I tasks' code run on a pool of ROS runners, Table II metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._robot_pool import on_pool, run_goals
from flows._runtime import main
from robot import evaluation
from tasks import paths, tracking
from tasks.io import write_json, write_text
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript.benchmark import load_benchmark
from tasks.roboscript.catalog import load_catalog

STAGE = "roboscript-eval"
EXPERIMENT = "roboscript-eval"
log = logging.getLogger("embp")


@task(name="prepare-code", cache_policy=NO_CACHE)
def prepare_code(params, tasks) -> tuple[dict, str]:
    ep = params.roboscript.eval
    if ep.code == "snippets":
        source = Path(ep.snippets_file)
        return evaluation.load_snippets(source if source.is_absolute() else paths.ROOT / source, tasks)
    return evaluation.generate_code(tasks, params)


@flow(name=STAGE)
def _eval_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    ep = params.roboscript.eval
    with StageLog(STAGE) as slog:
        tasks = evaluation.select_tasks(load_benchmark(load_catalog(), params.roboscript.worlds), ep.tasks)
        slog.read("tasks/roboscript/benchmark_tasks.yaml", f"{len(tasks)} tasks")
        codes, model = prepare_code(params, tasks)
        started = time.monotonic()
        goals = {t.id: evaluation.goal_for(t, codes[t.id].code, ep) for t in tasks if t.id in codes}
        results, pool_info = run_goals(ep, goals, STAGE, "tasks")
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
    return on_pool(_eval_flow, params_file)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, roboscript_eval)
