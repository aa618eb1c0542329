"""The real TextWorld engine on ALFWorld's own domain and grammar: build a ``tw-pddl`` game, replay commands.

A game is ALFWorld's ``alfred.pddl`` + ``alfred.twl2`` (package data) with our ADL problem, loaded by TextWorld's
``PddlEnv``. Entities are shown with ALFWorld-style names ("apple 1"), which TextWorld takes from its entity infos:
we set them right after loading, as ALFWorld's own environment wrapper does.

Two action grammars are selectable and recorded with every record:

* ``alfworld-0.4`` -- ALFWorld 0.4's ``move X to Y``;
* ``muep`` -- the older ``put X in/on Y`` form that MuEP's published data uses.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property

from tasks.errors import DataError
from tasks.muep import alfworld_data
from tasks.muep.pddl import Problem
from tasks.muep.world_state import WorldState, state_from_facts

GRAMMARS = {
    "alfworld-0.4": 'template :: "move {o} to {r}";',
    "muep": 'template :: "put {o} in/on {r}";',
}
GOAL_PLACEHOLDER = "UNKNOWN GOAL."
START_LOCATION = "loc_start"


@cache
def _domain() -> str:
    return alfworld_data.domain_file().read_text(encoding="utf-8")


@cache
def _grammar(version: str) -> str:
    text = alfworld_data.grammar_file().read_text(encoding="utf-8")
    put_rule = 'action PutObject {\n    template :: "move {o} to {r}";'
    if put_rule not in text:
        raise DataError(f"{alfworld_data.grammar_file()}: no `PutObject` rule with the `move {{o}} to {{r}}` template; "
                        "this grammar file is not ALFWorld 0.4's.")
    return text.replace(put_rule, "action PutObject {\n    " + GRAMMARS[version])


def put_command(obj: str, receptacle: str, grammar: str) -> str:
    return f"move {obj} to {receptacle}" if grammar == "alfworld-0.4" else f"put {obj} in/on {receptacle}"


def game_data(problem: Problem, instruction: str, grammar: str) -> dict:
    if grammar not in GRAMMARS:
        raise ValueError(f"unknown grammar {grammar!r}; known: {', '.join(GRAMMARS)}")
    goal = instruction.strip().rstrip(".") + "."
    return {
        "pddl_domain": _domain(),
        "grammar": _grammar(grammar).replace(GOAL_PLACEHOLDER, goal),
        "pddl_problem": problem.adl(START_LOCATION),
        "solvable": True,
    }


@contextmanager
def _argv_guard():
    """TextWorld's fast-downward translation overwrites ``sys.argv``; put it back."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


@contextmanager
def single_translation():
    """Translate each (domain, problem) to SAS once instead of four times.

    TextWorld's ``PddlState`` translates the problem twice (a plain task, and an "optimised" one that only its
    Fast Downward replanner uses), and ``PddlEnv`` builds a ``PddlState`` in ``load`` and again in ``reset``: four
    translations, ~0.35 s each for a 30-receptacle scene, of which one is needed. Inside this context the first
    plain translation is reused for the others. The replanner then gets the plain task, which is still correct; we
    never ask for it anyway (it can run away on pick-two games). Game play and goal checks are unchanged.
    """
    import fast_downward

    original = fast_downward.pddl2sas
    memo: dict[tuple[str, str], object] = {}

    def translate(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
        key = (domain, problem)
        if key not in memo:
            memo[key] = original(domain, problem, verbose=verbose, optimize=False)
        return memo[key]

    fast_downward.pddl2sas = translate
    try:
        with _argv_guard():
            yield
    finally:
        fast_downward.pddl2sas = original


@dataclass
class Step:
    command: str
    observation: str
    valid: bool
    won: bool
    state: WorldState


@dataclass
class Game:
    """One loaded TextWorld game with ALFWorld names; ``reset`` then ``step`` commands."""

    problem: Problem
    grammar: str
    env: object = field(repr=False)
    location_of: dict[str, str] = field(default_factory=dict)  # location id -> first receptacle name there

    facing: str | None = None  # the receptacle the agent last went to (several can share one location)

    def _state(self, step: int, action: str | None) -> WorldState:
        state = state_from_facts(self.env.state["_facts"], self.problem.names, self.location_of, step, action)
        if self.facing is not None and state.agent_at is not None:
            here = self.location_by_name.get(state.agent_at)
            if here is not None and here == self.location_by_name.get(self.facing):
                state.agent_at = self.facing
        return state

    @cached_property
    def location_by_name(self) -> dict[str, str]:
        return {r.name: r.location for r in self.problem.receptacles}

    def reset(self) -> tuple[str, WorldState]:
        self.facing = None
        with single_translation():
            state = self.env.reset()
        return state.feedback, self._state(0, None)

    def admissible(self) -> list[str]:
        return list(self.env.state["admissible_commands"])

    def step(self, command: str, index: int) -> Step:
        valid = command in self.env.state["_valid_commands"]
        with _argv_guard():
            state, _, _ = self.env.step(command)
        if valid and command.startswith("go to "):
            self.facing = command[len("go to "):]
        return Step(command, state.feedback, valid, bool(state["won"]), self._state(index, command))

    def won(self) -> bool:
        return bool(self.env.state["won"])


def load_game(problem: Problem, instruction: str, grammar: str = "alfworld-0.4") -> Game:
    import textworld
    from textworld.envs.pddl import PddlEnv

    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, facts=False, won=True))
    with single_translation():
        env.load(game_data(problem, instruction, grammar))
    names = problem.names
    for key, info in env._entity_infos.items():  # noqa: SLF001 - TextWorld reads display names from here
        if key in names:
            info.name = names[key]
    location_of: dict[str, str] = {}
    for r in problem.receptacles:
        location_of.setdefault(r.location, r.name)
    return Game(problem, grammar, env, location_of)
