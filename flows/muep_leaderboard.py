"""MuEP leaderboard: paper-style tables and bar charts of the evaluation runs in MLflow (Markdown + static HTML)."""

from __future__ import annotations

import logging

from prefect import flow

from core.errors import DataError
from flows._runtime import main
from tasks import tracking
from tasks.muep import layout
from tasks.muep.eval import leaderboard
from tasks.muep.eval.runs import EXPERIMENT, load_outcomes, read_runs
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript.eval import leaderboard as robot_leaderboard

STAGE = "muep-leaderboard"
log = logging.getLogger("embp")


def build_leaderboard(params_file: str | None = None, all_versions: bool = False) -> leaderboard.Board:
    """Read the runs from MLflow and write reports/leaderboard.{md,html}."""
    import mlflow
    from mlflow import MlflowClient

    params = load_params(params_file)
    uri = tracking.tracking_uri(params.tracking)
    name = f"{params.tracking.experiment_prefix}/{EXPERIMENT}"
    with StageLog(STAGE) as slog:
        mlflow.set_tracking_uri(uri)
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise DataError(f"the MLflow store {uri} has no experiment {name!r}.",
                            hint="Run the evaluation first (`dvc repro muep-eval`), or set tracking.uri.")
        runs = read_runs(client, experiment.experiment_id)
        slog.read(uri, f"{len(runs)} finished runs of {name}")
        board = leaderboard.build(runs, all_versions=all_versions)
        leaderboard.attach_outcomes(board, lambda run: load_outcomes(client, run.run_id, run.split))
        source = f"experiment `{name}`"
        md, page = leaderboard.to_markdown(board, source), leaderboard.to_html(board, source)
        robot_name = f"{params.tracking.experiment_prefix}/{robot_leaderboard.EXPERIMENT}"
        robot_section = robot_leaderboard.section_markdown(client, robot_name)
        if robot_section:  # the RoboScript table joins the same page when its evaluation has run
            slog.read(uri, f"runs of {robot_name}")
            md = md.rstrip("\n") + "\n\n" + robot_section
            page = page.replace("</body></html>", robot_leaderboard.markdown_table_to_html(robot_section)
                                + "\n</body></html>")
        for target, text in ((layout.LEADERBOARD_MD, md), (layout.LEADERBOARD_HTML, page)):
            slog.write(target, text)
    return board


@flow(name=STAGE)
def _leaderboard_flow(params_file: str | None = None) -> list[str]:
    return build_leaderboard(params_file).labels


def muep_leaderboard(params_file: str | None = None) -> list[str]:
    """MuEP leaderboard: paper-style tables and bar charts of the evaluation runs in MLflow (Markdown + HTML)."""
    return _leaderboard_flow(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_leaderboard)
