"""Free text from an LLM -> structured MuEP tasks; what cannot be parsed becomes a reject with its reason.

The expected line is ``N. type: <type> | instruction: <sentence> | object: <Type> | receptacle: <Type>`` (or
``light: <Lamp>``), but models drift: numbering and bullets, markdown, preambles and sign-offs, code fences, JSON
instead of lines, missing fields, other languages, a last line cut off by the token limit. The parser accepts what
it can recover (the task type and the items can be read off a plain English sentence) and rejects the rest with a
reason. It does not judge feasibility: an item that is not in the scene is kept (``object_type`` None when the name
is no AI2-THOR type at all) and left to the filter, whose criteria need the scene.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tasks.muep.vocab import TASK_TYPES, _lookup, _norm, canonical_task_type, canonical_type

PARSE_REJECT_REASONS = (
    "empty_response", "truncated", "wrong_language", "malformed_json", "not_a_task", "unknown_task_type",
    "missing_instruction", "missing_object", "missing_receptacle",
)

_FIELD_KEYS = {
    "type": "type", "tasktype": "type", "category": "type", "kind": "type",
    "instruction": "instruction", "task": "instruction", "description": "instruction", "goal": "instruction",
    "object": "object", "item": "object", "target": "object", "targetobject": "object", "obj": "object",
    "receptacle": "receptacle", "recep": "receptacle", "destination": "receptacle", "location": "receptacle",
    "place": "receptacle", "container": "receptacle",
    "light": "light", "lamp": "light", "lightsource": "light", "toggle": "light",
}
_LEAD = re.compile(r"^\s*(?:[-*+•]|\d+\s*[.):\]]|\(\d+\)|task\s*\d+\s*[:.)-])\s*", re.IGNORECASE)
_BRACKET_TYPE = re.compile(r"^[\[(]\s*([^\])]{2,60})\s*[\])]\s*[:\-–]?\s*(.*)$")
_TYPE_KEYWORDS = (
    ("pick_heat_then_place_in_recep", r"\b(heat|warm|cook|microwave|hot)\w*"),
    ("pick_cool_then_place_in_recep", r"\b(cool|chill|cold|refrigerat|freez)\w*"),
    ("pick_clean_then_place_in_recep", r"\b(clean|wash|rinse|scrub)\w*"),
    ("look_at_obj_in_light", r"\b(look at|examine|inspect|study|read)\b|\bin the light\b|\bunder the\b.*\blamp\b"),
    ("pick_two_obj_and_place", r"\b(two|2|both|pair of)\b"),
    ("pick_and_place_simple", r"\b(put|place|move|bring|set|take|carry|drop|store|leave)\b"),
)


@dataclass
class ParsedTask:
    line_no: int
    raw_line: str
    task_type: str
    instruction: str
    object_name: str
    object_type: str | None
    receptacle_name: str | None
    receptacle_type: str | None
    light_name: str | None
    light_type: str | None
    goal_conditions: list[str] = field(default_factory=list)


@dataclass
class ParseReject:
    line_no: int
    raw_line: str
    reason: str
    detail: str


def _strip_markup(line: str) -> str:
    line = line.replace("**", "").replace("__", "").replace("`", "").strip()
    previous = None
    while previous != line:  # "1. - **Task 3:** ..." has several layers
        previous = line
        line = _LEAD.sub("", line, count=1).strip()
    return line


def _is_foreign(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    non_latin = sum(1 for c in letters if ord(c) > 0x24F)
    return non_latin / len(letters) > 0.3


def _mentions(text: str) -> list[str]:
    """AI2-THOR types mentioned in a sentence, in order, longest spelling first ("spray bottle" before "bottle")."""
    words = re.findall(r"[a-zA-Z]+", text.lower())
    lookup = _lookup()
    found: list[str] = []
    i = 0
    while i < len(words):
        for n in (3, 2, 1):
            chunk = "".join(words[i:i + n])
            if len(words[i:i + n]) == n and chunk in lookup:
                found.append(lookup[chunk])
                i += n
                break
        else:
            i += 1
    return found


def _infer_type(instruction: str) -> str | None:
    low = instruction.lower()
    for name, pattern in _TYPE_KEYWORDS:
        if re.search(pattern, low):
            return name
    return None


def _fields(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in line.split("|"):
        key, sep, value = part.partition(":")
        if not sep:
            continue
        canon = _FIELD_KEYS.get(_norm(key))
        if canon and value.strip():
            out.setdefault(canon, value.strip().rstrip(";").strip())
    return out


def _from_fields(fields: dict[str, Any], line_no: int, raw: str) -> ParsedTask | ParseReject:
    type_label = str(fields.get("type") or "").strip()
    instruction = str(fields.get("instruction") or "").strip()
    task_type = canonical_task_type(type_label) if type_label else None
    if task_type is None and type_label:
        inferred = _infer_type(type_label)
        task_type = inferred if inferred and len(type_label) < 60 else None
        if task_type is None:
            return ParseReject(line_no, raw, "unknown_task_type", f"unknown task type {type_label!r}")
    if not instruction:
        return ParseReject(line_no, raw, "missing_instruction", "no instruction sentence")
    if task_type is None:
        task_type = _infer_type(instruction)
        if task_type is None:
            return ParseReject(line_no, raw, "unknown_task_type", "no task type given and none can be read off")
    spec = TASK_TYPES[task_type]
    mentions = _mentions(instruction)
    lamps = [m for m in mentions if m in ("DeskLamp", "FloorLamp")]
    things = [m for m in mentions if m not in ("DeskLamp", "FloorLamp")]

    object_name = str(fields.get("object") or "").strip()
    if not object_name:
        if not things:
            return ParseReject(line_no, raw, "missing_object", "no object named in the fields or the sentence")
        object_name = things[0]
    object_type = canonical_type(object_name)

    receptacle_name = light_name = None
    if spec.needs_receptacle:
        receptacle_name = str(fields.get("receptacle") or "").strip() or None
        if receptacle_name is None:
            rest = [m for m in things if m != object_type]
            if not rest:
                return ParseReject(line_no, raw, "missing_receptacle", f"a {spec.label} task needs a receptacle")
            receptacle_name = rest[-1]
    else:
        light_name = str(fields.get("light") or fields.get("receptacle") or "").strip() or None
        if light_name is None:
            light_name = lamps[0] if lamps else "DeskLamp"  # "in the light" with no lamp named: a desk lamp
    receptacle_type = canonical_type(receptacle_name) if receptacle_name else None
    light_type = canonical_type(light_name) if light_name else None
    goals = spec.goal_conditions(object_type or object_name, receptacle_type or receptacle_name,
                                 light_type or light_name)
    return ParsedTask(line_no, raw, task_type, instruction, object_name, object_type, receptacle_name,
                      receptacle_type, light_name, light_type, goals)


def _parse_line(line: str, line_no: int) -> ParsedTask | ParseReject:
    raw = line
    text = _strip_markup(line)
    if _is_foreign(text):
        return ParseReject(line_no, raw, "wrong_language", "the line is not in English")
    fields = _fields(text)
    if "instruction" not in fields and "type" not in fields:
        bracket = _BRACKET_TYPE.match(text)
        if bracket and canonical_task_type(bracket.group(1)):
            fields = {"type": bracket.group(1), "instruction": bracket.group(2).strip()} | fields
        elif fields:  # "object: X | receptacle: Y" with the sentence in the first part
            first = text.split("|")[0]
            if ":" not in first:
                fields["instruction"] = first.strip()
        else:
            if not _mentions(text) or _infer_type(text) is None:
                return ParseReject(line_no, raw, "not_a_task", "no task type and no household object in the line")
            fields = {"instruction": text}
    return _from_fields(fields, line_no, raw)


def _json_items(text: str) -> list[dict[str, Any]] | None:
    """A JSON answer (list of objects, or an object holding one): its items with our field names, else None."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else [data]
    if not isinstance(data, list):
        return None
    items = []
    for item in data:
        if isinstance(item, dict):
            items.append({_FIELD_KEYS.get(_norm(str(k)), str(k)): v for k, v in item.items()})
        else:
            items.append({"instruction": str(item)})
    return items


def parse_response(text: str, finish_reason: str = "stop") -> tuple[list[ParsedTask], list[ParseReject]]:
    if not text or not text.strip():
        return [], [ParseReject(0, text or "", "empty_response", "the model returned no text")]
    body = "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("```"))
    stripped = body.strip()
    if stripped[:1] in "[{":
        items = _json_items(stripped)
        if items is None:
            reason = "truncated" if finish_reason == "length" else "malformed_json"
            return [], [ParseReject(0, text, reason, "the answer looks like JSON but does not parse")]
        tasks, rejects = [], []
        for i, item in enumerate(items, start=1):
            result = _from_fields(item, i, json.dumps(item, ensure_ascii=False))
            (tasks if isinstance(result, ParsedTask) else rejects).append(result)
        return tasks, rejects

    lines = [(i, ln) for i, ln in enumerate(body.splitlines(), start=1) if ln.strip()]
    tasks: list[ParsedTask] = []
    rejects: list[ParseReject] = []
    for pos, (line_no, line) in enumerate(lines):
        if finish_reason == "length" and pos == len(lines) - 1:
            rejects.append(ParseReject(line_no, line, "truncated", "the answer hit the token limit inside this line"))
            continue
        result = _parse_line(line, line_no)
        (tasks if isinstance(result, ParsedTask) else rejects).append(result)
    return tasks, rejects
