"""PDDL for one (instantiated scene, task): the ADL problem TextWorld plays and its STRIPS twin pyperplan solves.

Both are written from the same :class:`Problem` (identifiers, facts, goal), so the planner and the game agree on the
world. The ADL problem is read with ALFWorld's own domain ``alfred.pddl``; the STRIPS twin (``STRIPS_DOMAIN``) is
ours: typed STRIPS without negative preconditions, ``or`` or ``exists``:

* ALFWorld's ``(or (not (openable ?r)) (opened ?r))`` becomes: every non-openable receptacle starts ``opened``, and
  openable ones start ``closed``.
* receptacle classes become flags (``is-microwave``, ``is-fridge``, ``is-sinkbasin``); ``canContain`` over types
  becomes ``can-hold ?r ?o`` over the instances of the scene.
* the agent stands *at a receptacle* (``agent-at``) instead of at a location; going to a receptacle that shares a
  location with the current one is a valid "go to" in the game too.
* the goal is a single ``done`` flag reachable only through a task-type-specific ``finish-*`` action whose
  preconditions are the task's full goal over target-type instances (the *guard*): the search cannot stop at an
  easier goal (a heat task must heat *the object it places*, a pick-two task needs two *different* objects).
  ``finish-*`` actions are planner bookkeeping and never become game commands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import permutations

from tasks.muep.vocab import TASK_TYPES, catalog

LAMPS = ("DeskLamp", "FloorLamp")
MODE = {"pick_and_place_simple": "mode-place", "pick_two_obj_and_place": "mode-two",
        "pick_heat_then_place_in_recep": "mode-heat", "pick_cool_then_place_in_recep": "mode-cool",
        "pick_clean_then_place_in_recep": "mode-clean", "look_at_obj_in_light": "mode-look"}
APPLIANCE_FLAG = {"Microwave": "is-microwave", "Fridge": "is-fridge", "SinkBasin": "is-sinkbasin"}
#: Initial marks (ADL predicate) -> the twin's predicate.
TWIN_MARK = {"isHot": "hot", "isCool": "cool", "isClean": "clean", "isToggled": "toggled"}


def ident(name: str, prefix: str) -> str:
    """"countertop 1" -> "rec_countertop_1": a PDDL-safe identifier."""
    return f"{prefix}_{re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')}"


ID_ORDERS = ("names", "released")


def released_order(name: str) -> tuple[str, int]:
    """Sort key of the order MuEP's released client lists entities in: type, then number *descending* ("cabinet 6,
    ..., cabinet 1, coffeemachine 1"). TextWorld lists entities in the order of their PDDL ids; ALFRED's ids start
    with the type ("Cabinet_bar_...", lower-cased by the PDDL reader) and ALFWorld's ``Demangler`` numbers the sorted
    ids of one name from their count down, so within a name the numbers descend. (A type that is a prefix of another
    sorts first either way: "_" sorts before every letter, as the space does.)"""
    head, _, tail = name.rpartition(" ")
    return (head.lower(), -int(tail)) if head and tail.isdigit() else (name.lower(), 0)


@dataclass(frozen=True)
class Receptacle:
    name: str
    type: str
    location: str  # location identifier (receptacles with the same interaction pose share one)
    openable: bool


@dataclass(frozen=True)
class Instance:
    name: str
    type: str
    parent: str  # receptacle name
    also_in: tuple[str, ...] = ()
    """Further receptacles it starts in (ALFWorld's evaluation games give some objects two ``inReceptacle`` facts)."""
    marks: tuple[str, ...] = ()
    """State predicates true at the start, e.g. ``("isCool",)``."""
    pickupable: bool | None = None
    """From the initial state when it says (ALFWorld's games do, per object); None = the type's attribute."""

    @property
    def parents(self) -> tuple[str, ...]:
        return (self.parent, *self.also_in)


@dataclass
class Problem:
    """One planning problem: a scene's receptacles and instances, and a task goal over types."""

    name: str
    receptacles: list[Receptacle]
    instances: list[Instance]
    task_type: str
    object_type: str
    target_type: str  # receptacle type, or the lamp type for look tasks
    ids: dict[str, str] = field(default_factory=dict)  # ALFWorld name -> PDDL identifier
    id_order: str = "names"
    """How identifiers sort, which is the order TextWorld lists entities in (intro, a receptacle's contents):
    ``names`` -- made from the names, so in the names' string order ("cabinet 1, cabinet 10, cabinet 2"; the
    demonstrations'); ``released`` -- in the order MuEP's released client lists them (:func:`released_order`)."""
    location_names: dict[str, str] = field(default_factory=dict)
    """Location id -> display name under the released grammar ("loc 18"), when the scene knows ALFRED's locations
    (``tasks.muep.demos.SceneContext.released_locations``); empty: numbered from our own locations."""

    def __post_init__(self) -> None:
        if self.id_order not in ID_ORDERS:
            raise ValueError(f"unknown id_order {self.id_order!r}; known: {', '.join(ID_ORDERS)}")
        for prefix, names in (("rec", [r.name for r in self.receptacles]), ("obj", [i.name for i in self.instances])):
            if self.id_order == "released":
                for rank, name in enumerate(sorted(names, key=released_order)):
                    self.ids[name] = ident(name, f"{prefix}_{rank:04d}")
            else:
                for name in names:
                    self.ids[name] = ident(name, prefix)

    @property
    def names(self) -> dict[str, str]:
        """PDDL identifier -> ALFWorld name."""
        return {v: k for k, v in self.ids.items()}

    def targets(self) -> list[str]:
        return [i.name for i in self.instances if i.type == self.object_type]

    def target_receptacles(self) -> list[str]:
        return [r.name for r in self.receptacles if r.type == self.target_type]

    def lamps(self) -> list[str]:
        return [i.name for i in self.instances if i.type == self.target_type and i.type in LAMPS]

    def check(self) -> str | None:
        """Why this problem cannot be posed, or None."""
        spec = TASK_TYPES[self.task_type]
        if len(self.targets()) < spec.n_objects:
            return f"the scene has {len(self.targets())} {self.object_type} instance(s), the task needs {spec.n_objects}"
        if spec.needs_receptacle and not self.target_receptacles():
            return f"no {self.target_type} receptacle in the scene"
        if not spec.needs_receptacle and not self.lamps():
            return f"no {self.target_type} in the scene"
        for appliance in spec.appliances:
            if spec.needs_receptacle and any(r.type == appliance for r in self.receptacles):
                break
        else:
            if spec.needs_receptacle and spec.appliances:
                return f"no {' or '.join(spec.appliances)} in the scene"
        return None

    # ------------------------------------------------------------------------------------------------------------
    # Facts shared by both encodings

    def _attribute_facts(self) -> list[tuple[str, str]]:
        cat = catalog()
        facts = []
        for inst in self.instances:
            o = self.ids[inst.name]
            for attr in ("pickupable", "heatable", "coolable", "cleanable", "toggleable", "sliceable"):
                on = inst.pickupable if attr == "pickupable" and inst.pickupable is not None \
                    else inst.type in getattr(cat, attr)
                if on:
                    facts.append((attr, o))
        return facts

    # ------------------------------------------------------------------------------------------------------------
    # ADL problem for TextWorld + alfred.pddl

    def adl(self, start_location: str = "loc_start", goal: str | None = None) -> str:
        """The ADL problem; ``goal`` replaces the task's goal (:meth:`adl_goal`): the problems of one scene instance
        differ only there."""
        cat = catalog()
        otypes = sorted({i.type for i in self.instances})
        rtypes = sorted({r.type for r in self.receptacles})
        locations = sorted({r.location for r in self.receptacles} | {start_location})
        objects = (["agent1 - agent"] + [f"{loc} - location" for loc in locations]
                   + [f"{self.ids[r.name]} - receptacle" for r in self.receptacles]
                   + [f"{self.ids[i.name]} - object" for i in self.instances]
                   + [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes])
        init = [f"(atLocation agent1 {start_location})"]
        for r in self.receptacles:
            rid = self.ids[r.name]
            init += [f"(receptacleAtLocation {rid} {r.location})", f"(receptacleType {rid} {r.type}Type)"]
            if r.openable:
                init.append(f"(openable {rid})")
        location_of = {r.name: r.location for r in self.receptacles}
        for inst in self.instances:
            oid = self.ids[inst.name]
            init.append(f"(objectType {oid} {inst.type}Type)")
            for parent in inst.parents:
                init += [f"(inReceptacle {oid} {self.ids[parent]})", f"(wasInReceptacle {oid} {self.ids[parent]})"]
            init.append(f"(objectAtLocation {oid} {location_of[inst.parent]})")
            init += [f"({mark} {oid})" for mark in inst.marks]
            if inst.type in cat.movable_receptacles:
                init.append(f"(isReceptacleObject {oid})")
        init += [f"({attr} {o})" for attr, o in self._attribute_facts()]
        init += [f"(canContain {rt}Type {ot}Type)" for rt in rtypes for ot in otypes if cat.holds(rt, ot)]
        return (f"(define (problem {self.name})\n  (:domain alfred)\n  (:objects\n    "
                + "\n    ".join(objects) + "\n  )\n  (:init\n    " + "\n    ".join(init)
                + f"\n  )\n  (:goal\n    {goal or self.adl_goal()}\n  )\n)\n")

    def adl_goal(self) -> str:
        o, t = f"{self.object_type}Type", f"{self.target_type}Type"
        kind = self.task_type
        if kind == "pick_and_place_simple":
            return (f"(exists (?o - object ?r - receptacle) (and (objectType ?o {o}) (receptacleType ?r {t}) "
                    "(inReceptacle ?o ?r)))")
        if kind == "pick_two_obj_and_place":
            return (f"(exists (?o1 - object ?o2 - object ?r - receptacle) (and (objectType ?o1 {o}) "
                    f"(objectType ?o2 {o}) (receptacleType ?r {t}) (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r) "
                    "(not (= ?o1 ?o2))))")
        if kind == "look_at_obj_in_light":
            return (f"(exists (?ot - object ?a - agent ?l - location ?r - receptacle ?o - object) (and "
                    f"(objectType ?ot {t}) (toggleable ?ot) (isToggled ?ot) (objectType ?o {o}) (holds ?a ?o) "
                    "(atLocation ?a ?l) (receptacleAtLocation ?r ?l) (inReceptacle ?ot ?r)))")
        pred = TASK_TYPES[kind].state_predicate
        return (f"(exists (?o - object ?r - receptacle) (and (objectType ?o {o}) (receptacleType ?r {t}) "
                f"({pred} ?o) (inReceptacle ?o ?r)))")

    # ------------------------------------------------------------------------------------------------------------
    # STRIPS twin for pyperplan

    def relevant(self) -> tuple[list[Instance], list[Receptacle]]:
        """The part of the scene a plan can need: target instances (and lamps), where they start, the target
        receptacles and the appliance of the task type. Other objects never block anything in this domain (no
        capacities, no obstacles), so leaving them out keeps grounding small without changing any plan's validity
        in the full game."""
        spec = TASK_TYPES[self.task_type]
        wanted = {self.object_type} | ({self.target_type} if not spec.needs_receptacle else set())
        instances = [i for i in self.instances if i.type in wanted]
        rec_names = {p for i in instances for p in i.parents}
        for r in self.receptacles:
            if (spec.needs_receptacle and r.type == self.target_type) or r.type in spec.appliances:
                rec_names.add(r.name)
        return instances, [r for r in self.receptacles if r.name in rec_names]

    def strips(self) -> str:
        cat = catalog()
        spec = TASK_TYPES[self.task_type]
        instances, receptacles = self.relevant()
        init = ["(agent-at start)", "(handempty)", f"({MODE[self.task_type]})"]
        for r in receptacles:
            rid = self.ids[r.name]
            init.append(f"(closed {rid})" if r.openable else f"(opened {rid})")
            if r.openable:
                init.append(f"(openable {rid})")
            if r.type in APPLIANCE_FLAG:
                init.append(f"({APPLIANCE_FLAG[r.type]} {rid})")
            if spec.needs_receptacle and r.type == self.target_type:
                init.append(f"(target-rec {rid})")
        for inst in instances:
            oid = self.ids[inst.name]
            init += [f"(in {oid} {self.ids[p]})" for p in inst.parents]
            init += [f"({TWIN_MARK[m]} {oid})" for m in inst.marks if m in TWIN_MARK]
            for r in receptacles:
                if cat.holds(r.type, inst.type):
                    init.append(f"(can-hold {self.ids[r.name]} {oid})")
            if inst.type == self.object_type:
                init.append(f"(target-obj {oid})")
            if not spec.needs_receptacle and inst.type == self.target_type:
                init.append(f"(target-lamp {oid})")
        kept = {self.ids[i.name] for i in instances}
        init += [f"({attr} {o})" for attr, o in self._attribute_facts() if o in kept]
        if spec.n_objects == 2:
            targets = [self.ids[i.name] for i in instances if i.type == self.object_type]
            init += [f"(distinct {a} {b})" for a, b in permutations(targets, 2)]
        objects = [f"{self.ids[r.name]} - rec" for r in receptacles] + [f"{self.ids[i.name]} - obj" for i in instances]
        return (f"(define (problem {self.name})\n  (:domain muep-strips)\n  (:objects\n    "
                + "\n    ".join(objects) + "\n  )\n  (:init\n    " + "\n    ".join(init)
                + "\n  )\n  (:goal (and (done)))\n)\n")


#: The STRIPS twin of ALFWorld's domain (see the module docstring). pyperplan forbids a type named ``object``.
STRIPS_DOMAIN = """
(define (domain muep-strips)
  (:requirements :strips :typing)
  (:types rec - place place obj)
  (:constants start - place)
  (:predicates
    (agent-at ?p - place) (handempty) (holds ?o - obj) (in ?o - obj ?r - rec)
    (opened ?r - rec) (closed ?r - rec) (openable ?r - rec) (can-hold ?r - rec ?o - obj)
    (pickupable ?o - obj) (heatable ?o - obj) (coolable ?o - obj) (cleanable ?o - obj) (toggleable ?o - obj)
    (sliceable ?o - obj)
    (is-microwave ?r - rec) (is-fridge ?r - rec) (is-sinkbasin ?r - rec)
    (hot ?o - obj) (cool ?o - obj) (clean ?o - obj) (toggled ?o - obj)
    (target-obj ?o - obj) (target-rec ?r - rec) (target-lamp ?o - obj) (distinct ?a - obj ?b - obj) (done)
    (mode-place) (mode-two) (mode-heat) (mode-cool) (mode-clean) (mode-look))
  (:action goto :parameters (?from - place ?to - rec)
    :precondition (agent-at ?from) :effect (and (not (agent-at ?from)) (agent-at ?to)))
  (:action open :parameters (?r - rec)
    :precondition (and (agent-at ?r) (openable ?r) (closed ?r)) :effect (and (opened ?r) (not (closed ?r))))
  (:action close :parameters (?r - rec)
    :precondition (and (agent-at ?r) (openable ?r) (opened ?r)) :effect (and (closed ?r) (not (opened ?r))))
  (:action take :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (in ?o ?r) (opened ?r) (handempty) (pickupable ?o))
    :effect (and (holds ?o) (not (in ?o ?r)) (not (handempty))))
  (:action put :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (holds ?o) (opened ?r) (can-hold ?r ?o))
    :effect (and (in ?o ?r) (handempty) (not (holds ?o))))
  (:action heat :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (holds ?o) (heatable ?o) (is-microwave ?r))
    :effect (and (hot ?o) (not (cool ?o))))
  (:action cool :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (holds ?o) (coolable ?o) (is-fridge ?r))
    :effect (and (cool ?o) (not (hot ?o))))
  (:action clean :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (holds ?o) (cleanable ?o) (is-sinkbasin ?r)) :effect (clean ?o))
  (:action toggle :parameters (?o - obj ?r - rec)
    :precondition (and (agent-at ?r) (in ?o ?r) (toggleable ?o)) :effect (toggled ?o))
  (:action finish-place :parameters (?o - obj ?r - rec)
    :precondition (and (target-obj ?o) (target-rec ?r) (in ?o ?r) (mode-place)) :effect (done))
  (:action finish-two :parameters (?a - obj ?b - obj ?r - rec)
    :precondition (and (target-obj ?a) (target-obj ?b) (distinct ?a ?b) (target-rec ?r) (in ?a ?r) (in ?b ?r) (mode-two))
    :effect (done))
  (:action finish-heat :parameters (?o - obj ?r - rec)
    :precondition (and (target-obj ?o) (target-rec ?r) (in ?o ?r) (hot ?o) (mode-heat)) :effect (done))
  (:action finish-cool :parameters (?o - obj ?r - rec)
    :precondition (and (target-obj ?o) (target-rec ?r) (in ?o ?r) (cool ?o) (mode-cool)) :effect (done))
  (:action finish-clean :parameters (?o - obj ?r - rec)
    :precondition (and (target-obj ?o) (target-rec ?r) (in ?o ?r) (clean ?o) (mode-clean)) :effect (done))
  (:action finish-look :parameters (?o - obj ?l - obj ?r - rec)
    :precondition (and (target-obj ?o) (holds ?o) (target-lamp ?l) (toggled ?l) (in ?l ?r) (agent-at ?r) (mode-look))
    :effect (done))
)
"""
