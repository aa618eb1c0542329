"""The object vocabulary and operational attributes (from ALFWorld's tables) and the six MuEP task types."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from tasks.muep import alfworld_data

ATTRIBUTES = ("pickupable", "receptacle", "openable", "heatable", "coolable", "cleanable", "sliceable", "toggleable")

#: Lamps are not in ALFWorld's receptacle tables; a lamp stands on (or, for floor lamps, beside) one of these, and
#: the agent uses it from there. Our choice, recorded as ``placement_synthesized`` in the instance table.
LAMP_HOSTS = {
    "DeskLamp": ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "DiningTable", "TVStand", "CounterTop"),
    "FloorLamp": ("SideTable", "Desk", "Dresser", "Sofa", "ArmChair", "Bed", "TVStand", "CoffeeTable", "Shelf",
                  "DiningTable", "Ottoman"),
}


@dataclass(frozen=True)
class Catalog:
    """Operational attributes of every AI2-THOR object type ALFWorld knows."""

    types: frozenset[str]
    static_receptacles: frozenset[str]
    movable_receptacles: frozenset[str]
    can_hold: dict[str, frozenset[str]] = field(hash=False)
    pickupable: frozenset[str] = frozenset()
    openable: frozenset[str] = frozenset()
    heatable: frozenset[str] = frozenset()
    coolable: frozenset[str] = frozenset()
    cleanable: frozenset[str] = frozenset()
    sliceable: frozenset[str] = frozenset()
    toggleable: frozenset[str] = frozenset()

    def attributes(self, obj_type: str) -> dict[str, bool]:
        return {
            "pickupable": obj_type in self.pickupable,
            "receptacle": obj_type in self.static_receptacles or obj_type in self.movable_receptacles,
            "openable": obj_type in self.openable,
            "heatable": obj_type in self.heatable,
            "coolable": obj_type in self.coolable,
            "cleanable": obj_type in self.cleanable,
            "sliceable": obj_type in self.sliceable,
            "toggleable": obj_type in self.toggleable,
        }

    def holds(self, receptacle: str, obj_type: str) -> bool:
        return obj_type in self.can_hold.get(receptacle, frozenset())


@cache
def catalog() -> Catalog:
    c = alfworld_data.constants()
    val = {k: frozenset(v) for k, v in c.VAL_RECEPTACLE_OBJECTS.items()}
    actions = c.VAL_ACTION_OBJECTS
    movable = frozenset(c.MOVABLE_RECEPTACLES)
    unsliced = lambda names: frozenset(n for n in names if not n.endswith("Sliced"))  # noqa: E731
    pickupable = unsliced(set().union(*val.values()))
    return Catalog(
        types=frozenset(c.OBJECTS) | movable | frozenset(val),
        static_receptacles=frozenset(val) - movable,
        movable_receptacles=movable,
        can_hold={k: unsliced(v) for k, v in val.items()},
        pickupable=pickupable,
        openable=frozenset(c.OPENABLE_CLASS_LIST),
        heatable=unsliced(actions["Heatable"]),
        coolable=unsliced(actions["Coolable"]),
        cleanable=unsliced(actions["Cleanable"]),
        sliceable=unsliced(actions["Sliceable"]),
        toggleable=unsliced(actions["Toggleable"]),
    )


def instance_prefix(obj_type: str) -> str:
    """ALFWorld's instance naming: the type in lower case ("DiningTable" -> "diningtable", then "diningtable 1")."""
    return obj_type.lower()


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@cache
def _lookup() -> dict[str, str]:
    """Normalised spelling -> type, covering "dining table", "diningtable", "DiningTable", plurals."""
    table: dict[str, str] = {}
    for t in catalog().types:
        table[_norm(t)] = t
        spaced = re.sub(r"(?<!^)(?=[A-Z])", " ", t)
        table[_norm(spaced)] = t
        table[_norm(t) + "s"] = t
        table[_norm(t) + "es"] = t
    extra = {"tv": "Television", "remote": "RemoteControl", "phone": "CellPhone", "cellphone": "CellPhone",
             "keys": "KeyChain", "key": "KeyChain", "table": "DiningTable", "lamp": "DeskLamp",
             "sink": "SinkBasin", "bathtub": "BathtubBasin", "stove": "StoveBurner", "garbage": "GarbageCan",
             "trashcan": "GarbageCan", "bin": "GarbageCan", "nightstand": "SideTable", "couch": "Sofa",
             "knives": "Knife", "tomatoes": "Tomato", "potatoes": "Potato", "glass": "Cup", "bottle": "Glassbottle",
             "refrigerator": "Fridge", "freezer": "Fridge", "counter": "CounterTop", "counters": "CounterTop",
             "kitchencounter": "CounterTop", "cupboard": "Cabinet", "cupboards": "Cabinet", "shelves": "Shelf",
             "coffeemaker": "CoffeeMachine", "sponge": "DishSponge", "remotes": "RemoteControl", "phones": "CellPhone",
             "trash": "GarbageCan", "trashbin": "GarbageCan", "wastebasket": "GarbageCan", "wine": "WineBottle",
             "bottleofwine": "WineBottle", "stovetop": "StoveBurner", "burner": "StoveBurner", "clock": "AlarmClock",
             "microwaveoven": "Microwave"}
    for k, v in extra.items():
        table.setdefault(k, v)
    # A sink or bathtub *is* a receptacle in a task sentence: in AI2-THOR the basin is (Sink and Bathtub are the
    # fixtures around it and hold nothing).
    for spelling in ("sink", "sinks", "bathtub", "bathtubs"):
        table[spelling] = "SinkBasin" if spelling.startswith("sink") else "BathtubBasin"
    return table


def canonical_type(name: str) -> str | None:
    """Map a model's spelling of an object ("Dining Table", "apples", "apple 1") to an AI2-THOR type, or None."""
    cleaned = re.sub(r"\s+\d+$", "", name.strip().strip(".`*'\"").strip())
    cleaned = re.sub(r"^(the|a|an|some|two|2)\s+", "", cleaned, flags=re.IGNORECASE)
    return _lookup().get(_norm(cleaned))


def phrase(obj_type: str) -> str:
    """Human words for a type: "DiningTable" -> "dining table"."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", obj_type).lower()


# --------------------------------------------------------------------------------------------------------------------
# Task types (ALFWorld's six, without the movable-receptacle variant)


@dataclass(frozen=True)
class TaskType:
    name: str
    label: str
    aliases: tuple[str, ...]
    appliances: tuple[str, ...] = ()
    """The room must contain one of these types (the heat source, the fridge, the basin, the lamp)."""
    object_attribute: str | None = None
    """The object must have this attribute (heatable / coolable / cleanable)."""
    state_predicate: str | None = None
    needs_receptacle: bool = True
    n_objects: int = 1

    def goal_conditions(self, obj: str, receptacle: str | None, light: str | None) -> list[str]:
        """Goal conditions counted the way ALFWorld counts them per task type (1, 2, 2, 3, 3, 3)."""
        if self.name == "pick_and_place_simple":
            return [f"inReceptacle({obj}, {receptacle})"]
        if self.name == "pick_two_obj_and_place":
            return [f"inReceptacle({obj}#1, {receptacle})", f"inReceptacle({obj}#2, {receptacle})"]
        if self.name == "look_at_obj_in_light":
            return [f"holds({obj})", f"isToggled({light})"]
        pred = self.state_predicate
        return [f"{pred}({obj})", f"inReceptacle({obj}, {receptacle})", f"{pred}({obj}) & inReceptacle({obj}, {receptacle})"]


TASK_TYPES: dict[str, TaskType] = {
    t.name: t
    for t in (
        TaskType("pick_and_place_simple", "pick & place", ("pick and place", "pick & place", "pick_place", "place",
                                                           "pick and place simple", "pick")),
        TaskType("look_at_obj_in_light", "look at object in light", ("look at obj in light", "look at object in light",
                                                                      "examine in light", "look", "examine"),
                 appliances=("DeskLamp", "FloorLamp"), needs_receptacle=False),
        TaskType("pick_clean_then_place_in_recep", "pick clean then place", ("clean & place", "clean and place",
                                                                              "pick clean then place", "clean"),
                 appliances=("SinkBasin",), object_attribute="cleanable", state_predicate="isClean"),
        TaskType("pick_heat_then_place_in_recep", "pick heat then place", ("heat & place", "heat and place",
                                                                            "pick heat then place", "heat"),
                 appliances=("Microwave",), object_attribute="heatable", state_predicate="isHot"),
        TaskType("pick_cool_then_place_in_recep", "pick cool then place", ("cool & place", "cool and place",
                                                                            "pick cool then place", "cool"),
                 appliances=("Fridge",), object_attribute="coolable", state_predicate="isCool"),
        TaskType("pick_two_obj_and_place", "pick two & place", ("pick two & place", "pick two and place",
                                                                 "pick two obj and place", "pick two", "two"),
                 n_objects=2),
    )
}


@cache
def _type_lookup() -> dict[str, str]:
    table = {}
    for t in TASK_TYPES.values():
        for alias in (t.name, t.label, *t.aliases):
            table[_norm(alias)] = t.name
    return table


def canonical_task_type(label: str) -> str | None:
    return _type_lookup().get(_norm(label.strip().strip("[]()*`")))
