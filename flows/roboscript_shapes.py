"""RoboScript object-shape study (paper V-B): pick-and-place and drawer tasks over every catalog object."""

from __future__ import annotations

import logging
import time

from prefect import flow

from flows._robot_pool import on_pool, run_goals
from flows._runtime import main
from robot import evaluation, shapes
from tasks import tracking
from tasks.io import write_json
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript.catalog import load_catalog

STAGE = "roboscript-shapes"
log = logging.getLogger("embp")


@flow(name=STAGE)
def _shapes_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    ep = params.roboscript.eval
    catalog = load_catalog()
    with StageLog(STAGE) as slog:
        trials, skipped = shapes.trials(catalog, params.roboscript.worlds, ep)
        slog.read("tasks/roboscript/assets.yaml", f"{len(trials)} trials, {len(skipped)} not applicable")
        started = time.monotonic()
        goals = {f"{t.study}/{t.asset}": shapes.goal(t, ep) for t in trials}
        by_key, pool_info = run_goals(ep, goals, STAGE, "trials")
        results = {tuple(k.split("/")): r for k, r in by_key.items()}
        rates: dict[str, dict] = {}
        for (study, asset), result in sorted(results.items()):
            rates.setdefault(study, {})[asset] = shapes.success_rate(result)
        statuses = {f"{s}/{a}": sorted({r["status"] for r in res.get("repeats", [])}) or [res.get("error")]
                    for (s, a), res in results.items()}
        report = {"repeats": ep.shapes.repeats, "arm": ep.arm, "perception": ep.perception,
                  "success": rates, "not_applicable": skipped, "statuses": statuses,
                  "mean": {s: round(sum(v or 0 for v in r.values()) / len(r), 4) for s, r in rates.items() if r},
                  "pool": pool_info, "wall_s": round(time.monotonic() - started, 2)}
        target = evaluation.REPORTS / "shapes.json"
        write_json(target, report)
        slog.wrote(target)
        figure = evaluation.REPORTS / "figures" / "shape_success.png"
        shapes.plot(rates, catalog, figure)
        slog.wrote(figure)
        _log_mlflow(params, report, target, figure)
        return report["mean"]


def _log_mlflow(params, report: dict, target, figure) -> None:
    import mlflow

    experiment_id = tracking.setup(params.tracking, STAGE)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"shapes-{report['arm']}"):
        mlflow.log_params({"repeats": report["repeats"], "arm": report["arm"], "perception": report["perception"]})
        mlflow.log_metrics({f"{study}.{asset}": rate for study, rates in report["success"].items()
                            for asset, rate in rates.items() if rate is not None})
        mlflow.log_metrics({f"mean.{study}": value for study, value in report["mean"].items()})
        mlflow.log_artifact(str(target))
        mlflow.log_artifact(str(figure))


def roboscript_shapes(params_file: str | None = None) -> dict:
    """RoboScript object-shape study (paper V-B): pick-and-place and drawer tasks over every catalog object."""
    return on_pool(_shapes_flow, params_file)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, roboscript_shapes)
