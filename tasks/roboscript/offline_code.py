"""How the offline backend's main agent writes a script: read the task sentence against the objects list, pick the
task pattern, compose tool calls with step comments, and call helper functions for sub-tasks the way the few-shot
examples do (the sub-agent writes those).

Patterns: put into / onto, take out, open a drawer, open a drawer and put things in it, put into a drawer, open a
door, swap two objects, move all of a category, clear the table, same-colour container, empty container, place
relative to another object, pick up and lift. A sentence that fits none, or names an object that is not in the
list, raises :class:`NotUnderstood`; the skill then answers in prose, as a model that cannot help does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tasks.roboscript import offline_knowledge as kb


class NotUnderstood(Exception):
    pass


@dataclass(frozen=True)
class Intent:
    kind: str
    obj: str | None = None
    target: str | None = None
    other: str | None = None
    category: str | None = None
    part: tuple[str, str] | None = None
    relation: str | None = None
    distance_cm: int = 10


_O = r"(?:the |a |an )?(?P<obj>[a-z0-9_ .]+?)"
_T = r"(?:the )?(?P<target>[a-z0-9_ .]+?)"
_PUT = r"(?:place|put|move|drop|set)"
_IN = r"(?:into|in|onto|on|inside)"
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(rx)) for kind, rx in (
    ("drawer_open", r"^open the (?P<ord>[a-z ]+?) (?:cabinet )?drawer(?: of the cabinet)?"
                    r"(?: and (?:place|put|move) (?P<what>[a-z0-9_ .]+?) (?:into|in|inside) it)?$"),
    ("drawer_put", rf"^{_PUT} {_O} {_IN} the (?P<ord>[a-z ]+?) (?:cabinet )?drawer$"),
    ("door", r"^open the (?:cabinet )?door(?: of the cabinet)?$"),
    ("swap", r"^(?:exchange|swap) the positions? of the (?P<a>[a-z0-9_ .]+?) and the (?P<b>[a-z0-9_ .]+?)"
             r"(?: on the table)?$"),
    ("clear", rf"^clear the table by (?:moving|putting|placing) all (?:the )?(?:table )?objects(?: on the table)? "
              rf"{_IN} {_T}$"),
    ("category", rf"^{_PUT} all (?:the )?(?P<cat>[a-z]+)(?: on the table)? {_IN} {_T}$"),
    ("colour", rf"^{_PUT} {_O} {_IN} (?:a|the) container (?:with|of) the same colou?r$"),
    ("empty", rf"^{_PUT} {_O} {_IN} an empty (?P<kind>[a-z]+)$"),
    ("take_out", rf"^take {_O} out of the (?P<src>[a-z0-9_ .]+?)(?: and (?:put|place|set) it (?:on|onto) the "
                 rf"table)?$"),
    ("relative", rf"^{_PUT} {_O} (?P<rel>to the left of|to the right of|in front of|behind|next to) {_T}$"),
    ("lift", rf"^pick up {_O}(?: and lift it(?: up)?(?: by)? (?P<cm>\d+) (?:centimetres|centimeters|cm))?$"),
    ("put", rf"^{_PUT} {_O} {_IN} {_T}$"),
))
OFFSETS = {"to the left of": (0.0, 0.2), "to the right of": (0.0, -0.2), "in front of": (-0.2, 0.0),
           "behind": (0.2, 0.0), "next to": (0.0, 0.15)}


def _name(text: str, objects: list[str]) -> str:
    name = kb.resolve(text, objects)
    if name is None:
        raise NotUnderstood(f"I cannot find '{text.strip()}' in the objects list, so I cannot write code for it.")
    return name


def read_task(instruction: str, objects: list[str]) -> Intent:
    # the rules read the first sentence as the task; later sentences (notes, hints) are not used
    first = re.split(r"(?<=[.!?])\s+", instruction.strip(), maxsplit=1)[0]
    text = " ".join(first.lower().replace(",", " ").split()).rstrip(".!")
    text = re.sub(r"^(?:please|robot) ", "", text)
    for kind, pattern in PATTERNS:
        m = pattern.match(text)
        if m is None:
            continue
        g = m.groupdict()
        if kind in ("drawer_open", "drawer_put"):
            part = kb.drawer_by_words(g["ord"], kb.drawers_of(objects))
            if part is None:
                raise NotUnderstood(f"There is no '{g['ord']} drawer' among the objects.")
            what = g.get("what") if kind == "drawer_open" else g["obj"]
            if what and (cat := kb.PLURALS.get(what.removeprefix("all ").strip())):
                return Intent("drawer_put", category=cat, part=part)
            return Intent("drawer_put" if what else "drawer_open", obj=_name(what, objects) if what else None,
                          part=part)
        if kind == "door":
            doors = kb.doors_of(objects)
            if not doors:
                raise NotUnderstood("There is no cabinet door among the objects.")
            return Intent("door", part=doors[0])
        if kind == "swap":
            return Intent("swap", obj=_name(g["a"], objects), other=_name(g["b"], objects))
        if kind == "category":
            category = kb.PLURALS.get(g["cat"])
            if category is None:
                continue
            return Intent("category", category=category, target=_name(g["target"], objects))
        if kind == "empty":
            return Intent("empty", obj=_name(g["obj"], objects), category=g["kind"])
        if kind == "relative":
            return Intent("relative", obj=_name(g["obj"], objects), target=_name(g["target"], objects),
                          relation=g["rel"])
        if kind == "lift":
            return Intent("lift", obj=_name(g["obj"], objects), distance_cm=int(g.get("cm") or 10))
        if kind == "take_out":
            return Intent("take_out", obj=_name(g["obj"], objects), other=_name(g["src"], objects))
        obj = _name(g["obj"], objects) if g.get("obj") else None
        target = _name(g["target"], objects) if g.get("target") else None
        return Intent(kind, obj=obj, target=target)
    raise NotUnderstood("I am not sure how to carry out this task with the tools I was given.")


# ------------------------------------------------------------------------------------------------------------------
# Composition


class Script:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.helpers: set[str] = set()

    def say(self, comment: str) -> None:
        self.lines.append(f"# {comment}")

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def call(self, helper: str, *args: str) -> str:
        self.helpers.add(helper)
        return f"{helper}({', '.join(args)})"

    def grasp(self, obj: str) -> None:
        tool, why = kb.grasp_tool(obj)
        self.say(f"Grasp the {kb.phrase(obj)}: {why}.")
        self.add("open_gripper()", f"grasp_pose = {tool}(object_name={obj!r})", "grasp(grasp_pose)",
                 "close_gripper()", f"attach_object({obj!r})")

    def release(self, obj: str) -> None:
        self.say(f"Release the {kb.phrase(obj)} and move the arm out of the way.")
        self.add("open_gripper()", f"detach_object({obj!r})", "reset_to_default_pose()")

    def text(self) -> str:
        return "\n".join(self.lines)


def _put(s: Script, i: Intent) -> None:
    assert i.obj and i.target
    s.say(f"The task involves the {kb.phrase(i.obj)} and the {kb.phrase(i.target)}: detect them first.")
    s.add(f"detect_objects(object_list=[{i.obj!r}, {i.target!r}])")
    s.grasp(i.obj)
    s.say(f"Carry it to the {kb.phrase(i.target)} and put it down {kb.preposition(i.target)} it.")
    s.add(f"place_pose = parse_place_pose(object_name={i.obj!r}, receptacle_name={i.target!r})",
          "move_to_pose(place_pose)")
    s.release(i.obj)


def _take_out(s: Script, i: Intent) -> None:
    assert i.obj and i.other
    s.say(f"The {kb.phrase(i.obj)} is in the {kb.phrase(i.other)}; lift it out and set it on the table.")
    s.add(f"detect_objects(object_list=[{i.obj!r}, {i.other!r}])")
    s.grasp(i.obj)
    s.say("Raise it above the rim before moving sideways.")
    s.add("move_in_direction(np.array([0.0, 0.0, 1.0]), distance=0.15)",
          f"place_pose = parse_place_pose(object_name={i.obj!r}, receptacle_name='table')", "move_to_pose(place_pose)")
    s.release(i.obj)


def _drawer_open(s: Script, i: Intent) -> None:
    assert i.part
    drawer, handle = i.part
    s.say(f"The drawer is {drawer} and its handle {handle}.")
    s.add(f"detect_objects(object_list=['cabinet', {drawer!r}, {handle!r}])")
    s.say("A drawer slides on a prismatic joint: find the joint, grasp the handle against its axis, pull along it.")
    s.add(f"handle_position = get_object_center_position({handle!r})",
          f"joint_info = get_object_joint_info(object_name={drawer!r}, position=handle_position, type='prismatic')",
          "pull_axis = joint_info['joint_axis']", "open_gripper()",
          f"grasp_pose = parse_horizontal_grasp_pose(object_name={handle!r}, approach_direction=-pull_axis)",
          "grasp(grasp_pose)", "close_gripper()", f"attach_object({handle!r})",
          "move_in_direction(pull_axis, distance=0.2)")
    s.release(handle)


def _drawer_put(s: Script, i: Intent) -> None:
    assert i.part
    drawer, handle = i.part
    s.say(f"{drawer} is closed: open it first (its handle is {handle}).")
    s.add(s.call("open_drawer", repr(drawer), repr(handle)))
    if i.category:
        s.say(f"Find the {i.category} objects, then detect them and the open drawer again.")
        s.add(f"items = [name for name in get_object_name_list() if {s.call(f'is_{i.category}', 'name')}]",
              f"detect_objects(object_list=items + [{drawer!r}])", "for item in items:",
              f"    {s.call('pick_and_place', 'item', repr(drawer))}")
    else:
        assert i.obj
        s.say("The scene has changed: detect the drawer and the object again, then put the object in.")
        s.add(f"detect_objects(object_list=[{drawer!r}, {i.obj!r}])", s.call("pick_and_place", repr(i.obj),
                                                                             repr(drawer)))


def _door(s: Script, i: Intent) -> None:
    assert i.part
    door, handle = i.part
    s.say(f"The door is {door}; it turns about a hinge, which the helper handles.")
    s.add(s.call("open_door", repr(door), repr(handle)))


def _swap(s: Script, i: Intent) -> None:
    assert i.obj and i.other
    a, b = i.obj, i.other
    s.say(f"Swapping needs a free spot: remember both places, then park the {kb.phrase(a)} on a free spot of the "
          "table first.")
    s.add("detect_objects()", f"position_a = get_object_center_position({a!r})",
          f"position_b = get_object_center_position({b!r})", s.call("pick_and_place", repr(a), "'table'"))
    s.say(f"Put the {kb.phrase(b)} where the {kb.phrase(a)} was, then the {kb.phrase(a)} where the "
          f"{kb.phrase(b)} was.")
    s.add(s.call("move_object_to_position", repr(b), "position_a"),
          s.call("move_object_to_position", repr(a), "position_b"))


def _category(s: Script, i: Intent) -> None:
    assert i.category and i.target
    s.say(f"'{i.category}' is a category: keep the objects of that kind.")
    s.add(f"items = [name for name in get_object_name_list() if {s.call(f'is_{i.category}', 'name')}]",
          f"detect_objects(object_list=items + [{i.target!r}])")
    s.say(f"Move them {kb.preposition(i.target)} the {kb.phrase(i.target)} one at a time.")
    s.add("for item in items:", f"    {s.call('pick_and_place', 'item', repr(i.target))}")


def _clear(s: Script, i: Intent) -> None:
    assert i.target
    s.say("Clearing the table moves the loose objects standing on it, not containers or furniture.")
    s.add(f"objects_to_move = {s.call('get_objects_on_table')}",
          f"objects_to_move = [name for name in objects_to_move if name != {i.target!r}]",
          f"detect_objects(object_list=objects_to_move + [{i.target!r}])", "for object_name in objects_to_move:",
          f"    {s.call('pick_and_place', 'object_name', repr(i.target))}")


def _colour(s: Script, i: Intent) -> None:
    assert i.obj
    s.say(f"Find the colour of the {kb.phrase(i.obj)}, then a different container of that colour.")
    s.add("detect_objects()", f"target_colour = {s.call('get_colour', repr(i.obj))}",
          f"containers = [name for name in get_object_name_list() if {s.call('is_receptacle', 'name')} and "
          f"name != {i.obj!r}]",
          f"matches = [name for name in containers if {s.call('get_colour', 'name')} == target_colour]",
          "if len(matches) == 0:", "    print('No container has the colour', target_colour)", "else:",
          f"    {s.call('pick_and_place', repr(i.obj), 'matches[0]')}")


def _empty(s: Script, i: Intent) -> None:
    assert i.obj and i.category
    s.say(f"Look for a {i.category} with nothing in or on it.")
    s.add("detect_objects()",
          f"candidates = [name for name in get_object_name_list() if name.endswith({i.category!r})]",
          f"empty = [name for name in candidates if {s.call('is_empty', 'name')}]", "if len(empty) == 0:",
          f"    print('There is no empty {i.category}.')", "else:",
          f"    {s.call('pick_and_place', repr(i.obj), 'empty[0]')}")


def _relative(s: Script, i: Intent) -> None:
    assert i.obj and i.target and i.relation
    dx, dy = OFFSETS[i.relation]
    s.say(f"'{i.relation}' the {kb.phrase(i.target)} is an offset of ({dx}, {dy}) m in the robot's frame.")
    s.add(f"detect_objects(object_list=[{i.obj!r}, {i.target!r}])",
          f"target_position = get_object_center_position({i.target!r}) + np.array([{dx}, {dy}, 0.0])")
    s.grasp(i.obj)
    s.say("Lift it clear of the table, then set it down at the target position.")
    s.add("move_in_direction(np.array([0.0, 0.0, 1.0]), distance=0.1)",
          f"place_pose = parse_place_pose(object_name={i.obj!r}, position=target_position)", "move_to_pose(place_pose)")
    s.release(i.obj)


def _lift(s: Script, i: Intent) -> None:
    assert i.obj
    s.add(f"detect_objects(object_list=[{i.obj!r}])")
    s.grasp(i.obj)
    s.say(f"Lift it straight up by {i.distance_cm} cm and hold it there.")
    s.add(f"move_in_direction(np.array([0.0, 0.0, 1.0]), distance={i.distance_cm / 100:.2f})")


COMPOSERS = {"put": _put, "take_out": _take_out, "drawer_open": _drawer_open, "drawer_put": _drawer_put,
             "door": _door, "swap": _swap, "category": _category, "clear": _clear, "colour": _colour,
             "empty": _empty, "relative": _relative, "lift": _lift}


def compose(intent: Intent) -> Script:
    script = Script()
    COMPOSERS[intent.kind](script, intent)
    return script
