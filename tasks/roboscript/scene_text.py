"""Scene text (RoboScript appendix VI-D, step 2): a world as the words an LLM reads, and back.

The text is an ``objects = [...]`` line -- every name a task may use, the table first, cabinet parts by their full
names (``cabinet.drawer_0``) -- followed by one sentence per placement ("The apple is in the grey bowl.", "The grey
bowl is on the table.") and, with a cabinet, its drawers from top to bottom and its doors with their handles and
whether they are open. :func:`parse_scene_text` reads such a text back into an :class:`Arrangement`, the same one
:func:`arrangement_of` computes from the world, so the description provably says where everything is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from robot.contract.world import CABINET, World

OBJECTS_LINE = re.compile(r"^objects\s*=\s*\[(.*)\]\s*$", re.MULTILINE)
_PLACEMENT = re.compile(r"^The (.+?) is (in|on) the (.+?)$")
_PARTS = re.compile(r"^The (\S+) has (\d+) (drawers?|doors?)(?:, from top to bottom)?: (.+)$")
_PART = re.compile(r"^(\S+) \(handle (\S+)\)$")
_STATE_ALL = re.compile(r"^All (?:drawers and doors|drawers|doors) are closed$")
_STATE_OPEN = re.compile(r"^(\S+) is open by ([0-9.]+) (m|rad)$")
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


@dataclass(frozen=True)
class Arrangement:
    objects: tuple[str, ...]
    placements: tuple[tuple[str, str, str], ...]
    """(name, relation 'on' | 'in', parent) for every model that is not a cabinet part, in world order."""
    drawers: tuple[tuple[str, str], ...] = ()
    """(drawer, handle), top drawer first."""
    doors: tuple[tuple[str, str], ...] = ()
    open_joints: tuple[tuple[str, float], ...] = ()
    """(part, opening) for the parts that are not closed: metres for drawers, radians for doors."""
    unparsed: tuple[str, ...] = field(default=(), compare=False)
    """Sentences the parser did not understand (empty for text written by :func:`describe`)."""

    def phrase_to_name(self) -> dict[str, str]:
        return {name.replace("_", " "): name for name in self.objects}


def _phrase(name: str) -> str:
    return name.replace("_", " ")


def arrangement_of(world: World) -> Arrangement:
    placements = tuple((m.name, m.relation, m.parent) for m in world.models if m.relation in ("on", "in"))
    drawers = tuple((j.part, j.handle) for j in world.joints if j.type == "prismatic")
    doors = tuple((j.part, j.handle) for j in world.joints if j.type == "revolute")
    opened = tuple((j.part, round(j.value, 3)) for j in world.joints if abs(j.value) > 1e-9)
    return Arrangement(tuple(world.object_names()), placements, drawers, doors, opened)


def objects_line(names: list[str] | tuple[str, ...]) -> str:
    return f"objects = [{', '.join(names)}]"


def describe(world: World) -> str:
    return render(arrangement_of(world))


def render(arr: Arrangement) -> str:
    sentences = [f"The {_phrase(name)} is {relation} the {_phrase(parent)}." for name, relation, parent in
                 arr.placements]
    for label, parts, order in (("drawer", arr.drawers, ", from top to bottom"), ("door", arr.doors, "")):
        if parts:
            plural = label + ("s" if len(parts) > 1 else "")
            listed = ", ".join(f"{part} (handle {handle})" for part, handle in parts)
            sentences.append(f"The {CABINET} has {len(parts)} {plural}{order}: {listed}.")
    if arr.drawers or arr.doors:
        if not arr.open_joints:
            which = "drawers and doors" if arr.drawers and arr.doors else "drawers" if arr.drawers else "doors"
            sentences.append(f"All {which} are closed.")
        revolute = {part for part, _ in arr.doors}
        sentences += [f"{part} is open by {value:g} {'rad' if part in revolute else 'm'}."
                      for part, value in arr.open_joints]
    return objects_line(arr.objects) + "\n" + " ".join(sentences)


def parse_scene_text(text: str) -> Arrangement:
    """Read a scene description back. Sentences it does not understand are kept in ``unparsed``."""
    match = OBJECTS_LINE.search(text)
    objects = tuple(o.strip().strip("'\"") for o in match.group(1).split(",") if o.strip()) if match else ()
    body = OBJECTS_LINE.sub("", text) if match else text
    by_phrase = {_phrase(o): o for o in objects}
    placements, drawers, doors, opened, unparsed = [], [], [], [], []
    for sentence in _SENTENCE_END.split(" ".join(body.split())):
        sentence = sentence.strip()
        if not sentence:
            continue
        core = sentence[:-1] if sentence.endswith(".") else sentence
        if m := _PARTS.match(core):
            parts = [_PART.match(p.strip()) for p in m.group(4).split(", ")]
            if all(parts) and len(parts) == int(m.group(2)):
                pairs = [(p.group(1), p.group(2)) for p in parts if p]
                (drawers if m.group(3).startswith("drawer") else doors).extend(pairs)
                continue
        elif m := _PLACEMENT.match(core):
            child, parent = by_phrase.get(m.group(1)), by_phrase.get(m.group(3), m.group(3).replace(" ", "_"))
            if child is not None:
                placements.append((child, m.group(2), parent))
                continue
        elif _STATE_ALL.match(core):
            continue
        elif m := _STATE_OPEN.match(core):
            opened.append((m.group(1), float(m.group(2))))
            continue
        unparsed.append(sentence)
    return Arrangement(objects, tuple(placements), tuple(drawers), tuple(doors), tuple(opened), tuple(unparsed))
