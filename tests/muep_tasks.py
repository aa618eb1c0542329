"""Hand-made MuEP task records for tests (the fields the generation stage would fill)."""

from __future__ import annotations

from tasks.muep.generate import TaskRecord
from tasks.muep.vocab import TASK_TYPES


def make_task(scene: str, floorplan: int, room: str, task_type: str, obj: str, target: str, tid: str) -> TaskRecord:
    spec = TASK_TYPES[task_type]
    look = not spec.needs_receptacle
    goals = spec.goal_conditions(obj, None if look else target, target if look else None)
    return TaskRecord(
        task_id=tid, scene=scene, floorplan=floorplan, room_type=room, split="seen", task_type=task_type,
        instruction=f"{task_type.replace('_', ' ')}: {obj} -> {target}", object_name=obj, object_type=obj,
        receptacle_name=None if look else target, receptacle_type=None if look else target,
        light_name=target if look else None, light_type=target if look else None, goal_conditions=goals,
        n_goal_conditions=len(goals), request_index=0, line_no=0, raw_line="", backend="test", model="test",
        prompt_hash="", response_key="", finish_reason="stop")
