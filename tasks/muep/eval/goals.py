"""How far an episode got: the paper's sub-goals (the headline GCS) and ALFWorld's goal conditions (``gcs_alfworld``
and the progress rate), both counted from the game state after every step.

Objects are matched by *type*, as in ALFRED: any instance of the task's object type, any receptacle of the target
type. With ``O`` = instances of the object type, ``R`` = receptacles of the target type and *held* = the instances of
``O`` the agent has held at some step of the episode so far. An object *lies in* every receptacle the game says it is
in: ALFWorld's games put some in two (``WorldState.placements`` holds the first by name, ``also_in`` the others), and
the game's goal holds for either:

**Sub-goals (the paper, section 3.2, "Goal-Condition Success").** The paper's only worked example: "placing a
heated potato on a table" has three sub-goals -- *finding* the potato, *heating* it, *placing* it on the table --
and an agent that puts an unheated potato on the table scores 2/3. Finding an object counts as done once the agent
has held one (it must have found it to pick it up; seeing it in a list of objects is not enough). The other task
types are extended in the same spirit, one sub-goal per thing the agent has to achieve:

=============================  =====  ================================================================================
task type                      total  sub-goals (each counts 1)
=============================  =====  ================================================================================
pick_and_place_simple          2      found (some o in O held); placed (some o in O lies in some r in R)
pick_two_obj_and_place         4      found: min(2, #(held, or lying in some r in R)); placed: min(2, max over r in R
                                      of #{o in O lying in r}). An object in place needs no finding: pick-two tasks
                                      can start with one there
look_at_obj_in_light           3      found; lamp on (a lamp of the target type is switched on); looked (the agent holds
                                      some o in O where a switched-on lamp of the target type is)
pick_heat_then_place_in_recep  3      found; heated (some o in O is hot); placed (some o in O lies in some r in R)
(clean / cool likewise)
=============================  =====  ================================================================================

Every sub-goal holds when the game is won; the converse fails in one case the paper's count cannot tell apart:
heating one potato and placing *another* meets all three heat sub-goals without solving the task (SR and
``gcs_alfworld`` tell it apart).

**Goal conditions (ALFWorld: ALFRED's ``goal_conditions_met``)**, state only:

=============================  =====  ================================================================================
task type                      total  conditions
=============================  =====  ================================================================================
pick_and_place_simple          1      some o in O lies in some r in R
pick_two_obj_and_place         2      min(2, max over r in R of #{o in O lying in r})
look_at_obj_in_light           2      a lamp of the target type is on *and* at the agent's location; the agent holds
                                      some o in O
pick_heat_then_place_in_recep  3      some o in O lies in some r in R; some o in O is hot; some o in O is hot *and*
(clean / cool likewise)               lies in some r in R (the same object)
=============================  =====  ================================================================================

So an *unheated* potato placed on the table in a heat-and-place task scores 2/3 of the sub-goals (found, placed)
and 1/3 of ALFWorld's conditions (in place; not heated; not the same object heated and placed). Every condition set
is met exactly when the game's PDDL goal holds (the oracle check tests this on every episode). See docs/muep-eval.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.muep.pddl import Problem
from tasks.muep.vocab import TASK_TYPES
from tasks.muep.world_state import WorldState

#: ALFWorld's goal conditions per task type (``gcs_alfworld``, the progress rate).
CONDITION_TOTALS = {"pick_and_place_simple": 1, "pick_two_obj_and_place": 2, "look_at_obj_in_light": 2,
                    "pick_heat_then_place_in_recep": 3, "pick_cool_then_place_in_recep": 3,
                    "pick_clean_then_place_in_recep": 3}
#: The paper's sub-goals per task type (the headline ``gcs``).
SUBGOAL_TOTALS = {"pick_and_place_simple": 2, "pick_two_obj_and_place": 4, "look_at_obj_in_light": 3,
                  "pick_heat_then_place_in_recep": 3, "pick_cool_then_place_in_recep": 3,
                  "pick_clean_then_place_in_recep": 3}
_MARK = {"isHot": "hot", "isCool": "cool", "isClean": "clean"}


@dataclass(frozen=True)
class GoalCounter:
    """What counts for one task: the object instances, target receptacles, lamps and where receptacles are."""

    task_type: str
    objects: frozenset[str]            # instance names of the object type
    targets: frozenset[str]            # receptacle names of the target type (receptacle tasks)
    lamps: frozenset[str]              # lamp instance names of the target type (look tasks)
    location: dict[str, str]           # receptacle name -> location id

    @classmethod
    def for_problem(cls, problem: Problem) -> GoalCounter:
        if problem.task_type not in CONDITION_TOTALS:
            raise ValueError(f"no goal conditions for task type {problem.task_type!r}")
        return cls(problem.task_type, frozenset(problem.targets()), frozenset(problem.target_receptacles()),
                   frozenset(problem.lamps()), {r.name: r.location for r in problem.receptacles})

    @property
    def conditions_total(self) -> int:
        return CONDITION_TOTALS[self.task_type]

    @property
    def subgoals_total(self) -> int:
        return SUBGOAL_TOTALS[self.task_type]

    @staticmethod
    def _inside(state: WorldState, obj: str) -> set[str]:
        """Every receptacle ``obj`` lies in: ALFWorld's games put some objects in two (``WorldState.also_in``), and
        the game's goal (``inReceptacle ?o ?r``) holds for any of them."""
        first = state.placements.get(obj)
        return ({first} if first else set()) | set(state.also_in.get(obj, ()))

    def _placed(self, state: WorldState) -> set[str]:
        return {o for o in self.objects if self._inside(state, o) & self.targets}

    def _most_in_one_target(self, state: WorldState) -> int:
        return min(2, max((sum(r in self._inside(state, o) for o in self.objects) for r in self.targets), default=0))

    def _lit_here(self, state: WorldState) -> bool:
        here = self.location.get(state.agent_at) if state.agent_at else None
        return here is not None and any(lamp in state.toggled and here in {self.location.get(r) for r in
                                                                            self._inside(state, lamp)}
                                        for lamp in self.lamps)

    def _marked(self, state: WorldState) -> set[str]:
        return self.objects & getattr(state, _MARK[TASK_TYPES[self.task_type].state_predicate])

    def conditions(self, state: WorldState) -> int:
        """How many of ALFWorld's goal conditions hold in ``state``."""
        kind = self.task_type
        if kind == "pick_and_place_simple":
            return int(bool(self._placed(state)))
        if kind == "pick_two_obj_and_place":
            return self._most_in_one_target(state)
        if kind == "look_at_obj_in_light":
            return int(self._lit_here(state)) + int(state.holding in self.objects)
        placed, marked = self._placed(state), self._marked(state)
        return int(bool(placed)) + int(bool(marked)) + int(bool(placed & marked))

    def subgoals(self, state: WorldState, held: frozenset[str] | set[str]) -> int:
        """How many of the paper's sub-goals are done in ``state``, ``held`` being the instances of the object type
        the agent has held so far (this state's included)."""
        kind = self.task_type
        found = len(held & self.objects)
        if kind == "pick_and_place_simple":
            return min(1, found) + int(bool(self._placed(state)))
        if kind == "pick_two_obj_and_place":  # one may lie in place from the start: it needs no finding
            return min(2, len((set(held) | self._placed(state)) & self.objects)) + self._most_in_one_target(state)
        if kind == "look_at_obj_in_light":
            switched_on = any(lamp in state.toggled for lamp in self.lamps)
            return min(1, found) + int(switched_on) + int(state.holding in self.objects and self._lit_here(state))
        return min(1, found) + int(bool(self._marked(state))) + int(bool(self._placed(state)))


@dataclass
class GoalTracker:
    """One episode's progress: feed it every state in order; it remembers which objects the agent has held."""

    counter: GoalCounter
    held: set[str] = field(default_factory=set)

    def update(self, state: WorldState) -> tuple[int, int]:
        """(sub-goals done, ALFWorld conditions met) after ``state``."""
        if state.holding in self.counter.objects:
            self.held.add(state.holding)
        return self.counter.subgoals(state, self.held), self.counter.conditions(state)
