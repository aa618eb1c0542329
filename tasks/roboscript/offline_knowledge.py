"""What the offline backend "knows" without being told: the common sense a language model brings to the RoboScript
prompts. Words for kinds of things (fruit, containers, colours, round or upright shapes), how phrases in a sentence
map to names of the objects list, and how to write a few generic helper functions that the few-shot examples do not
show (a category test, a colour read off a name, whether a container is empty, the loose objects on the table,
opening a door). It knows the tool API and such generic skills, never a benchmark task's world or solution: no
object arrangement, position or benchmark object list is written here.

None of it is read from the pipeline's data files: a real model has only the prompt and its training, and so do
the offline skills (the prompt through their arguments, the training through this module).
"""

from __future__ import annotations

import re

CATEGORY_WORDS: dict[str, tuple[str, ...]] = {
    "fruit": ("apple", "banana", "orange", "lemon", "peach", "pear", "plum", "strawberry", "grape", "mango"),
    "box": ("box",),
    "can": ("can",),
    "ball": ("ball", "softball", "baseball", "racquetball"),
    "cup": ("cup",),
    "bottle": ("bottle", "cleanser"),
    "tool": ("drill", "scissors", "wrench", "screwdriver", "hammer", "clamp", "padlock", "marker"),
    "block": ("block", "brick", "cube"),
    "utensil": ("fork", "spoon", "knife", "spatula"),
}
#: Plural forms used in instructions ("all fruits", "all boxes").
PLURALS = {"fruits": "fruit", "boxes": "box", "cans": "can", "balls": "ball", "cups": "cup", "bottles": "bottle",
           "tools": "tool", "blocks": "block", "utensils": "utensil"}
RECEPTACLE_WORDS = ("plate", "bowl", "basket", "tray", "mug", "cardboard")
FURNITURE_WORDS = ("cabinet", "drawer", "door", "handle")
OPEN_TOP = ("plate", "tray")  # things one puts objects *onto*
COLOURS = ("white", "black", "grey", "gray", "red", "green", "blue", "yellow", "orange", "brown", "purple", "pink",
           "beige")
ROUND_WORDS = ("apple", "orange", "lemon", "peach", "plum", "pear", "strawberry", "ball", "softball", "baseball",
               "racquetball")
UPRIGHT_WORDS = ("bottle", "cleanser", "pitcher", "chips")
ORDINALS = {"top": 0, "first": 0, "first top": 0, "second": 1, "second top": 1, "third": 2, "third top": 2,
            "fourth": 3, "fourth top": 3}
ARTICLES = re.compile(r"^(?:the|a|an)\s+")


def words(name: str) -> list[str]:
    return name.replace(".", "_").split("_")


def is_receptacle(name: str) -> bool:
    return any(w in RECEPTACLE_WORDS or w in FURNITURE_WORDS for w in words(name))


def is_furniture(name: str) -> bool:
    return any(w in FURNITURE_WORDS for w in words(name))


def category_of(name: str) -> str | None:
    last = words(name)[-1]
    for category, members in CATEGORY_WORDS.items():
        if last in members and not is_receptacle(name):
            return category
    return None


def colour_of(name: str) -> str | None:
    first = words(name)[0]
    return first if first in COLOURS else None


def grasp_tool(name: str) -> tuple[str, str]:
    """(grasp tool, why) for an object, from the shape its name suggests."""
    ws = words(name)
    if any(w in UPRIGHT_WORDS for w in ws):
        return "parse_horizontal_grasp_pose", "it stands upright, so grasp it from the side"
    if ws[-1] in ROUND_WORDS:
        return "parse_central_lift_grasp_pose", "it is compact and round, so a central lift grasp suits it"
    return "parse_adaptive_shape_grasp_pose", "a grasp predicted from its shape suits it"


def preposition(receptacle: str) -> str:
    return "onto" if any(w in OPEN_TOP for w in words(receptacle)) else "into"


def phrase(name: str) -> str:
    return name.replace("_", " ")


def resolve(text: str, objects: list[str] | tuple[str, ...]) -> str | None:
    """The object a phrase names: the exact name, else the only object whose name holds all the phrase's words."""
    text = ARTICLES.sub("", text.strip().lower())
    exact = text.replace(" ", "_")
    if exact in objects:
        return exact
    wanted = set(text.split())
    matches = [o for o in objects if o != "table" and wanted <= set(words(o))]
    return matches[0] if len(matches) == 1 else None


def drawers_of(objects: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(drawer, handle) pairs, top first, read off the object names."""
    found = sorted((int(m.group(1)), o) for o in objects if (m := re.fullmatch(r"cabinet\.drawer_(\d+)", o)))
    return [(drawer, f"cabinet.handle_{i}") for i, drawer in found]


def doors_of(objects: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    found = sorted((int(m.group(1)), o) for o in objects if (m := re.fullmatch(r"cabinet\.door_(\d+)", o)))
    return [(door, f"cabinet.door_handle_{i}") for i, door in found]


def drawer_by_words(text: str, drawers: list[tuple[str, str]]) -> tuple[str, str] | None:
    text = ARTICLES.sub("", text.strip().lower()).replace("cabinet", "").replace("from the top", "top").strip()
    text = " ".join(text.split())
    if not drawers:
        return None
    if text in ("bottom", "lowest", "last"):
        return drawers[-1]
    index = ORDINALS.get(text)
    return drawers[index] if index is not None and index < len(drawers) else None


def ordinal_words(index: int, count: int) -> str:
    if index == count - 1 and count > 1:
        return "bottom"
    return ("top", "second top", "third top", "fourth top")[index] if index < 4 else f"drawer {index}"


# ------------------------------------------------------------------------------------------------------------------
# Helper definitions the sub-agent writes from its own knowledge (the few-shot examples cover the others).


def category_predicate(name: str, params: list[str]) -> str | None:
    """``is_fruit`` / ``is_box`` / ...: a name-based category test that leaves containers out."""
    match = re.fullmatch(r"is_([a-z]+)", name)
    category = match.group(1) if match else None
    if category not in CATEGORY_WORDS:
        return None
    arg = params[0] if params else "object_name"
    listed = ", ".join(repr(w) for w in CATEGORY_WORDS[category])
    return (f"def {name}({arg}):\n"
            f'    """Whether an object is a {category}, judged from the last word of its name; containers are not."""\n'
            f"    {category}_words = [{listed}]\n"
            f"    if is_receptacle({arg}):\n"
            f"        return False\n"
            f"    return {arg}.split('_')[-1] in {category}_words")


def open_door_definition(name: str, params: list[str]) -> str | None:
    if name != "open_door":
        return None
    door, handle = (params + ["door_name", "handle_name"])[:2]
    return (f"def open_door({door}, {handle}):\n"
            f'    """Swing a door open by moving its handle along an arc around the door\'s hinge."""\n'
            f"    detect_objects(object_list=[{door}, {handle}])\n"
            f"    # Grasp the handle.\n"
            f"    open_gripper()\n"
            f"    grasp_pose = parse_adaptive_shape_grasp_pose(object_name={handle})\n"
            f"    grasp(grasp_pose)\n"
            f"    close_gripper()\n"
            f"    attach_object({handle})\n"
            f"    # The hinge is a revolute joint: follow an arc around it.\n"
            f"    handle_position = get_object_center_position({handle})\n"
            f"    joint_info = get_object_joint_info(object_name={door}, position=handle_position, type='revolute')\n"
            f"    path = generate_arc_path_around_joint(current_pose=get_gripper_pose(), "
            f"joint_axis=joint_info['joint_axis'], joint_position=joint_info['joint_position'], n=10, angle=60)\n"
            f"    follow_path(path)\n"
            f"    open_gripper()\n"
            f"    detach_object({handle})\n"
            f"    reset_to_default_pose()")


def receptacle_predicate(name: str, params: list[str]) -> str | None:
    """``is_receptacle``: furniture or a container, judged from the words of a name."""
    if name != "is_receptacle":
        return None
    arg = params[0] if params else "object_name"
    listed = ", ".join(repr(w) for w in (*RECEPTACLE_WORDS, *FURNITURE_WORDS))
    return (f"def is_receptacle({arg}):\n"
            f'    """Whether an object is furniture or a container for other objects, judged from the words of its '
            f'name."""\n'
            f"    receptacle_words = [{listed}]\n"
            f"    words = {arg}.replace('.', '_').split('_')\n"
            f"    return any(word in receptacle_words for word in words)")


def colour_reader(name: str, params: list[str]) -> str | None:
    """``get_colour``: the colour word a name starts with."""
    if name != "get_colour":
        return None
    arg = params[0] if params else "object_name"
    listed = ", ".join(repr(c) for c in COLOURS)
    return (f"def get_colour({arg}):\n"
            f'    """The colour word at the start of an object\'s name, or \'unknown\'."""\n'
            f"    colours = [{listed}]\n"
            f"    first_word = {arg}.replace('.', '_').split('_')[0]\n"
            f"    if first_word in colours:\n"
            f"        return first_word\n"
            f"    return 'unknown'")


def emptiness_test(name: str, params: list[str]) -> str | None:
    """``is_empty``: no other object's footprint overlaps the container's above its bottom."""
    if name != "is_empty":
        return None
    arg = params[0] if params else "container_name"
    return (f"def is_empty({arg}):\n"
            f'    """Whether nothing rests in or on a container: no other object\'s footprint overlaps the '
            f'container\'s above its bottom."""\n'
            f"    container_bbox = get_3d_bbox({arg})\n"
            f"    for name in get_object_name_list():\n"
            f"        if name == {arg} or name == 'table' or name.startswith('cabinet'):\n"
            f"            continue\n"
            f"        bbox = get_3d_bbox(name)\n"
            f"        overlaps = bbox[0] < container_bbox[3] and container_bbox[0] < bbox[3] and "
            f"bbox[1] < container_bbox[4] and container_bbox[1] < bbox[4]\n"
            f"        if overlaps and bbox[2] >= container_bbox[2] - 0.01:\n"
            f"            return False\n"
            f"    return True")


def table_objects_lister(name: str, params: list[str]) -> str | None:
    """``get_objects_on_table``: loose objects standing on the table top (no containers, furniture, contents)."""
    if name != "get_objects_on_table":
        return None
    return ("def get_objects_on_table():\n"
            '    """Names of the loose objects standing directly on the table (no containers, furniture or their '
            'contents)."""\n'
            "    table_top = get_3d_bbox('table')[5]\n"
            "    names = []\n"
            "    for name in get_object_name_list():\n"
            "        if name == 'table' or is_receptacle(name):\n"
            "            continue\n"
            "        if abs(get_3d_bbox(name)[2] - table_top) < 0.02:\n"
            "            names.append(name)\n"
            "    return names")


KNOWN_HELPERS = (category_predicate, open_door_definition, receptacle_predicate, colour_reader, emptiness_test,
                 table_objects_lister)


def known_definition(name: str) -> str | None:
    """A definition of ``name`` from the offline model's own knowledge, or None."""
    params = {"open_door": ["door_name", "handle_name"], "is_empty": ["container_name"]}.get(name, ["object_name"])
    for writer in KNOWN_HELPERS:
        code = writer(name, params)
        if code is not None:
            return code
    return None
