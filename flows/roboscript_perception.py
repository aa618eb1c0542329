"""RoboScript perception ablation (paper V-C, Figs. 7-8): pick-and-place and open-drawer-and-place on the best-grasped
objects with ground-truth or perceived detection and planning scene."""

from __future__ import annotations

import logging
import time

from prefect import flow

from flows._robot_pool import on_pool, run_goals
from flows._runtime import main
from robot import ablation, evaluation
from tasks import tracking
from tasks.io import write_json, write_text
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript.catalog import load_catalog

STAGE = "roboscript-perception"
log = logging.getLogger("embp")


@flow(name=STAGE)
def _perception_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    ep = params.roboscript.eval
    with StageLog(STAGE) as slog:
        trials, skipped = ablation.trials(load_catalog(), params.roboscript.worlds, ep)
        slog.read("tasks/roboscript/assets.yaml", f"{len(trials)} trials, {len(skipped)} not applicable")
        started = time.monotonic()
        results, pool_info = run_goals(ep, {t.key: ablation.goal(t, ep) for t in trials}, STAGE, "trials")
        summary = ablation.summarise(results, ep.ablation.settings)
        report = {"settings": ep.ablation.settings, "objects": ep.ablation.objects, "studies": ep.ablation.studies,
                  "repeats": ep.ablation.repeats, "arm": ep.arm, "grounding": ep.pipeline.grounding.backend,
                  "grasp": ep.pipeline.grasp, **summary, "outcomes": ablation.failures(results),
                  "not_applicable": skipped, "perception_s": ablation.perception_seconds(results),
                  "pool": pool_info, "wall_s": round(time.monotonic() - started, 2)}
        reports = evaluation.REPORTS
        target = reports / "perception.json"
        write_json(target, report)
        slog.wrote(target)
        table = reports / "perception_ablation.md"
        write_text(table, ablation.markdown(summary, ep.ablation.settings, ep.ablation.repeats))
        slog.wrote(table)
        figure = reports / "figures" / "perception_ablation.png"
        ablation.plot(summary, ep.ablation.settings, figure)
        slog.wrote(figure)
        _log_mlflow(params, report, [target, table, figure])
        return summary["mean"]


def _log_mlflow(params, report: dict, artifacts) -> None:
    import mlflow

    ep = params.roboscript.eval
    experiment_id = tracking.setup(params.tracking, STAGE)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"perception-{report['arm']}"):
        mlflow.set_tags({"stage": STAGE, "arm": ep.arm, "grounding": ep.pipeline.grounding.backend})
        mlflow.log_params({"repeats": report["repeats"], "arm": ep.arm, "objects": ",".join(report["objects"]),
                           "settings": ",".join(report["settings"]), "grounding": ep.pipeline.grounding.backend,
                           "grasp": ep.pipeline.grasp, "cameras": len(ep.pipeline.cameras.cameras),
                           "voxel_m": ep.pipeline.fusion.voxel_m})
        mlflow.log_metrics({f"{setting}.{study}.{asset}": rate for setting, per in report["success"].items()
                            for study, rates in per.items() for asset, rate in rates.items() if rate is not None})
        mlflow.log_metrics({f"mean.{setting}.{study}": value for setting, per in report["mean"].items()
                            for study, value in per.items() if value is not None})
        mlflow.log_metrics({f"drop_points.{setting}.{study}": value for setting, per in report["drop_points"].items()
                            for study, value in per.items()})
        for path in artifacts:
            mlflow.log_artifact(str(path))


def roboscript_perception(params_file: str | None = None) -> dict:
    """RoboScript perception ablation (paper V-C): GT vs perceived detection and planning scene."""
    return on_pool(_perception_flow, params_file)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, roboscript_perception)
