"""ALFWorld's game archives (carried in tasks/muep/alfworld/): reading them, failing clearly on bad input, ALFWorld's
names, and its evaluation games as splits whose expert plans replay to a win in our TextWorld engine."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from core.errors import DataError
from core.io import atomic_dir
from tasks.muep import alfworld_games
from tasks.muep.alfworld_games import (
    decode_location,
    demangle_names,
    parse_game,
    read_games,
    unmangle,
)
from tasks.muep.alfworld_splits import (
    SPLITS,
    PlaySettings,
    clear_scene_cache,
    expert_commands,
    game_metadata,
    places_object,
    play_game,
    scene_of,
    select_games,
)
from tasks.muep.metadata import write_tables
from tasks.muep.vocab import TASK_TYPES


@pytest.fixture(scope="module")
def valid_games():
    return read_games(alfworld_games.VALID_ARCHIVE)


def test_the_archives_hold_alfworlds_test_games(valid_games):
    counts = Counter(g.split for g in valid_games)
    assert counts == {"valid_seen": 140, "valid_unseen": 134}
    per_type = {s: Counter(g.task_type for g in valid_games if g.split == s) for s in counts}
    # ALFWorld's per-type sizes (the paper's quoted 52.94 % = 9 / 17 pick-two games of #Unseen)
    assert per_type["valid_unseen"]["pick_two_obj_and_place"] == 17
    assert per_type["valid_seen"]["pick_two_obj_and_place"] == 24
    assert {g.floorplan for g in valid_games if g.split == "valid_unseen"} == {10, 219, 308, 424}
    assert len({g.trial for g in valid_games}) == 274


def test_walkthrough_names_are_the_games_names(valid_games):
    """ALFWorld's demangling rule gives exactly the names its walkthroughs use, in all 274 games."""
    for game in valid_games:
        names = {r.name for r in game.receptacles} | {o.name for o in game.objects}
        for cmd in game.walkthrough:
            for word in ("go to ", "open ", "use "):
                if cmd.startswith(word):
                    assert cmd[len(word):] in names, (game.trial, cmd)
            if cmd.startswith("take "):
                obj, rec = cmd[len("take "):].split(" from ")
                assert obj in names and rec in names, (game.trial, cmd)


def test_names_poses_and_ids():
    ids = ["Cabinet_bar__plus_00_dot_10_bar_x", "Cabinet_bar__minus_00_dot_20_bar_x", "Sink_bar_1_bar_2_bar_SinkBasin",
           "Sink_bar_1_bar_2", "agent1"]
    names = demangle_names(ids)
    # sorted ids take the numbers from the largest down (ALFWorld's Demangler); basins get their own prefix
    assert names["cabinet_bar__minus_00_dot_20_bar_x"] == "cabinet 2"
    assert names["cabinet_bar__plus_00_dot_10_bar_x"] == "cabinet 1"
    assert names["sink_bar_1_bar_2_bar_sinkbasin"] == "sinkbasin 1" and names["sink_bar_1_bar_2"] == "sink 1"
    assert "agent1" not in names
    assert unmangle("Cabinet_bar__minus_01_dot_55_bar__plus_00_dot_50") == "Cabinet|-01.55|+00.50"
    assert decode_location("loc_bar__minus_6_bar_2_bar_3_bar_60") == (-1.5, 0.5, 270.0, 60.0)
    assert decode_location("loc|5|0|1|30") == (1.25, 0.0, 90.0, 30.0)


def test_two_parent_objects_and_initial_marks_are_kept(valid_games):
    multi = [o for g in valid_games for o in g.objects if len(o.parents) > 1]
    cold = [o for g in valid_games for o in g.objects if "isCool" in o.marks]
    assert len(multi) > 100 and all(len(set(o.parents)) == len(o.parents) for o in multi)
    assert cold and all(o.parents[0].startswith("fridge") for o in cold)


def test_a_changed_archive_is_refused_by_its_checksum(tmp_path, monkeypatch):
    bad = tmp_path / alfworld_games.VALID_ARCHIVE.name
    data = bytearray(alfworld_games.VALID_ARCHIVE.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"{bad}.*does not match its SHA-256"):
        read_games(bad)
    with pytest.raises(DataError, match="is missing"):
        read_games(tmp_path / "json_2.1.1_train.tar.xz")


def test_a_corrupt_archive_names_the_file(tmp_path, monkeypatch):
    """A truncated archive that passes the checksum (say, SHA256SUMS was updated with it) still fails clearly."""
    bad = tmp_path / "json_2.1.1_valid.tar.xz"
    bad.write_bytes(alfworld_games.VALID_ARCHIVE.read_bytes()[:100_000])
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    monkeypatch.setattr(alfworld_games, "_checksums", lambda: {bad.name: digest})
    with pytest.raises(DataError, match=rf"cannot read the ALFWorld archive {bad}"):
        read_games(bad)


def _archive_with(tmp_path: Path, monkeypatch, members: dict[str, bytes]) -> Path:
    path = tmp_path / "json_2.1.1_valid.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(alfworld_games, "_checksums", lambda: {path.name: digest})
    return path


def test_a_malformed_or_missing_game_names_the_file(tmp_path, monkeypatch, valid_games):
    member = valid_games[0].member
    with tarfile.open(alfworld_games.VALID_ARCHIVE) as tar:
        raw = tar.extractfile(member).read()
    path = _archive_with(tmp_path, monkeypatch, {member: b"{not json"})
    with pytest.raises(DataError, match=rf"{path}:{member} is not an ALFWorld game file"):
        read_games(path)
    path = _archive_with(tmp_path, monkeypatch, {member: raw})
    games = read_games(path)
    assert len(games) == 1
    with pytest.raises(DataError, match=rf"{path} does not hold the expected games \(valid_seen: 1 of 140"):
        alfworld_games.check_counts(games, path, ("valid_seen", "valid_unseen"))
    with pytest.raises(DataError, match="task directory 'bogus' is not"):
        parse_game("valid_seen/bogus/trial_T1/game.tw-pddl", raw)


def test_atomic_dir_keeps_the_old_folder_on_failure(tmp_path):
    out = tmp_path / "alfworld"
    with atomic_dir(out) as tmp:
        (tmp / "episodes.parquet").write_text("one")
    with pytest.raises(RuntimeError), atomic_dir(out) as tmp:
        (tmp / "episodes.parquet").write_text("half")
        raise RuntimeError("a game failed")
    assert (out / "episodes.parquet").read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alfworld"]  # nothing half-written left beside it


def test_the_default_slice_is_one_game_per_type_and_split(valid_games):
    picked = select_games(valid_games, 6)
    assert Counter((g.split, g.task_type) for g in picked) == {(s, t): 1 for s in ("valid_seen", "valid_unseen")
                                                                for t in TASK_TYPES}
    assert [g.trial for g in select_games(list(reversed(valid_games)), 6)] == [g.trial for g in picked]
    assert len(select_games(valid_games, None)) == 274
    assert len(select_games(valid_games, 7)) == 14


def test_walkthroughs_in_either_grammar(valid_games):
    game = next(g for g in valid_games if g.task_type == "pick_and_place_simple")
    moves = [c for c in game.walkthrough if c.startswith("move ")]
    assert moves and expert_commands(game.walkthrough, "alfworld-0.4") == list(game.walkthrough)
    muep = expert_commands(game.walkthrough, "muep")
    assert [c for c in muep if c.startswith("put ")] == [c.replace("move ", "put ", 1).replace(" to ", " in/on ")
                                                          for c in moves]
    # ALFWorld's artifact: eight evaluation walkthroughs win without putting the object down
    assert sum(not places_object(g) for g in valid_games) == 8


@pytest.mark.textworld
@pytest.mark.parametrize("grammar", ["alfworld-0.4", "muep"])
def test_expert_plans_win_in_our_engine(valid_games, grammar, tmp_path):
    """One game per task type and split, rebuilt from the written scene tables as the evaluation rebuilds it, and the
    eight games whose walkthrough wins without placing the object (their second inReceptacle fact is kept)."""
    from tasks.muep.planner import PlannerWorker
    from tasks.muep.textworld_env import GameEngine

    games = select_games(valid_games, 6)
    if grammar == "alfworld-0.4":
        games += [g for g in valid_games if not places_object(g)][:3]
    write_tables([game_metadata(g) for g in games], tmp_path)
    clear_scene_cache()
    settings = PlaySettings(grammar, "gbf", 20.0, 40)
    engine = GameEngine()
    with PlannerWorker() as planner:
        for game in games:
            record, _ = play_game(game, str(tmp_path), settings, engine, planner)
            assert record.status == "ok" and record.search == "walkthrough", (game.trial, record.detail)
            assert record.split in SPLITS and record.scene == scene_of(game) and record.grammar == grammar
            assert record.actions == expert_commands(game.walkthrough, grammar)
            assert bool(record.detail) == (not places_object(game))
    scenes = pd.read_parquet(tmp_path / "scenes.parquet")
    assert scenes.initial_state.is_unique and set(scenes.state_split) == set(SPLITS)
    instances = pd.read_parquet(tmp_path / "instances.parquet")
    assert instances.also_in.map(len).sum() > 0  # ALFWorld's second inReceptacle facts are in the tables


@pytest.mark.textworld
def test_a_walkthrough_that_does_not_win_falls_back_to_a_plan(valid_games, tmp_path):
    """Drop the second receptacle of the object a no-placement walkthrough relies on: its walkthrough no longer wins
    in our engine, and the stage's FF plan (which puts the object down) does."""
    from dataclasses import replace

    from tasks.muep.planner import PlannerWorker
    from tasks.muep.textworld_env import GameEngine

    game = next(g for g in valid_games if not places_object(g))
    game = replace(game, objects=tuple(replace(o, parents=o.parents[:1]) for o in game.objects))
    write_tables([game_metadata(game)], tmp_path)
    clear_scene_cache()
    with PlannerWorker() as planner:
        record, _ = play_game(game, str(tmp_path), PlaySettings("alfworld-0.4", "gbf", 20.0, 40), GameEngine(),
                              planner)
    assert record.status == "ok" and record.search == "gbf", record.detail
    assert "walkthrough not won here" in record.detail
    assert any(a.startswith("move ") for a in record.actions)


def test_no_stage_reads_outside_the_repository():
    """The archives live in the repository; no code names the shared folder they were copied from."""
    repo = Path(__file__).resolve().parent.parent
    for folder in ("tasks", "flows", "core"):
        for path in (repo / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "/work/shared" not in text and "../shared" not in text, path
    assert alfworld_games.ARCHIVE_DIR.resolve().is_relative_to(repo)


def test_evaluation_scenes_are_floorplan_scenes(valid_games):
    """Scene names of the evaluation games still name their AI2-THOR floorplan (the thor renderer loads it)."""
    from tasks.muep.render.thor import _floorplan

    assert all(_floorplan(scene_of(g)) == g.floorplan for g in valid_games)


def test_world_state_of_an_object_in_two_receptacles_does_not_depend_on_fact_order():
    from types import SimpleNamespace as NS

    from tasks.muep.world_state import state_from_facts

    def fact(pred, *args):
        return NS(name=pred, arguments=[NS(name=a) for a in args])

    names = {"o": "mug 1", "r1": "countertop 1", "r2": "coffeemachine 1", "r3": "cabinet 1", "p": "apple 1"}
    facts = [fact("inReceptacle", "o", "r1"), fact("inReceptacle", "o", "r2"), fact("inReceptacle", "p", "r3")]
    states = [state_from_facts(f, names, {}) for f in (facts, list(reversed(facts)))]
    assert states[0] == states[1]
    assert states[0].placements == {"mug 1": "coffeemachine 1", "apple 1": "cabinet 1"}
    assert states[0].also_in == {"mug 1": ["countertop 1"]}
    assert states[0].to_json()["also_in"] == {"mug 1": ["countertop 1"]}
    assert "also_in" not in state_from_facts(facts[2:], names, {}).to_json()  # one receptacle each: as before


def test_training_games_as_in_context_examples(valid_games):
    from tasks.muep.alfworld_games import TRAIN_ARCHIVE, read_tasks
    from tasks.muep.alfworld_splits import train_game_records

    records = train_game_records(read_tasks(TRAIN_ARCHIVE), "muep")
    assert len(records) == 3553 and len({r.floorplan for r in records}) == 108
    assert not {r.trial for r in records} & {g.trial for g in valid_games}  # no evaluation game among the examples
    assert sum(not r.places_object for r in records) == 91
    assert all(not a.startswith("move ") for r in records for a in r.actions)  # in the configured grammar
    assert round(sum(r.plan_length for r in records) / len(records), 2) == 6.0  # ALFWorld's walkthrough length


def _released_client_view(game, raw: bytes) -> list[tuple[str, str, bool]]:
    """What MuEP's released client shows for ``game``: its game file's own PDDL problem in TextWorld with the released
    grammar, every entity named by ALFWorld's ``Demangler`` rule over all the problem's ids (locations included),
    played through :func:`_tour`."""
    import json

    import textworld
    from textworld.envs.pddl import PddlEnv

    from tasks.muep import textworld_env as tw

    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
    data = {"pddl_domain": tw._domain(), "pddl_problem": json.loads(raw)["pddl_problem"], "solvable": True,
            "grammar": tw._grammar("muep-released").replace(tw.GOAL_PLACEHOLDER, tw.goal_sentence(game.goal))}
    with tw.single_translation():
        env.load(data)
        names = demangle_names(list(env._entity_infos))
        for key, info in env._entity_infos.items():
            info.name = names.get(key.lower(), key)
        first = env.reset()
        return _tour(game, first.feedback, lambda cmd: (env.state["_valid_commands"], env.step(cmd)[0].feedback))


def _tour(game, intro: str, step) -> list[tuple[str, str, bool]]:
    """(command, observation, valid): the intro, then "go to" every receptacle and open / close the openable ones --
    every receptacle's contents and every location's number shown once."""
    out = [("", intro, True)]
    for r in game.receptacles:
        commands = [f"go to {r.name}"] + ([f"open {r.name}", f"close {r.name}"] if r.openable else [])
        for cmd in commands:
            valid, observation = step(cmd)
            out.append((cmd, observation, cmd in valid))
    return out


@pytest.mark.textworld
def test_released_protocol_shows_the_released_clients_lists_and_location_numbers(valid_games, tmp_path):
    """Four ALFWorld test games, each loaded from its own game file as MuEP's released client loads it, and as the
    evaluation rebuilds it under the released protocol: the same intro, the same receptacle contents in the same
    order ("a cabinet 6, a cabinet 5, ..."), the same "loc N" at every receptacle, command by command."""
    from tasks.muep.eval.env import pose
    from tasks.muep.eval.records import EpisodeSpec
    from tasks.muep.textworld_env import GameEngine

    games = select_games(valid_games, 2)
    assert len(games) == 4
    raws = dict(alfworld_games.iter_members(alfworld_games.VALID_ARCHIVE, lambda m: m in {g.member for g in games}))
    write_tables([game_metadata(g) for g in games], tmp_path)
    clear_scene_cache()
    engine = GameEngine()
    numbers = set()
    for game in games:
        theirs = _released_client_view(game, raws[game.member])
        spec = EpisodeSpec(game.trial, "alfworld_seen", scene_of(game), game.task_type, game.goal, game.object_type,
                           game.target_type, "muep-released", source="alfworld")
        problem, _ = pose(spec, str(tmp_path))
        ours_game = engine.load(problem, game.goal, "muep-released")
        intro, _ = ours_game.reset()
        ours = _tour(game, intro, lambda cmd: (ours_game.env.state["_valid_commands"],
                                               ours_game.step(cmd, 1).observation))
        assert [t[0] for t in ours] == [t[0] for t in theirs]
        for mine, released in zip(ours, theirs, strict=True):
            assert mine == released, (game.trial, mine[0])
        numbers |= {o.split("You arrive at ", 1)[1].split(".")[0] for c, o, v in ours if v and c.startswith("go to ")}
        listed = theirs[0][1].split("you see ", 1)[1].split(".\n")[0].replace(", and ", ", ").split(", ")
        keys = [(name.split()[1], -int(name.split()[2])) for name in listed]   # "a drawer 8" -> ("drawer", -8)
        assert keys == sorted(keys) and len(set(k[0] for k in keys)) < len(keys)  # type, then number descending
    assert len(numbers) > 20 and all(n.startswith("loc ") for n in numbers)
    # the demonstrations' grammars keep the ids made from the names (their bytes do not change)
    assert all(not i.startswith(("rec_0", "obj_0")) for i in problem.ids.values())


def test_released_location_names_come_from_every_location_of_alfreds_problem():
    from types import SimpleNamespace as NS

    from tasks.muep.demos import _released_location_map
    from tasks.muep.pddl import Receptacle

    def row(loc, receptacles=(), start=False):
        return NS(location=loc, receptacles=list(receptacles), agent_start=start)

    rows = [row("loc_bar_1_bar_0_bar_0_bar_30", ["desk 1", "drawer 1"]), row("loc_bar_2_bar_0_bar_0_bar_30"),
            row("loc_bar__minus_1_bar_0_bar_0_bar_30", ["bed 1"]), row("loc_bar_3_bar_0_bar_0_bar_30", start=True)]
    recs = [Receptacle("desk 1", "Desk", "loc_1", False), Receptacle("drawer 1", "Drawer", "loc_1", True),
            Receptacle("bed 1", "Bed", "loc_2", False)]
    # sorted ids numbered from the count down: loc_bar_1 -> 4, loc_bar_2 -> 3, loc_bar_3 -> 2, loc_bar__minus_1 -> 1
    assert _released_location_map(rows, recs, "here") == {"loc_1": "loc 4", "loc_2": "loc 1", "loc_start": "loc 2"}
    with pytest.raises(DataError, match="here: receptacle sofa 1 is at none of the locations"):
        _released_location_map(rows, recs + [Receptacle("sofa 1", "Sofa", "loc_3", False)], "here")
    with pytest.raises(DataError, match="here: 0 agent start locations"):
        _released_location_map(rows[:3], recs, "here")
    split = [row("loc_bar_1_bar_0_bar_0_bar_30", ["desk 1"]), row("loc_bar_2_bar_0_bar_0_bar_30", ["drawer 1"]),
             *rows[2:]]
    with pytest.raises(DataError, match="the receptacles at loc_1 are at different locations"):
        _released_location_map(split, recs, "here")


def test_released_ids_sort_by_type_then_number_descending_and_the_default_ids_are_unchanged():
    from tasks.muep.pddl import Instance, Problem, Receptacle, released_order

    names = ["cabinet 2", "cabinet 10", "coffeemachine 1", "cabinet 1", "countertop 3"]
    assert sorted(names, key=released_order) == ["cabinet 10", "cabinet 2", "cabinet 1", "coffeemachine 1",
                                                 "countertop 3"]
    recs = [Receptacle(n, n.split()[0].title(), f"loc_{i}", False) for i, n in enumerate(names)]
    args = ("p", recs, [Instance("mug 1", "Mug", "cabinet 1")], "pick_and_place_simple", "Mug", "Cabinet")
    released = Problem(*args, id_order="released")
    assert sorted(names, key=released.ids.get) == ["cabinet 10", "cabinet 2", "cabinet 1", "coffeemachine 1",
                                                   "countertop 3"]
    assert Problem(*args).ids["cabinet 10"] == "rec_cabinet_10"   # the demonstrations' ids, as before
    with pytest.raises(ValueError, match="unknown id_order 'sorted'"):
        Problem(*args, id_order="sorted")
