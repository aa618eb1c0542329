"""Code tests of the episode viewer (tasks/viewer): MuEP pages from a small real evaluation (the fixture's test
episodes, played by the oracle and the random agent, the harness saving the viewer's images), the index filters'
data, the leaderboard's links, shared images, missing and stale images."""

from __future__ import annotations

import json
import re
from dataclasses import replace
import tempfile
from functools import cache
from pathlib import Path

import pytest
from test_eval_support import build_dataset

pytestmark = pytest.mark.textworld

AGENTS = (("oracle", "oracle"), ("random", "random"))
SPLITS = ("seen_test", "unseen_test")


@cache
def evaluate_small():
    """(runs as the viewer takes them, the specs, the settings): oracle and random on the fixture's 6 test episodes."""
    from tasks.muep.eval.agents import AgentContext
    from tasks.muep.eval.episodes import make_batches, select
    from tasks.muep.eval.harness import EvalSettings, run_batch
    from tasks.params import EvalParams

    data = build_dataset()
    specs = select(data.index, list(SPLITS), None, 0)
    images = Path(tempfile.mkdtemp(prefix="embp-viewer-images-", dir=data.root))  # removed with the dataset
    settings = EvalSettings(metadata_dir=str(data.metadata_dir), params=EvalParams(max_steps=12),
                            context=AgentContext(), images_dir=str(images))
    results = [r for b in make_batches(specs, list(AGENTS), 6) for r in run_batch(b, settings).results]
    runs = [(name, label, split, [r for r in results if r.agent == label and r.split == split])
            for name, label in AGENTS for split in SPLITS]
    return runs, specs, settings


def write_leaderboard(root: Path, runs, specs, settings) -> tuple[dict, dict]:
    """``root/reports``: the viewer and the leaderboard page with the links the muep-leaderboard stage adds."""
    from flows import muep_leaderboard
    from tasks.muep import layout
    from tasks.muep.eval import leaderboard
    from tasks.muep.eval.runs import RunSummary, split_tallies
    from tasks.viewer import muep as viewer

    reports = root / "reports"
    summary, used = viewer.build(reports / "viewer/muep", runs, settings.images_dir)
    summaries = []
    for k, (name, label, split, results) in enumerate(runs):
        total, by_type = split_tallies(results)
        summaries.append(RunSummary(f"run{k}", label, name, split, "dvc:x", k, total, by_type))
    board = leaderboard.build(summaries)
    saved = layout.VIEWER, layout.LEADERBOARD_HTML
    layout.VIEWER, layout.LEADERBOARD_HTML = reports / "viewer/muep", reports / "leaderboard.html"
    try:
        links = muep_leaderboard.episode_links(board)
    finally:
        layout.VIEWER, layout.LEADERBOARD_HTML = saved
    (reports / "leaderboard.html").write_text(leaderboard.to_html(board, "a test", links))
    return summary, used


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer")
    runs, specs, settings = evaluate_small()
    summary, used = write_leaderboard(root, runs, specs, settings)
    return root / "reports", runs, summary, used


def _data(page: Path) -> dict:
    text = page.read_text()
    found = re.search(r'<script id="episode-data" type="application/json">(.*?)</script>', text, re.S)
    assert found, f"{page} has no episode data"
    return json.loads(found.group(1))


def test_every_episode_has_a_page_and_every_split_an_index(built):
    reports, runs, summary, _ = built
    from tasks.viewer.muep import episode_file

    for name, _, split, results in runs:
        folder = reports / "viewer/muep" / name / split
        index = (folder / "index.html").read_text()
        assert len(results) == index.count("data-outcome=")
        for r in results:
            assert (folder / episode_file(r)).exists() and episode_file(r) in index
            assert f'data-end="{r.end_reason}"' in index and f'data-type="{r.task_type}"' in index
    front = (reports / "viewer/muep/index.html").read_text()
    assert all(f"{name}/{split}/index.html" in front for name, _, split, _ in runs)
    assert summary["pages"] == 1 + sum(len(r) + 1 for *_, r in runs)


def test_a_page_steps_through_the_trajectory_with_images_goals_and_admissibility(built):
    reports, runs, _, _ = built
    from tasks.viewer.muep import episode_file

    _, _, split, results = next(r for r in runs if r[0] == "oracle")
    oracle = results[0]
    steps = _data(reports / "viewer/muep/oracle" / split / episode_file(oracle))["steps"]
    assert len(steps) == len(oracle.steps) + 1
    assert steps[0]["observation"] == oracle.initial_observation and steps[0]["action"] == "(none yet)"
    for entry, step in zip(steps[1:], oracle.steps, strict=True):
        assert entry["action"] == step.action and entry["observation"] == step.observation
        assert entry["goals"] == f"{step.goals_met} / {oracle.goals_total}"
        assert "not admissible" not in entry["flags"] and "admissible" in entry["flags"]   # the expert's plan
        assert entry["image"].startswith("../../images/") and (reports / "viewer/muep" / entry["image"][6:]).exists()
    assert "ended: the game&#x27;s goal holds: won" in steps[-1]["flags"] and "won" in steps[-1]["cls"]


def test_a_failed_episode_says_why_it_ended_and_marks_invalid_actions(built):
    reports, runs, _, _ = built
    from tasks.viewer.muep import episode_file, first_loop

    failed = [(split, r) for name, _, split, results in runs if name == "random" for r in results if not r.success]
    assert failed
    split, r = failed[0]
    steps = _data(reports / "viewer/muep/random" / split / episode_file(r))["steps"]
    assert "ended: the step cap (max_steps) was reached" in steps[-1]["flags"]
    for entry, step in zip(steps[1:], r.steps, strict=True):
        assert ("invalid (nothing happened)" in entry["flags"]) == (not step.valid)
    loop = first_loop(r)
    if loop is not None:
        assert "loop rule fires here" in steps[loop]["flags"]


def test_images_are_shared_files_not_copies_and_small(built):
    reports, _, summary, used = built
    images = list((reports / "viewer/muep/images").glob("*.png"))
    assert len(images) == summary["images"] == len(set().union(*used.values()))
    assert all(p.stat().st_size < 12_000 for p in images)
    pages = list((reports / "viewer/muep").rglob("*.html"))
    assert not any("data:image" in p.read_text() for p in pages)
    assert summary["bytes"] < 5_000_000


def test_the_leaderboard_links_each_agent_row_to_its_episodes(built):
    reports, runs, _, _ = built
    page = (reports / "leaderboard.html").read_text()
    for name, _, split, _ in runs:
        assert f"href='viewer/muep/{name}/{split}/index.html'" in page


def test_the_harness_records_admissibility_and_an_image_of_every_state():
    runs, _, settings = evaluate_small()
    for _, _, _, results in runs:
        for r in results:
            assert r.initial_image and all(s.image for s in r.steps)
            assert all(s.admissible == s.valid for s in r.steps if s.action)   # the game runs what it offers
            for name in (r.initial_image, *(s.image for s in r.steps)):
                assert (Path(settings.images_dir) / name).stat().st_size < 12_000


def test_missing_images_leave_the_step_without_one_and_stale_images_are_swept(tmp_path):
    from tasks.viewer.muep import build, episode_file, sweep_images

    runs, _, settings = evaluate_small()
    name, label, split, results = runs[0]
    images = tmp_path / "images"
    images.mkdir()
    keep = results[0].initial_image
    (images / keep).write_bytes((Path(settings.images_dir) / keep).read_bytes())
    (images / "stale.png").write_bytes(b"old")
    assert sweep_images(images, [runs[0]]) == 1 and [p.name for p in images.iterdir()] == [keep]
    summary, used = build(tmp_path / "viewer", [runs[0]], images)
    assert summary["images"] == 1 and summary["missing_images"] > 0 and used[(name, split)] == {f"images/{keep}"}
    steps = _data(tmp_path / "viewer" / name / split / episode_file(results[0]))["steps"]
    assert steps[0]["image"] == f"../../images/{keep}" and steps[1]["image"] is None


def test_an_mlflow_run_carries_its_episodes_in_one_file(built, tmp_path):
    """The run's ``viewer/`` artifact is the split's book (tests/test_viewer_mlflow.py: why, and MLflow's UI on it)."""
    from mlflow import MlflowClient

    from tasks.muep.eval.runs import log_run, write_results
    from tasks.params import TrackingParams
    from tasks.viewer.muep import stage_artifact

    _, runs, _, _ = built
    name, label, split, results = runs[0]
    _, _, settings = evaluate_small()
    tracking = TrackingParams(uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    trajectories = write_results(tmp_path / f"{split}.jsonl", results)
    pages, summary = stage_artifact(label, split, results, settings.images_dir, tmp_path / "staging")
    tags = {"dataset_version": "dvc:x", "dataset": "muep-demos", "eval_fingerprint": ""}
    run_id, _, new = log_run(tracking, label, split, {"agent": name}, tags, results, trajectories, viewer=pages)
    client = MlflowClient(tracking.uri)
    listed = client.list_artifacts(run_id, "viewer")
    assert new and [(a.path, a.file_size) for a in listed] == [("viewer/episodes.html", summary["bytes"])]
    assert summary["episodes"] == len(results) and summary["images"] > 0 and summary["left_out"] == 0
