"""Data tests of stage 1: ALFWorld's scene configuration read for all 120 floorplans, and a seeded initial state
that only places objects where ALFWorld's tables allow."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest

from core.errors import DataError
from tasks.muep import alfworld_data
from tasks.muep.metadata import collect_scene, receptacle_type_of
from tasks.muep.vocab import LAMP_HOSTS, catalog
from tasks.params import ALL_FLOORPLANS, MetadataParams, SceneParams, room_type_of


@pytest.fixture(scope="module")
def all_scenes():
    scenes = SceneParams()
    return {n: collect_scene(n, scenes, MetadataParams()) for n in ALL_FLOORPLANS}


def test_all_120_floorplans_with_their_room_types(all_scenes):
    assert len(all_scenes) == 120
    rooms = Counter(m.scene.room_type for m in all_scenes.values())
    assert rooms == {"kitchen": 30, "living_room": 30, "bedroom": 30, "bathroom": 30}
    assert all_scenes[1].scene.room_type == "kitchen"
    assert all_scenes[230].scene.room_type == "living_room"
    assert all_scenes[301].scene.room_type == "bedroom"
    assert all_scenes[430].scene.room_type == "bathroom"
    assert Counter(m.scene.split for m in all_scenes.values()) == {"seen": 108, "unseen": 12}


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


def test_receptacles_missing_from_the_pose_file_are_completed_and_flagged(all_scenes):
    for n in range(1, 31):
        meta = all_scenes[n]
        objects = set(alfworld_data.read_scene(n).object_types)
        by_type = {r.receptacle_type: r for r in meta.receptacles}
        for rtype in ("StoveBurner", "CoffeeMachine", "Toaster"):
            if rtype in objects:
                assert by_type[rtype].pose_synthesized, (n, rtype)
    for meta in all_scenes.values():
        grid = {tuple(p) for p in alfworld_data.read_scene(meta.scene.floorplan).grid.tolist()}
        for r in meta.receptacles:
            if r.pose_synthesized:
                assert (r.x, r.z) in grid and r.thor_id.endswith("|synthesized")
            else:
                assert not r.thor_id.endswith("|synthesized")
    assert sum(m.scene.n_receptacles_synthesized for m in all_scenes.values()) > 90


def test_instances_are_placed_only_where_the_tables_allow(all_scenes):
    cat = catalog()
    for meta in all_scenes.values():
        parents = {r.name: r.receptacle_type for r in meta.receptacles}
        for inst in meta.instances:
            assert parents[inst.parent] == inst.parent_type
            if inst.placement_synthesized:
                assert inst.parent_type in LAMP_HOSTS[inst.object_type]
            else:
                assert cat.holds(inst.parent_type, inst.object_type), (meta.scene.scene, inst)


def test_counts_match_instances_and_bounds(all_scenes):
    params = MetadataParams()
    for meta in all_scenes.values():
        counted = Counter(i.object_type for i in meta.instances) + Counter(r.receptacle_type for r in meta.receptacles)
        for row in meta.object_types:
            assert row.count == counted.get(row.object_type, 0)
        for obj_type, n in Counter(i.object_type for i in meta.instances).items():
            if obj_type in catalog().pickupable:
                assert params.min_instances_per_type <= n <= params.max_instances_per_type


def test_instantiation_is_deterministic_per_seed():
    scenes = SceneParams(floorplans=[5])
    a = collect_scene(5, scenes, MetadataParams(seed=7))
    b = collect_scene(5, scenes, MetadataParams(seed=7))
    c = collect_scene(5, scenes, MetadataParams(seed=8))
    assert a.instances == b.instances and a.receptacles == b.receptacles
    assert a.instances != c.instances


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
