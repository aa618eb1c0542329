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
from tasks.roboscript import layout as robot_layout
from tasks.viewer import pages as viewer
from tasks.viewer import roboscript as robot_viewer

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
        md, page = leaderboard.to_markdown(board, source), leaderboard.to_html(board, source, episode_links(board))
        robot_name = f"{params.tracking.experiment_prefix}/{robot_leaderboard.EXPERIMENT}"
        robot_section = robot_leaderboard.section_markdown(client, robot_name)
        if robot_section:  # the RoboScript table joins the same page when its evaluation has run
            slog.read(uri, f"runs of {robot_name}")
            md = md.rstrip("\n") + "\n\n" + robot_section
            page = page.replace("</body></html>", robot_leaderboard.markdown_table_to_html(
                robot_section, robot_episode_links(robot_section)) + "\n</body></html>")
        for target, text in ((layout.LEADERBOARD_MD, md), (layout.LEADERBOARD_HTML, page)):
            slog.write(target, text)
    return board


def episode_links(board: leaderboard.Board) -> dict[str, list[tuple[str, str]]]:
    """Agent label -> (split name, link relative to the leaderboard page) of every episode index the viewer wrote
    for the board's runs (tasks/viewer; the muep-eval stage writes them). Runs without pages get no link."""
    out: dict[str, list[tuple[str, str]]] = {}
    order = {s: i for i, s in enumerate(board.splits)}
    for run in sorted(board.runs, key=lambda r: (order.get(r.split, 99), r.split)):
        index = layout.VIEWER / viewer.index_link(run.agent, run.split)
        if index.exists():
            href = index.relative_to(layout.LEADERBOARD_HTML.parent).as_posix()
            out.setdefault(run.label, []).append((leaderboard.SPLIT_TITLES.get(run.split, run.split), href))
    return out


def robot_episode_links(section: str) -> dict[str, str]:
    """Code writer -> link (relative to the leaderboard page) of its RoboScript episode index, for every code writer
    of the Table II section whose pages the roboscript-eval stage wrote."""
    out = {}
    for line in section.splitlines():
        model = line.strip().strip("|").split("|")[0].strip() if line.startswith("|") else ""
        index = robot_layout.VIEWER / robot_viewer.model_link(model) if model else None
        if index is not None and index.exists():
            out[model] = index.relative_to(layout.LEADERBOARD_HTML.parent).as_posix()
    return out


@flow(name=STAGE)
def _leaderboard_flow(params_file: str | None = None) -> list[str]:
    return build_leaderboard(params_file).labels


def muep_leaderboard(params_file: str | None = None) -> list[str]:
    """MuEP leaderboard: paper-style tables and bar charts of the evaluation runs in MLflow (Markdown + HTML)."""
    return _leaderboard_flow(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_leaderboard)
