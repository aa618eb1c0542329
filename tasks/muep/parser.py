"""Free text from an LLM -> structured MuEP tasks; what cannot be parsed becomes a reject with its reason.

The expected line is ``N. type: <type> | instruction: <sentence> | object: <Type> | receptacle: <Type>`` (or
``light: <Lamp>``), but models drift: numbering and bullets, markdown, preambles and sign-offs, code fences, JSON
instead of lines, missing fields, other languages, a last line cut off by the token limit. The parser accepts what
it can recover (the task type and the items can be read off a plain English sentence) and rejects the rest with a
reason. It does not judge feasibility: an item that is not in the scene is kept (``object_type`` None when the name
is no AI2-THOR type at all) and left to the filter, whose criteria need the scene.

Nothing is dropped silently: every non-empty line outside code fences ends up in exactly one task or reject. A task
written as a block of one-field lines (``Type: ...`` / ``Instruction: ...`` / ...), or as a sentence followed by
indented field lines, is one record whose ``raw_line`` holds the block's lines and whose ``line_no`` is the block's
first line. For a JSON answer ``line_no`` is the line where the item starts (bumped to the next free number when
several items share one line, so that task ids stay distinct) and ``raw_line`` the item as JSON.

Reading a plain sentence: the task type comes from its verbs (heat / cool / clean / look at, "two", put / place);
the object is the noun phrase after the first verb; the target is the first item after in / on / into / to
following the last placing verb ("from the counter", "next to the lettuce" are not targets). "Heat an apple in the
microwave" names no destination (missing_receptacle); "Put the mug in the microwave" is a pick & place. "sink" and
"bathtub" are the basins ALFWorld uses as receptacles. A Latin-script line in another language (German, French,
Spanish...) is wrong_language like a non-Latin one. With ``finish_reason == "length"`` the last line is truncated
unless the text ends with a line break; a cut-off JSON answer keeps its complete items.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tasks.muep.vocab import (
    TASK_TYPES,
    _lookup,
    _norm,
    canonical_task_type,
    canonical_type,
    catalog,
)

PARSE_REJECT_REASONS = (
    "empty_response", "truncated", "wrong_language", "malformed_json", "not_a_task", "unknown_task_type",
    "missing_instruction", "missing_object", "missing_receptacle",
)

_FIELD_KEYS = {
    "type": "type", "tasktype": "type", "category": "type", "kind": "type",
    "instruction": "instruction", "instructions": "instruction", "task": "instruction", "description": "instruction",
    "goal": "instruction", "sentence": "instruction",
    "object": "object", "item": "object", "target": "object", "targetobject": "object", "obj": "object",
    "objecttype": "object", "objectname": "object",
    "receptacle": "receptacle", "recep": "receptacle", "destination": "receptacle", "location": "receptacle",
    "place": "receptacle", "container": "receptacle", "receptacletype": "receptacle", "receptaclename": "receptacle",
    "targetreceptacle": "receptacle",
    "light": "light", "lamp": "light", "lightsource": "light", "toggle": "light", "lighttype": "light",
    "lightname": "light",
}
#: Field keys as they are written in a line; longer spellings first so "object type:" is not read as "object".
_KEY_SPELLINGS = (
    r"task[ _-]?type", r"object[ _-]?type", r"object[ _-]?name", r"target[ _-]?object", r"target[ _-]?receptacle",
    r"receptacle[ _-]?type", r"receptacle[ _-]?name", r"light[ _-]?source", r"light[ _-]?type", r"light[ _-]?name",
    r"instructions?", r"description", r"destination", r"receptacle", r"container", r"location", r"category",
    r"sentence", r"object", r"target", r"recep", r"place", r"light", r"toggle", r"type", r"kind", r"task", r"goal",
    r"item", r"lamp", r"obj",
)
_KEY = re.compile(r"(?<![A-Za-z0-9])[*_]?(" + "|".join(_KEY_SPELLINGS) + r")[*_]?\s*[:=]", re.IGNORECASE)

#: List markers and numbering in front of a line: "-", "*", "•", "1.", "1)", "(1)", "[1]", "Task 3:", "### Task 3".
_LEAD = re.compile(
    r"^\s*(?:#{1,6}(?=\s|$)|#\d{1,3}\b[.):]?|[-*+•–—·▪‣◦●]|\d{1,3}\s*[.):\]]|\d{1,3}\s+[-–—](?=\s)|\(\d{1,3}\)|"
    r"\[\d{1,3}\]|task\s*#?\s*\d{1,3}\s*(?:[:.)\-–—]|$))\s*",
    re.IGNORECASE,
)
_NUMBERED = re.compile(r"^\s*(?:#{0,6}\s*)?(?:\(?\[?\d|#\d|task\s*#?\s*\d)", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_JSON_START = re.compile(r"^\s*(?:\[\s*(?:[{\[\"'\]]|$)|\{\s*(?:[\"'}]|$))")
_BRACKET_TYPE = re.compile(r"^[\[(]\s*([^\])]{2,60}?)\s*[\])]\s*[:\-–—]?\s*(.*)$")
_TRAILING_TYPE = re.compile(
    r"^(.*?\S)\s*(?:[\[(]\s*([^\])]{2,60}?)\s*[\])]|\s[-–—]\s*([A-Za-z][A-Za-z0-9 &_/,+'-]{1,60}))\s*$")
_LABEL_TYPE = re.compile(r"^([A-Za-z][A-Za-z0-9 &_/,+'-]{1,60}?)\s*(?::|\s[-–—]\s|[–—])\s*(.+)$")
_CHATTER = re.compile(
    r"^(?:here\b|sure\b|certainly\b|of course\b|okay\b|ok\b|great\b|absolutely\b|note\b|notes\b|i\b|i'(?:m|ve|d|ll)\b"
    r"|let me\b|let's\b|these\b|below\b|hope\b|feel free\b|as requested\b|the following\b|following\b|all of\b"
    r"|each of\b|this list\b|in summary\b|summary\b|that's\b|thanks?\b)",
    re.IGNORECASE,
)
_PRONOUNS = {"it", "them", "one", "something", "everything", "anything", "thing", "things", "this", "that", "those",
             "these", "item", "items", "object", "objects", "stuff"}

_HEAT = r"\b(?:heat\w*|warm\w*|cook\w*|hot|hotter|microwave(?=\s+(?:the|a|an|some|it|them|two|both)\b))"
_COOL = r"\b(?:cool\w*|chill\w*|cold\w*|refrigerat(?:e|es|ed|ing)\b|freez(?:e|es|ing)\b|frozen)"
_CLEAN = r"\b(?:clean\w*|wash(?:es|ed|ing)?\b|rinse\w*|scrub\w*)"
_LOOK = (r"\b(?:look(?:ing)? at|examine\w*|inspect\w*|study|studying|read|reading|check out)\b|\bin the light\b|"
         r"\blight of\b|\b(?:under|beneath)\b.*\blamp\b|\b(?:turn|switch)(?:ed|ing)?\s+on\b.*\blamp\b|"
         r"\blamp\b.*\b(?:turned|switched)\s+on\b")
_TWO = r"\b(?:two|2|both|pair of|couple of)\b"
_PLACE_VERBS = (r"\b(?:put|puts|place|places|move|moves|bring|set|take|carry|drop|store|leave|return|hang|stack|"
                r"transfer|toss|throw|insert|deposit|keep)\b")
_TYPE_KEYWORDS = (
    ("pick_heat_then_place_in_recep", _HEAT),
    ("pick_cool_then_place_in_recep", _COOL),
    ("pick_clean_then_place_in_recep", _CLEAN),
    ("look_at_obj_in_light", _LOOK),
    ("pick_two_obj_and_place", _TWO),
    ("pick_and_place_simple", _PLACE_VERBS),
)
#: A type label ("Microwave & Place", "Pick, Chill and Place") names the appliance or the state, not a sentence.
_LABEL_KEYWORDS = (
    ("pick_heat_then_place_in_recep", r"heat|warm|hot|cook|microwave"),
    ("pick_cool_then_place_in_recep", r"cool|chill|cold|fridge|refrigerat|freez"),
    ("pick_clean_then_place_in_recep", r"clean|wash|rinse|scrub|sink"),
    ("look_at_obj_in_light", r"look|light|lamp|examine|inspect"),
    ("pick_two_obj_and_place", r"\btwo\b|\b2\b|both|pair|multiple"),
    ("pick_and_place_simple", r"pick|place|put|move"),
)
_PREPOSITION = re.compile(
    r"\b(on top of|in front of|next to|close to|away from|out of|into|onto|inside|in|on|to|at|from|off|near|beside|"
    r"behind|by|under|beneath|with|of)\b", re.IGNORECASE)
_DESTINATION = frozenset({"on top of", "into", "onto", "inside", "in", "on", "to", "at"})
#: A line that opens like a statement or a remark (not an imperative): chatter even when it names objects.
_STATEMENT = re.compile(r"^\W*(?:the|a|an|this|that|these|those|it|its|it's|there|here|i|i'm|we|you|they|my|our|"
                        r"your|their|some|all|each|every|both|note|also)\b", re.IGNORECASE)
_LABEL_WORDS = frozenset((
    "pick place put move and then in into on recep receptacle obj object objects item items simple task the a an it "
    "up heat heated heating warm hot cook microwave cool cooled cooling chill chilled cold fridge refrigerate freeze "
    "clean cleaned cleaning wash rinse scrub sink look at light lamp examine inspect under two 2 both pair of multiple"
).split())
_OBJECT_PHRASE = re.compile(
    r"\b(?:put|place|move|bring|take|set|carry|drop|store|leave|return|throw|toss|hang|stack|transfer|heat|"
    r"warm(?:\s+up)?|cook|microwave|cool(?:\s+down)?|chill|refrigerate|freeze|clean|wash|rinse|scrub|look\s+at|"
    r"examine|inspect|study|read|hold|pick\s+up|grab|find|get|fetch)\s+(?:up\s+)?"
    r"(?:(?:the|a|an|some|two|2|both|one|another|any|your)\s+)?(?:of\s+the\s+)?([a-z][a-z' -]*?)"
    r"(?=\s+(?:in|on|into|onto|to|inside|under|by|and|then|from|next|at|with|near|beside|underneath|out|off|"
    r"back|so|until|for)\b|\s*[,.;:!?)(]|$)",
    re.IGNORECASE,
)
#: The AI2-THOR object that contains the basin is not the receptacle: ALFWorld's receptacle is the basin.
_PREFER = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin",
           # "toilet paper roll" is the roll itself: AI2-THOR's ToiletPaper (no scene has a ToiletPaperRoll)
           "ToiletPaperRoll": "ToiletPaper"}
_LAMPS = ("DeskLamp", "FloorLamp")

_ENGLISH_WORDS = frozenset(
    "the a an and in on it to of then into onto with from under by put place them its is up at".split())
_FOREIGN_WORDS = frozenset(
    "der die das den dem des und ist mit auf ein eine einen einem einer nach im zum zur lege leg stelle stell bitte "
    "dann sie es le la les et dans sur une un du puis el los las y con una del luego il lo gli nel sulla poi het een "
    "op zet leg neem".split())


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


# --------------------------------------------------------------------------------------------------------------------
# Words


def _strip_markup(line: str) -> str:
    line = line.replace("**", "").replace("__", "").replace("`", "").strip()
    previous = None
    while previous != line:  # "1. - **Task 3:** ..." has several layers
        previous = line
        line = _LEAD.sub("", line, count=1).strip()
    return line


def _is_foreign(text: str) -> bool:
    """Mostly non-Latin script (Chinese, Cyrillic, ...), or a Latin-script sentence in German, French, Spanish...."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    non_latin = sum(1 for c in letters if ord(c) > 0x24F)
    if non_latin / len(letters) > 0.3:
        return True
    words = re.findall(r"[^\W\d_]+", text.lower())
    foreign = sum(w in _FOREIGN_WORDS for w in words)
    english = sum(w in _ENGLISH_WORDS for w in words)
    return foreign >= 2 and foreign > english


def _mentions(text: str) -> list[str]:
    """AI2-THOR types mentioned in a sentence, in order, longest spelling first ("spray bottle" before "bottle").
    Of two items named back to back ("the desk drawer", "a wine glass") only the last, the head noun, counts."""
    words = list(re.finditer(r"[a-zA-Z]+", text.lower()))
    lookup = _lookup()
    found: list[str] = []
    previous_end = -1
    i = 0
    while i < len(words):
        for n in (3, 2, 1):
            chunk = "".join(w.group() for w in words[i:i + n])
            if len(words[i:i + n]) == n and chunk in lookup:
                obj_type = _PREFER.get(lookup[chunk], lookup[chunk])
                if found and previous_end >= 0 and re.fullmatch(r"[\s-]*", text[previous_end:words[i].start()]):
                    found[-1] = obj_type
                else:
                    found.append(obj_type)
                previous_end = words[i + n - 1].end()
                i += n
                break
        else:
            i += 1
    return found


def _type_of(name: str | None) -> str | None:
    """A field's item name -> AI2-THOR type: "apple 1", "Apple_1", "apple #2", "the red apple", "Sink" (the basin)."""
    if not name:
        return None
    cleaned = re.sub(r"[\s_#-]*[(\[]?\d+[)\]]?$", "", name.strip()) or name
    found = canonical_type(cleaned) or canonical_type(name)
    if found is None:
        inside = set(_mentions(cleaned))
        found = inside.pop() if len(inside) == 1 else None
    return _PREFER.get(found, found) if found else None


def _infer_type(instruction: str) -> str | None:
    low = instruction.lower()
    for name, pattern in _TYPE_KEYWORDS:
        if re.search(pattern, low):
            return name
    return None


def _label_type(label: str) -> str | None:
    """A task type label -> task type: an alias, or (for a short label) the state or action it names."""
    found = canonical_task_type(label)
    if found or len(label) >= 60:
        return found
    low = label.lower()
    if set(re.findall(r"[a-z]+|\d+", low)) - _LABEL_WORDS:  # "slice then place", "juggle": another operation
        return None
    for name, pattern in _LABEL_KEYWORDS:
        if re.search(pattern, low):
            return name
    return None


def _scalar(value: Any) -> str:
    if isinstance(value, list | tuple):
        value = next((v for v in value if isinstance(v, str | int | float) and str(v).strip()), "")
    if value is None or isinstance(value, dict):
        return ""
    return str(value).strip()


def _clean_value(value: str, sentence: bool = False) -> str:
    value = value.strip().strip("|;,").strip()
    if not sentence:
        value = value.strip("()[]").rstrip(".").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1].strip()
    return value


# --------------------------------------------------------------------------------------------------------------------
# One task


def _fields(text: str) -> tuple[dict[str, str], str, list[str]]:
    """``key: value`` fields of a line (separated by |, ;, commas or nothing), the free text before the first key,
    and the canonical keys in the order written."""
    matches = list(_KEY.finditer(text))
    out: dict[str, str] = {}
    order: list[str] = []
    for m, nxt in zip(matches, [*matches[1:], None][:len(matches)], strict=True):
        canon = _FIELD_KEYS[_norm(m.group(1))]
        order.append(canon)
        value = text[m.end():nxt.start() if nxt else len(text)].split("|")[0]
        value = _clean_value(value, sentence=canon == "instruction")
        if value:
            out.setdefault(canon, value)
    prefix = text[:matches[0].start()] if matches else text
    return out, _clean_value(prefix.rstrip("([{"), sentence=True), order


def _guess_object(instruction: str, things: list[str]) -> tuple[str | None, str | None]:
    """The object a sentence is about: the noun phrase after its first verb, else its first pickupable item."""
    pickable = [t for t in things if t in catalog().pickupable]
    m = _OBJECT_PHRASE.search(instruction)
    if m:
        phrase = m.group(1).strip()
        inside = [t for t in _mentions(phrase) if t not in _LAMPS]
        if inside:
            return inside[0], inside[0]
        words = phrase.lower().split()
        if words and len(words) <= 3 and not set(words) & _PRONOUNS and not _mentions(phrase) and not pickable:
            return phrase, None  # "the unicorn": kept by name, no AI2-THOR type; the filter rejects it
    # With nothing pickupable named, the first item is the object only if another one can be the target: in
    # "Put it in the fridge" the fridge is where it goes, and the object is missing.
    first = (pickable or (things if len(things) >= 2 else []) or [None])[0]
    return first, first


def _guess_receptacle(instruction: str, task_type: str, object_type: str | None, things: list[str]) -> str | None:
    """Where the object goes: after the last placing verb, the first item in a destination phrase ("in/on/into/to
    the X", not "from/near/next to the X"); else the last item that is not the appliance doing the heating /
    cooling / cleaning ("Heat an apple in the microwave" names no destination)."""
    verbs = list(re.finditer(_PLACE_VERBS, instruction, re.IGNORECASE))
    if verbs:
        segment = instruction[verbs[-1].end():]
        preps = list(_PREPOSITION.finditer(segment))
        for prep, nxt in zip(preps, [*preps[1:], None][:len(preps)], strict=True):
            if prep.group(1).lower() in _DESTINATION:
                chunk = segment[prep.end():nxt.start() if nxt else len(segment)]
                # a destination phrase names the destination, even one of the object's own type ("put a book in
                # the book": parsed as such, and left to the filter's attribute criterion, as the paper has it)
                inside = [t for t in _mentions(chunk) if t not in _LAMPS]
                if inside:
                    return inside[0]
        after = [t for t in _mentions(segment) if t != object_type and t not in _LAMPS]
        if after:
            return after[-1]
    appliances = TASK_TYPES[task_type].appliances if TASK_TYPES[task_type].state_predicate else ()
    candidates = [t for t in things if t != object_type and t not in appliances]
    return candidates[-1] if candidates else None


def _from_fields(fields: dict[str, Any], line_no: int, raw: str) -> ParsedTask | ParseReject:
    type_label = _scalar(fields.get("type"))
    instruction = _clean_value(_scalar(fields.get("instruction")), sentence=True)
    if instruction and _is_foreign(instruction):
        return ParseReject(line_no, raw, "wrong_language", "the instruction is not in English")
    task_type = _label_type(type_label) if type_label else None
    if type_label and task_type is None:
        return ParseReject(line_no, raw, "unknown_task_type", f"unknown task type {type_label!r}")
    if not instruction:
        return ParseReject(line_no, raw, "missing_instruction", "no instruction sentence")
    if task_type is None:
        task_type = _infer_type(instruction)
        if task_type is None:
            return ParseReject(line_no, raw, "unknown_task_type", "no task type given and none can be read off")
    spec = TASK_TYPES[task_type]
    mentions = _mentions(instruction)
    lamps = [m for m in mentions if m in _LAMPS]
    things = [m for m in mentions if m not in _LAMPS]

    receptacle_field = _clean_value(_scalar(fields.get("receptacle"))) or None
    light_field = _clean_value(_scalar(fields.get("light"))) or None
    object_name = _clean_value(_scalar(fields.get("object"))) or None
    if object_name:
        object_type = _type_of(object_name)
    else:
        given_target = _type_of(receptacle_field if spec.needs_receptacle else None)
        object_name, object_type = _guess_object(instruction, [t for t in things if t != given_target])
        if object_name is None:
            return ParseReject(line_no, raw, "missing_object", "no object named in the fields or the sentence")

    receptacle_name = light_name = None
    if spec.needs_receptacle:
        receptacle_name = receptacle_field or _guess_receptacle(instruction, task_type, object_type, things)
        if receptacle_name is None:
            return ParseReject(line_no, raw, "missing_receptacle", f"a {spec.label} task needs a receptacle")
    else:
        light_name = light_field or receptacle_field
        if light_name is None:
            light_name = lamps[0] if lamps else "DeskLamp"  # "in the light" with no lamp named: a desk lamp
    receptacle_type = _type_of(receptacle_name)
    light_type = _type_of(light_name)
    goals = spec.goal_conditions(object_type or object_name, receptacle_type or receptacle_name,
                                 light_type or light_name)
    return ParsedTask(line_no, raw, task_type, instruction, object_name, object_type, receptacle_name,
                      receptacle_type, light_name, light_type, goals)


def _json_fields(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in item.items():
        canon = _FIELD_KEYS.get(_norm(str(key)))
        if canon and canon not in out and _scalar(value):
            out[canon] = value
    return out


def _cells(text: str) -> list[str]:
    return [c.strip() for c in text.strip().strip("|").split("|")]


def _positional(text: str) -> dict[str, str] | None:
    """Fields of a pipe-separated line without keys: ``[N |] type | instruction | object | receptacle-or-light``."""
    cells = [c for c in _cells(text) if c and not re.fullmatch(r"#?\d{1,3}[.)]?", c)]
    if len(cells) < 3 or len(cells) > 5 or not _label_type(cells[0]) or len(cells[1].split()) < 3:
        return None
    out = {"type": cells[0], "instruction": cells[1], "object": cells[2]}
    if len(cells) > 3:
        out["light" if _label_type(cells[0]) == "look_at_obj_in_light" else "receptacle"] = cells[3]
    return out


def _table_header(text: str) -> list[str | None] | None:
    """A markdown table header naming our fields ("| # | Type | Instruction | Object | Receptacle |"): the field
    of each column, else None."""
    if not text.lstrip().startswith("|") or text.count("|") < 3:
        return None
    columns = [_FIELD_KEYS.get(_norm(c)) for c in _cells(text)]
    named = {c for c in columns if c}
    return columns if "instruction" in named and len(named) >= 2 else None


def _read(text: str) -> tuple[dict[str, Any] | None, bool]:
    """The fields written in one line (or one JSON string): JSON, ``key: value`` fields, a type label in front or at
    the end, positional cells, or a plain sentence as the instruction. Also whether it is a plain sentence, whose
    task type and items must be read off it. None for a JSON object with none of our fields."""
    if text.startswith("{"):
        data = _loads(text.rstrip(",").strip())
        if isinstance(data, dict):
            return _json_fields(data) or None, False
    label = None
    bracket = _BRACKET_TYPE.match(text)
    if bracket and _label_type(bracket.group(1)):  # "[clean] Wash the mug ...", "(Heat & Place) ..."
        label, text = bracket.group(1), bracket.group(2).strip()
    else:
        labelled = _LABEL_TYPE.match(text)  # "Heat & Place: Heat the potato ...", "Pick Two & Place - Put ..."
        if (labelled and canonical_task_type(labelled.group(1))
                and _norm(labelled.group(1)) not in _FIELD_KEYS):
            label, text = labelled.group(1), labelled.group(2).strip()
    fields, prefix, keys = _fields(text)
    if not keys and label is None and text.count("|") >= 2:
        cells = _positional(text)  # "heat | Heat the potato ... | Potato | CounterTop", a table row without header
        if cells:
            return cells, False
    if not keys and label is None:
        trailing = _TRAILING_TYPE.match(text)  # "Put the apple in the fridge. (pick_and_place_simple)"
        found = trailing and (trailing.group(2) or trailing.group(3))
        if found and (_label_type(found) if trailing.group(2) else canonical_task_type(found)):
            label, text = found, trailing.group(1)
            fields, prefix, keys = _fields(text)
    if label is not None:
        fields.setdefault("type", label)
    if prefix and "instruction" not in fields and not prefix.endswith(":") and not _CHATTER.match(prefix):
        fields["instruction"] = prefix
    return fields, not keys and label is None


def _sentence_reject(text: str, line_no: int, raw: str) -> ParseReject | None:
    """Why a plain sentence is no task: another language, chatter, or nothing to do with household objects."""
    if _is_foreign(text):
        return ParseReject(line_no, raw, "wrong_language", "the line is not in English")
    if not text or text.endswith(":") or _CHATTER.match(text):
        return ParseReject(line_no, raw, "not_a_task", "a heading, preamble or comment, not a task")
    mentions = _mentions(text)
    if not mentions:
        what = "no household object" if _infer_type(text) else "no task type and no household object"
        return ParseReject(line_no, raw, "not_a_task", f"{what} in the line")
    if _infer_type(text) is None:
        named = ", ".join(dict.fromkeys(mentions))
        if _STATEMENT.match(text):
            return ParseReject(line_no, raw, "not_a_task", f"a statement about {named}, not an instruction")
        return ParseReject(line_no, raw, "unknown_task_type", f"names {named} but no task type can be read off")
    return None


def _parse_text(text: str, line_no: int, raw: str) -> ParsedTask | ParseReject:
    """One task written on one line (or one JSON string)."""
    fields, sentence = _read(text)
    if fields is None:
        return ParseReject(line_no, raw, "not_a_task", "a JSON object with none of the task fields")
    if sentence:
        reject = _sentence_reject(text, line_no, raw)
        if reject:
            return reject
    return _from_fields(fields, line_no, raw)


# --------------------------------------------------------------------------------------------------------------------
# Whole answers


@dataclass
class _Line:
    no: int
    raw: str
    text: str
    keys: list[str]
    indent: int
    numbered: bool
    table: str | None = None
    """"header" or "rule" for those rows of a markdown table whose header names our fields, "row" for its rows."""
    table_fields: dict[str, str] = field(default_factory=dict)

    @property
    def fields_only(self) -> bool:
        """Only ``key: value`` fields, no free text before the first key."""
        return bool(self.keys) and bool(_KEY.match(self.text))

    @property
    def sentence(self) -> bool:
        """A task sentence that indented field lines may complete ("1. Put the apple in the fridge." followed by
        "   - Type: pick_and_place_simple")."""
        return (not self.keys and bool(self.text) and not self.text.endswith(":") and not _CHATTER.match(self.text)
                and not self.table)

    @property
    def header(self) -> bool:
        """A bare task header: "1.", "Task 3:", "### Task 3"."""
        return not self.text and self.numbered


def _line(no: int, raw: str) -> _Line:
    text = _strip_markup(raw)
    keys = _fields(text)[2] if not text.startswith("{") else []
    return _Line(no, raw, text, keys, len(raw) - len(raw.lstrip()), bool(_NUMBERED.match(raw.lstrip(" \t*_>"))))


def _mark_tables(lines: list[_Line]) -> None:
    columns: list[str | None] | None = None
    for ln in lines:
        header = _table_header(ln.raw)
        if header:
            columns, ln.table = header, "header"
        elif columns and ln.raw.lstrip().startswith("|"):
            cells = _cells(ln.raw)
            if all(re.fullmatch(r":?-*:?", c) for c in cells):
                ln.table = "rule"
            else:
                ln.table = "row"
                ln.table_fields = {col: cell for col, cell in zip(columns, cells, strict=False) if col and cell}
        else:
            columns = None


def _groups(lines: list[_Line]) -> list[list[_Line]]:
    """Consecutive lines that write one task as a block of one-field lines ("Type: ...", "Instruction: ...") are one
    group; every other line is a group of its own."""
    groups: list[list[_Line]] = []
    for ln in lines:
        group = groups[-1] if groups else None
        if group is not None and ln.no == group[-1].no + 1 and ln.fields_only and not ln.table:
            first = group[0]
            keys = {k for g in group for k in g.keys}
            if first.sentence:  # a sentence completed by indented fields: it is the instruction
                keys.add("instruction")
                rest = group[1:]
                open_block = ln.indent > first.indent and all(len(g.keys) == 1 for g in rest)
            else:
                open_block = (all(g.header or len(g.keys) == 1 for g in group)
                              and (first.header or first.fields_only) and not first.table)
            only_headers = all(g.header for g in group)
            if (open_block and (len(ln.keys) == 1 or only_headers) and not keys & set(ln.keys)
                    and not (ln.numbered and ln.indent <= first.indent)):
                group.append(ln)
                continue
        groups.append([ln])
    return groups


def _parse_group(group: list[_Line]) -> ParsedTask | ParseReject:
    raw = "\n".join(g.raw for g in group)
    if group[0].table in ("header", "rule"):
        return ParseReject(group[0].no, raw, "not_a_task", f"the {group[0].table} of a table")
    if group[0].table == "row":
        return _from_fields(group[0].table_fields, group[0].no, raw)
    body = [g for g in group if not g.header]
    if len(body) <= 1:
        return _parse_text((body or group)[0].text, group[0].no, raw)
    fields: dict[str, Any] = {}
    for g in body:
        found, _ = _read(g.text)
        for key, value in (found or {}).items():
            fields.setdefault(key, value)
    return _from_fields(fields, group[0].no, raw)


def _loads(text: str) -> Any:
    """JSON, or a Python literal (single quotes), else None."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _json_values(data: Any) -> list[Any]:
    """The task items in a JSON answer: objects with task fields, or strings, however deeply they are wrapped."""
    if isinstance(data, dict):
        if _json_fields(data):
            return [data]
        return [item for value in data.values() if isinstance(value, list | dict) for item in _json_values(value)]
    if isinstance(data, list):
        out: list[Any] = []
        for item in data:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, list | dict):
                found = _json_values(item)
                out.extend(found if found or not isinstance(item, dict) else [item])
        return out
    return []


def _salvage(span: str) -> tuple[list[tuple[Any, int]], int]:
    """Complete items at the head of a JSON list that does not parse (cut off, or broken further on), with their
    offsets; and the offset where parsing stopped."""
    start = span.find("[")
    if start < 0:
        return [], 0
    decoder = json.JSONDecoder()
    pos, items = start + 1, []
    while True:
        while pos < len(span) and span[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(span) or span[pos] == "]":
            return items, pos
        try:
            value, end = decoder.raw_decode(span, pos)
        except json.JSONDecodeError:
            return items, pos
        items.append((value, pos))
        pos = end


class _Out:
    def __init__(self) -> None:
        self.tasks: list[ParsedTask] = []
        self.rejects: list[ParseReject] = []
        self.last_no = 0

    def add(self, result: ParsedTask | ParseReject) -> None:
        (self.tasks if isinstance(result, ParsedTask) else self.rejects).append(result)
        self.last_no = max(self.last_no, result.line_no)

    def item(self, value: Any, line_no: int) -> None:
        line_no = max(line_no, self.last_no + 1)  # items sharing a line get distinct numbers
        if isinstance(value, str):
            self.add(_parse_text(_strip_markup(value), line_no, value))
            return
        raw = json.dumps(value, ensure_ascii=False)
        fields = _json_fields(value) if isinstance(value, dict) else {}
        self.add(_from_fields(fields, line_no, raw) if fields
                 else ParseReject(line_no, raw, "not_a_task", "a JSON value with none of the task fields"))


def _json_block(content: list[tuple[int, str, bool]], i: int, finish_reason: str, out: _Out) -> int | None:
    """Parse the JSON that starts at content line ``i``; return the index of the first content line after it, or
    None when the line only starts like JSON (``["clean"] Wash the mug ...``) and is to be read as a line."""
    numbers = [no for no, _, _ in content[i:]]
    span = "\n".join(line for _, line, _ in content[i:])

    def line_at(offset: int) -> int:
        return numbers[min(span.count("\n", 0, offset), len(numbers) - 1)]

    def lines_up_to(offset: int) -> int:
        return i + span.count("\n", 0, offset) + 1

    try:
        start = len(span) - len(span.lstrip())
        value, end = json.JSONDecoder().raw_decode(span, start)
        line_end = span.find("\n", end)
        if "\n" not in span[start:end] and span[end:line_end if line_end >= 0 else len(span)].strip(" \t,;"):
            return None  # text after a one-line JSON value on the same line
        items = _json_values(value)
        if not items:
            out.add(ParseReject(line_at(0), span[:end], "not_a_task", "JSON with no task items"))
        positions = _item_offsets(span, end, len(items))
        for item, offset in zip(items, positions, strict=True):
            out.item(item, line_at(offset))
        return lines_up_to(end)
    except json.JSONDecodeError:
        pass
    first = content[i][1].strip()
    last_line = i == len(content) - 1
    if first.startswith("{") and first.rstrip(",").endswith("}"):  # one object per line, this one broken
        data = _loads(first.rstrip(","))
        if isinstance(data, dict):
            out.item(data, content[i][0])
        else:
            truncated = finish_reason == "length" and last_line and not content[i][2]
            out.add(ParseReject(content[i][0], content[i][1], "truncated" if truncated else "malformed_json",
                                "this JSON line does not parse"))
        return i + 1
    items, stop = _salvage(span)
    closed = re.match(r"[\s,\]}]*", span[stop:])
    if items and (stop + closed.end() == len(span) or "]" in closed.group()):
        # a trailing comma before the closing bracket, nothing else wrong: keep the items, read what follows
        for item, offset in items:
            for value in _json_values([item]):
                out.item(value, line_at(offset))
        after = stop + closed.end()
        return lines_up_to(span.rfind("\n", 0, after)) if after < len(span) else len(content)
    closing = [k for k in range(len(content) - 1, i - 1, -1) if content[k][1].rstrip().endswith(("]", "}"))]
    if closing:  # a Python literal ({'type': ...}) instead of JSON
        data = _loads("\n".join(line for _, line, _ in content[i:closing[0] + 1]))
        if isinstance(data, list | dict) and _json_values(data):
            for item in _json_values(data):
                out.item(item, content[i][0])
            return closing[0] + 1
    for item, offset in items:  # cut off, or broken further on: the complete items at its head
        for value in _json_values([item]):
            out.item(value, line_at(offset))
    rest = span[stop:]
    if rest.strip(" \t\r\n,]}"):
        reason = "truncated" if finish_reason == "length" else "malformed_json"
        detail = ("the answer hit the token limit inside this JSON" if reason == "truncated"
                  else "the JSON does not parse from here on")
        out.add(ParseReject(max(line_at(stop), out.last_no + 1) if items else line_at(0),
                            rest if items else span, reason, detail))
    return len(content)


def _item_offsets(span: str, end: int, n: int) -> list[int]:
    """Where each of ``n`` items of a parsed JSON span starts (the elements of its first list), best effort."""
    offsets = [offset for _, offset in _salvage(span[:end])[0]]
    return offsets if len(offsets) == n else [0] * n


def parse_response(text: str, finish_reason: str = "stop") -> tuple[list[ParsedTask], list[ParseReject]]:
    if not text or not text.strip():
        return [], [ParseReject(0, text or "", "empty_response", "the model returned no text")]
    # (line number, line without its line break, whether it had one), blank lines and code fences left out
    content = [(no, (line.splitlines() or [""])[0], (line.splitlines() or [""])[0] != line)
               for no, line in enumerate(text.splitlines(keepends=True), start=1)]
    content = [c for c in content if c[1].strip() and not _FENCE.match(c[1])]
    if not content:
        return [], [ParseReject(0, text, "empty_response", "the answer holds nothing but code fences")]
    out = _Out()
    cut = finish_reason == "length" and not content[-1][2]  # the last line stops mid-way
    not_json: set[int] = set()

    def json_start(k: int) -> bool:
        return k not in not_json and bool(_JSON_START.match(content[k][1]))

    i = 0
    while i < len(content):
        if json_start(i):
            after = _json_block(content, i, finish_reason, out)
            if after is not None:
                i = after
                continue
            not_json.add(i)
        j = i + 1
        while j < len(content) and not json_start(j):
            j += 1
        lines = [_line(no, line) for no, line, _ in content[i:j]]
        _mark_tables(lines)
        for group in _groups(lines):
            if cut and j == len(content) and group[-1] is lines[-1]:
                out.add(ParseReject(group[0].no, "\n".join(g.raw for g in group), "truncated",
                                    "the answer hit the token limit inside this line"))
            else:
                out.add(_parse_group(group))
        i = j
    return out.tasks, out.rejects
