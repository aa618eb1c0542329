"""The symbolic state of a MuEP scene after each action, and the static layout a renderer draws it on.

The state is read off the real TextWorld engine's facts after every step (:func:`state_from_facts`), so the
picture of a step shows what the game says, not what the planner assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol


@dataclass(frozen=True)
class ReceptacleLayout:
    name: str            # "fridge 1"
    receptacle_type: str  # "Fridge"
    x: float             # interaction pose from ALFWorld's layout files (metres, AI2-THOR x / z)
    z: float
    rotation: float      # degrees, 0 = +z
    horizon: float       # camera pitch, degrees (positive looks down)
    openable: bool
    pose_synthesized: bool


@dataclass(frozen=True)
class SceneLayout:
    """What does not change during an episode: the floor grid and where the receptacles are."""

    scene: str
    room_type: str
    grid: tuple[tuple[float, float], ...]  # navigable points (x, z), 0.25 m apart
    receptacles: tuple[ReceptacleLayout, ...]
    start: tuple[float, float, float, float]  # agent start pose (x, z, rotation, horizon)

    def receptacle(self, name: str) -> ReceptacleLayout:
        for r in self.receptacles:
            if r.name == name:
                return r
        raise KeyError(name)


@dataclass
class WorldState:
    """Where the agent is, what it holds, where every object is and which state marks are set."""

    agent_at: str | None                      # receptacle name the agent stands at; None at the start pose
    holding: str | None                       # instance name ("apple 1")
    placements: dict[str, str] = field(default_factory=dict)  # instance -> receptacle name, for objects not held
    #: instance -> further receptacles it is in. ALFWorld's evaluation games give some objects two receptacles (a mug
    #: in the coffee machine and on the countertop); ``placements`` then holds the first by name, this the others.
    also_in: dict[str, list[str]] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)             # receptacle names that are open
    hot: set[str] = field(default_factory=set)
    cool: set[str] = field(default_factory=set)
    clean: set[str] = field(default_factory=set)
    toggled: set[str] = field(default_factory=set)
    sliced: set[str] = field(default_factory=set)
    step: int = 0
    last_action: str | None = None

    def to_json(self) -> dict:
        return {
            "agent_at": self.agent_at, "holding": self.holding, "placements": dict(sorted(self.placements.items())),
            **({"also_in": dict(sorted(self.also_in.items()))} if self.also_in else {}),
            "opened": sorted(self.opened), "hot": sorted(self.hot), "cool": sorted(self.cool),
            "clean": sorted(self.clean), "toggled": sorted(self.toggled), "sliced": sorted(self.sliced),
            "step": self.step, "last_action": self.last_action,
        }


class Fact(Protocol):
    """A ground fact: TextWorld's ``Proposition`` has this shape (``name`` and ``arguments`` with ``.name``)."""

    name: str
    arguments: list


def state_from_facts(facts: Iterable[Fact], names: dict[str, str], location_of: dict[str, str],
                     step: int = 0, last_action: str | None = None) -> WorldState:
    """Build a :class:`WorldState` from ground facts.

    ``names`` maps PDDL identifiers to ALFWorld names ("Apple_1" -> "apple 1"); ``location_of`` maps a location
    identifier to the receptacle name the agent faces there (the first receptacle at that location).
    """
    state = WorldState(agent_at=None, holding=None, step=step, last_action=last_action)
    # TextWorld's PDDL logic may lower-case predicate names: compare without case.
    marks = {"opened": state.opened, "ishot": state.hot, "iscool": state.cool, "isclean": state.clean,
             "istoggled": state.toggled, "issliced": state.sliced}
    inside: dict[str, list[str]] = {}
    for fact in facts:
        args = [a.name for a in fact.arguments]
        pred = fact.name.lower()
        if pred == "atlocation" and len(args) == 2:
            state.agent_at = location_of.get(args[1])
        elif pred == "holds" and len(args) == 2:
            state.holding = names.get(args[1], args[1])
        elif pred == "inreceptacle" and len(args) == 2:
            inside.setdefault(names.get(args[0], args[0]), []).append(names.get(args[1], args[1]))
        elif pred in marks and len(args) == 1:
            marks[pred].add(names.get(args[0], args[0]))
    for obj, receptacles in inside.items():  # facts come in no fixed order: the same state, the same record
        first, *others = sorted(set(receptacles))
        state.placements[obj] = first
        if others:
            state.also_in[obj] = others
    return state
