"""Pipeline test: `dvc repro` of the three RoboScript stages in a temporary copy of the repository, through the real
Prefect flows (each stage starts Prefect's ephemeral server: ~15 s a stage on 2 cores); `dvc metrics show` lists
worlds, queries and checked snippets; a second run is a no-op. (Reruns answered from the LLM cache are tested in
tests/test_roboscript_codegen.py and test_roboscript_queries.py, without Prefect.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from repo_copy import copy_repo, run_checked, stages_run

pytestmark = [pytest.mark.dvc, pytest.mark.prefect]

STAGES = ("roboscript-worlds", "roboscript-queries", "roboscript-codegen")


_run = run_checked


def _ran(proc: subprocess.CompletedProcess) -> set[str]:
    return stages_run(proc, STAGES)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("repo")

    def small(params: dict) -> None:
        params["roboscript"]["worlds"]["n_worlds"] = 4

    return work, copy_repo(work, small)


def test_repro_produces_worlds_pictures_queries_and_checked_snippets(workdir):
    work, env = workdir
    proc = _run([sys.executable, "-m", "dvc", "repro", "roboscript-codegen"], work, env)
    assert _ran(proc) == set(STAGES)
    worlds = pd.read_parquet(work / "data/roboscript/worlds/worlds.parquet")
    assert list(worlds.world_id) == [f"world_{i:04d}" for i in range(4)]
    for row in worlds.itertuples():
        assert (work / row.world_file).exists() and (work / row.picture_file).stat().st_size > 1000
    assert len(list((work / "data/roboscript/benchmark").glob("*.json"))) == 8
    queries = pd.read_parquet(work / "data/roboscript/queries/queries.parquet")
    snippets = pd.read_parquet(work / "data/roboscript/codegen/snippets.parquet")
    assert len(snippets) == len(queries) > 0 and snippets.ok.sum() > 0
    assert (work / "reports/roboscript/dataset_card.md").read_text().count("worlds_grid.png") == 1

    metrics = json.loads(_run([sys.executable, "-m", "dvc", "metrics", "show", "--json"], work, env).stdout)
    figures = {path: entry["data"] for path, entry in next(iter(metrics.values()))["data"].items()
               if "data" in entry}  # the MuEP stages did not run here
    data = figures["reports/roboscript/data.json"]
    assert data["worlds"] == 4 and data["queries"] == len(queries) and data["snippets"] == len(snippets)
    assert data["snippets_passing"] == int(snippets.ok.sum())
    assert sum(data["rejects_by_reason"]["snippets"].values()) >= data["rejects"]["snippets"]
    assert figures["reports/roboscript/worlds.json"]["benchmark_tasks"] == 8


def test_second_repro_is_a_no_op(workdir):
    work, env = workdir
    proc = _run([sys.executable, "-m", "dvc", "repro", "roboscript-codegen"], work, env)
    assert _ran(proc) == set()
    assert "up to date" in proc.stdout + proc.stderr
