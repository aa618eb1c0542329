"""Flow tests: the muep-eval flow (Prefect, process pool) on a small real dataset -- the demonstrations' test splits
and ALFWorld-format games -- logs one MLflow run per agent x split into a real sqlite store, writes the DVC metrics
and trajectories; the muep-leaderboard flow then builds the tables and charts from MLflow alone. Plus the
leaderboard's choice of runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from openai_server import openai_server  # noqa: F401 (fixture)
from test_eval_support import add_alfworld_games, build_dataset, timing_keys

from core.io import dvc_md5
from tasks.muep.eval.leaderboard import build, tables, to_markdown
from tasks.muep.eval.metrics import Tally
from tasks.muep.eval.records import EpisodeResult
from tasks.muep.eval.runs import RunSummary

REPO = Path(__file__).resolve().parent.parent


def _flow(module: str, root: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", f"flows.{module}", "--params", str(root / "params.yaml")], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.mark.prefect
@pytest.mark.textworld
@pytest.mark.network
def test_eval_flow_logs_mlflow_runs_and_the_leaderboard_reads_them(tmp_path, openai_server):  # noqa: F811
    from mlflow import MlflowClient

    data = build_dataset()
    root = tmp_path / "root"
    shutil.copytree(data.root / "data", root / "data")
    add_alfworld_games(root, data)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["uri"] = None   # the default store: sqlite mlflow.db under the root, artifacts beside it
    # the cap must leave room for the longest expert plan, or the oracle cannot win that episode: since the metadata
    # holds ALFRED's real initial states, the fixture's pick-two bowls start one in a closed fridge (9 actions)
    max_steps = max(len(actions) for actions in data.index.actions)
    params["muep"]["eval"].update(agents=["oracle", "random", "openai"], max_steps=max_steps, max_invalid_streak=2,
                                  batch_size=2, task_runner="processes", workers=2, alfworld_episodes=None)
    params["muep"]["eval"]["openai"].update(model="test-model", base_url=openai_server.base_url, max_retries=0,
                                            few_shot=1)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = os.environ | {"EMBP_ROOT": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("MLFLOW_TRACKING_URI", None)

    _flow("muep_eval", root, env)
    oracle = json.loads((root / "reports/muep/eval_oracle.json").read_text())
    random = json.loads((root / "reports/muep/eval_random.json").read_text())
    llm = json.loads((root / "reports/muep/eval_openai.json").read_text())
    assert oracle["overall"]["sr"] == oracle["overall"]["lc"] == oracle["overall"]["gcs"] == 1.0
    assert oracle["overall"]["gcs_alfworld"] == 1.0
    for report in (oracle, random, llm):  # DVC metrics: the same inputs give the same bytes, so no time in them
        assert not timing_keys(report), timing_keys(report)
    assert oracle["overall"]["episodes"] == 12 and set(oracle["by_split"]) == {"seen_test", "unseen_test",
                                                                                "alfworld_seen", "alfworld_unseen"}
    assert oracle["by_split"]["alfworld_unseen"]["episodes"] == 3 and oracle["by_split"]["alfworld_seen"]["sr"] == 1.0
    assert len(oracle["by_task_type"]) == 6 and len(oracle["by_split_task_type"]["alfworld_seen"]) == 3
    assert set(oracle["dataset_versions"]) == {"demos", "alfworld"}
    # DVC's hash of each input folder, from its contents (this copy has no dvc.lock): what `dvc repro` records for it
    assert oracle["dataset_versions"]["demos"] == "dvc:" + dvc_md5(root / "data/muep/demos").removesuffix(".dir")
    assert random["overall"]["sr"] < 1.0 and random["overall"]["lc"] == 1.0
    assert llm["overall"]["lc"] == 0.0 and llm["overall"]["sr"] == 0.0   # the fake endpoint only echoes
    assert openai_server.calls == 1 + 12 * 2                                # preflight + 2 invalid steps each
    assert "Example 1 (pick heat then place)" in openai_server.bodies[-1]["messages"][0]["content"]

    trajectories = [json.loads(line) for line in (root / "data/muep/eval/oracle/seen_test.jsonl").open()]
    assert len(trajectories) == 3 and all(EpisodeResult.from_json({k: v for k, v in t.items() if k != "metrics"})
                                          .success for t in trajectories)

    alfworld = [json.loads(line) for line in (root / "data/muep/eval/oracle/alfworld_unseen.jsonl").open()]
    assert [t["episode_id"][:9] for t in alfworld] == ["alfworld-"] * 3 and all(t["success"] for t in alfworld)

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("embp/muep-eval")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 12 and {r.info.status for r in runs} == {"FINISHED"}
    run = next(r for r in runs if r.data.tags["agent"] == "oracle" and r.data.tags["split"] == "unseen_test")
    assert run.data.params["dataset_version"] == oracle["dataset_versions"]["demos"]
    assert run.data.params["model"] == "ff-planner" and run.data.tags["stop_rules"] == (
        f"protocol=muep-released, max_steps={max_steps}, invalid_streak=2")
    assert (run.data.params["protocol"], run.data.params["grammar"]) == ("muep-released", "muep-released")
    assert run.data.metrics["sr"] == 1.0 and run.data.metrics["n/episodes"] == 3
    assert run.data.metrics["gcs_alfworld"] == 1.0 and run.data.metrics["time/total_s"] > 0
    alf = next(r for r in runs if r.data.tags["agent"] == "oracle" and r.data.tags["split"] == "alfworld_seen")
    assert alf.data.tags["dataset"] == "muep-alfworld"
    assert alf.data.params["dataset_version"] == oracle["dataset_versions"]["alfworld"]
    assert run.data.metrics["sr/look_at_obj_in_light"] == 1.0
    assert "rdi" not in run.data.metrics  # undefined without a failure: not logged
    assert run.data.metrics["sr_ci_low"] == run.data.metrics["sr_ci_high"] == 1.0     # certain: no spread
    assert oracle["by_split"]["unseen_test"]["ci95"] == {"sr": [1.0, 1.0], "gcs": [1.0, 1.0], "pr": [1.0, 1.0],
                                                         "lc": [1.0, 1.0], "level": 0.95, "indicative": True}
    outcomes = client.download_artifacts(run.info.run_id, "outcomes/unseen_test.json", str(tmp_path / "o"))
    assert len(json.loads(Path(outcomes).read_text())) == 3
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI opens on the runs
    inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert [(i.dataset.name, i.dataset.digest) for i in inputs] == [
        ("muep-unseen_test", oracle["dataset_versions"]["demos"].split(":")[-1])]
    assert inputs[0].tags[0].value == "evaluation" and json.loads(inputs[0].dataset.profile) == {"records": 3}
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "trajectories")]
    assert artifacts == ["trajectories/unseen_test.jsonl"]
    local = client.download_artifacts(run.info.run_id, "trajectories/unseen_test.jsonl", str(tmp_path))
    assert len(Path(local).read_text().splitlines()) == 3
    llm_run = next(r for r in runs if r.data.tags["agent"] == "openai")
    assert llm_run.data.params["base_url"] == openai_server.base_url and llm_run.data.tags["agent_label"] == \
        "openai:test-model"

    for report in (root / "reports/muep").glob("eval_*.json"):  # the leaderboard reads MLflow, not these files
        report.unlink()
    _flow("muep_leaderboard", root, env)
    md = (root / "reports/leaderboard.md").read_text()
    html = (root / "reports/leaderboard.html").read_text()
    assert "| oracle | 100.0 [100.0, 100.0] | " in md and "| random |" in md and "| openai:test-model |" in md
    # every SR / GCS / PR cell with its interval; 3 episodes a split: indicative; agents on the same games paired
    assert "| 6 † |" in md and "## Paired comparisons: ALFWorld's test games" in md
    assert "| oracle | openai:test-model | 6 | 6 | 0 | 0.031 | yes |" in md
    # a program is never presented as a model: every table with oracle / random says what they are
    tables = md.split("\n## ")[1:]
    assert tables and all("Scripted programs, not models: `oracle`" in t for t in tables if "| oracle |" in t)
    assert "#Seen SR" in md and "#Unseen RDI" in md and "#Seen GCS-A" in md
    assert "## Main results: ALFWorld's test games" in md and "## Main results: MuEP's generated test episodes" in md
    assert "Per task type, ALFWorld #Unseen" in md and "Per task type, generated #Seen" in md
    assert "| oracle | pick heat then place | 1 | 100.0 |" in md
    assert f"`protocol=muep-released, max_steps={max_steps}, invalid_streak=2` (openai:test-model, oracle, random) " \
           "-- the invalid-action streak" in md
    assert html.count("data:image/png;base64,") == 2 and "<table>" in html


def _summary(label: str, split: str, version: str, start: int, successes: int, dataset: str = "muep-demos",
             rules: str = "max_steps=30") -> RunSummary:
    t = Tally(episodes=2, successes=successes, steps=10, steps_success=4 * successes, valid=8, goals_met=2,
              goals_total=4, conditions_met=1, conditions_total=4, failed=2 - successes, disoriented_failed=0,
              progress_sum=1.0)
    return RunSummary(f"{label}-{split}-{start}", label, label, split, version, start, t,
                      {"pick_and_place_simple": t}, dataset, rules)


def test_leaderboard_keeps_the_newest_run_per_agent_and_split_of_the_newest_data():
    runs = [_summary("random", "seen_test", "v1", 1, 0), _summary("random", "seen_test", "v2", 5, 1),
            _summary("random", "unseen_test", "v2", 6, 0), _summary("oracle", "seen_test", "v1", 2, 2),
            _summary("oracle", "seen_test", "v2", 7, 2), _summary("oracle", "seen_test", "v2", 3, 0),
            _summary("old", "seen_test", "v1", 4, 2)]
    board = build(runs)
    assert board.labels == ["oracle", "random"] and board.dataset_versions == ["v2"]   # "old" is of v1 only
    assert board.cells[("oracle", "seen_test")].successes == 2                          # start 7, not 3
    assert board.overall("random").episodes == 4 and board.overall("random").successes == 1
    main = tables(board)[0]
    assert main[0] == "Main results: MuEP's generated test episodes"
    assert main[1][1:5] == ["#Seen SR", "#Seen IS", "#Seen GCS", "#Seen GCS-A"] and main[2][1][:2] == ["random", "50.0"]
    assert main[2][0][-3:] == ["100.0", "50.0", "2 †"] and main[2][0][7] == "-"        # oracle has no #Unseen run
    assert main[2][1][7] == "0.0" and main[2][1][3:5] == ["50.0", "25.0"]               # GCS and GCS-A
    assert "old" in build(runs, all_versions=True).labels
    assert "No evaluation runs yet" in to_markdown(build([]), "x")


def test_leaderboard_puts_alfworlds_games_first_each_dataset_on_its_newest_version_and_names_the_stop_rules():
    runs = [_summary("random", "seen_test", "d2", 5, 1), _summary("random", "alfworld_seen", "a1", 3, 0, "muep-alfworld"),
            _summary("oracle", "alfworld_seen", "a1", 4, 2, "muep-alfworld"),
            _summary("oracle", "alfworld_unseen", "a1", 4, 2, "muep-alfworld"),
            _summary("llm", "alfworld_unseen", "a1", 4, 1, "muep-alfworld",
                     "protocol=alfworld, max_steps=30, invalid_streak=10"),
            _summary("random", "seen_test", "d1", 1, 0)]
    board = build(runs)
    assert board.splits == ["alfworld_seen", "alfworld_unseen", "seen_test"]     # both datasets, each its newest data
    assert board.dataset_versions == ["a1", "d2"] and board.cells[("random", "seen_test")].successes == 1
    titles = [t[0] for t in tables(board)]
    assert titles[:2] == ["Main results: ALFWorld's test games (the paper's test set; cf. Table 3)",
                          "Main results: MuEP's generated test episodes"]
    assert "Per task type, ALFWorld #Unseen (cf. the paper's Tables 2 and 4)" in titles
    assert "Per task type, ALFWorld's test games, all splits (cf. the paper's Tables 2 and 4)" in titles
    assert [r[0] for r in tables(board)[0][2]] == ["oracle", "llm", "random"]            # by SR on ALFWorld's games
    assert [r[0] for r in tables(board)[1][2]] == ["random"]                             # only who played them
    md = to_markdown(board, "x")
    assert "Protocol and stop rules: " in md
    assert ("`protocol=alfworld, max_steps=30, invalid_streak=10` (llm) -- the invalid-action streak stop is NOT a "
            "rule of the paper") in md
    assert "`max_steps=30` (oracle, random)" in md


def test_leaderboard_shows_an_agent_under_each_protocol_it_was_evaluated_by():
    released, alfworld = "protocol=muep-released, max_steps=30", "protocol=alfworld, max_steps=30"
    runs = [_summary("random", s, "a1", start, n, "muep-alfworld", rules)
            for s in ("alfworld_seen", "alfworld_unseen")
            for start, n, rules in ((1, 0, alfworld), (2, 1, released), (3, 2, alfworld))]
    runs.append(_summary("oracle", "alfworld_seen", "a1", 4, 2, "muep-alfworld", alfworld))   # one protocol only
    board = build(runs)
    assert board.labels == ["oracle", "random (alfworld)", "random"]
    # the newest run of each protocol: alfworld's at start 3 (2 solved), the released one (1 solved)
    assert board.cells[("random (alfworld)", "alfworld_seen")].successes == 2
    assert board.cells[("random", "alfworld_unseen")].successes == 1
    assert [r[0] for r in tables(board)[0][2]] == ["oracle", "random (alfworld)", "random"]
    md = to_markdown(board, "x")
    assert f"`{alfworld}` (oracle, random (alfworld))" in md and f"`{released}` (random)" in md
    assert "`alfworld`: ALFWorld's: grammar alfworld-0.4" in md and "`muep-released`: MuEP's released test client" in md
    assert [r.protocol for r in runs[:2]] == ["alfworld", "muep-released"] and _summary("x", "s", "v", 1, 0).protocol == ""


def _outcomes(successes: list[bool]) -> dict:
    from tasks.muep.eval.metrics import EpisodeMetrics

    return {f"ep{i:03d}": EpisodeMetrics(success=ok, steps=0, valid=0, goals_met=int(ok), goals_total=1,
                                         conditions_met=0, conditions_total=0, progress=float(ok), disoriented=False)
            for i, ok in enumerate(successes)}


def test_leaderboard_intervals_and_paired_comparisons_come_from_the_runs_outcomes():
    from tasks.muep.eval.leaderboard import attach_outcomes

    def summary(label, split, solved):
        t = Tally(episodes=40, successes=solved, steps=400, steps_success=0, valid=400, goals_met=solved,
                  goals_total=40, conditions_met=0, conditions_total=0, failed=40 - solved, disoriented_failed=0,
                  progress_sum=float(solved))
        return RunSummary(f"{label}-{split}", label, label, split, "v", 1, t, {}, "muep-alfworld")

    runs = [summary("strong", "alfworld_seen", 30), summary("strong", "alfworld_unseen", 20),
            summary("weak", "alfworld_seen", 10), summary("weak", "alfworld_unseen", 10),
            summary("other", "alfworld_seen", 10)]
    outcomes = {("strong", "alfworld_seen"): _outcomes([True] * 30 + [False] * 10),
                ("strong", "alfworld_unseen"): _outcomes([True] * 20 + [False] * 20),
                ("weak", "alfworld_seen"): _outcomes([True] * 10 + [False] * 30),
                ("weak", "alfworld_unseen"): _outcomes([True] * 10 + [False] * 30),
                ("other", "alfworld_seen"): _outcomes([False] * 30 + [True] * 10)}
    board = attach_outcomes(build(runs), lambda run: outcomes.get((run.label, run.split)))
    main = tables(board)[0]
    strong = main[2][0]
    assert strong[0] == "strong" and strong[1].startswith("75.0 [") and strong[-1] == "80"
    low, high = (float(x) for x in strong[1].split("[")[1].rstrip("]").split(", "))
    assert 58 <= low < 75 < high <= 90                  # binomial: 75 +- 13.4
    assert strong[-3].startswith("62.5 [")                 # overall SR over both splits, resampled per split
    paired = next(t for t in tables(board) if t[0].startswith("Paired comparisons"))
    # strong and weak played the same 80 games: 20 + 10 only strong solved, none only weak -> they differ
    assert paired[2] == [["strong", "weak", "80", "30", "0", "<0.001", "yes"]]
    # "other" played only #Seen: not paired over the test set, and its single split of 40 episodes is not indicative
    assert next(r for r in main[2] if r[0] == "other")[-1] == "40"
