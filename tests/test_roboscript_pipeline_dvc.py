"""Pipeline test: `dvc repro` of the three RoboScript stages in a temporary copy of the repository, through the real
Prefect flows (each stage starts Prefect's ephemeral server: ~15 s a stage on 2 cores); `dvc metrics show` lists
worlds, queries and checked snippets; a second run is a no-op. (Reruns answered from the LLM cache are tested in
tests/test_roboscript_codegen.py and test_roboscript_queries.py, without Prefect.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.dvc, pytest.mark.prefect]

REPO = Path(__file__).resolve().parent.parent
STAGES = ("roboscript-worlds", "roboscript-queries", "roboscript-codegen")


def _run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def _ran(proc: subprocess.CompletedProcess) -> set[str]:
    out = proc.stdout + proc.stderr
    return {s for s in STAGES if f"Running stage '{s}'" in out}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("repo")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not rel.startswith(("data/", "reports/")) and rel != "dvc.lock":
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["roboscript"]["worlds"]["n_worlds"] = 4
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    bin_dir = str(Path(sys.executable).parent)
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "EMBP_ROOT": str(work),
                        "DVC_NO_ANALYTICS": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        # Prefect gives its temporary server 20 s to start; a busy 2-core machine can need more.
                        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    env.pop("PREFECT_API_URL", None)
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy"]):
        _run(cmd, work, env)
    return work, env


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
