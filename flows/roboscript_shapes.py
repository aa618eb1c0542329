"""RoboScript object-shape study (paper V-B): pick-and-place and drawer tasks over catalog objects."""

from __future__ import annotations

import time

from prefect import flow

from flows._robot_pool import GOAL_THREADS, run_goals
from flows._runtime import main
from robot.contract.catalog import CATALOG_FILE, load_catalog
from tasks import tracking
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript import layout
from tasks.roboscript.eval import shapes

STAGE = "roboscript-shapes"


@flow(name=STAGE, task_runner=GOAL_THREADS)
def roboscript_shapes(params_file: str | None = None) -> dict:
    """RoboScript object-shape study (paper V-B): pick-and-place and drawer tasks over catalog objects."""
    params = load_params(params_file)
    ep = params.roboscript.eval
    catalog = load_catalog()
    with StageLog(STAGE) as slog:
        trials, skipped = shapes.trials(catalog, params.roboscript.worlds, ep)
        slog.read(CATALOG_FILE, f"{len(trials)} trials, {len(skipped)} not applicable")
        started = time.monotonic()
        results, pool_info = run_goals(ep, {f"{t.study}/{t.asset}": shapes.goal(t, ep) for t in trials}, STAGE,
                                       "trials")
        report = shapes.report(results, skipped, ep)
        slog.run_facts(pool=pool_info, episodes_s=round(time.monotonic() - started, 2))
        figure = layout.REPORTS / "figures" / "shape_success.png"
        shapes.plot(report["success"], catalog, figure)
        slog.wrote(figure)
        target = slog.write(layout.REPORTS / "shapes.json", report)
        tracking.log_run(params.tracking, STAGE, f"shapes-{ep.arm}", tags={"stage": STAGE},
                         run_params={"repeats": report["repeats"], "arm": ep.arm, "perception": ep.perception},
                         metrics=shapes.mlflow_metrics(report), artifacts=[target, figure], started_at=slog.started_at)
        return report["mean"]


if __name__ == "__main__":
    main(STAGE, roboscript_shapes)
