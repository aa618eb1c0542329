"""Resuming the evaluation: the work directory keeps finished (batch, agent) parts under fingerprints, a killed
muep-eval flow (kill -9) resumes with only the missing batches and ends with the same bytes as an uninterrupted run
and one MLflow run per agent x split, and a run whose logging was cut off is replaced, not duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_eval_support import add_alfworld_games, build_dataset, timing_keys

from tasks.muep.eval.harness import BatchOutput, EpisodeTiming, EvalBatch
from tasks.muep.eval.records import EpisodeResult, EpisodeSpec
from tasks.muep.eval.store import EvalStore

REPO = Path(__file__).resolve().parent.parent


def _spec(n: int) -> EpisodeSpec:
    return EpisodeSpec(f"e{n}", "seen_test", "FloorPlan1", "pick_and_place_simple", "put it", "Apple", "Fridge",
                       "alfworld-0.4")


def _output(batch: EvalBatch) -> BatchOutput:
    results = [EpisodeResult(label, s.episode_id, s.split, s.scene, s.task_type, s.instruction, "intro", 2, 0, False,
                             "max_steps", 0) for s in batch.episodes for _, label in batch.agents]
    timings = [EpisodeTiming(r.agent, r.episode_id, 0, 0.1, 0.2, 0.0, 0.0, 0.3) for r in results]
    return BatchOutput(results, timings, 0.01, 123, 250.0)


def test_the_store_keeps_parts_under_their_fingerprints(tmp_path):
    agents = [("oracle", "oracle"), ("random", "random")]
    batches = [EvalBatch("b00000", agents, [_spec(1), _spec(2)]), EvalBatch("b00001", agents, [_spec(3)])]
    store = EvalStore(tmp_path, "c1", {"oracle": "o1", "random": "r1"})
    assert store.prepare() == {}
    assert [(b.batch_id, b.agents) for b in store.pending(batches)] == [(b.batch_id, agents) for b in batches]
    store.commit(batches[0], _output(batches[0]))
    (tmp_path / "parts" / "random" / ".b00001.jsonl.x.tmp").write_text("half a line")  # a writer killed mid-file
    assert [(b.batch_id, b.agents) for b in store.pending(batches)] == [("b00001", agents)]
    assert [r.episode_id for r in store.results("random", ["b00000"])] == ["e1", "e2"]

    # another random agent (its parameters changed): only its parts go, and the stray file is swept
    store = EvalStore(tmp_path, "c1", {"oracle": "o1", "random": "r2"})
    assert store.prepare() == {"random": "its parameters changed"}
    assert not list((tmp_path / "parts").rglob("*.tmp"))
    assert [(b.batch_id, b.agents) for b in store.pending(batches)] == [("b00000", [("random", "random")]),
                                                                       ("b00001", agents)]
    only_random = store.pending(batches)[0]
    store.commit(only_random, _output(only_random))
    # a DVC output: results and fingerprints only, no timings, pids or memory (those are run facts)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "manifest.json", "parts/oracle/b00000.jsonl", "parts/random/b00000.jsonl"]
    assert not timing_keys([json.loads(line) for p in tmp_path.rglob("*.jsonl") for line in p.open()])
    # a new agent joins: the others' parts stay
    store = EvalStore(tmp_path, "c1", {"oracle": "o1", "random": "r2", "llm": "l1"})
    assert store.prepare() == {}
    assert store.done("oracle") == {"b00000"} and store.done("random") == {"b00000"}
    # other code, data or rules: everything goes
    store = EvalStore(tmp_path, "c2", {"oracle": "o1", "random": "r2"})
    assert store.prepare() == {"all": "code, episodes, data or rules changed"}
    assert store.done("oracle") == set()
    with pytest.raises(Exception, match="b00000 was not played by oracle"):
        store.results("oracle", ["b00000"])


def test_an_interrupted_logging_is_replaced_not_duplicated(tmp_path):
    from mlflow import MlflowClient

    from tasks.muep.eval.runs import EXPERIMENT, log_run
    from tasks.params import TrackingParams
    from tasks.tracking import setup

    tracking = TrackingParams(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment_prefix="t")
    client = MlflowClient(tracking.uri)
    experiment = setup(tracking, EXPERIMENT)
    cut_off = client.create_run(experiment, tags={"eval_fingerprint": "fp1", "stage": "muep-eval"})  # still RUNNING
    results = _output(EvalBatch("b", [("random", "random")], [_spec(1)])).results
    path = tmp_path / "t.jsonl"
    path.write_text("{}\n")
    tags = {"eval_fingerprint": "fp1", "dataset_version": "sha256:x", "stage": "muep-eval"}
    run_id, _, new = log_run(tracking, "random", "seen_test", {}, tags, results, path)
    assert new and run_id != cut_off.info.run_id
    again, _, new_again = log_run(tracking, "random", "seen_test", {}, tags, results, path)
    assert (again, new_again) == (run_id, False)
    runs = client.search_runs([experiment])
    assert [(r.info.run_id, r.info.status) for r in runs] == [(run_id, "FINISHED")]


def _params(root: Path) -> Path:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["uri"] = None
    params["muep"]["eval"].update(agents=["oracle", "random"], batch_size=1, task_runner="processes", workers=1,
                                  alfworld_episodes=None)
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def _run(root: Path, env: dict, kill_after_parts: int | None = None) -> subprocess.CompletedProcess | None:
    cmd = [sys.executable, "-m", "flows.muep_eval", "--params", str(_params(root))]
    if kill_after_parts is None:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    parts = root / "data/cache/muep-eval/parts"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(parts.rglob("*.jsonl"))) >= kill_after_parts:
            os.killpg(proc.pid, signal.SIGKILL)  # the flow and its worker processes, mid-run
            proc.wait()
            return None
        time.sleep(0.05)
    raise AssertionError("the evaluation ended before it could be killed")


@pytest.mark.prefect
@pytest.mark.textworld
def test_a_killed_evaluation_resumes_and_ends_as_an_uninterrupted_one(tmp_path):
    from mlflow import MlflowClient

    data = build_dataset()
    roots = {}
    for name in ("clean", "killed"):
        root = roots[name] = tmp_path / name
        import shutil

        shutil.copytree(data.root / "data", root / "data")
        add_alfworld_games(root, data)
    env = os.environ | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)

    _run(roots["clean"], env | {"EMBP_ROOT": str(roots["clean"])})
    killed_env = env | {"EMBP_ROOT": str(roots["killed"])}
    _run(roots["killed"], killed_env, kill_after_parts=3)
    kept = sorted(p.relative_to(roots["killed"]) for p in roots["killed"].glob("data/cache/muep-eval/parts/*/*"))
    assert 3 <= len(kept) < 24 and not (roots["killed"] / "reports/muep/eval_oracle.json").exists()
    resumed = _run(roots["killed"], killed_env)
    assert f"{len(kept)} already done, {24 - len(kept)} to play" in resumed.stderr
    progress = [line for line in resumed.stderr.splitlines() if "muep-eval: agent-episodes:" in line]
    assert progress and f"{24 - len(kept)}/{24 - len(kept)} agent-episodes" in progress[-1]   # progress and ETA
    assert all("agent-episodes/s" in line and " left" in line for line in progress)

    # every DVC output of the stage is the same bytes in two copies, killed and resumed or not (its work directory
    # too); what the runs measured is in their run facts
    outputs = ["reports/muep/eval_oracle.json", "reports/muep/eval_random.json",
               *(p.relative_to(roots["clean"]).as_posix() for p in roots["clean"].glob("data/muep/eval/*/*.jsonl")),
               *(p.relative_to(roots["clean"]).as_posix() for p in roots["clean"].glob("data/cache/muep-eval/**/*")
                 if p.is_file())]
    # reports, results, manifest, a part per agent-episode; and the episode viewer's images (data/cache/muep-eval/images)
    assert len([r for r in outputs if "/images/" not in r]) == 2 + 8 + 1 + 24, outputs
    for rel in outputs:
        assert (roots["killed"] / rel).read_bytes() == (roots["clean"] / rel).read_bytes(), rel
    assert sorted(p.relative_to(roots["killed"]).as_posix() for p in roots["killed"].glob("data/cache/muep-eval/**/*")
                  if p.is_file()) == sorted(r for r in outputs if r.startswith("data/cache/"))
    for rel in (r for r in outputs if not r.endswith(".png")):
        text = (roots["clean"] / rel).read_text()
        docs = [json.loads(line) for line in text.splitlines()] if rel.endswith(".jsonl") else [json.loads(text)]
        assert not timing_keys(docs), (rel, timing_keys(docs))
    facts = json.loads((roots["clean"] / "reports/timings/muep-eval.json").read_text())
    assert facts["played"] == 24 and sum(len(t["episodes"]) for t in facts["timings"].values()) == 24
    client = MlflowClient(f"sqlite:///{roots['killed'] / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("embp/muep-eval")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 8 and {r.info.status for r in runs} == {"FINISHED"}

    again = _run(roots["killed"], killed_env)  # nothing left to play, nothing new to log
    assert "24 already done, 0 to play" in again.stderr and "logged in" not in again.stderr
    assert len(client.search_runs([experiment.experiment_id])) == 8
