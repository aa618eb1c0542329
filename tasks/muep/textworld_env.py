"""The real TextWorld engine on ALFWorld's own domain and grammar: build a ``tw-pddl`` game, replay commands.

A game is ALFWorld's ``alfred.pddl`` + ``alfred.twl2`` (package data) with our ADL problem, loaded by TextWorld's
``PddlEnv``. Entities are shown with ALFWorld-style names ("apple 1"), which TextWorld takes from its entity infos:
we set them right after loading, as ALFWorld's own environment wrapper does.

Two action grammars are selectable and recorded with every record:

* ``alfworld-0.4`` -- ALFWorld 0.4's ``move X to Y``;
* ``muep`` -- the older ``put X in/on Y`` form that MuEP's published data uses;
* ``muep-released`` -- the whole grammar file of MuEP's released test client (``testing_environment/alfworld/data/
  alfred.twl2`` of github.com/kanxueli/MuEP): ``put X in/on Y``, its feedback "You put the X in/on the Y." and "You
  arrive at loc N." (the location's name, numbered by the released ``Demangler``), and no ``help`` command (our
  games keep its rule, as ALFWorld 0.4's domain has the action, but do not offer it). Derived from ALFWorld 0.4's
  file by those edits; :data:`RELEASED_GRAMMAR_SHA256` checks the result byte for byte (``help`` left out). A game
  of this grammar also lists entities in the released client's order (:func:`for_grammar`) and numbers locations
  as it does from ALFRED's locations where the problem knows them (``Problem.location_names``).

:func:`load_game` builds each game from scratch, as TextWorld does. :class:`GameEngine` plays many games one after
the other in one process and makes that cheap (one ``PddlEnv`` reused, one Fast Downward translation per scene
instance, memoised grammar parses: ``tasks.muep.textworld_fast``); its games behave exactly like fresh ones.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from functools import cache, cached_property

from core.errors import DataError
from tasks.muep import alfworld_data, textworld_fast
from tasks.muep.pddl import Instance, Problem, Receptacle
from tasks.muep.textworld_fast import SceneTranslation, argv_guard
from tasks.muep.world_state import WorldState, state_from_facts

GRAMMARS = {
    "alfworld-0.4": 'template :: "move {o} to {r}";',
    "muep": 'template :: "put {o} in/on {r}";',
    "muep-released": 'template :: "put {o} in/on {r}";',
}
#: sha256 of MuEP's released ``testing_environment/alfworld/data/alfred.twl2`` (github.com/kanxueli/MuEP, 2d03c6c):
#: what :func:`_grammar` ("muep-released") must produce from ALFWorld 0.4's file.
RELEASED_GRAMMAR_SHA256 = "d955e6db384c68ac5797e881b795fd36d788e87a03547f9a87e48fbd7c5b361b"
#: The released file's edits of ALFWorld 0.4's (besides the ``PutObject`` templates): (ours, theirs).
_RELEASED_EDITS = (
    ('"rhs": "You arrive at {r.name}. #examineReceptacle.feedback#"',
     '"rhs": "You arrive at {lend.name}. #examineReceptacle.feedback#"'),
    ('"rhs": "You move the {o.name} to the {r.name}."', '"rhs": "You put the {o.name} in/on the {r.name}."'),
    ('action PutEmptyReceptacleObjectinReceptacle {\n    template :: "move {o} to {r}";',
     'action PutEmptyReceptacleObjectinReceptacle {\n    template :: "put {o} in/on {r}";'),
)
GOAL_PLACEHOLDER = "UNKNOWN GOAL."
START_LOCATION = "loc_start"
log = logging.getLogger("embp")


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
    text = text.replace(put_rule, "action PutObject {\n    " + GRAMMARS[version])
    if version == "muep-released":
        text = _released(text)
    return text


def _released(text: str) -> str:
    """ALFWorld 0.4's grammar (``PutObject`` already edited) -> MuEP's released one, checked by its hash."""
    for ours, theirs in _RELEASED_EDITS:
        if text.count(ours) != 1:
            raise DataError(f"{alfworld_data.grammar_file()}: expected one {ours!r}; this grammar file is not "
                            "ALFWorld 0.4's.")
        text = text.replace(ours, theirs)
    help_at = text.find("\n\naction help {")
    if help_at < 0:
        raise DataError(f"{alfworld_data.grammar_file()}: no `help` action; this grammar file is not ALFWorld 0.4's.")
    # The released file has no `help` action (nor has its domain); ALFWorld 0.4's domain, which our games use, has,
    # and TextWorld needs a template for every action of the domain: the rule stays, and ``Game.admissible`` leaves
    # "help" out under this grammar.
    digest = hashlib.sha256((text[:help_at] + "\n").encode("utf-8")).hexdigest()
    if digest != RELEASED_GRAMMAR_SHA256:
        raise DataError(f"the grammar derived from {alfworld_data.grammar_file()} is not MuEP's released alfred.twl2 "
                        f"(sha256 {digest}, expected {RELEASED_GRAMMAR_SHA256}).")
    return text


def released_location_names(location_ids: Iterable[str]) -> dict[str, str]:
    """Display names of location entities as MuEP's released client shows them ("loc 7"): its ``Demangler``
    (``testing_environment/alfworld/agents/utils/misc.py``, l. 19-69) sorts the entity ids, counts the ids of each
    name, and hands out the numbers count, count-1, ... in sorted order (``list.pop()``). The sort runs on ALFWorld's
    mangled spelling (``_minus_`` for "-"), which we rebuild for ours."""
    def mangled(key: str) -> str:
        return key.replace("-", "_minus_").replace("+", "_plus_").replace(".", "_dot_").replace(",", "_comma_")

    ordered = sorted(set(location_ids), key=mangled)
    return {key: f"loc {len(ordered) - i}" for i, key in enumerate(ordered)}


def for_grammar(problem: Problem, grammar: str) -> Problem:
    """The problem as a game of ``grammar`` poses it: under ``muep-released``, with identifiers that sort as MuEP's
    released client's (``Problem.id_order``), so that every list of entities comes in its order; else unchanged
    (the demonstrations' grammars keep the ids made from the names)."""
    if grammar != "muep-released" or problem.id_order == "released":
        return problem
    return replace(problem, ids={}, id_order="released")


def put_command(obj: str, receptacle: str, grammar: str) -> str:
    if grammar not in GRAMMARS:
        raise ValueError(f"unknown grammar {grammar!r}; known: {', '.join(GRAMMARS)}")
    return f"move {obj} to {receptacle}" if grammar == "alfworld-0.4" else f"put {obj} in/on {receptacle}"


def goal_sentence(instruction: str) -> str:
    return instruction.strip().rstrip(".") + "."


@cache
def _grammar_template(version: str) -> textworld_fast.GrammarTemplate:
    return textworld_fast.GrammarTemplate(_grammar(version), GOAL_PLACEHOLDER)


def game_data(problem: Problem, instruction: str, grammar: str) -> dict:
    if grammar not in GRAMMARS:
        raise ValueError(f"unknown grammar {grammar!r}; known: {', '.join(GRAMMARS)}")
    return {
        "pddl_domain": _domain(),
        "grammar": _grammar(grammar).replace(GOAL_PLACEHOLDER, goal_sentence(instruction)),
        "pddl_problem": problem.adl(START_LOCATION),
        "solvable": True,
    }


@contextmanager
def single_translation():
    """Translate each (domain, problem) to SAS once instead of four times.

    TextWorld's ``PddlState`` translates the problem twice (a plain task, and an "optimised" one that only its
    Fast Downward replanner uses), and ``PddlEnv`` builds a ``PddlState`` in ``load`` and again in ``reset``: four
    translations, ~0.35 s each for a 30-receptacle scene, of which one is needed. Inside this context the first
    plain translation is reused for the others (:func:`load_game` and ``Game.reset`` each open their own, so a game
    built that way translates twice; :class:`GameEngine` once per scene instance). The replanner then gets the plain task, which is still correct; we
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
        with argv_guard():
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
    #: the context every call into TextWorld runs in (the plain one, or a :class:`GameEngine`'s)
    within: Callable[[], AbstractContextManager] = field(default=single_translation, repr=False)

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
        with self.within():
            state = self.env.reset()
        return state.feedback, self._state(0, None)

    def admissible(self) -> list[str]:
        commands = list(self.env.state["admissible_commands"])
        return [c for c in commands if c != "help"] if self.grammar == "muep-released" else commands

    def step(self, command: str, index: int) -> Step:
        valid = command in self.env.state["_valid_commands"]
        with self.within():
            state, _, _ = self.env.step(command)
        if valid and command.startswith("go to "):
            self.facing = command[len("go to "):]
        return Step(command, state.feedback, valid, bool(state["won"]), self._state(index, command))

    def won(self) -> bool:
        return bool(self.env.state["won"])


def _new_env():
    import textworld
    from textworld.envs.pddl import PddlEnv

    return PddlEnv(textworld.EnvInfos(admissible_commands=True, facts=False, won=True))


def _game(env, problem: Problem, grammar: str, within: Callable[[], AbstractContextManager]) -> Game:
    names = problem.names
    for key, info in env._entity_infos.items():  # noqa: SLF001 - TextWorld reads display names from here
        if key in names:
            info.name = names[key]
    location_of: dict[str, str] = {}
    for r in problem.receptacles:
        location_of.setdefault(r.location, r.name)
    if grammar == "muep-released":
        locations = {loc.lower() for loc in location_of} | {START_LOCATION}
        keys = [key for key in env._entity_infos if key.lower() in locations]  # noqa: SLF001
        known = {loc.lower(): name for loc, name in problem.location_names.items()}
        missing = [key for key in keys if key.lower() not in known]
        if known and missing:
            raise DataError(f"problem {problem.name}: no released location name for {', '.join(sorted(missing))}.")
        named = {key: known[key.lower()] for key in keys} if known else released_location_names(keys)
        for key, name in named.items():
            env._entity_infos[key].name = name  # noqa: SLF001
    return Game(problem, grammar, env, location_of, within)


def load_game(problem: Problem, instruction: str, grammar: str = "alfworld-0.4") -> Game:
    """A game built from scratch: a new ``PddlEnv`` (its own copy of Fast Downward's library), TextWorld's own
    translation and parsing. The reference :class:`GameEngine` is tested against."""
    problem = for_grammar(problem, grammar)
    env = _new_env()
    with single_translation():
        env.load(game_data(problem, instruction, grammar))
    return _game(env, problem, grammar, single_translation)


SceneKey = tuple[tuple[Receptacle, ...], tuple[Instance, ...]]


def scene_key(problem: Problem) -> SceneKey:
    """What a problem's ADL text depends on besides its name and goal: the scene instance."""
    return tuple(problem.receptacles), tuple(problem.instances)


class GameEngine:
    """Plays many games in one process, one at a time, at a fraction of :func:`load_game`'s cost.

    * one ``PddlEnv`` for all games: TextWorld's ``load`` replaces everything a game holds. (Each new ``PddlEnv``
      loads a fresh copy of Fast Downward's library that is never unloaded: ~4 MB a game, which adds up to tens of
      GB over a paper-scale run.)
    * one Fast Downward translation per scene instance for all the goals :meth:`expect` announced
      (:func:`tasks.muep.textworld_fast.translate_scene`), kept for the last ``scenes`` scene instances;
    * TextWorld's grammar parses memoised, the grammar document parsed once per grammar version, and derivation
      contexts light, while a game runs.

    Loading a game ends the previous one (its methods then raise). With TextWorld or Fast Downward versions other
    than the pinned ones it says so once and builds every game with :func:`load_game`.
    """

    def __init__(self, scenes: int = 4) -> None:
        self.scenes = scenes
        self.translations = 0      # Fast Downward translations made (scene translations + fallbacks)
        self.fast = textworld_fast.unsupported() is None
        if not self.fast:
            log.warning("TextWorld games are built the slow way: %s", textworld_fast.unsupported())
        self._env = None
        self._translated: OrderedDict[tuple[SceneKey, str], SceneTranslation] = OrderedDict()
        self._expected: OrderedDict[SceneKey, set[str]] = OrderedDict()
        self._current: tuple[int, str, Problem] | None = None  # (game number, its ADL text, its problem)
        self._grammar: tuple[str, textworld_fast.GrammarTemplate, str] | None = None  # the current game's
        self._games = 0
        self._current_sas: tuple[int, tuple[object, str]] | None = None  # (game number, its translation)
        self._fallback: tuple[tuple[str, str], tuple[object, str]] | None = None
        self._pristine: tuple[int, object] | None = None  # (game number, the state its load built, untouched)
        self._texts: tuple[int, textworld_fast.FixedTexts] | None = None  # the current game's fixed texts
        self._scene_texts: OrderedDict[tuple, dict[tuple, str]] = OrderedDict()  # their store, per scene instance

    def expect(self, problems: Iterable[Problem]) -> None:
        """Announce games to come: each scene instance is translated once with all the goals announced for it."""
        for problem in problems:
            key = scene_key(problem)
            self._expected.setdefault(key, set()).add(problem.adl_goal())
            self._expected.move_to_end(key)
        while len(self._expected) > 16 * self.scenes:
            self._expected.popitem(last=False)

    def load(self, problem: Problem, instruction: str, grammar: str = "alfworld-0.4") -> Game:
        if not self.fast:
            return load_game(problem, instruction, grammar)
        problem = for_grammar(problem, grammar)
        data = game_data(problem, instruction, grammar)
        self._games += 1
        self._current = (self._games, data["pddl_problem"], problem)
        self._grammar = (data["grammar"], _grammar_template(grammar), goal_sentence(instruction))
        self.expect([problem])
        if self._env is None:
            self._env = _new_env()
        game_no = self._games
        with self._running(game_no):
            self._env.load(data)
        self._pristine = (game_no, self._env._pddl_state)  # noqa: SLF001 - what the first reset can have as is
        shared = (scene_key(problem), problem.id_order, grammar)  # games whose fixed texts are the same
        texts = self._scene_texts.pop(shared, None) or {}
        self._scene_texts[shared] = texts
        while len(self._scene_texts) > self.scenes:
            self._scene_texts.popitem(last=False)
        changing = textworld_fast.changing_predicates(self._env._pddl_state.task)  # noqa: SLF001
        self._texts = (game_no, textworld_fast.FixedTexts(self._env._logic.grammar, changing, texts))  # noqa: SLF001
        return _game(self._env, problem, grammar, lambda: self._running(game_no))

    def _running(self, game_no: int) -> AbstractContextManager:
        if self._current is None or self._current[0] != game_no:
            raise RuntimeError("this game was replaced by a later one of the same GameEngine")
        return textworld_fast.patched(self._pddl2sas, self._grammar, self._pddl_state, self._fixed_texts)

    def _fixed_texts(self) -> textworld_fast.FixedTexts | None:
        """The current game's :class:`~tasks.muep.textworld_fast.FixedTexts` (None while it loads)."""
        if self._texts is None or self._current is None or self._texts[0] != self._current[0]:
            return None
        return self._texts[1]

    def _pddl_state(self, build: Callable, downward_lib, pddl_problem: str, logic):
        """What TextWorld gets for ``PddlState(...)`` while a game runs: the state the current game's ``load``
        built, once, if it is of this problem and nothing has used it since; else a new one (``build``), which for
        the current game's problem takes its initial facts from the first state of its scene translation
        (mechanism 7 of :mod:`tasks.muep.textworld_fast`)."""
        pristine, self._pristine = self._pristine, None
        if self._current is not None and pristine is not None and pristine[0] == self._current[0]:
            state = pristine[1]
            if state.downward_lib is downward_lib and state.pddl_problem == pddl_problem and state._logic is logic:  # noqa: SLF001
                return state
        if self._current is None or pddl_problem != self._current[1] or logic.domain != _domain():
            return build(downward_lib, pddl_problem, logic)
        problem = self._current[2]
        translation = self._translation(problem, problem.adl_goal())  # the one its pddl2sas gets (_pddl2sas)
        state = textworld_fast.state_without_read(build, downward_lib, pddl_problem, logic)
        if translation.initial is None:  # the first state of this translation reads the initial state back
            translation.initial = textworld_fast.initial_facts(state)
        state.add_facts(translation.initial)  # as the constructor adds them: after its ``init`` facts
        return state

    def _pddl2sas(self, domain: str, problem: str, verbose: bool = False, optimize: bool = False):
        """What TextWorld gets for ``fast_downward.pddl2sas`` while a game runs. The plain task also serves the
        "optimised" one TextWorld builds for its Fast Downward replanner, which we never ask for."""
        if self._current is not None and problem == self._current[1] and domain == _domain():
            game_no, _, ours = self._current
            if self._current_sas is None or self._current_sas[0] != game_no:
                goal = ours.adl_goal()
                translation = self._translation(ours, goal)
                self._current_sas = (game_no, (translation.task, translation.sas_for(goal)))
            return self._current_sas[1]
        if self._fallback is None or self._fallback[0] != (domain, problem):  # not ours: translated as given
            from fast_downward.interface import pddl2sas

            self.translations += 1
            self._fallback = ((domain, problem), pddl2sas(domain, problem, verbose=verbose, optimize=False))
        return self._fallback[1]

    def _translation(self, problem: Problem, goal: str) -> SceneTranslation:
        key = scene_key(problem)  # the goals announced for it, whichever ids its games get
        ids = (key, problem.id_order)  # a translation is of one spelling of the ids
        found = self._translated.get(ids)
        if found is None or goal not in found.goal_fact:
            goals = sorted(set(self._expected.get(key, ())) | {goal} | set(found.goal_fact if found else ()))

            def write(g: str) -> str:
                return problem.adl(START_LOCATION, goal=g)

            self.translations += 1
            try:
                found = textworld_fast.translate_scene(_domain(), write, goals)
            except Exception:  # noqa: BLE001 - one announced goal must not fail the others: this goal alone
                if len(goals) == 1:
                    raise
                log.debug("translating %d goals together failed; translating this game's goal alone", len(goals))
                self._expected.pop(key, None)  # the next games of this scene add their goals one by one
                self.translations += 1
                found = textworld_fast.translate_scene(_domain(), write, [goal])
            self._translated[ids] = found
        self._translated.move_to_end(ids)
        while len(self._translated) > self.scenes:
            self._translated.popitem(last=False)
        return found
