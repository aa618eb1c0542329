"""Offline skill for MuEP task generation: reads the prompt's object dictionary and writes tasks as lines.

It sees only what a real model sees -- the room, the allowed task types, the object dictionary with attributes and
counts, the number of tasks asked for -- and follows the answer format of the system prompt. Like a real model it
does not know the initial placements (so some proposals are already satisfied) nor ALFWorld's exact table of which
receptacle holds what (so some are inadequate), and with probability ``noise`` it makes a deliberate mistake: an
item that is not in the room, a non-receptacle as target, a task type the room cannot host, or a sloppy line.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from tasks.muep.prompts import DICTIONARY_HEADER
from tasks.muep.vocab import TASK_TYPES, catalog, phrase

_DICT_LINE = re.compile(r"^- (\w+) \((\d+)\): (.*)$")

_PHRASES = {
    "pick_and_place_simple": ("Put {a} {o} in the {r}.", "Place {a} {o} on the {r}.", "Move {a} {o} to the {r}.",
                              "Take {a} {o} and put it on the {r}."),
    "pick_two_obj_and_place": ("Put two {os} in the {r}.", "Place two {os} on the {r}.",
                               "Find two {os} and put them in the {r}."),
    "look_at_obj_in_light": ("Look at {a} {o} under the {l}.", "Examine {a} {o} in the light of the {l}.",
                             "Pick up {a} {o} and inspect it by the {l}."),
    "pick_clean_then_place_in_recep": ("Clean {a} {o} and put it in the {r}.", "Rinse {a} {o}, then place it on the {r}.",
                                       "Wash {a} {o} and set it on the {r}."),
    "pick_heat_then_place_in_recep": ("Heat {a} {o} and put it on the {r}.", "Warm up {a} {o}, then place it in the {r}.",
                                      "Cook {a} {o} in the microwave and put it on the {r}."),
    "pick_cool_then_place_in_recep": ("Cool {a} {o} and put it in the {r}.", "Chill {a} {o}, then place it on the {r}.",
                                      "Put a chilled {o} on the {r}."),
}
_IMAGINED = ("Banana", "Teapot", "Scissors", "Umbrella", "Guitar", "Blender", "Toothbrush", "Candle", "Watch",
             "BasketBall", "Laptop", "Kettle", "TeddyBear")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("s", "sh", "ch", "o")) else "s")


def _parse_prompt(user: str) -> tuple[str, list[str], dict[str, tuple[int, set[str]]], int]:
    room = re.search(r"Scene: \S+, an? ([a-z ]+)\.", user)
    allowed = re.search(r"Task types you may use: ([a-z_, ]+)\.", user)
    n_tasks = re.search(r"Number of tasks: (\d+)", user)
    dictionary: dict[str, tuple[int, set[str]]] = {}
    section = user.split(DICTIONARY_HEADER, 1)[1] if DICTIONARY_HEADER in user else ""
    for line in section.splitlines():
        m = _DICT_LINE.match(line.strip())
        if m:
            dictionary[m.group(1)] = (int(m.group(2)), {a.strip() for a in m.group(3).split(",")})
    return (
        room.group(1) if room else "room",
        [t.strip() for t in allowed.group(1).split(",")] if allowed else list(TASK_TYPES),
        dictionary,
        int(n_tasks.group(1)) if n_tasks else 10,
    )


class MuEPTaskProposer:
    def matches(self, messages: Sequence[tuple[str, str]]) -> bool:
        return any(role == "user" and DICTIONARY_HEADER in text and "Number of tasks:" in text
                   for role, text in messages)

    def respond(self, messages: Sequence[tuple[str, str]], rng: random.Random, noise: float) -> str:
        user = next(text for role, text in reversed(messages) if role == "user")
        room, allowed, dictionary, n_tasks = _parse_prompt(user)
        has = lambda attr: sorted(t for t, (_, a) in dictionary.items() if attr in a)  # noqa: E731
        pickable = has("pickupable")
        receptacles = [t for t in has("receptacle") if t not in pickable]
        lamps = [t for t in dictionary if t in ("DeskLamp", "FloorLamp")]
        lines = []
        for _ in range(n_tasks):
            mistake = rng.random() < noise
            line = self._mistake(rng, dictionary, pickable, receptacles, lamps) if mistake else None
            if line is None:
                line = self._task(rng, allowed, dictionary, pickable, receptacles, lamps)
            if line is not None:
                lines.append(line)
        numbered = [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
        if rng.random() < noise:  # a chatty model: preamble and sign-off lines the parser must reject
            numbered = [f"Here are {len(lines)} tasks for this {room}:", *numbered, "I hope these help!"]
        return "\n".join(numbered)

    def _format(self, rng: random.Random, task_type: str, obj: str, target: str) -> str:
        template = rng.choice(_PHRASES[task_type])
        o = phrase(obj)
        sentence = template.format(a=_article(o), o=o, os=_plural(o), r=phrase(target), l=phrase(target))
        key = "light" if task_type == "look_at_obj_in_light" else "receptacle"
        return f"type: {task_type} | instruction: {sentence} | object: {obj} | {key}: {target}"

    def _task(self, rng, allowed, dictionary, pickable, receptacles, lamps) -> str | None:
        cat = catalog()
        for _ in range(20):
            task_type = rng.choice(allowed)
            spec = TASK_TYPES[task_type]
            candidates = [t for t in pickable if spec.object_attribute is None or spec.object_attribute in
                          dictionary[t][1]]
            if spec.n_objects == 2:
                candidates = [t for t in candidates if dictionary[t][0] >= 2]
            if not candidates:
                continue
            obj = rng.choice(candidates)
            if task_type == "look_at_obj_in_light":
                if not lamps:
                    continue
                return self._format(rng, task_type, obj, rng.choice(lamps))
            # Common sense, not ALFWorld's table: prefer receptacles that are big enough surfaces or containers.
            fitting = [r for r in receptacles if cat.holds(r, obj)]
            pool = fitting if fitting and rng.random() < 0.85 else receptacles
            if not pool:
                continue
            return self._format(rng, task_type, obj, rng.choice(pool))
        return None

    def _mistake(self, rng, dictionary, pickable, receptacles, lamps) -> str | None:
        kind = rng.choice(("missing_item", "non_receptacle", "room_incompatible", "sloppy"))
        if kind == "missing_item" and receptacles:
            ghost = rng.choice([t for t in _IMAGINED if t not in dictionary] or ["Unicorn"])
            return self._format(rng, "pick_and_place_simple", ghost, rng.choice(receptacles))
        if kind == "non_receptacle" and len(pickable) >= 2:
            obj, target = rng.sample(pickable, 2)
            if target not in catalog().movable_receptacles:
                return self._format(rng, "pick_and_place_simple", obj, target)
        if kind == "room_incompatible" and pickable and receptacles:
            spec = TASK_TYPES[rng.choice(("pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                                          "pick_clean_then_place_in_recep"))]
            if not any(a in dictionary for a in spec.appliances):
                return self._format(rng, spec.name, rng.choice(pickable), rng.choice(receptacles))
        if kind == "sloppy" and pickable and receptacles:
            obj, target = rng.choice(pickable), rng.choice(receptacles)
            return f"**{phrase(obj).title()}** -> {phrase(target)} (maybe?)"
        return None


