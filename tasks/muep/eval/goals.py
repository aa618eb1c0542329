"""Goal conditions counted from the game state, per task type, the way ALFWorld (ALFRED's ``goal_conditions_met``)
counts them.

Objects are matched by *type*, as in ALFRED: any instance of the task's object type, any receptacle of the target
type. With ``O`` = instances of the object type and ``R`` = receptacles of the target type:

=============================  =====  =================================================================================
task type                      total  conditions (each counts 1)
=============================  =====  =================================================================================
pick_and_place_simple          1      some o in O lies in some r in R
pick_two_obj_and_place         2      min(2, max over r in R of #{o in O lying in r})  (counts 0, 1 or 2)
look_at_obj_in_light           2      a lamp of the target type is on *and* at the agent's location ("visible");
                                      the agent holds some o in O
pick_heat_then_place_in_recep  3      some o in O lies in some r in R; some o in O is hot;
(clean / cool likewise)               some o in O is hot *and* lies in some r in R (the same object)
=============================  =====  =================================================================================

So an *unheated* potato placed on the table in a heat-and-place task meets 1 of 3 (in place; not heated; not the
same object heated and placed): GCS 1/3. Heating one potato and placing another meets 2 of 3. The paper's prose
example counts "finding the potato" as a sub-goal and says 2/3 for the first case; ALFWorld's state-based counter --
which this module follows, as the issue asks -- has no "found" condition. See docs/muep-eval.md.

Every condition set is met exactly when the game's PDDL goal holds (the oracle check tests this on every episode).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.muep.pddl import Problem
from tasks.muep.vocab import TASK_TYPES
from tasks.muep.world_state import WorldState

GOAL_TOTALS = {"pick_and_place_simple": 1, "pick_two_obj_and_place": 2, "look_at_obj_in_light": 2,
               "pick_heat_then_place_in_recep": 3, "pick_cool_then_place_in_recep": 3,
               "pick_clean_then_place_in_recep": 3}
_MARK = {"isHot": "hot", "isCool": "cool", "isClean": "clean"}


@dataclass(frozen=True)
class GoalCounter:
    task_type: str
    objects: frozenset[str]            # instance names of the object type
    targets: frozenset[str]            # receptacle names of the target type (receptacle tasks)
    lamps: frozenset[str]              # lamp instance names of the target type (look tasks)
    location: dict[str, str]           # receptacle name -> location id

    @classmethod
    def for_problem(cls, problem: Problem) -> GoalCounter:
        if problem.task_type not in GOAL_TOTALS:
            raise ValueError(f"no goal conditions for task type {problem.task_type!r}")
        return cls(problem.task_type, frozenset(problem.targets()), frozenset(problem.target_receptacles()),
                   frozenset(problem.lamps()), {r.name: r.location for r in problem.receptacles})

    @property
    def total(self) -> int:
        return GOAL_TOTALS[self.task_type]

    def met(self, state: WorldState) -> int:
        """How many of the task's goal conditions hold in ``state``."""
        placed = {o for o in self.objects if state.placements.get(o) in self.targets}
        kind = self.task_type
        if kind == "pick_and_place_simple":
            return int(bool(placed))
        if kind == "pick_two_obj_and_place":
            per_receptacle = [sum(state.placements.get(o) == r for o in self.objects) for r in self.targets]
            return min(2, max(per_receptacle, default=0))
        if kind == "look_at_obj_in_light":
            here = self.location.get(state.agent_at) if state.agent_at else None
            lit = any(lamp in state.toggled and here is not None
                      and self.location.get(state.placements.get(lamp, "")) == here for lamp in self.lamps)
            return int(lit) + int(state.holding in self.objects)
        marked = getattr(state, _MARK[TASK_TYPES[kind].state_predicate])
        changed = self.objects & marked
        return int(bool(placed)) + int(bool(changed)) + int(bool(placed & changed))
