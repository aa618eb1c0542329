"""RoboScript robot evaluation: the Table I tasks' code run on a pool of ROS runners, Table II metrics."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._robot_pool import GOAL_THREADS, run_goals
from flows._runtime import main
from robot.contract.catalog import load_catalog
from tasks import paths, tracking
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript import layout
from tasks.roboscript.benchmark import BENCHMARK_FILE, load_benchmark
from tasks.roboscript.eval import evaluation
from tasks.viewer import roboscript as robot_viewer

STAGE = "roboscript-eval"


@task(name="prepare-code", cache_policy=NO_CACHE)
def prepare_code(params, tasks) -> tuple[dict, str]:
    ep = params.roboscript.eval
    if ep.code == "snippets":
        source = Path(ep.snippets_file)
        return evaluation.load_snippets(source if source.is_absolute() else paths.ROOT / source, tasks)
    return evaluation.generate_code(tasks, params)


@flow(name=STAGE, task_runner=GOAL_THREADS)
def roboscript_eval(params_file: str | None = None) -> dict:
    """RoboScript robot evaluation: the Table I tasks' code run on a pool of ROS runners, Table II metrics."""
    params = load_params(params_file)
    ep = params.roboscript.eval
    with StageLog(STAGE) as slog:
        tasks = evaluation.select_tasks(load_benchmark(load_catalog(), params.roboscript.worlds), ep.tasks)
        slog.read(BENCHMARK_FILE, f"{len(tasks)} tasks")
        codes, model = prepare_code(params, tasks)
        started = time.monotonic()
        goals = {t.id: evaluation.goal_for(t, codes[t.id].code, ep) for t in tasks if t.id in codes}
        results, pool_info = run_goals(ep, goals, STAGE, "tasks")
        report, details, facts = evaluation.build_report(tasks, codes, results, model, ep, pool_info)
        slog.run_facts(**facts, episodes_s=round(time.monotonic() - started, 2))
        runs = layout.REPORTS / layout.TABLE2_RUNS
        kept = slog.write(runs / evaluation.run_record_name(report), evaluation.run_record(report))
        outputs = [slog.write(layout.REPORTS / "eval.json", report),
                   slog.write(layout.REPORTS / "eval_details.json", details),
                   slog.write(layout.REPORTS / "table2.md",
                              evaluation.table2(report, evaluation.load_run_records(runs))), kept]
        pages = robot_viewer.build(layout.VIEWER, details)   # a page per task and repeat
        slog.wrote(pages / "index.html")
        run_params, tags = evaluation.mlflow_fields(report, params)
        with tempfile.TemporaryDirectory(prefix="embp-viewer-") as staging:   # the run's viewer/episodes.html
            book, _ = robot_viewer.stage_artifact(details, Path(staging))
            tracking.log_run(params.tracking, STAGE, report["model"], run_params=run_params,
                             tags=tags | {"stage": STAGE}, metrics=evaluation.mlflow_metrics(report),
                             artifacts=outputs + [book], dataset=evaluation.benchmark_dataset(goals),
                             started_at=slog.started_at)
        return report["summary"]


if __name__ == "__main__":
    main(STAGE, roboscript_eval)
