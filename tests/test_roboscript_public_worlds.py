"""The public eval worlds (``roboscript.worlds.benchmark_worlds: public``): every public object at its public pose,
cabinet_1076 on the floor behind the robot turned round with its four drawers and handles where the public model's
meshes put them, near-start distances from the model origin, and a drawer that code written for the public worlds
pulls the right way.

The expected numbers are read off the public world files and cabinet_1076/model.sdf (github.com/SgtVincent/RoboScript,
instruct_to_policy/data/benchmark/worlds/, instruct_to_policy/models/cabinet_1076/) and moved into our frame: the
public robot base stands at (-0.45, 0), ours at the origin, so x_ours = x_public + 0.45."""

from __future__ import annotations

import dataclasses
import math

import pytest

from core.errors import DataError
from robot.contract.catalog import load_catalog, parse_catalog
from robot.contract.geometry import Box
from robot.contract.items import TabletopState, initial_state, model_origin
from tasks.roboscript.benchmark import evaluate, load_benchmark
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.worlds import world_problems

CATALOG = load_catalog()
PUBLIC = {t.id: t for t in load_benchmark(CATALOG, WorldsParams(benchmark_worlds="public"))}
BASE_X = -0.45

#: (x, y) of each model's <pose> in the public world file (public frame).
PUBLIC_POSES = {
    "world_1_table_sort": {"apple": (-0.204362, -0.332023), "banana": (-0.370036, 0.452791),
                           "white_ceramic_plate": (-0.01908, 0.203189), "white_and_pink_box": (-0.383764, -0.462874),
                           "brown_box": (-0.032555, -0.141017)},
    "world_2_pick_and_place": {"apple": (-0.085209, -0.166958), "footed_bowl": (-0.122685, 0.244758)},
    "world_3_mug_to_empty_plate": {"white_ceramic_plate": (-0.214824, -0.298031),
                                   "turquoise_salad_plate": (-0.202483, 0.288656), "lemon": (-0.246124, 0.287173),
                                   "brown_ceramic_cup": (0.094219, -0.023674)},
    "world_4_clear_table_to_basket": {"basket_with_fabric_liner": (-0.223049, 0.297071), "orange": (0.06906, -0.02198),
                                      "toy_bus": (-0.135539, -0.364542)},
    "world_5_mug_to_cabinet": {"white_and_yellow_mug": (-0.145605, -0.094768)},
    "world_6_mug_to_same_color_plate": {"green_plant_plate": (-0.300853, -0.357843),
                                        "white_ceramic_plate": (0.067732, -0.006874),
                                        "red_plant_saucer": (-0.265816, 0.33369),
                                        "white_porcelain_mug": (-0.148098, -0.006508)},
}

#: Boxes of cabinet_1076's links measured from its collision meshes at the model.sdf scale (0.8), placed at the
#: public <pose> -1.45 -0.2 0.693 0 0 -3.1416, in our frame: (x0, y0, z0, x1, y1, z1).
PUBLIC_CABINET = {
    "cabinet.drawer_0": (-1.216, -0.649, 1.033, -0.66, 0.241, 1.292),  # its top lip reaches x = -0.609
    "cabinet.drawer_1": (-1.216, -0.649, 0.798, -0.66, 0.241, 1.019),
    "cabinet.drawer_2": (-1.216, -0.649, 0.563, -0.66, 0.241, 0.784),
    "cabinet.drawer_3": (-1.216, -0.649, 0.177, -0.66, 0.241, 0.548),
    "cabinet.handle_0": (-0.66, -0.367, 1.154, -0.609, -0.041, 1.171),
    "cabinet.handle_1": (-0.66, -0.367, 0.900, -0.609, -0.041, 0.917),
    "cabinet.handle_2": (-0.66, -0.367, 0.664, -0.609, -0.041, 0.682),
    "cabinet.handle_3": (-0.66, -0.367, 0.354, -0.608, -0.041, 0.371),
}


def test_the_public_worlds_validate_and_keep_the_tasks():
    ours = {t.id: t for t in load_benchmark(CATALOG, WorldsParams())}
    assert list(PUBLIC) == list(ours)
    for tid, task in PUBLIC.items():
        assert world_problems(task.world) == [], tid
        assert task.evaluation == ours[tid].evaluation and task.instruction == ours[tid].instruction
        assert task.world.table.height == pytest.approx(0.815)  # the public Table model's top


@pytest.mark.parametrize("tid", list(PUBLIC))
def test_every_public_object_stands_at_its_public_position(tid):
    task = PUBLIC[tid]
    poses = PUBLIC_POSES[task.public_world]
    loose = {m.name: m for m in task.world.models if m.kind in ("object", "container")}
    assert set(loose) == set(poses)
    for name, (x, y) in poses.items():
        assert loose[name].position[:2] == pytest.approx((x - BASE_X, y), abs=1e-3), name


@pytest.mark.parametrize("tid", list(PUBLIC))
def test_the_cabinet_stands_behind_the_robot_at_the_public_pose(tid):
    world = PUBLIC[tid].world
    body = world.model("cabinet")
    assert (body.asset, body.parent, body.yaw_deg) == ("cabinet_1076", "floor", 180.0)
    assert body.bbox.z0 == 0.0 and body.bbox.z1 == pytest.approx(1.299)
    assert body.bbox.x1 == pytest.approx(-0.66) and body.bbox.x0 == pytest.approx(-1.366)
    for name, box in PUBLIC_CABINET.items():
        got = world.model(name).bbox.as_list()
        tol = 0.03 if name.startswith("cabinet.drawer") else 0.002  # our drawers are 2.5 cm narrower; no lip
        assert got == pytest.approx(list(box), abs=tol), name
    joints = {j.part: j for j in world.joints}
    assert sorted(joints) == [f"cabinet.drawer_{i}" for i in range(4)]
    for i, joint in joints.items():
        assert joint.axis == (1.0, 0.0, 0.0) and joint.upper == pytest.approx(0.3), i  # pulled along +x, 0.3 m


def test_hard_1_swaps_objects_0_8_m_apart_measured_from_their_origins():
    task = PUBLIC["Hard_1"]
    start = initial_state(task.world)
    apple, banana = model_origin(start.boxes["apple"]), model_origin(start.boxes["banana"])
    assert math.dist(apple, banana) == pytest.approx(0.80, abs=0.005)
    assert apple[2] == pytest.approx(0.815) and banana[2] == pytest.approx(0.815)  # the table top, as publicly

    def moved(box: Box, to: tuple[float, float, float], dx: float) -> Box:
        sx, sy, sz = box.x1 - box.x0, box.y1 - box.y0, box.z1 - box.z0
        return Box.from_center((to[0] + dx, to[1], to[2] + sz / 2), (sx, sy, sz))

    for dx, ok in ((0.09, True), (0.11, False)):
        boxes = dict(start.boxes, apple=moved(start.boxes["apple"], banana, dx),
                     banana=moved(start.boxes["banana"], apple, 0.0))
        results = evaluate(task, TabletopState(boxes, start.joints))
        assert [r.ok for r in results] == [ok, True], [r.detail for r in results]


def test_the_floor_cabinet_is_no_tabletop_cabinet_and_bad_bands_are_named():
    assert "cabinet_1076" in CATALOG.assets and CATALOG["cabinet_1076"] not in CATALOG.cabinets
    text = ("assets:\n  - {name: c, kind: cabinet, category: cabinet, colour: brown, size: [0.5, 0.5, 1.0], "
            "mass: 10, drawers: 2, stands: floor, drawer_bands: [[0.5, 0.4], [0.1, 0.3]]}\n")
    with pytest.raises(DataError, match=r"assets.yaml:2: entry 'c': drawer_bands"):
        parse_catalog(text)
    with pytest.raises(DataError, match="stands: must be one of table, floor"):
        parse_catalog(text.replace("stands: floor", "stands: wall").replace("[[0.5, 0.4]", "[[0.4, 0.5]"))


@pytest.mark.parametrize(("old", "new", "words"), [
    ("{asset: cabinet_1076, at: [-1.013, -0.204], yaw: 180}", "{asset: cabinet_1076, at: [-1.013, -0.204], yaw: 90}",
     "task Simple_0: public_world.cabinet: yaw must be 0 (front to the robot, on the table) or 180"),
    ("{asset: cabinet_1076, at: [-1.013, -0.204], yaw: 180}", "{asset: cabinet_1076, at: [-1.413, -0.204], yaw: 180}",
     "task Simple_0: its world breaks the placement rules: cabinet.handle_0 is out of reach"),
    ("{asset: footed_bowl, at: [0.327, 0.245]}", "{asset: footed_bowl, at: [0.15, 0.10]}",
     "footed_bowl overlaps the robot's keep-out box"),
    ("    robot: {keep_out: [-0.25, -0.13, 0.2, 0.13]}", "    robot: {keep_out: [-0.25, -0.13, 0.2]}",
     "benchmark_tasks.yaml: layouts.public:"),
])
def test_bad_public_declarations_are_named(tmp_path, old, new, words):
    from tasks.roboscript.benchmark import BENCHMARK_FILE

    text = BENCHMARK_FILE.read_text()
    assert old in text
    path = tmp_path / "benchmark_tasks.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(DataError) as info:
        load_benchmark(CATALOG, WorldsParams(benchmark_worlds="public"), path)
    assert words in str(info.value)


def test_a_world_that_puts_the_floor_cabinet_onto_the_table_is_refused():
    world = PUBLIC["Moderate_2"].world
    models = [dataclasses.replace(m, position=(m.position[0] + 0.8, *m.position[1:]))
              if m.name.startswith("cabinet") else m for m in world.models]
    problems = world_problems(dataclasses.replace(world, models=models))
    assert any("stands on the floor but overlaps the table" in p for p in problems)


@pytest.mark.sim
def test_public_style_drawer_code_pulls_the_public_drawer_along_plus_x_and_fills_it():
    from robot_goals import run_once
    from test_roboscript_public_api import PUBLIC_STYLE_DRAWER

    from tasks.roboscript.eval.scoring import task_metrics

    # The public GPT-4 code for world_5 pulls by 0.25 m (generated_code/text_gpt_4/raw_world_5_mug_to_cabinet.json).
    code = PUBLIC_STYLE_DRAWER.replace("distance=0.2)", "distance=0.25)")
    result, repeat = run_once(PUBLIC["Moderate_2"], code, "public-worlds")
    assert repeat["status"] == "ok", repeat["error"]
    assert repeat["state"]["joints"]["cabinet.drawer_1"] > 0.2
    handle = repeat["state"]["boxes"]["cabinet.handle_1"]
    assert handle[0] > -0.66 + 0.2  # moved towards the robot, along +x
    assert task_metrics(result, 1)["finished_whole_task"] == 1.0, repeat["items"]
