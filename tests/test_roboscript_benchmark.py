"""The eight benchmark tasks of Table I: each follows one public RoboScript task (its objects, its evaluation items,
the cabinet every public world has), declared worlds obey the placement rules, evaluation items are machine-checkable
(false at the start, true in a hand-made goal state), and bad declarations are named."""

from __future__ import annotations

import dataclasses

import pytest

from core.errors import DataError
from robot.contract.catalog import load_catalog
from robot.contract.geometry import Box
from robot.contract.items import TabletopState, initial_state
from tasks.roboscript.benchmark import BENCHMARK_FILE, evaluate, load_benchmark
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.worlds import world_problems

CATALOG = load_catalog()
TASKS = {t.id: t for t in load_benchmark(CATALOG, WorldsParams())}


def test_the_eight_tasks_of_table_one():
    assert list(TASKS) == ["Simple_0", "Simple_1", "Moderate_0", "Moderate_1", "Moderate_2", "Hard_0", "Hard_1",
                           "Hard_2"]
    assert TASKS["Simple_0"].instruction == "Place the apple into the footed bowl."
    assert TASKS["Moderate_1"].reasoning == ("property_reasoning",)
    for task in TASKS.values():
        assert world_problems(task.world) == []


#: The public eval items (instruct_to_policy/data/benchmark/eval_items/*.json): label, world, items as
#: (check, object, receptacle or start-position source).
PUBLIC = {
    "Simple_0": ("simple_0", "world_2_pick_and_place", [("in", "apple", "footed_bowl")]),
    "Simple_1": ("hard_3", "world_3_mug_to_empty_plate", [("on", "brown_ceramic_cup", "white_ceramic_plate")]),
    "Moderate_0": ("hard_1", "world_1_table_sort", [("in", "white_and_pink_box", "cabinet.drawer_1"),
                                                    ("in", "brown_box", "cabinet.drawer_1")]),
    "Moderate_1": ("hard_5", "world_6_mug_to_same_color_plate",
                   [("on", "white_porcelain_mug", "white_ceramic_plate")]),
    "Moderate_2": ("simple_1", "world_5_mug_to_cabinet", [("in", "white_and_yellow_mug", "cabinet.drawer_1")]),
    "Hard_0": ("hard_0", "world_1_table_sort", [("on", "apple", "white_ceramic_plate"),
                                                ("on", "banana", "white_ceramic_plate")]),
    "Hard_1": ("hard_2", "world_1_table_sort", [("position", "apple", "banana"), ("position", "banana", "apple")]),
    "Hard_2": ("hard_4", "world_4_clear_table_to_basket", [("in", "orange", "basket_with_fabric_liner"),
                                                           ("in", "toy_bus", "basket_with_fabric_liner")]),
}
#: The objects of each public world file (the cabinet aside).
PUBLIC_WORLDS = {
    "world_1_table_sort": {"apple", "banana", "white_ceramic_plate", "white_and_pink_box", "brown_box"},
    "world_2_pick_and_place": {"apple", "footed_bowl"},
    "world_3_mug_to_empty_plate": {"white_ceramic_plate", "turquoise_salad_plate", "lemon", "brown_ceramic_cup"},
    "world_4_clear_table_to_basket": {"basket_with_fabric_liner", "orange", "toy_bus"},
    "world_5_mug_to_cabinet": {"white_and_yellow_mug"},
    "world_6_mug_to_same_color_plate": {"green_plant_plate", "white_ceramic_plate", "red_plant_saucer",
                                        "white_porcelain_mug"},
}


@pytest.mark.parametrize("task_id", list(PUBLIC))
def test_each_task_carries_the_public_eval_items_objects_and_cabinet(task_id):
    task = TASKS[task_id]
    label, world, items = PUBLIC[task_id]
    assert (task.public_label, task.public_world) == (label, world)
    names = {"in": "in_receptacle", "on": "on_receptacle", "position": "near_start"}
    assert [(i.type, i.object, i.receptacle or i.of) for i in task.evaluation] == \
        [(names[kind], obj, other) for kind, obj, other in items]
    assert all(i.min_overlap == 0.8 and i.tolerance == 0.1 for i in task.evaluation)  # the public thresholds
    loose = {m.name for m in task.world.models if m.kind in ("object", "container")}
    assert loose == PUBLIC_WORLDS[world]
    cabinet = [m for m in task.world.models if m.kind == "cabinet"]
    assert [m.asset for m in cabinet] == ["cabinet_1076"]  # every public world has its 4-drawer cabinet_1076
    assert [j.part for j in task.world.joints] == [f"cabinet.drawer_{i}" for i in range(4)]


def test_hints_and_scaled_objects_follow_the_public_queries_and_worlds():
    assert TASKS["Moderate_2"].prompt_instruction.startswith("Place the mug into the second top drawer. ")
    assert "open it first" in TASKS["Moderate_2"].hint
    assert TASKS["Simple_1"].hint and TASKS["Moderate_1"].hint and TASKS["Hard_0"].hint is None
    apple = TASKS["Simple_0"].world.model("apple")
    assert apple.size == pytest.approx((0.0525, 0.0525, 0.0525))  # the public world_2 spawns the apple at 0.7
    assert len({t.public_label for t in TASKS.values()}) == 8


@pytest.mark.parametrize("task_id", list(TASKS))
def test_no_task_is_solved_at_the_start(task_id):
    task = TASKS[task_id]
    results = evaluate(task, initial_state(task.world))
    assert results and not any(r.ok for r in results)
    assert all(r.detail for r in results)


def _put(state: TabletopState, obj: str, receptacle: str, inside: bool) -> None:
    """Move ``obj`` to the middle of ``receptacle``: resting on its top, or on its floor when ``inside``."""
    o, r = state.boxes[obj], state.boxes[receptacle]
    cx, cy = (r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2
    z0 = r.z0 + 0.01 if inside else r.z1
    sx, sy, sz = o.x1 - o.x0, o.y1 - o.y0, o.z1 - o.z0
    state.boxes[obj] = Box(cx - sx / 2, cy - sy / 2, z0, cx + sx / 2, cy + sy / 2, z0 + sz)


def _goal_state(task_id: str) -> TabletopState:
    task = TASKS[task_id]
    state = initial_state(task.world)
    for item in task.evaluation:
        if item.type == "joint_opened":
            state.joints[item.part] = item.min_value + 0.05
        elif item.type in ("on_receptacle", "in_receptacle"):
            _put(state, item.object, item.receptacle, inside=item.type == "in_receptacle")
    swaps = [i for i in task.evaluation if i.type == "near_start"]
    start = initial_state(task.world)
    for item in swaps:
        then, now = start.boxes[item.of], start.boxes[item.object]
        dx, dy = then.center[0] - now.center[0], then.center[1] - now.center[1]
        state.boxes[item.object] = Box(now.x0 + dx, now.y0 + dy, now.z0, now.x1 + dx, now.y1 + dy, now.z1)
    return state


@pytest.mark.parametrize("task_id", list(TASKS))
def test_a_goal_state_satisfies_every_item(task_id):
    results = evaluate(TASKS[task_id], _goal_state(task_id))
    assert all(r.ok for r in results), [r.detail for r in results]


def test_items_fail_for_the_right_measurement():
    state = _goal_state("Moderate_2")
    mug = state.boxes["white_and_yellow_mug"]
    state.boxes["white_and_yellow_mug"] = dataclasses.replace(mug, z0=mug.z0 + 0.15, z1=mug.z1 + 0.15)  # sticks out
    (result,) = evaluate(TASKS["Moderate_2"], state)
    assert not result.ok and "volume inside" in result.detail
    state = _goal_state("Hard_0")
    apple = state.boxes["apple"]
    state.boxes["apple"] = dataclasses.replace(apple, x0=apple.x0 + 0.12, x1=apple.x1 + 0.12)  # beside the plate
    assert not evaluate(TASKS["Hard_0"], state)[0].ok and "footprint overlap" in evaluate(TASKS["Hard_0"],
                                                                                           state)[0].detail


def _bad_file(tmp_path, old: str, new: str):
    text = BENCHMARK_FILE.read_text().replace(old, new, 1)
    assert text != BENCHMARK_FILE.read_text()
    path = tmp_path / "benchmark_tasks.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("old", "new", "words"), [
    ("{asset: footed_bowl, at: [0.42, 0.00]}", "{asset: footed_bowl, at: [0.37, -0.25]}",
     "task Simple_0: its world breaks the placement rules: footed_bowl overlaps the robot's keep-out box; footed_bowl and apple overlap"),
    ("{asset: footed_bowl, at: [0.42, 0.00]}", "{asset: golden_bowl, at: [0.42, 0.00]}",
     "task Simple_0: world.models[1]: unknown asset 'golden_bowl'"),
    ("{asset: footed_bowl, at: [0.42, 0.00]}", "{asset: footed_bowl, at: [0.42, 0.00], scale: 0.5}",
     "task Simple_0: world.models[1]: scale applies to objects only; footed_bowl is a container"),
    ("{asset: apple, at: [0.37, -0.25], scale: 0.7}", "{asset: apple, at: [0.37, -0.25], scale: big}",
     "task Simple_0: world.models[2]: scale must be a number from 0.2 to 3, got 'big'"),
    ("public: {label: simple_0, world: world_2_pick_and_place}", "public: {label: simple_9, world: w}",
     "task Simple_0: public must be {label: <one of simple_0"),
    ("    reasoning: []\n", "    reasoning: []\n    hints: typo\n", "task Simple_0: unknown key(s) ['hints']"),
    ("{type: in_receptacle, object: apple, receptacle: footed_bowl}",
     "{type: in_receptacle, object: apple, receptacle: silver_bowl}",
     "task Simple_0: evaluation[1]: receptacle 'silver_bowl' is not in the task's world"),
    ("{type: in_receptacle, object: apple, receptacle: footed_bowl}", "{type: on, object: apple, receptacle: x}",
     "YAML reads a bare on/off/yes/no as true/false"),
    ("{asset: footed_bowl, at: [0.42, 0.00]}", "{asset: footed_bowl, at: [1.45, 0.00]}", "out of reach"),
])
def test_bad_declarations_are_named(tmp_path, old, new, words):
    with pytest.raises(DataError) as info:
        load_benchmark(CATALOG, WorldsParams(benchmark_worlds="ours"), _bad_file(tmp_path, old, new))
    assert words in str(info.value)
