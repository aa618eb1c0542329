"""Harness tests on real TextWorld games: the oracle wins every task type with every action valid, random is seeded
and far below, misbehaving agents end as invalid actions within the caps, only the paper's stop rules apply unless
others are asked for, the loop stop ends an episode at the RDI rule's first loop, the heat-and-place partial credit
comes out of the real game state, multimodal agents get the rendered image, and a batch plays every agent on one
translation per scene instance with the same results as episodes played one by one."""

from __future__ import annotations

import re
import time

import pytest
from test_eval_support import build_dataset

from tasks.muep.eval import env as eval_env
from tasks.muep.eval.agents import AgentBudgetExhausted, AgentContext, build_agent
from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.episodes import make_batches, select
from tasks.muep.eval.harness import EvalSettings, run_batch, run_episode
from tasks.muep.eval.metrics import disoriented, episode_metrics, tally
from tasks.muep.eval.env import for_protocol
from tasks.muep.eval.protocol import PROTOCOLS
from tasks.muep.eval.records import Observation
from tasks.params import EvalParams

pytestmark = pytest.mark.textworld


@pytest.fixture(scope="module")
def data():
    return build_dataset()


@pytest.fixture(scope="module")
def specs(data):
    return {s.task_type: s for s in select(data.index, ["seen_test", "unseen_test"], None, 0)}


def settings(data, **eval_params) -> EvalSettings:
    """ALFWorld's protocol unless a test names another: most tests here are about the harness, not the protocol."""
    params = EvalParams(**({"protocol": "alfworld"} | eval_params))
    return EvalSettings(metadata_dir=str(data.metadata_dir), params=params, context=AgentContext())


class Scripted(Agent):
    """A test agent: answers from a list (strings, or exceptions to raise), then ``then`` forever."""

    name = "scripted"

    def __init__(self, answers=(), then=""):
        super().__init__(EvalParams(), AgentContext())
        self.answers, self.then, self.seen = list(answers), then, []

    @classmethod
    def describe(cls, params) -> AgentInfo:
        return AgentInfo(cls.name, cls.name, "script")

    def act(self, observation: Observation):
        self.seen.append(observation)
        answer = self.answers.pop(0) if self.answers else self.then
        if isinstance(answer, BaseException):
            raise answer
        return answer


@pytest.mark.parametrize("protocol", ["muep-released", "alfworld"])
def test_oracle_wins_every_task_type_with_every_action_valid(data, specs, protocol):
    assert len(specs) == 6  # one episode of each task type, in both test splits
    agent = build_agent("oracle", EvalParams(), AgentContext())
    results = [run_episode(spec, agent, "oracle", settings(data, protocol=protocol)) for spec in specs.values()]
    for r in results:
        assert r.success and r.end_reason == "won", (r.episode_id, r.steps[-1])
        assert r.goals_met == r.goals_total > r.initial_goals_met, r.episode_id  # the counters agree with the game
        assert r.conditions_met == r.conditions_total > r.initial_conditions_met, r.episode_id
        assert [s.action for s in r.steps] == list(for_protocol(specs[r.task_type], PROTOCOLS[protocol]).expert_actions)
        assert r.protocol == protocol and r.stopped_action is None
    rates = tally(results).rates()
    assert rates["sr"] == rates["lc"] == rates["gcs"] == rates["gcs_alfworld"] == rates["pr"] == 1.0
    assert rates["rdi"] is None  # no failed episode


def test_random_is_seeded_valid_and_far_below_the_oracle(data, specs):
    s = settings(data, max_steps=12)
    agent = build_agent("random", s.params, s.context)
    results = [run_episode(spec, agent, "random", s) for spec in specs.values()]
    rates = tally(results).rates()
    assert rates["lc"] == 1.0          # it only picks admissible commands
    assert rates["sr"] <= 1 / 3 and rates["gcs"] < 0.5
    assert all(len(r.steps) == 12 or r.success for r in results)
    again = run_episode(specs["pick_and_place_simple"], agent, "random", s)
    assert [x.action for x in again.steps] == [x.action for x in results[0].steps]  # same seed, same episode


@pytest.mark.parametrize(("answers", "then", "reason", "check"), [
    ([], "", "invalid_streak", lambda st: all(x.action == "" for x in st)),
    ([], "x" * 10_000, "invalid_streak", lambda st: len(st[0].action) == 200 and len(st[0].raw) == 2000),
    ([RuntimeError("boom")] * 3, "", "invalid_streak", lambda st: st[0].error == "RuntimeError: boom"),
    ([], None, "invalid_streak", lambda st: st[0].action == "" and st[0].raw == "None"),
    ([], "look", "max_steps", lambda st: all(x.valid for x in st)),
    (["GO   TO  nowhere 1 "], "look", "max_steps", lambda st: st[0].action == "GO TO nowhere 1" and not st[0].valid),
])
def test_misbehaving_agents_become_invalid_actions_within_the_caps(data, specs, answers, then, reason, check):
    start = time.perf_counter()
    r = run_episode(specs["pick_and_place_simple"], Scripted(answers, then), "bad",
                    settings(data, max_steps=6, max_invalid_streak=3))
    assert time.perf_counter() - start < 60
    assert not r.success and r.end_reason == reason
    assert len(r.steps) == (3 if reason == "invalid_streak" else 6)
    assert check(r.steps)
    m = episode_metrics(r)
    invalid = [x for x in r.steps if not x.valid]
    assert all(x.observation == "Nothing happens." for x in invalid)
    assert m.valid == len(r.steps) - len(invalid)
    assert m.disoriented  # the same answer under the same feedback, again and again


def test_only_the_papers_stop_rules_apply_under_alfworlds_protocol(data, specs):
    params = EvalParams()
    assert (params.protocol, params.max_steps, params.loop_stop, params.max_invalid_streak) == (
        "muep-released", 30, False, None)
    r = run_episode(specs["pick_and_place_simple"], Scripted([], ""), "mute", settings(data))
    assert r.end_reason == "max_steps" and len(r.steps) == 30 and not any(x.valid for x in r.steps)
    assert episode_metrics(r).disoriented  # still counted for RDI: the same empty answer, the same feedback


def test_the_loop_stop_ends_an_episode_at_the_first_loop(data, specs):
    spec = specs["pick_and_place_simple"]
    looping = run_episode(spec, Scripted(["look", "inventory", "look", "inventory"], "look"), "loop",
                          settings(data, loop_stop=True))
    assert looping.end_reason == "loop" and [x.action for x in looping.steps] == ["look", "inventory"] * 2
    observations = [looping.initial_observation] + [x.observation for x in looping.steps]
    assert disoriented(observations, [x.action for x in looping.steps])
    assert not disoriented(observations[:-1], [x.action for x in looping.steps[:-1]])  # not one step earlier
    expert = run_episode(spec, build_agent("oracle", EvalParams(), AgentContext()), "oracle",
                         settings(data, loop_stop=True))
    assert expert.end_reason == "won"  # a plan never loops


@pytest.mark.parametrize(("script", "executed", "pattern"), [
    (["look", "look"], ["look"], "A-A"),
    (["", ""], [""], "A-A"),                                   # invalid answers repeat too
    (["look", "inventory", "look", "inventory"], ["look", "inventory", "look"], "A-B-A-B"),
    (["go to desk 1", "look", "look"], ["go to desk 1", "look"], "A-A"),
])
def test_the_released_protocol_stops_at_the_first_repeated_proposal_unexecuted(data, specs, script, executed, pattern):
    r = run_episode(specs["pick_and_place_simple"], Scripted(script, "examine desk 1"), "rep",
                    settings(data, protocol="muep-released"))
    assert r.end_reason == "loop" and [x.action for x in r.steps] == executed and r.stopped_action == script[-1]
    assert episode_metrics(r).disoriented  # counts for RDI: the stop fired
    walk = run_episode(specs["pick_and_place_simple"], Scripted(["look", "inventory", "look", "examine desk 1"] * 8),
                       "walk", settings(data, protocol="muep-released"))
    assert walk.end_reason == "max_steps" and len(walk.steps) == 30  # A-B-A-C is no repeat
    assert not episode_metrics(walk).disoriented


def test_the_released_grammar_speaks_put_in_on_and_arrives_at_numbered_locations(data, specs):
    spec = specs["pick_and_place_simple"]
    played = for_protocol(spec, PROTOCOLS["muep-released"])
    r = run_episode(spec, build_agent("oracle", EvalParams(), AgentContext()), "oracle",
                    settings(data, protocol="muep-released"))
    assert r.success and any(a.startswith("put ") and " in/on " in a for a in played.expert_actions)
    arrived = [x.observation for x in r.steps if x.action.startswith("go to ")]
    assert arrived and all(re.match(r"You arrive at loc \d+\. ", o) for o in arrived), arrived
    put = next(x for x in r.steps if x.action.startswith("put "))
    assert put.observation.startswith("You put the ") and " in/on the " in put.observation
    agent = Scripted(["look"])
    run_episode(spec, agent, "s", settings(data, protocol="muep-released", max_steps=1))
    assert "help" not in agent.seen[0].admissible and agent.seen[0].grammar == "muep-released"


def test_budget_exhaustion_ends_the_episode_without_an_action(data, specs):
    r = run_episode(specs["pick_and_place_simple"], Scripted(["look", AgentBudgetExhausted("cap")]), "capped",
                    settings(data))
    assert r.end_reason == "call_budget" and [x.action for x in r.steps] == ["look"]


def test_an_agent_that_cannot_start_fails_the_episode_only(data, specs):
    class Broken(Scripted):
        def reset(self, episode):
            raise OSError("model file vanished")

    r = run_episode(specs["pick_and_place_simple"], Broken(), "broken", settings(data))
    assert (r.end_reason, r.steps, r.success, r.error) == ("agent_error", (), False, "OSError: model file vanished")
    assert tally([r]).rates()["sr"] == 0.0 and tally([r]).rates()["lc"] is None


def test_unheated_object_placed_in_a_heat_task_gets_the_papers_two_thirds_from_the_real_game(data, specs):
    spec = specs["pick_heat_then_place_in_recep"]
    script = [a for a in spec.expert_actions if not a.startswith("heat ")]
    assert len(script) == len(spec.expert_actions) - 1
    r = run_episode(spec, Scripted(script), "no-heat", settings(data, max_steps=len(script)))
    assert all(x.valid for x in r.steps) and not r.success
    assert (r.goals_met, r.goals_total) == (2, 3)            # found, not heated, placed: the paper's 2/3
    assert (r.conditions_met, r.conditions_total) == (1, 3)  # in place; not heated; not "the same object heated and placed"
    rates = tally([r]).rates()
    assert rates["gcs"] == pytest.approx(2 / 3) and rates["gcs_alfworld"] == pytest.approx(1 / 3)


def test_the_agent_sees_task_history_admissible_commands_and_only_its_share(data, specs):
    spec = specs["pick_and_place_simple"]
    agent = Scripted(["look", "inventory"])
    run_episode(spec, agent, "s", settings(data, max_steps=3))
    first, third = agent.seen[0], agent.seen[2]
    assert "Your task is to" in first.text and first.step == 1 and first.history == ()
    assert first.instruction == spec.instruction and "look" in first.admissible and first.image is None
    assert [t.action for t in third.history] == ["look", "inventory"] and third.history[0].observation == first.text
    assert agent.episode.expert_actions == ()  # only the oracle sees the plan


def test_a_multimodal_agent_gets_the_rendered_state(data, specs):
    class Looker(Scripted):
        multimodal = True

    agent = Looker(["look"])
    run_episode(specs["look_at_obj_in_light"], agent, "mm", settings(data, max_steps=2, render_size=160))
    assert all(o.image is not None and o.image[:8] == b"\x89PNG\r\n\x1a\n" for o in agent.seen)


def test_a_batch_plays_every_agent_on_one_translation_per_scene_instance(data, specs, monkeypatch):
    """Two agents, three episodes of two scene instances: each instance is translated once for all six games, and
    the results equal the episodes played one by one."""
    from tasks.muep.textworld_env import GameEngine

    chosen = [specs["pick_and_place_simple"], specs["look_at_obj_in_light"], specs["pick_two_obj_and_place"]]
    assert len({s.scene for s in chosen}) == 2
    s = settings(data, max_steps=5)
    batch, = make_batches(chosen, [("oracle", "oracle"), ("random", "random")], batch_size=4)
    grouped = [chosen[0], chosen[2], chosen[1]]          # the episodes of a scene instance next to each other
    assert batch.episodes == grouped
    assert [(g[1], g[2]) for g in batch.scene_goals] == [(c.scene, c.task_type) for c in grouped]
    games = GameEngine()
    monkeypatch.setattr(eval_env, "_ENGINE", [games])
    out = run_batch(batch, s)
    assert games.translations == 2                      # one per scene instance, for 6 games
    assert [(r.agent, r.episode_id) for r in out.results] == [(a, c.episode_id) for c in grouped
                                                              for a in ("oracle", "random")]
    assert len(out.timings) == 6 and all(t.total_s >= t.load_s + t.game_s for t in out.timings)
    assert out.max_rss_mb > 0 and out.pid > 0
    alone = [run_episode(c, build_agent(a, s.params, s.context), a, s) for c in grouped for a in ("oracle", "random")]
    assert [r.to_json() for r in out.results] == [r.to_json() for r in alone]


@pytest.mark.dvc
@pytest.mark.textworld
def test_oracle_scores_sr_1_on_the_default_pipelines_test_splits(default_data):
    """The harness check on the default pipeline's own demonstrations (built by `dvc repro` in a copy)."""
    from tasks.muep.demo_reader import read_index

    params = EvalParams()
    specs = select(read_index(default_data / "data/muep/demos"), ["seen_test", "unseen_test"], params.episodes,
                   params.seed)
    s = EvalSettings(metadata_dir=str(default_data / "data/muep/metadata"), params=params)
    agent = build_agent("oracle", params, s.context)
    results = [run_episode(spec, agent, "oracle", s) for spec in specs]
    rates = tally(results).rates()
    assert len(results) > 0 and rates["sr"] == 1.0 and rates["lc"] == 1.0, \
        [(r.episode_id, r.end_reason) for r in results if not r.success]


def test_an_agent_that_listens_hears_how_the_episode_ended(data, specs):
    class Listener(Scripted):
        def finish(self, observation, won):
            self.ended = (observation.text, won, observation.step)

    spec = specs["pick_and_place_simple"]
    plan = for_protocol(spec, PROTOCOLS["muep-released"]).expert_actions
    agent = Listener(list(plan))
    r = run_episode(spec, agent, "listener", settings(data, protocol="muep-released"))
    assert r.success and agent.ended == (r.steps[-1].observation, True, len(plan) + 1)
    loser = Listener(["look", "look"])
    run_episode(spec, loser, "listener", settings(data, protocol="muep-released"))
    assert loser.ended[1] is False
