"""Code tests of stage 3: each of the paper's four criteria (and duplicates) has an accepting and a rejecting case."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tasks.muep.filter import REASONS, SceneFacts, filter_tasks, scene_facts
from tasks.muep.generate import TaskRecord
from tasks.muep.metadata import (
    InstanceRecord,
    ObjectTypeRecord,
    SceneRecord,
    collect_scene,
)
from tasks.muep.vocab import TASK_TYPES, canonical_type
from tasks.params import MetadataParams, SceneParams
from tasks.records import to_frame

KITCHEN = SceneFacts(
    scene="FloorPlan1", room_type="kitchen",
    counts={"Apple": 2, "Tomato": 1, "Fork": 2, "Mug": 1, "Fridge": 1, "Microwave": 1, "SinkBasin": 1,
            "CounterTop": 2, "Cabinet": 3, "CoffeeMachine": 1, "DiningTable": 1, "Drawer": 2},
    placements={"Apple": ["Fridge", "CounterTop"], "Tomato": ["CounterTop"], "Fork": ["Drawer", "Drawer"],
                "Mug": ["Cabinet"]},
)
BEDROOM = SceneFacts(
    scene="FloorPlan301", room_type="bedroom",
    counts={"Book": 2, "CellPhone": 1, "DeskLamp": 1, "Desk": 1, "Bed": 1, "Drawer": 2, "Mug": 1},
    placements={"Book": ["Desk", "Drawer"], "CellPhone": ["Bed"], "DeskLamp": ["Desk"], "Mug": ["Desk"]},
)
FACTS = {f.scene: f for f in (KITCHEN, BEDROOM)}


def task(task_type: str, obj: str, target: str, scene: str = "FloorPlan1", **kw) -> TaskRecord:
    spec = TASK_TYPES[task_type]
    look = not spec.needs_receptacle
    obj_type, target_type = canonical_type(obj), canonical_type(target)
    goals = spec.goal_conditions(obj_type or obj, None if look else target_type, target_type if look else None)
    fields = dict(
        task_id=f"{scene}:{task_type}:{obj}:{target}", scene=scene, floorplan=int(scene.removeprefix("FloorPlan")),
        room_type=FACTS[scene].room_type if scene in FACTS else "kitchen", split="seen", task_type=task_type,
        instruction=f"{task_type} {obj} {target}", object_name=obj, object_type=obj_type,
        receptacle_name=None if look else target, receptacle_type=None if look else target_type,
        light_name=target if look else None, light_type=target_type if look else None, goal_conditions=goals,
        n_goal_conditions=len(goals), request_index=0, line_no=1, raw_line="", backend="offline", model="m",
        prompt_hash="h", response_key="k", finish_reason="stop",
    )
    fields.update(kw)
    return TaskRecord(**fields)


def verdict(t: TaskRecord) -> str:
    accepted, rejected, _ = filter_tasks([t], FACTS)
    return "accepted" if accepted else rejected[0].reason


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # 1. room compatibility: the appliance the task type needs
        (task("pick_heat_then_place_in_recep", "Tomato", "DiningTable"), "accepted"),
        (task("pick_heat_then_place_in_recep", "Book", "Desk", scene="FloorPlan301"), "room_incompatible"),
        (task("look_at_obj_in_light", "Book", "DeskLamp", scene="FloorPlan301"), "accepted"),
        (task("look_at_obj_in_light", "Apple", "DeskLamp"), "room_incompatible"),
        (task("pick_clean_then_place_in_recep", "Mug", "Desk", scene="FloorPlan301"), "room_incompatible"),
        # 2. invalid items: not an AI2-THOR type, not in this scene, too few for pick-two
        (task("pick_and_place_simple", "Unicorn", "CounterTop"), "invalid_item"),
        (task("pick_and_place_simple", "Laptop", "CounterTop"), "invalid_item"),
        (task("pick_and_place_simple", "Tomato", "Sofa"), "invalid_item"),
        (task("pick_two_obj_and_place", "Tomato", "CounterTop"), "invalid_item"),
        (task("pick_two_obj_and_place", "Fork", "CounterTop"), "accepted"),
        # 3. inadequate attributes: not pickupable, not a receptacle, cannot hold it, not heatable
        (task("pick_and_place_simple", "Fridge", "CounterTop"), "inadequate_attributes"),
        (task("pick_and_place_simple", "Fork", "Tomato"), "inadequate_attributes"),
        (task("pick_and_place_simple", "Apple", "CoffeeMachine"), "inadequate_attributes"),
        (task("pick_heat_then_place_in_recep", "Fork", "CounterTop"), "inadequate_attributes"),
        (task("pick_and_place_simple", "Mug", "CoffeeMachine"), "accepted"),
        (task("pick_and_place_simple", "Apple", "Mug"), "inadequate_attributes"),  # movable receptacle
        # 4. already satisfied in the initial state
        (task("pick_and_place_simple", "Apple", "Fridge"), "already_satisfied"),
        (task("pick_and_place_simple", "Apple", "DiningTable"), "accepted"),
        (task("pick_two_obj_and_place", "Fork", "Drawer"), "already_satisfied"),
        (task("pick_two_obj_and_place", "Apple", "CounterTop"), "accepted"),  # only one of two starts there
        (task("pick_cool_then_place_in_recep", "Apple", "Fridge"), "accepted"),  # nothing starts cold
    ],
)
def test_each_criterion_accepts_and_rejects(case, expected):
    assert verdict(case) == expected


def test_first_failing_criterion_is_reported_in_paper_order():
    # A heat task in a bedroom with an item that is not there: the room criterion comes first.
    t = task("pick_heat_then_place_in_recep", "Potato", "Desk", scene="FloorPlan301")
    _, rejected, _ = filter_tasks([t], FACTS)
    assert rejected[0].reason == "room_incompatible"
    assert "Microwave" in rejected[0].detail and "FloorPlan301" in rejected[0].detail


def test_duplicates_are_rejected_after_the_first_and_can_be_kept():
    a = task("pick_and_place_simple", "Apple", "DiningTable")
    b = replace(a, task_id="other", instruction="Put an apple on the table, please.")
    accepted, rejected, report = filter_tasks([a, b], FACTS)
    assert [t.task_id for t in accepted] == [a.task_id]
    assert rejected[0].reason == "duplicate"
    assert report["rejected_by_reason"]["duplicate"] == 1
    accepted, rejected, _ = filter_tasks([a, b], FACTS, drop_duplicates=False)
    assert len(accepted) == 2 and not rejected


def test_report_counts_every_reason_and_rejects_keep_the_task():
    cases = [task("pick_and_place_simple", "Unicorn", "CounterTop"), task("pick_and_place_simple", "Apple", "Fridge"),
             task("pick_and_place_simple", "Apple", "DiningTable")]
    accepted, rejected, report = filter_tasks(cases, FACTS)
    assert set(report["rejected_by_reason"]) == set(REASONS)
    assert report["proposed"] == 3 and report["accepted"] == 1 and report["rejected"] == 2
    assert report["rejected_by_reason"]["invalid_item"] == 1
    assert report["rejected_by_reason"]["already_satisfied"] == 1
    assert rejected[0].instruction == cases[0].instruction and rejected[0].detail


def test_scene_facts_from_real_metadata_tables():
    meta = collect_scene(1, SceneParams(floorplans=[1]), MetadataParams())
    facts = scene_facts(to_frame([meta.scene], SceneRecord), to_frame(meta.object_types, ObjectTypeRecord),
                        to_frame(meta.instances, InstanceRecord))["FloorPlan1"]
    inst = meta.instances[0]
    assert facts.counts[inst.object_type] == sum(i.object_type == inst.object_type for i in meta.instances)
    t = task("pick_and_place_simple", inst.object_type, inst.parent_type)
    accepted, rejected, _ = filter_tasks([t], {"FloorPlan1": facts})
    assert rejected and rejected[0].reason == "already_satisfied"
    assert "Window" not in facts.counts  # scenery with no instances is not an item a task may use
