"""The training stage as the pipeline runs it: `dvc repro` of the tiny-profile stage in a temporary copy of the
repository (Prefect flow, models/<baseline>/, metrics, MLflow runs), then a no-op second repro; and the Prefect
deployments of prefect.yaml listed by `prefect deployment ls` against a local Prefect server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from repo_copy import copy_repo, run_checked
from test_train_support import make_sft

pytestmark = [pytest.mark.slow, pytest.mark.prefect]
BASELINES = ["bloomz-3b", "llava"]


_run = run_checked


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("repo")

    def tiny(params: dict) -> None:
        params["train"] |= {"baselines": BASELINES, "max_steps": 3, "max_seq_len": 160}

    def sft(root: Path) -> None:
        make_sft(root, sft=root / "data/muep/sft", shard=root / "data/muep/demos/shards/train-00000.tar",
                 shard_ref="data/muep/demos/shards/train-00000.tar")

    env = copy_repo(work, tiny, before_commit=sft) | {"OMP_NUM_THREADS": "1"}
    return work, env


@pytest.mark.dvc
def test_dvc_repro_trains_the_tiny_profile_and_logs_to_mlflow(workdir):
    from mlflow import MlflowClient

    work, env = workdir
    stages = [f"muep-train-tiny@{name}" for name in BASELINES]
    proc = _run([sys.executable, "-m", "dvc", "repro", "--single-item", *stages], work, env)
    for stage in stages:
        assert f"Running stage '{stage}'" in proc.stdout + proc.stderr
    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("embp/muep-train")
    for name in BASELINES:
        card = json.loads((work / f"models/{name}/baseline.json").read_text())
        assert card["profile"] == "tiny" and card["trained_steps"] == 3
        report = json.loads((work / f"reports/muep/train/{name}.json").read_text())
        assert not {"mlflow_run_id", "tokens_per_s", "train_seconds", "peak_memory_mb"} & report.keys()
        facts = json.loads((work / f"reports/timings/muep-train@{name}.json").read_text())
        run = client.get_run(facts["baselines"][name]["mlflow_run_id"])
        assert run.info.experiment_id == experiment.experiment_id and run.info.status == "FINISHED"
        assert len(client.get_metric_history(run.info.run_id, "train_loss")) == 3
        assert not (work / f"models/{name}/checkpoints").exists()
    again = _run([sys.executable, "-m", "dvc", "repro", "--single-item", *stages], work, env)
    assert "Running stage" not in again.stdout + again.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prefect_deployments_are_listed_by_a_local_server(workdir, tmp_path):
    work, env = workdir
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = env | {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api, "EMBP_WORKDIR": str(work)}
    prefect = [sys.executable, "-m", "prefect"]
    server = subprocess.Popen([*prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)], cwd=work,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{api}/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "the Prefect server did not answer within 120 s"
                time.sleep(1)
        for pool in ("gpu-pool", "cpu-pool"):
            _run([*prefect, "work-pool", "create", pool, "--type", "process"], work, env)
        _run([*prefect, "--no-prompt", "deploy", "--all"], work, env)
        listed = _run([*prefect, "deployment", "ls"], work, env | {"COLUMNS": "200"}).stdout
        for expected in ("muep-train/muep-train-gpu", "muep-train/muep-train-tiny",
                         "muep-eval/muep-eval-gpu"):
            assert expected in listed, listed
        shown = _run([*prefect, "deployment", "inspect", "muep-train/muep-train-gpu"], work, env).stdout
        assert "'profile': 'full'" in shown and "gpu-pool" in shown
    finally:
        server.terminate()
        server.wait(timeout=30)
