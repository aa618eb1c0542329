"""The fast TextWorld path of the demonstrations (``GameEngine``: one ``PddlEnv`` per process, one Fast Downward
translation per scene instance, memoised grammar parses) plays exactly the game a freshly built TextWorld game plays:
same observations, admissible commands, validity, ``won`` flags and facts at every step, for all six task types,
for right and wrong plans; and scene-grouped batching keeps every selected episode exactly once."""

from __future__ import annotations

import copy
from collections import Counter

import pandas as pd
import pytest
from test_demos import find_task, metadata_dir, planner, renderer, settings  # noqa: F401 - fixtures

from tasks.muep import textworld_fast
from tasks.muep.demos import (
    BATCHING,
    Batch,
    commands_from_plan,
    expect_games,
    fingerprint,
    make_batches,
    run_episode,
    scene_context,
    select_episodes,
)
from tasks.muep.pddl import Problem
from tasks.muep.textworld_env import GameEngine, game_data, load_game, scene_key
from tasks.muep.textworld_fast import argv_guard, translate_scene
from tasks.muep.vocab import TASK_TYPES

pytestmark = pytest.mark.textworld


def _problem(metadata_dir, task: dict, name: str = "p") -> Problem:
    ctx = scene_context(str(metadata_dir), task["scene"])
    spec = TASK_TYPES[task["task_type"]]
    target = task["receptacle_type"] if spec.needs_receptacle else task["light_type"]
    return Problem(name, ctx.receptacles, ctx.instances, task["task_type"], task["object_type"], target)


def _commands(metadata_dir, planner, task: dict) -> list[str]:
    problem = _problem(metadata_dir, task)
    plan = planner.solve(problem.strips())
    assert plan.status == "solved", plan.detail
    ctx = scene_context(str(metadata_dir), task["scene"])
    return commands_from_plan(plan.steps, problem.names, "alfworld-0.4", {r.name: r.location for r in ctx.receptacles})


def _facts(env) -> list[str]:
    """The game's facts, without the derived goal predicates Fast Downward adds (``new-axiom@N``): a shared
    translation has one per goal of the scene; no grammar rule and no world state reads them."""
    return sorted(str(f) for f in env.state["_facts"] if not f.name.startswith("new-axiom@"))


def _snapshot(env) -> dict:
    state = env.state
    return {"feedback": state.feedback, "admissible": state["admissible_commands"], "won": bool(state["won"]),
            "facts": _facts(env)}


def fresh_trace(problem: Problem, instruction: str, commands: list[str]) -> list[dict]:
    """The reference: TextWorld exactly as shipped (a new PddlEnv, its own four translations, no memo, no patch)."""
    import textworld
    from textworld.envs.pddl import PddlEnv

    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, facts=False, won=True))
    names = problem.names
    with argv_guard():
        env.load(game_data(problem, instruction, "alfworld-0.4"))
        for key, info in env._entity_infos.items():
            if key in names:
                info.name = names[key]
        env.reset()
        trace = [_snapshot(env)]
        for command in commands:
            valid = command in env.state["_valid_commands"]
            env.step(command)
            trace.append(_snapshot(env) | {"valid": valid})
    # PddlEnv never unloads its copy of Fast Downward's library (~4 MB). It is left loaded: unloading it here
    # (fast_downward.close_lib) made a later load of a fresh copy crash the process (a segfault in dlopen when this
    # module ran alone)
    return trace


def engine_trace(engine: GameEngine, problem: Problem, instruction: str, commands: list[str]) -> list[dict]:
    game = engine.load(problem, instruction)
    game.reset()
    trace = [_snapshot(game.env)]
    for i, command in enumerate(commands, 1):
        step = game.step(command, i)
        trace.append(_snapshot(game.env) | {"valid": step.valid})
        assert step.observation == trace[-1]["feedback"] and step.won == trace[-1]["won"]
    return trace


@pytest.fixture(scope="module")
def tasks_by_type(metadata_dir) -> dict[str, dict]:
    return {t: find_task(metadata_dir, t) for t in sorted(TASK_TYPES)}


@pytest.fixture(scope="module")
def engine(metadata_dir, tasks_by_type) -> GameEngine:
    """One engine for the module that expects every task's goal, as a worker does for a batch."""
    games = GameEngine()
    assert games.fast, textworld_fast.unsupported()
    games.expect(_problem(metadata_dir, t) for t in tasks_by_type.values())
    return games


@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_engine_game_is_the_fresh_game(task_type, metadata_dir, planner, tasks_by_type, engine):
    task = tasks_by_type[task_type]
    problem, commands = _problem(metadata_dir, task), _commands(metadata_dir, planner, task)
    fresh = fresh_trace(problem, task["instruction"], commands)
    fast = engine_trace(engine, problem, task["instruction"], commands)
    assert fast == fresh
    assert fresh[-1]["won"] and all(s["valid"] for s in fresh[1:])


def test_one_translation_per_scene_instance(metadata_dir, planner, tasks_by_type):
    games = GameEngine()
    problems = [_problem(metadata_dir, t, f"p{i}") for i, t in enumerate(tasks_by_type.values())]
    games.expect(problems)
    for task, problem in zip(tasks_by_type.values(), problems, strict=True):
        game = games.load(problem, task["instruction"])
        game.reset()
    assert games.translations == len({scene_key(p) for p in problems}) < len(problems)


def test_wrong_plans_are_refused_or_not_won_as_in_a_fresh_game(metadata_dir, planner, tasks_by_type, engine):
    heat = tasks_by_type["pick_heat_then_place_in_recep"]
    commands = _commands(metadata_dir, planner, heat)
    unheated = [c for c in commands if not c.startswith("heat ")]  # places a cold object
    two = tasks_by_type["pick_two_obj_and_place"]
    two_commands = _commands(metadata_dir, planner, two)
    last_move = max(i for i, c in enumerate(two_commands) if c.startswith("move "))
    short_of_two = two_commands[:last_move]  # the last object is never placed
    for task, wrong in ((heat, unheated), (two, short_of_two)):
        problem = _problem(metadata_dir, task)
        fresh = fresh_trace(problem, task["instruction"], wrong)
        assert engine_trace(engine, problem, task["instruction"], wrong) == fresh
        assert not any(s["won"] for s in fresh)
    bogus = commands[:1] + ["take the moon from the sky"] + commands[1:]  # refused, then the plan goes on
    problem = _problem(metadata_dir, heat)
    fresh = fresh_trace(problem, heat["instruction"], bogus)
    assert engine_trace(engine, problem, heat["instruction"], bogus) == fresh
    assert not fresh[2]["valid"] and fresh[2]["feedback"] == "Nothing happens." and fresh[-1]["won"]


def test_run_episode_with_the_engine_equals_the_plain_path(metadata_dir, planner, renderer, tasks_by_type, tmp_path):
    s = settings(metadata_dir, tmp_path)
    games = GameEngine()
    games.expect(_problem(metadata_dir, t) for t in tasks_by_type.values())
    for task in tasks_by_type.values():
        plain, plain_samples, _ = run_episode(task, s, planner, renderer, "b")
        fast, fast_samples, _ = run_episode(task, s, planner, renderer, "b", games)
        timings = ("plan_s", "load_s", "steps_s", "render_s", "write_s")
        assert {k: v for k, v in vars(fast).items() if k not in timings} == \
            {k: v for k, v in vars(plain).items() if k not in timings}
        assert fast.status == "ok", fast.detail
        assert [(x.key, x.image, x.meta) for x in fast_samples] == [(x.key, x.image, x.meta) for x in plain_samples]


def test_a_replaced_game_refuses_to_play(metadata_dir, tasks_by_type):
    games = GameEngine()
    first, second = list(tasks_by_type.values())[:2]
    old = games.load(_problem(metadata_dir, first), first["instruction"])
    old.reset()
    new = games.load(_problem(metadata_dir, second), second["instruction"])
    assert new.env is old.env  # one PddlEnv (one copy of Fast Downward's library) for all games
    with pytest.raises(RuntimeError, match="replaced"):
        old.step("look", 1)
    new.reset()


def test_an_announced_goal_that_cannot_be_translated_does_not_break_the_others(metadata_dir, tasks_by_type):
    task = tasks_by_type["pick_and_place_simple"]
    problem = _problem(metadata_dir, task)
    broken = Problem("broken", problem.receptacles, problem.instances, task["task_type"], "NoSuchThing",
                     problem.target_type)  # NoSuchThingType is not an object of the problem: FD cannot parse it
    games = GameEngine()
    games.expect([broken, problem])
    game = games.load(problem, task["instruction"])
    game.reset()
    assert games.translations == 2  # the failed combined one, then this goal alone
    assert game.env.state["admissible_commands"]
    games.load(problem, task["instruction"]).reset()
    assert games.translations == 2  # kept for the scene; the failed combination is not tried again


def test_scene_translation_differs_only_in_the_goal_section(metadata_dir, tasks_by_type):
    task = tasks_by_type["pick_clean_then_place_in_recep"]
    problem = _problem(metadata_dir, task)
    goals = [problem.adl_goal(), Problem("q", problem.receptacles, problem.instances, "pick_and_place_simple",
                                         problem.object_type, problem.target_type).adl_goal()]
    with argv_guard():
        shared = translate_scene(game_data(problem, "x", "alfworld-0.4")["pddl_domain"],
                                 lambda g: problem.adl("loc_start", goal=g), goals)
    a, b = shared.sas_for(goals[0]), shared.sas_for(goals[1])
    assert a != b and shared.goal_fact[goals[0]] != shared.goal_fact[goals[1]]
    cut = lambda sas: sas[:sas.index("begin_goal")] + sas[sas.index("end_goal"):]  # noqa: E731
    assert cut(a) == cut(b) == cut(shared.sas)


def test_parse_memo_hands_out_copies_and_stays_bounded():
    calls = []

    def parse(text, rule_name=None):
        calls.append(text)
        return [{"parsed": text}]

    memo = textworld_fast._ParseMemo(parse, size=2)
    first = memo("a", rule_name="r")
    first[0]["parsed"] = "mutated by the caller"
    assert memo("a", rule_name="r") == [{"parsed": "a"}] and calls == ["a"]
    memo("b", rule_name="r"), memo("c", rule_name="r")
    assert len(memo.results) == 2
    memo("a", rule_name="r")
    assert calls == ["a", "b", "c", "a"]


def test_parse_memo_shares_the_results_of_the_shared_rules():
    memo = textworld_fast._ParseMemo(lambda text, rule_name=None: [["predicate", text]], shared=frozenset({"q"}))
    first, second = memo("a", rule_name="q"), memo("a", rule_name="q")
    assert first == second and first is not second and first[0] is second[0]  # a new list of the same objects
    first.append("changed by the caller")
    assert memo("a", rule_name="q") == [["predicate", "a"]]
    assert memo("a", rule_name="other")[0] is not memo("a", rule_name="other")[0]  # any other rule: copies


def test_a_game_builds_one_initial_state_for_load_and_its_first_reset(metadata_dir, planner, tasks_by_type, engine,
                                                                     monkeypatch):
    """TextWorld builds a ``PddlState`` in ``load`` and another in ``reset``; the engine gives the first ``reset``
    the untouched one ``load`` built, and any later ``reset`` a new one -- and plays the fresh game either way."""
    from textworld.envs.pddl import logic as pddl_logic

    built = []
    original = pddl_logic.PddlState.__init__

    def spy(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(pddl_logic.PddlState, "__init__", spy)
    task = tasks_by_type["pick_and_place_simple"]
    problem, commands = _problem(metadata_dir, task), _commands(metadata_dir, planner, task)
    game = engine.load(problem, task["instruction"])
    assert len(built) == 1
    game.reset()
    assert len(built) == 1 and game.env._pddl_state is built[0]
    for i, command in enumerate(commands, 1):
        game.step(command, i)
    assert game.won()
    game.reset()  # after play: a new state, back at the start
    assert len(built) == 2 and not game.won()  # (its play equals the fresh game's: test_engine_game_is_the_fresh_game)


def test_later_games_of_a_scene_take_its_initial_facts_and_build_textworld_s_state(metadata_dir, planner,
                                                                                   tasks_by_type, engine, monkeypatch):
    """Mechanism 7: the initial state's facts are read back from Fast Downward once per scene translation; a later
    game's state, built with them, is TextWorld's own ``PddlState`` of that problem -- the same facts, added in the
    same order (so every set iterates alike), the same variables -- and its game plays as a freshly built one."""
    from textworld.envs.pddl import logic as pddl_logic

    reads = []
    read = textworld_fast.initial_facts
    monkeypatch.setattr(textworld_fast, "initial_facts", lambda state: reads.append(state) or read(state))
    by_scene: dict[str, list[dict]] = {}
    for task in tasks_by_type.values():
        by_scene.setdefault(task["scene"], []).append(task)
    first, second = next(tasks for tasks in by_scene.values() if len(tasks) > 1)[:2]
    engine.load(_problem(metadata_dir, first), first["instruction"]).reset()
    assert engine._translation(_problem(metadata_dir, first), _problem(metadata_dir, first).adl_goal()).initial
    before = len(reads)
    problem, commands = _problem(metadata_dir, second), _commands(metadata_dir, planner, second)
    game = engine.load(problem, second["instruction"])
    assert len(reads) == before  # the scene's facts, not a new read
    state = game.env._pddl_state
    build = pddl_logic.PddlState
    with engine._running(engine._current[0]):  # the same translation (pddl2sas), built by TextWorld in full
        plain = build(state.downward_lib, state.pddl_problem, state._logic)

    def layout(s) -> tuple:
        return ({k: list(v) for k, v in s._facts.items()}, dict(s._vars_by_name),
                {k: list(v) for k, v in s._vars_by_type.items()}, dict(s._var_counts), s.name2type)

    assert layout(state) == layout(plain) and state.downward_lib is plain.downward_lib
    game.reset()
    trace = [_snapshot(game.env)]
    for i, command in enumerate(commands, 1):
        step = game.step(command, i)
        trace.append(_snapshot(game.env) | {"valid": step.valid})
    assert trace == fresh_trace(problem, second["instruction"], commands) and trace[-1]["won"]
    game.reset()  # a reset after play builds its state from the kept facts too: back at the start
    assert len(reads) == before and _snapshot(game.env) == trace[0]


def test_a_step_lists_its_state_s_facts_once_and_plays_as_the_fresh_game(metadata_dir, planner, tasks_by_type, engine,
                                                                          monkeypatch):
    """Mechanism 8: while TextWorld gathers a step's infos (one derivation context per applicable action, each with
    the state's facts), the facts are walked once; the game still plays as a freshly built one."""
    import textworld.logic

    walks = []
    plain = textworld.logic.State.facts

    def counted(state):
        walks.append(state)
        return plain.fget(state)

    monkeypatch.setattr(textworld.logic.State, "facts", property(counted))
    task = tasks_by_type["pick_clean_then_place_in_recep"]
    problem, commands = _problem(metadata_dir, task), _commands(metadata_dir, planner, task)
    game = engine.load(problem, task["instruction"])
    game.reset()
    trace = [_snapshot(game.env)]
    for i, command in enumerate(commands, 1):
        before = len(walks)
        step = game.step(command, i)
        assert len(walks) - before <= 2  # the feedback's context, and the one list for all the actions
        assert len(game.env.state["_valid_actions"]) > 10
        trace.append(_snapshot(game.env) | {"valid": step.valid})
    assert textworld.logic.State.facts.fget is counted  # put back
    assert trace == fresh_trace(problem, task["instruction"], commands) and trace[-1]["won"]


def test_pinned_facts_are_the_state_s_and_a_change_drops_them():
    import textworld.logic
    from textworld.logic import Proposition, Variable

    pinned = textworld_fast._PinnedFacts(textworld.logic.State.facts)
    a, b, c = (Proposition("at", [Variable(n, "o"), Variable("room", "r")]) for n in ("a", "b", "c"))
    logic = textworld.logic.GameLogic()
    state = textworld.logic.State(logic, [a, b])
    other = textworld.logic.State(logic, [c])
    env = type("Env", (), {})()
    env._pddl_state = state
    add = pinned.changing(textworld.logic.State.add_fact)
    seen = {}

    def gather(e):
        seen["first"] = list(pinned.facts(state))
        assert pinned.pinned[id(state)][1] == seen["first"]  # one list, handed out as it is
        seen["other"] = list(pinned.facts(other))  # another state is walked as usual
        add(state, c)  # a change (nothing in TextWorld makes one here) drops the list
        seen["after"] = list(pinned.facts(state))
        return "done"

    assert pinned.gathering(gather)(env) == "done" and not pinned.pinned
    assert seen["first"] == list(textworld.logic.State.facts.fget(textworld.logic.State(logic, [a, b])))
    assert seen["other"] == [c] and set(seen["after"]) == {a, b, c}


def test_fixed_texts_are_derived_once_per_scene_and_are_the_fresh_game_s(metadata_dir, planner, tasks_by_type, engine):
    """Command texts that read only facts no action changes are derived once for the games of a scene instance:
    the second game of a scene finds its commands derived, and plays exactly as a freshly built game. (The module's
    engine: every new TextWorld environment loads a copy of Fast Downward's library that is never unloaded.)"""
    by_scene: dict[str, list[dict]] = {}
    for task in tasks_by_type.values():
        by_scene.setdefault(task["scene"], []).append(task)
    first, second = next(tasks for tasks in by_scene.values() if len(tasks) > 1)[:2]
    engine.load(_problem(metadata_dir, first), first["instruction"]).reset()
    problem, commands = _problem(metadata_dir, second), _commands(metadata_dir, planner, second)
    game = engine.load(problem, second["instruction"])
    texts = engine._texts[1]
    game.reset()
    assert texts.hits > 0  # the first game's command texts, reused at the second's first step
    trace = [_snapshot(game.env)]
    for i, command in enumerate(commands, 1):
        step = game.step(command, i)
        trace.append(_snapshot(game.env) | {"valid": step.valid})
    assert trace == fresh_trace(problem, second["instruction"], commands)
    assert texts.fixed["go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]"]
    assert not texts.fixed["#GotoLocation.feedback#"]  # what the agent sees there changes


def test_only_texts_of_unchanging_facts_and_plain_reads_are_fixed(metadata_dir, tasks_by_type, engine):
    task = tasks_by_type["pick_and_place_simple"]
    engine.load(_problem(metadata_dir, task), task["instruction"]).reset()
    texts = engine._texts[1]
    changing = texts.changing
    assert {"atlocation", "holds", "opened", "inreceptacle"} <= changing and "receptacleatlocation" not in changing
    assert any(name.startswith("new-axiom@") for name in changing)  # derived predicates change with the state
    with textworld_fast.patched(engine._pddl2sas, engine._grammar):
        assert texts._is_fixed("take {o} from {r}")
        assert texts._is_fixed("[{r.name | receptacleatlocation(r:receptacle, lend:location)}]")
        assert not texts._is_fixed("[{o.name | inreceptacle(o:object, r:receptacle)}]")  # objects move
        assert not texts._is_fixed("{o.name.upper()}")  # a call, not a plain read
        assert not texts._is_fixed("#no_such_rule#")


@pytest.mark.parametrize("sentence", ["Put a clean apple in the fridge.", "Examine the mug with the desklamp, then stop.",
                                      "Look at #look# then {o.name}."])
def test_grammar_template_parse_equals_the_full_document_parse(sentence):
    from textworld.envs.pddl import logic as pddl_logic

    from tasks.muep.textworld_env import GOAL_PLACEHOLDER, _grammar

    template = textworld_fast.GrammarTemplate(_grammar("muep"), GOAL_PLACEHOLDER)
    assert template.usable and template.rule == "task"
    full = pddl_logic._parse_and_convert(_grammar("muep").replace(GOAL_PLACEHOLDER, sentence), rule_name="pddlStart")
    for _ in range(2):  # the second time from the memoised template
        actions, grammar = template.parse(sentence, pddl_logic._parse_and_convert)
        assert {k: vars(a) for k, a in actions.items()} == {k: vars(a) for k, a in full[0].items()}
        assert repr(dict(grammar._rules)) == repr(dict(full[1]._rules))
    assert not textworld_fast.GrammarTemplate(GOAL_PLACEHOLDER * 2, GOAL_PLACEHOLDER).usable


def test_a_sentence_that_breaks_the_grammar_breaks_it_the_same_way():
    import json

    from textworld.envs.pddl import logic as pddl_logic

    from tasks.muep.textworld_env import GOAL_PLACEHOLDER, _grammar

    sentence = 'Say "hello".'
    with pytest.raises(json.JSONDecodeError):
        pddl_logic._parse_and_convert(_grammar("muep").replace(GOAL_PLACEHOLDER, sentence), rule_name="pddlStart")
    with pytest.raises(json.JSONDecodeError):
        textworld_fast.GrammarTemplate(_grammar("muep"), GOAL_PLACEHOLDER).parse(sentence, pddl_logic._parse_and_convert)


def test_other_textworld_versions_fall_back_to_the_plain_path(metadata_dir, tasks_by_type, monkeypatch):
    real = textworld_fast.metadata.version
    try:
        with monkeypatch.context() as m:
            m.setattr(textworld_fast.metadata, "version", lambda dist: "9.9.9" if dist == "textworld" else real(dist))
            textworld_fast.unsupported.cache_clear()
            assert "textworld 9.9.9" in textworld_fast.unsupported()
            games = GameEngine()
            assert not games.fast
            task = tasks_by_type["pick_and_place_simple"]
            game = games.load(_problem(metadata_dir, task), task["instruction"])
            game.reset()
            assert game.env.state["admissible_commands"] and games._env is None  # built by load_game
            with pytest.raises(RuntimeError, match="cannot be used"):
                with textworld_fast.patched(lambda *a, **k: None):
                    pass
    finally:
        textworld_fast.unsupported.cache_clear()
    assert textworld_fast.unsupported() is None


def test_patches_are_undone_after_each_call(metadata_dir, tasks_by_type, engine):
    import fast_downward
    import textworld.logic
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.envs.pddl import textgen

    from textworld.envs.pddl.pddl import PddlEnv

    def current():
        return (fast_downward.pddl2sas, textworld.logic._parse_and_convert, textgen._parse_and_convert,
                textgen.copy_context, pddl_logic._parse_and_convert, pddl_logic.PddlState,
                textgen.ContextSensitiveGrammar.derive, PddlEnv._gather_infos, textworld.logic.State.facts,
                textworld.logic.State.add_fact, textworld.logic.State.remove_fact)

    before = current()
    task = tasks_by_type["look_at_obj_in_light"]
    engine.load(_problem(metadata_dir, task), task["instruction"]).reset()
    assert current() == before
    load_game(_problem(metadata_dir, task), task["instruction"]).reset()  # the plain path still works


# --------------------------------------------------------------------------------------------------------------------
# Scene-grouped batches


def _selection(n_scenes: int = 5, per_scene: int = 7) -> pd.DataFrame:
    rows = []
    for s in range(n_scenes):
        for k in range(per_scene):
            rows.append({"task_id": f"t{s}-{k}", "scene": f"FloorPlan{s + 1}", "task_type": "pick_and_place_simple",
                         "object_type": f"Obj{k % 3}", "receptacle_type": "CounterTop", "light_type": None,
                         "split": ("train", "seen_test", "unseen_test")[(s + k) % 3 if s < 3 else 2]})
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=0)
    return frame.sort_values(["split"], kind="stable").reset_index(drop=True)


def test_batches_group_a_scene_instance_and_keep_every_episode_once():
    selected = _selection()
    batches = make_batches(selected, batch_size=4)
    ids = [t["task_id"] for b in batches for t in b.tasks]
    assert Counter(ids) == Counter(selected.task_id)
    assert all(0 < len(b.tasks) <= 4 and {t["split"] for t in b.tasks} == {b.split} for b in batches)
    assert len({b.batch_id for b in batches}) == len(batches)
    for split in ("train", "seen_test", "unseen_test"):  # within a split, one scene's episodes are contiguous
        in_order = [t for b in sorted((b for b in batches if b.split == split), key=lambda b: b.batch_id)
                    for t in b.tasks]
        scenes = [t["scene"] for t in in_order]
        assert scenes == sorted(scenes, key=scenes.index)
        for scene in set(scenes):  # and in selection order
            chosen = [t for t in selected[(selected.split == split) & (selected.scene == scene)].task_id]
            assert [t["task_id"] for t in in_order if t["scene"] == scene] == chosen
    for b in batches:  # every goal of the batch's scenes, from any split
        wanted = {(r.scene, r.task_type, r.object_type, r.receptacle_type)
                  for r in selected[selected.scene.isin({t["scene"] for t in b.tasks})].itertuples()}
        assert set(b.scene_goals) == wanted
    first_scenes = [b.tasks[0]["scene"] for b in batches]
    assert first_scenes == sorted(first_scenes)  # submitted scene instance by scene instance
    assert [(b.batch_id, [t["task_id"] for t in b.tasks]) for b in make_batches(selected, 4)] == \
        [(b.batch_id, [t["task_id"] for t in b.tasks]) for b in batches]  # deterministic


def _batches(scenes_per_batch: list[list[str]]) -> list[Batch]:
    return [Batch(f"train-{i:05d}", "train", [{"scene": s, "task_id": f"{i}-{k}"} for k, s in enumerate(scenes)])
            for i, scenes in enumerate(scenes_per_batch)]


def test_runs_keep_the_batches_of_a_scene_instance_on_one_worker():
    """A run holds consecutive batches; it is cut where they share no scene instance, and a longer chain into
    near-equal runs of at most ``most`` batches (fewer when there would not be four runs per worker)."""
    from tasks.muep.demos import scene_runs

    layout = [["A"], ["A", "B"], ["B"], ["C"], ["C"], ["D"]] + [["E"]] * 10 + [["F", "G"]]
    batches = _batches(layout)
    runs = scene_runs(batches, workers=1, most=4)
    assert [b for run in runs for b in run] == batches  # every batch once, in order
    assert [[b.batch_id[-2:] for b in run] for run in runs] == [
        ["00", "01", "02"], ["03", "04"], ["05"], ["06", "07", "08", "09"], ["10", "11", "12"], ["13", "14", "15"],
        ["16"]]
    for run in runs:  # a run never splits where no scene is shared, and never mixes unrelated batches
        for before, batch in zip(run, run[1:], strict=False):
            assert {t["scene"] for t in before.tasks} & {t["scene"] for t in batch.tasks}
    assert max(len(r) for r in scene_runs(batches, workers=2, most=8)) == 2  # 17 batches: 4 runs a worker
    assert scene_runs([], workers=2) == []


def test_fingerprint_names_the_batching(metadata_dir, tmp_path, monkeypatch):
    """Batches cut another way (another size, another scheme) must never be mixed in on a resume."""
    from tasks.muep import demos

    selected = pd.DataFrame({"task_id": ["a", "b"]})
    s = settings(metadata_dir, tmp_path)
    now = fingerprint(selected, s, {"batch_size": 8})
    assert now != fingerprint(selected, s, {"batch_size": 4})
    monkeypatch.setattr(demos, "BATCHING", BATCHING + "-other")
    assert fingerprint(selected, s, {"batch_size": 8}) != now


def test_expect_games_announces_the_posable_goals_of_the_batch_scenes(metadata_dir, tasks_by_type):
    tasks = list(tasks_by_type.values())
    batch = Batch("train-00000", "train", tasks[:1], [(t["scene"], t["task_type"], t["object_type"],
                                                       t["receptacle_type"] or t["light_type"]) for t in tasks]
                  + [(tasks[0]["scene"], "pick_and_place_simple", "Television", "CounterTop")])
    games = GameEngine()
    expect_games(games, batch, str(metadata_dir))
    announced = {g for goals in games._expected.values() for g in goals}
    assert announced == {_problem(metadata_dir, t).adl_goal() for t in tasks}  # the Television one is not posable


def test_selection_then_batches_is_deterministic(metadata_dir):
    scenes = pd.read_parquet(metadata_dir / "scenes.parquet")
    tasks = pd.DataFrame([find_task(metadata_dir, t) for t in sorted(TASK_TYPES)] * 2)
    tasks["task_id"] = [f"t{i}" for i in range(len(tasks))]
    picked = select_episodes(tasks.drop(columns="split"), scenes, None, 0)
    a, b = make_batches(picked, 3), make_batches(copy.deepcopy(picked), 3)
    assert [[t["task_id"] for t in x.tasks] for x in a] == [[t["task_id"] for t in x.tasks] for x in b]


def test_a_batch_translates_each_scene_instance_once(metadata_dir, planner, tasks_by_type, tmp_path, monkeypatch):
    from tasks.muep import demos
    from tasks.muep.demos import prepare_output, run_batch

    games = GameEngine()
    monkeypatch.setitem(demos._WORKER, "planner", planner)
    monkeypatch.setitem(demos._WORKER, "games", games)
    selected = pd.DataFrame(list(tasks_by_type.values()))
    out = tmp_path / "demos"
    prepare_output(out, "fp")
    records = [r for b in make_batches(selected, batch_size=2) for r in run_batch(b, settings(metadata_dir, out))[0]]
    assert {r.status for r in records} == {"ok"} and len(records) == len(selected)
    assert games.translations == selected.scene.nunique()
