"""In-context prompts for MuEP task generation: four room templates, the object dictionary, ~30 typed examples.

Templates and examples are data files (``prompts/templates.yaml``, ``prompts/examples.yaml``) so they can be read,
diffed and changed without touching code; both are DVC dependencies of the generation stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from core.errors import DataError
from tasks.muep.vocab import TASK_TYPES, catalog

PROMPT_DIR = Path(__file__).parent / "prompts"
TEMPLATES_FILE = PROMPT_DIR / "templates.yaml"
EXAMPLES_FILE = PROMPT_DIR / "examples.yaml"

#: Task types each room type can host (ALFWorld's GOALS_VALID, without the movable-receptacle variant).
ROOM_TASK_TYPES: dict[str, tuple[str, ...]] = {
    "kitchen": ("pick_and_place_simple", "pick_two_obj_and_place", "pick_clean_then_place_in_recep",
                "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep"),
    "living_room": ("pick_and_place_simple", "pick_two_obj_and_place", "look_at_obj_in_light"),
    "bedroom": ("pick_and_place_simple", "pick_two_obj_and_place", "look_at_obj_in_light"),
    "bathroom": ("pick_and_place_simple", "pick_two_obj_and_place", "pick_clean_then_place_in_recep"),
}

APPLIANCE_ROLES = {"Microwave": "heats objects", "Fridge": "cools objects", "SinkBasin": "cleans objects",
                   "DeskLamp": "gives light", "FloorLamp": "gives light"}

DICTIONARY_HEADER = "## Object dictionary"


@dataclass(frozen=True)
class Example:
    room: str
    type: str
    instruction: str
    object: str
    receptacle: str | None = None
    light: str | None = None

    def line(self) -> str:
        target = f"light: {self.light}" if self.type == "look_at_obj_in_light" else f"receptacle: {self.receptacle}"
        return f"type: {self.type} | instruction: {self.instruction} | object: {self.object} | {target}"


@cache
def templates() -> dict:
    data = yaml.safe_load(TEMPLATES_FILE.read_text(encoding="utf-8"))
    missing = set(ROOM_TASK_TYPES) - set(data.get("rooms", {}))
    if "system" not in data or missing:
        raise DataError(f"{TEMPLATES_FILE}: needs `system` and a template under `rooms` for {sorted(missing)}.")
    return data


@cache
def examples() -> tuple[Example, ...]:
    data = yaml.safe_load(EXAMPLES_FILE.read_text(encoding="utf-8"))
    out = []
    types = catalog().types
    for i, item in enumerate(data.get("examples", []), start=1):
        try:
            ex = Example(**item)
        except TypeError as exc:
            raise DataError(f"{EXAMPLES_FILE}: example {i}: {exc}.") from None
        bad = [v for v in (ex.object, ex.receptacle, ex.light) if v is not None and v not in types]
        if ex.type not in TASK_TYPES or ex.room not in ROOM_TASK_TYPES or bad:
            raise DataError(f"{EXAMPLES_FILE}: example {i} has an unknown room, task type or object type {bad}.")
        out.append(ex)
    return tuple(out)


def dictionary_lines(type_counts: dict[str, int]) -> list[str]:
    """``- Apple (2): pickupable, heatable, ...`` for every type with instances in the scene."""
    cat = catalog()
    lines = []
    for obj_type in sorted(type_counts):
        count = type_counts[obj_type]
        if count <= 0:
            continue
        attrs = [name for name, on in cat.attributes(obj_type).items() if on]
        if obj_type in APPLIANCE_ROLES:
            attrs.append(APPLIANCE_ROLES[obj_type])
        lines.append(f"- {obj_type} ({count}): {', '.join(attrs) or 'no operational attributes'}")
    return lines


def build_messages(
    scene: str, room: str, type_counts: dict[str, int], n_tasks: int, n_examples: int, request: int, n_requests: int
) -> list[dict[str, str]]:
    t = templates()
    shown = examples()[:n_examples]
    user = t["rooms"][room].format(
        scene=scene,
        room=room.replace("_", " "),
        dictionary="\n".join(dictionary_lines(type_counts)),
        examples="\n".join(f"- {ex.line()}" for ex in shown) or "(none)",
        n_tasks=n_tasks,
        request=request + 1,
        n_requests=n_requests,
        task_types=", ".join(ROOM_TASK_TYPES[room]),
    )
    return [{"role": "system", "content": t["system"].strip()}, {"role": "user", "content": user.strip()}]
