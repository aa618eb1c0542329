"""Pipeline test: `dvc repro muep-filter` (MuEP stages 1-3) in a temporary copy of the repository, through the real
Prefect flows (each stage starts Prefect's ephemeral server), then a second repro that must be a no-op, a params
change that reruns only the stage reading that key, and `dvc push` to the default local remote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from repo_copy import copy_repo, run_checked, stages_run

pytestmark = [pytest.mark.dvc, pytest.mark.prefect]

STAGES = ("muep-metadata", "muep-generate", "muep-filter")
TARGET = "muep-filter"  # dvc repro TARGET runs the stages up to and including it


_run = run_checked


def _ran(proc: subprocess.CompletedProcess) -> set[str]:
    return stages_run(proc, STAGES)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("repo")

    def small(params: dict) -> None:
        params["muep"]["scenes"]["floorplans"] = [1, 2, 10, 201, 219, 301, 308, 401, 424]

    return work, copy_repo(work, small)


def test_repro_produces_outputs_and_metrics(workdir):
    work, env = workdir
    proc = _run([sys.executable, "-m", "dvc", "repro", TARGET], work, env)
    assert _ran(proc) == set(STAGES)
    scenes = pd.read_parquet(work / "data/muep/metadata/scenes.parquet")
    assert sorted(set(scenes.floorplan)) == [1, 2, 10, 201, 219, 301, 308, 401, 424]
    assert set(scenes[scenes.split == "unseen"].floorplan) == {10, 219, 308, 424}
    # one training state per floorplan, and a held-out seen-test state on one seen floorplan per room type
    assert scenes.state_split.value_counts().to_dict() == {"train": 5, "unseen_test": 4, "seen_test": 4}
    for name in ("object_types", "receptacles", "instances", "unplaced"):
        assert (work / f"data/muep/metadata/{name}.parquet").exists()
    tasks = pd.read_parquet(work / "data/muep/generate/tasks.parquet")
    accepted = pd.read_parquet(work / "data/muep/filter/accepted.parquet")
    rejected = pd.read_parquet(work / "data/muep/filter/rejected.parquet")
    assert len(accepted) + len(rejected) == len(tasks) > 0
    assert set(tasks.backend) == {"offline"} and tasks.prompt_hash.str.len().min() == 16

    metrics = json.loads(_run([sys.executable, "-m", "dvc", "metrics", "show", "--json"], work, env).stdout)
    data = next(iter(metrics.values()))["data"]
    figures = {path: entry["data"] for path, entry in data.items() if "data" in entry}  # not-yet-run stages: "error"
    assert figures["reports/muep/metadata.json"]["scenes"] == 13
    assert figures["reports/muep/generate.json"]["tasks_parsed"] == len(tasks)
    assert figures["reports/muep/filter.json"]["accepted"] == len(accepted)
    assert sum(figures["reports/muep/filter.json"]["rejected_by_reason"].values()) == len(rejected)


def test_second_repro_is_a_no_op(workdir):
    work, env = workdir
    proc = _run([sys.executable, "-m", "dvc", "repro", TARGET], work, env)
    assert _ran(proc) == set()
    assert "up to date" in proc.stdout + proc.stderr


def test_changing_a_key_reruns_only_the_stages_that_read_it(workdir):
    work, env = workdir
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["muep"]["filter"]["drop_duplicates"] = False
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert _ran(_run([sys.executable, "-m", "dvc", "repro", TARGET], work, env)) == {"muep-filter"}

    # An LLM key reruns generation and filtering; the cache answers every prompt again only if the prompt or
    # sampling changed, and here the temperature did, so the generation stage makes fresh calls.
    params["llm"]["temperature"] = 0.5
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert _ran(_run([sys.executable, "-m", "dvc", "repro", TARGET], work, env)) == {"muep-generate", "muep-filter"}
    report = json.loads((work / "reports/muep/generate.json").read_text())
    assert report["llm_calls"] == report["requests"] and report["cache_hits"] == 0

    # Back to the first temperature: the outputs change back, and every response comes from the cache.
    params["llm"]["temperature"] = 0.7
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run([sys.executable, "-m", "dvc", "repro", "muep-generate"], work, env)
    report = json.loads((work / "reports/muep/generate.json").read_text())
    assert report["llm_calls"] == 0 and report["cache_hits"] == report["requests"]


def test_push_to_the_default_local_remote(workdir):
    work, env = workdir
    _run([sys.executable, "-m", "dvc", "push", "--with-deps", TARGET], work, env)
    storage = work / ".dvc-storage"
    assert storage.exists() and any(p.is_file() for p in storage.rglob("*"))
