"""RoboScript perception ablation (paper V-C, Figs. 7-8): pick-and-place and open-drawer-and-place on the best-grasped
objects with ground-truth or perceived detection and planning scene."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from prefect import flow

from flows._robot_pool import GOAL_THREADS, run_goals
from flows._runtime import main
from robot.contract.catalog import CATALOG_FILE, load_catalog
from tasks import tracking
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript import layout
from tasks.roboscript.eval import ablation, tiny_detector
from tasks.roboscript.params import DETECTOR_SETTINGS

STAGE = "roboscript-perception"


@flow(name=STAGE, task_runner=GOAL_THREADS)
def roboscript_perception(params_file: str | None = None) -> dict:
    """RoboScript perception ablation (paper V-C): GT vs perceived detection and planning scene."""
    params = load_params(params_file)
    ep = params.roboscript.eval
    with StageLog(STAGE) as slog:
        trials, skipped = ablation.trials(load_catalog(), params.roboscript.worlds, ep)
        slog.read(CATALOG_FILE, f"{len(trials)} trials, {len(skipped)} not applicable")
        detector, building = None, None
        if any(s in DETECTOR_SETTINGS for s in ep.ablation.settings):
            # built (torch + transformers imports, most of its 10 s) while the runners start; sent to no runner
            # before it is written
            detector = layout.TINY_DETECTOR
            building = ThreadPoolExecutor(1, thread_name_prefix="tiny-detector")
            built = building.submit(tiny_detector.build_tiny_owlvit, detector)
        started = time.monotonic()
        try:
            requests = ablation.goals(trials, ep, detector)
            ran, pool_info = run_goals(ep, requests, STAGE, "goals", ready=built.result if building else None)
        finally:
            if building is not None:
                building.shutdown()
        if detector is not None:
            slog.wrote(detector)
        results = ablation.trial_results(ran, requests)
        report = ablation.report(results, skipped, ep)
        slog.run_facts(pool=pool_info, episodes_s=round(time.monotonic() - started, 2),
                       perception_s=ablation.perception_seconds(results),
                       perception_shared=ablation.shared_counts(ran))
        figure = layout.REPORTS / "figures" / "perception_ablation.png"
        ablation.plot(report, ep.ablation.settings, figure)
        slog.wrote(figure)
        outputs = [slog.write(layout.REPORTS / "perception.json", report),
                   slog.write(layout.REPORTS / "perception_ablation.md",
                              ablation.markdown(report, ep.ablation.settings, ep.ablation.repeats,
                                                ep.pipeline.grounding.backend)), figure]
        run_params, tags, metrics = ablation.mlflow_fields(report, ep)
        tracking.log_run(params.tracking, STAGE, f"perception-{ep.arm}", run_params=run_params,
                         tags=tags | {"stage": STAGE}, metrics=metrics, artifacts=outputs, started_at=slog.started_at)
        return report["mean"]


if __name__ == "__main__":
    main(STAGE, roboscript_perception)
