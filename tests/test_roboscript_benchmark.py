"""The eight benchmark tasks of Table I: declared worlds obey the placement rules, evaluation items are
machine-checkable (false at the start, true in a hand-made goal state), and bad declarations are named."""

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
    state.joints["cabinet.drawer_1"] = 0.02
    results = evaluate(TASKS["Moderate_2"], state)
    assert [r.ok for r in results] == [False, True] and "value 0.020" in results[0].detail
    state = _goal_state("Hard_0")
    apple = state.boxes["apple"]
    state.boxes["apple"] = dataclasses.replace(apple, z0=apple.z0 + 0.2, z1=apple.z1 + 0.2)  # held above the plate
    assert not evaluate(TASKS["Hard_0"], state)[0].ok


def _bad_file(tmp_path, old: str, new: str):
    text = BENCHMARK_FILE.read_text().replace(old, new, 1)
    assert text != BENCHMARK_FILE.read_text()
    path = tmp_path / "benchmark_tasks.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("old", "new", "words"), [
    ("{asset: footed_bowl, at: [0.45, 0.30]}", "{asset: footed_bowl, at: [0.40, -0.35]}",
     "task Simple_0: its world breaks the placement rules: footed_bowl and apple overlap"),
    ("{asset: footed_bowl, at: [0.45, 0.30]}", "{asset: golden_bowl, at: [0.45, 0.30]}",
     "task Simple_0: world.models[1]: unknown asset 'golden_bowl'"),
    ("{type: in_receptacle, object: apple, receptacle: footed_bowl}",
     "{type: in_receptacle, object: apple, receptacle: silver_bowl}",
     "task Simple_0: evaluation[1]: receptacle 'silver_bowl' is not in the task's world"),
    ("{type: in_receptacle, object: apple, receptacle: footed_bowl}", "{type: on, object: apple, receptacle: x}",
     "YAML reads a bare on/off/yes/no as true/false"),
    ("{asset: footed_bowl, at: [0.45, 0.30]}", "{asset: footed_bowl, at: [1.45, 0.30]}", "out of reach"),
])
def test_bad_declarations_are_named(tmp_path, old, new, words):
    with pytest.raises(DataError) as info:
        load_benchmark(CATALOG, WorldsParams(), _bad_file(tmp_path, old, new))
    assert words in str(info.value)
