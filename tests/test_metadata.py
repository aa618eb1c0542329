"""Data tests of stage 1: ALFRED's real initial states (ALFWorld's training games) as the scene instances of the 108
floorplans that have them, split per initial state; ALFWorld's scene configuration read for all 120 floorplans, and a
seeded initial state that only places objects where ALFWorld's tables allow where no real state exists."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest

from core.errors import DataError
from tasks.muep import alfworld_data, alfworld_games
from tasks.muep.metadata import (
    alfred_games,
    alfred_trials,
    collect_all,
    collect_scene,
    plan_states,
    receptacle_type_of,
    seeded_scene,
    state_order,
)
from tasks.muep.vocab import LAMP_HOSTS, catalog
from tasks.params import (
    ALL_FLOORPLANS,
    DEFAULT_UNSEEN,
    MetadataParams,
    SceneParams,
    room_type_of,
)


@pytest.fixture(scope="module")
def every_scene():
    """The default metadata: every floorplan's instances (training, held-out seen-test, unseen)."""
    return collect_all(SceneParams(), MetadataParams())


@pytest.fixture(scope="module")
def all_scenes(every_scene):
    """Instantiation 0 of each of the 120 floorplans."""
    return {m.scene.floorplan: m for m in every_scene if m.scene.instantiation == 0}


@pytest.fixture(scope="module")
def seeded_scenes():
    """The seeded initial state of all 120 floorplans (what the 12 without ALFRED states get)."""
    scenes = SceneParams()
    return {n: seeded_scene(n, scenes, MetadataParams()) for n in ALL_FLOORPLANS}


def test_all_120_floorplans_with_their_room_types(all_scenes):
    assert len(all_scenes) == 120
    rooms = Counter(m.scene.room_type for m in all_scenes.values())
    assert rooms == {"kitchen": 30, "living_room": 30, "bedroom": 30, "bathroom": 30}
    assert all_scenes[1].scene.room_type == "kitchen"
    assert all_scenes[230].scene.room_type == "living_room"
    assert all_scenes[301].scene.room_type == "bedroom"
    assert all_scenes[430].scene.room_type == "bathroom"
    assert Counter(m.scene.split for m in all_scenes.values()) == {"seen": 108, "unseen": 12}
    assert {n for n, m in all_scenes.items() if m.scene.split == "unseen"} == set(DEFAULT_UNSEEN)


def test_every_scene_has_receptacles_grid_and_attributes(all_scenes):
    for n, meta in all_scenes.items():
        assert meta.scene.n_receptacles > 0, n
        assert meta.scene.grid_points > 10, n
        types = {t.object_type: t for t in meta.object_types}
        for r in meta.receptacles:
            assert types[r.receptacle_type].receptacle, (n, r.receptacle_type)
        names = [r.name for r in meta.receptacles] + [i.name for i in meta.instances]
        assert len(names) == len(set(names)), f"FloorPlan{n}: instance names are not unique"
    kitchen = {t.object_type: t for t in all_scenes[1].object_types}
    assert kitchen["Apple"].pickupable and kitchen["Apple"].heatable and kitchen["Apple"].sliceable
    assert kitchen["Fridge"].receptacle and kitchen["Fridge"].openable and not kitchen["Fridge"].pickupable
    assert kitchen["Window"].count == 0 and not any(
        getattr(kitchen["Window"], a) for a in ("pickupable", "receptacle"))


def test_sink_basin_id_and_alfworld_names():
    assert receptacle_type_of("Sink|-01.90|+00.97|-01.50|SinkBasin") == "SinkBasin"
    assert receptacle_type_of("Cabinet|+00.68|+00.50|-02.20") == "Cabinet"


def test_receptacles_missing_from_the_pose_file_are_completed_and_flagged(seeded_scenes):
    for n in range(1, 31):
        meta = seeded_scenes[n]
        objects = set(alfworld_data.read_scene(n).object_types)
        by_type = {r.receptacle_type: r for r in meta.receptacles}
        for rtype in ("StoveBurner", "CoffeeMachine", "Toaster"):
            if rtype in objects:
                assert by_type[rtype].pose_synthesized, (n, rtype)
    for meta in seeded_scenes.values():
        grid = {tuple(p) for p in alfworld_data.read_scene(meta.scene.floorplan).grid.tolist()}
        for r in meta.receptacles:
            if r.pose_synthesized:
                assert (r.x, r.z) in grid and r.thor_id.endswith("|synthesized")
            else:
                assert not r.thor_id.endswith("|synthesized")
    assert sum(m.scene.n_receptacles_synthesized for m in seeded_scenes.values()) > 90


def test_instances_are_placed_only_where_the_tables_allow(seeded_scenes):
    cat = catalog()
    for meta in seeded_scenes.values():
        parents = {r.name: r.receptacle_type for r in meta.receptacles}
        for inst in meta.instances:
            assert parents[inst.parent] == inst.parent_type
            if inst.placement_synthesized:
                assert inst.parent_type in LAMP_HOSTS[inst.object_type]
            else:
                assert cat.holds(inst.parent_type, inst.object_type), (meta.scene.scene, inst)


def test_counts_match_instances_and_bounds(seeded_scenes):
    params = MetadataParams()
    for meta in seeded_scenes.values():
        counted = Counter(i.object_type for i in meta.instances) + Counter(r.receptacle_type for r in meta.receptacles)
        for row in meta.object_types:
            assert row.count == counted.get(row.object_type, 0)
        for obj_type, n in Counter(i.object_type for i in meta.instances).items():
            if obj_type in catalog().pickupable:
                assert params.min_instances_per_type <= n <= params.max_instances_per_type


def test_instantiation_is_deterministic_per_seed():
    scenes = SceneParams(floorplans=[5])
    a = seeded_scene(5, scenes, MetadataParams(seed=7))
    b = seeded_scene(5, scenes, MetadataParams(seed=7))
    c = seeded_scene(5, scenes, MetadataParams(seed=8))
    assert a.instances == b.instances and a.receptacles == b.receptacles
    assert a.instances != c.instances
    real = [collect_scene(5, scenes, MetadataParams(seed=s)) for s in (7, 7, 8)]
    assert real[0] == real[1] and real[0].scene.trial != real[2].scene.trial  # the seed orders ALFRED's states


# --------------------------------------------------------------------------------------------------------------------
# ALFRED's real initial states


def test_real_states_where_a_floorplan_has_them_seeded_placement_only_elsewhere(every_scene):
    trials = alfred_trials()
    assert len(trials) == 108 and sum(map(len, trials.values())) == alfworld_games.EXPECTED_GAMES["train"]
    assert set(ALL_FLOORPLANS) - set(trials) == set(DEFAULT_UNSEEN)  # the 12 without training games are held out
    for meta in every_scene:
        s = meta.scene
        assert (s.source == "alfred_train") == (s.floorplan in trials), s.scene
        assert (s.source == "seeded") == (s.trial == "")
    assert Counter(m.scene.source for m in every_scene) == {"alfred_train": 120, "seeded": 12}


def test_a_real_state_is_the_training_games_initial_state():
    meta = collect_scene(1, SceneParams(floorplans=[1]), MetadataParams())
    game = alfred_games([state_order(1, 0)[0]])[state_order(1, 0)[0]]
    assert meta.scene.trial == game.trial
    assert [(r.name, r.receptacle_type, r.openable) for r in meta.receptacles] == \
           [(r.name, r.type, r.openable) for r in game.receptacles]
    assert [(i.name, i.object_type, i.parent, i.initial_marks) for i in meta.instances] == \
           [(o.name, o.type, o.parents[0], list(o.marks)) for o in game.objects]
    # training states keep one receptacle per object (see scene_from_game); nothing is synthesised
    assert not any(i.also_in for i in meta.instances)
    assert not any(r.pose_synthesized for r in meta.receptacles) and meta.scene.n_receptacles_synthesized == 0
    for r in meta.receptacles:  # poses from ALFWorld's location ids: 0.25 m grid, quarter turns
        assert (r.x * 4).is_integer() and (r.z * 4).is_integer() and r.rotation in (0, 90, 180, 270)


def test_splits_are_decided_per_initial_state(every_scene):
    params = MetadataParams()
    by_split = {}
    for meta in every_scene:
        by_split.setdefault(meta.scene.state_split, []).append(meta.scene)
    assert {s: len(v) for s, v in by_split.items()} == {"train": 108, "seen_test": 12, "unseen_test": 12}
    states = {s: {r.initial_state for r in v} for s, v in by_split.items()}
    assert len(states["train"]) == 108  # every instance its own state
    assert not (states["train"] & states["seen_test"]) and not (states["train"] & states["unseen_test"])
    assert not (states["seen_test"] & states["unseen_test"])
    train_fp = {r.floorplan for r in by_split["train"]}
    assert {r.floorplan for r in by_split["seen_test"]} <= train_fp  # #Seen: familiar rooms, new states
    assert not {r.floorplan for r in by_split["unseen_test"]} & train_fp
    assert Counter(r.room_type for r in by_split["seen_test"]) == {r: 3 for r in ("kitchen", "living_room",
                                                                               "bedroom", "bathroom")}
    for r in by_split["seen_test"]:  # the held-out state is the next ALFRED state after the training ones
        assert r.instantiation == params.instantiations and r.trial == \
            alfworld_games.trial_of(state_order(r.floorplan, params.seed)[params.instantiations])


def test_more_instantiations_than_alfred_states_fall_back_to_seeded_placement():
    # FloorPlan211 has 4 training games: instantiations 0-3 are ALFRED's, the 5th is seeded
    assert len(alfred_trials()[211]) == 4
    plans = plan_states(SceneParams(floorplans=[211]), MetadataParams(instantiations=5, seen_test_fraction=0.0))
    assert [p.member is None for p in plans] == [False] * 4 + [True]
    assert {p.state_split for p in plans} == {"train"}


def test_initial_state_ids_follow_the_placements(every_scene):
    from dataclasses import replace

    from tasks.muep.metadata import initial_state_id

    meta = every_scene[0]
    same = initial_state_id(meta.scene.floorplan, list(reversed(meta.receptacles)), list(reversed(meta.instances)))
    assert same == meta.scene.initial_state  # row order does not matter
    moved = [replace(meta.instances[0], parent=meta.receptacles[-1].name)] + meta.instances[1:]
    assert initial_state_id(meta.scene.floorplan, meta.receptacles, moved) != meta.scene.initial_state
    fewer = meta.instances[1:]
    assert initial_state_id(meta.scene.floorplan, meta.receptacles, fewer) != meta.scene.initial_state
    cold = [replace(meta.instances[0], initial_marks=["isCool"])] + meta.instances[1:]
    assert initial_state_id(meta.scene.floorplan, meta.receptacles, cold) != meta.scene.initial_state


def test_missing_alfworld_package_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alfworld" else real(name, *a))
    alfworld_data.alfworld_root.cache_clear()
    try:
        with pytest.raises(DataError) as info:
            alfworld_data.alfworld_root()
        assert "`alfworld` package is not installed" in info.value.paragraph()
        assert "--no-deps alfworld==0.4.2" in info.value.paragraph()
    finally:
        alfworld_data.alfworld_root.cache_clear()


def test_corrupt_scene_file_names_the_file_and_line(tmp_path, monkeypatch):
    src = alfworld_data.layouts_dir()
    for suffix in ("-objects.json", "-layout.npy"):
        (tmp_path / f"FloorPlan1{suffix}").write_bytes((src / f"FloorPlan1{suffix}").read_bytes())
    (tmp_path / "FloorPlan1-openable.json").write_text('{\n  "Fridge|1|2|3": [1, 2, 0,\n')
    monkeypatch.setattr(alfworld_data, "layouts_dir", lambda: tmp_path)
    with pytest.raises(DataError, match=r"FloorPlan1-openable\.json is not valid JSON \(line \d+"):
        alfworld_data.read_scene(1)
    (tmp_path / "FloorPlan1-openable.json").write_text(json.dumps({"Fridge|1|2|3": [1, 2]}))
    with pytest.raises(DataError, match=r"pose of 'Fridge\|1\|2\|3' should be \[x, z, rotation, horizon\]"):
        alfworld_data.read_scene(1)


def test_room_type_helper_agrees_with_alfworld_constants():
    scene_type = alfworld_data.constants().SCENE_TYPE
    names = {"Kitchen": "kitchen", "LivingRoom": "living_room", "Bedroom": "bedroom", "Bathroom": "bathroom"}
    for alf_name, block in scene_type.items():
        assert all(room_type_of(n) == names[alf_name] for n in block)


def test_the_stage_progress_counts_every_scene_it_builds():
    """The stage's progress total is the scenes it really builds (instantiations plus the held-out seen-test
    states), not floorplans x instantiations: the last line says n/n, never 132/120 with a negative time left."""
    import logging

    from flows.muep_metadata import collect_scenes

    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())   # Prefect's logging config may not propagate
    logger = logging.getLogger("embp")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        scenes, params = SceneParams(floorplans=[1, 2, 3, 201, 202, 301]), MetadataParams(seen_test_fraction=0.5)
        metas = collect_scenes.fn(scenes, params)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert len(metas) > len(scenes.selected()) * params.instantiations   # held-out states are extra scenes
    lines = [line for line in lines if line.startswith("muep-metadata: scenes:")]
    assert lines and lines[-1].startswith(f"muep-metadata: scenes: {len(metas)}/{len(metas)} scenes")
    assert all(f"{len(metas)}/" not in line for line in lines[:-1])   # the last item logs once
    assert not any("-" in line.split(",")[-1] for line in lines)   # no negative time left
