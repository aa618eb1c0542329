"""The model ladder on MuEP (tasks/ladder_muep.py, flows/ladder_muep.py).

Unit tests of the rule that chooses the games (stratified by task type, deterministic); the agent on a fake endpoint
that answers garbage (scored as garbage, never retried, never dropped) or fails (an error naming the server's log);
and the stage end to end in a temporary copy of the repository: SmolLM2 served by the real llama.cpp server plays
the fixture's ALFWorld-format games, its runs reach MLflow with their outcomes, the leaderboard shows its row, and a
rerun asks the model nothing and writes the same report."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from openai_server import openai_server, server_error  # noqa: F401 (fixture)
from test_eval_flow import _flow

from core.errors import DataError, LLMError
from tasks.ladder_muep import allocate, choose_games, stratified_subset

REPO = Path(__file__).resolve().parent.parent
#: ALFWorld's 140 #Seen test games by task type (json_2.1.1_valid.tar.xz, valid_seen)
TYPES = {"pick_and_place_simple": 35, "look_at_obj_in_light": 13, "pick_clean_then_place_in_recep": 27,
         "pick_heat_then_place_in_recep": 16, "pick_cool_then_place_in_recep": 25, "pick_two_obj_and_place": 24}


def _games(sizes: dict[str, int], prefix: str = "trial") -> pd.DataFrame:
    rows = [{"episode_id": f"{prefix}_{kind[:8]}_{i:03d}", "task_type": kind} for kind, n in sizes.items()
            for i in range(n)]
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# Which games


def test_the_allocation_is_proportional_by_largest_remainder_with_every_type_present():
    counts = allocate(TYPES, 60)                 # 60 of the 140 games
    assert sum(counts.values()) == 60 and all(counts[k] <= TYPES[k] for k in TYPES)
    assert all(counts[k] >= 1 for k in TYPES)
    for kind, n in TYPES.items():                # one each first, the 54 others by share of the 134 left
        quota = 1 + 54 * (n - 1) / 134
        assert abs(counts[kind] - quota) < 1, (kind, counts[kind], quota)
    assert counts == {"pick_and_place_simple": 15, "look_at_obj_in_light": 6, "pick_clean_then_place_in_recep": 11,
                      "pick_heat_then_place_in_recep": 7, "pick_cool_then_place_in_recep": 11,
                      "pick_two_obj_and_place": 10}


def test_fewer_slots_than_types_go_to_the_largest_types_and_enough_slots_take_everything():
    assert allocate(TYPES, 1) == {k: int(k == "pick_and_place_simple") for k in TYPES}
    assert [k for k, v in allocate(TYPES, 3).items() if v] == ["pick_and_place_simple",
                                                               "pick_clean_then_place_in_recep",
                                                               "pick_cool_then_place_in_recep"]
    assert allocate(TYPES, 140) == TYPES == allocate(TYPES, 500)
    assert allocate({"a": 2, "b": 2}, 3) == {"a": 2, "b": 1}      # a tie: the name decides
    assert allocate(TYPES, 0) == {k: 0 for k in TYPES}
    with pytest.raises(ValueError):
        allocate(TYPES, -1)


def test_the_subset_is_fixed_by_the_games_not_by_their_order_and_grows_within_types():
    games = _games(TYPES)
    chosen = stratified_subset(games, 60)
    shuffled = games.sample(frac=1.0, random_state=7).reset_index(drop=True)
    assert stratified_subset(shuffled, 60) == chosen and len(chosen) == 60 == len(set(chosen))
    kinds = games.set_index("episode_id").task_type
    assert {k: sum(kinds[e] == k for e in chosen) for k in TYPES} == allocate(TYPES, 60)
    # within a type the order is a hash of the id, not the table's: not simply the first ids of each type
    assert chosen != sorted(games.groupby("task_type").head(10).episode_id)[:60]
    smaller = set(stratified_subset(games, 30))
    assert all(sum(kinds[e] == k for e in smaller) <= sum(kinds[e] == k for e in chosen) for k in TYPES)
    assert smaller < set(chosen)                           # a type's first games stay its first games
    assert stratified_subset(games, None) == sorted(games.episode_id) == stratified_subset(games, 1000)


def test_a_bad_games_table_is_refused_with_the_reason():
    with pytest.raises(DataError, match="no column 'task_type'"):
        stratified_subset(pd.DataFrame({"episode_id": ["a"]}), 1)
    with pytest.raises(DataError, match="lists episode 'a' twice"):
        stratified_subset(pd.DataFrame({"episode_id": ["a", "a"], "task_type": ["x", "x"]}), 1)


def test_choose_games_takes_each_splits_ok_games_and_counts_them(tmp_path):
    from test_eval_support import add_alfworld_games, build_dataset

    index = add_alfworld_games(tmp_path, build_dataset())
    broken = index.iloc[[0]].assign(episode_id="broken", status="excluded")
    specs, counts = choose_games(pd.concat([index, broken]), ["alfworld_unseen", "alfworld_seen"], 2)
    assert counts == {"alfworld_unseen": {"games": 3, "chosen": 2}, "alfworld_seen": {"games": 3, "chosen": 2}}
    assert [s.split for s in specs] == ["alfworld_unseen"] * 2 + ["alfworld_seen"] * 2
    assert all(s.source == "alfworld" and s.expert_actions for s in specs)
    with pytest.raises(DataError, match="no playable game in split 'alfworld_seen'"):
        choose_games(index[index.split == "alfworld_unseen"], ["alfworld_seen"], 1)


# ----------------------------------------------------------------------------------------------------------------
# The agent on a fake endpoint


def _agent_on(base_url: str, cache: Path):
    from tasks.ladder import served_llm
    from tasks.ladder_muep import ServedAgent, eval_params
    from tasks.llm import build_client
    from tasks.muep.eval.agents import AgentContext
    from tasks.params import LadderParams

    ladder = LadderParams()
    ev = eval_params(ladder, "smollm2-135m-instruct", base_url)
    client = build_client(served_llm(ladder, "smollm2-135m-instruct", base_url), cache)
    return ev, client, ServedAgent(ev, AgentContext(), client)


def _settings(root: Path, ev):
    from tasks.muep.eval.harness import EvalSettings

    return EvalSettings(metadata_dir=str(root / "data/muep/alfworld/metadata"), params=ev,
                        alfworld_metadata_dir=str(root / "data/muep/alfworld/metadata"))


@pytest.mark.textworld
@pytest.mark.network
def test_a_model_that_answers_garbage_scores_what_it_scores(tmp_path, openai_server):  # noqa: F811
    from test_eval_support import add_alfworld_games, build_dataset

    from tasks.ladder_muep import play

    index = add_alfworld_games(tmp_path, build_dataset())
    specs, _ = choose_games(index, ["alfworld_seen"], 2)
    openai_server.always("I think the answer is 42, my friend.")
    ev, client, agent = _agent_on(openai_server.base_url, tmp_path / "cache")
    results, timings = play(specs, agent, "llama.cpp:garbage", _settings(tmp_path, ev), tmp_path / "server.log")
    assert [r.episode_id for r in results] == [s.episode_id for s in specs] and len(timings) == 2
    assert not any(r.success for r in results)
    assert all(not s.valid and s.action == "i think the answer is 42, my friend" for r in results for s in r.steps)
    assert {r.end_reason for r in results} == {"loop"}          # the same answer again: the released client's stop
    # one request a step, plus the repeated proposal the released protocol stops before executing it
    assert openai_server.calls == sum(len(r.steps) + (r.stopped_action is not None) for r in results) == client.calls
    body = openai_server.bodies[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64 and body["model"] == "smollm2-135m-instruct"
    assert "Example 1" not in body["messages"][0]["content"]    # zero-shot


@pytest.mark.textworld
@pytest.mark.network
def test_a_request_that_fails_stops_the_stage_and_names_the_server_log(tmp_path, openai_server):  # noqa: F811
    from test_eval_support import add_alfworld_games, build_dataset

    from tasks.ladder_muep import play

    index = add_alfworld_games(tmp_path, build_dataset())
    specs, _ = choose_games(index, ["alfworld_seen"], 1)
    openai_server.plan(server_error(500))
    ev, client, agent = _agent_on(openai_server.base_url, tmp_path / "cache")
    with pytest.raises(LLMError, match=r"a request to the model failed in game .*server's log is .*server\.log"):
        play(specs, agent, "llama.cpp:x", _settings(tmp_path, ev), tmp_path / "server.log")
    assert openai_server.calls == 1                              # not retried into success
    assert not list((tmp_path / "cache").rglob("*.json"))        # and nothing cached


# ----------------------------------------------------------------------------------------------------------------
# The stage, end to end, with SmolLM2 through llama.cpp


@pytest.mark.prefect
@pytest.mark.textworld
@pytest.mark.network
def test_the_stage_plays_smollm2_through_llama_cpp_logs_runs_and_a_rerun_asks_nothing(tmp_path):
    from mlflow import MlflowClient
    from test_eval_support import add_alfworld_games, build_dataset, timing_keys

    root = tmp_path / "root"
    games = add_alfworld_games(root, build_dataset())
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["uri"] = None
    params["ladder"]["models"] = ["smollm2-135m-instruct"]
    params["ladder"]["serve"].update(threads=1, n_ctx=4096)
    params["ladder"]["muep"].update(games_per_split=1, max_steps=4)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = os.environ | {"EMBP_ROOT": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("MLFLOW_TRACKING_URI", None)

    _flow("ladder_muep", root, env)
    text = (root / "reports/ladder/muep.json").read_text()
    report = json.loads(text)
    assert not timing_keys(report), timing_keys(report)        # a DVC metric: the same inputs, the same bytes
    smol = report["models"]["smollm2-135m-instruct"]
    assert smol["label"] == "llama.cpp:smollm2-135m-instruct" and smol["agent"] == "openai"
    assert "llama.cpp" in smol["agent_kind"] and "zero-shot" in smol["agent_kind"]
    assert smol["overall"]["episodes"] == 2 and set(smol["by_split"]) == {"alfworld_seen", "alfworld_unseen"}
    assert smol["overall"]["ci95"]["indicative"] is True and len(smol["overall"]["ci95"]["sr"]) == 2
    assert smol["provenance"]["gguf_sha256"] and sum(smol["end_reasons"].values()) == 2
    assert report["protocol"]["stop_rules"] == "protocol=muep-released, max_steps=4" and report["protocol"]["few_shot"] == 0
    chosen = report["games"]["episodes"]
    assert report["games"]["splits"] == {"alfworld_seen": {"games": 3, "chosen": 1},
                                         "alfworld_unseen": {"games": 3, "chosen": 1}}
    for split, ids in chosen.items():
        assert ids == stratified_subset(games[games.split == split], 1)
    facts = json.loads((root / "reports/timings/ladder-muep.json").read_text())["models"]["smollm2-135m-instruct"]
    assert facts["llm_calls"] > 0 and facts["cache_hits"] == 0 and facts["server_start_s"] > 0
    assert (root / "reports/timings/ladder-muep.smollm2-135m-instruct.server.log").exists()
    lines = (root / "data/muep/ladder/smollm2-135m-instruct/alfworld_seen.jsonl").read_text().splitlines()
    assert [json.loads(line)["episode_id"] for line in lines] == chosen["alfworld_seen"]

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("embp/muep-eval")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2 and {r.data.tags["agent_label"] for r in runs} == {"llama.cpp:smollm2-135m-instruct"}
    run = next(r for r in runs if r.data.tags["split"] == "alfworld_unseen")
    assert run.data.tags["stage"] == "muep-eval" and run.data.tags["ladder_stage"] == "ladder-muep"
    assert run.data.params["agent"] == "openai" and run.data.params["gguf_sha256"] == smol["provenance"]["gguf_sha256"]
    assert "sr_ci_low" in run.data.metrics and run.data.metrics["n/episodes"] == 1
    outcomes = client.download_artifacts(run.info.run_id, "outcomes/alfworld_unseen.json", str(tmp_path / "o"))
    assert list(json.loads(Path(outcomes).read_text())) == chosen["alfworld_unseen"]

    _flow("ladder_muep", root, env)                              # again: every answer from the cache
    assert (root / "reports/ladder/muep.json").read_text() == text
    facts = json.loads((root / "reports/timings/ladder-muep.json").read_text())["models"]["smollm2-135m-instruct"]
    assert facts["llm_calls"] == 0 and facts["cache_hits"] > 0 and facts["server_start_s"] == 0
    assert len(client.search_runs([experiment.experiment_id])) == 2      # the same runs, not logged twice

    shutil.rmtree(root / "reports/muep", ignore_errors=True)
    _flow("muep_leaderboard", root, env)
    md = (root / "reports/leaderboard.md").read_text()
    assert "| llama.cpp:smollm2-135m-instruct |" in md and "## Main results: ALFWorld's test games" in md


@pytest.mark.prefect
def test_with_no_models_both_ladder_stages_are_off_start_no_server_and_write_their_outputs(tmp_path):
    """The paper profile runs no model (issue #32: the ladder is its own profile): ``ladder.models: []`` turns the
    two ladder stages off. They start no llama.cpp server, say so in their reports and write every DVC output."""
    from test_eval_support import add_alfworld_games, build_dataset

    root = tmp_path / "root"
    add_alfworld_games(root, build_dataset())
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["uri"] = None
    params["ladder"]["models"] = []
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stale = root / "data/muep/ladder/old-model"
    stale.mkdir(parents=True)                                         # an earlier run's model: not kept
    env = os.environ | {"EMBP_ROOT": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)

    for module in ("ladder_muep", "ladder_roboscript"):
        out = _flow(module, root, env)
        assert "the ladder is off" in out.stdout + out.stderr
    muep = json.loads((root / "reports/ladder/muep.json").read_text())
    assert muep["models"] == {} and muep["games"]["splits"]
    assert (root / "data/muep/ladder").is_dir() and not stale.exists()
    robo = json.loads((root / "reports/ladder/roboscript.json").read_text())
    assert robo["models"] == {} and robo["settings"]["models"] == []
    assert json.loads((root / "reports/ladder/roboscript_details.json").read_text()) == {}
    assert "Off" in (root / "reports/ladder/table2.md").read_text()
    for folder in ("data/cache/llm-ladder-muep", "data/cache/llm-ladder-roboscript",
                   "data/cache/roboscript-goals/ladder-roboscript"):
        assert (root / folder).is_dir(), folder
    assert not list((root / "reports/timings").glob("*.server.log"))  # no server was started
