"""Making many TextWorld games of one scene instance cheap, without changing what any game does.

Replaying an expert plan in TextWorld's PDDL environment costs, per game, two Fast Downward translations of the
ADL problem (~0.35 s each for a 30-receptacle scene: ``PddlEnv.load`` and ``reset`` both build a ``PddlState``),
and, per step, TatSu re-parsing the same grammar strings for every admissible command plus a ``deepcopy`` of the
derivation context for every grammar symbol (~55 ms a step). Measured in ``bench/muep_demos.py``. The mechanisms below,
used by :class:`tasks.muep.textworld_env.GameEngine` only while one of its games runs (:func:`patched`):

1. **One translation per scene instance** (:func:`translate_scene`). The ADL problems of the tasks of one scene
   instance differ only in their ``:goal``; every other part of the translation (variables, operators, initial
   state) is the same. Fast Downward turns a non-literal goal into one derived predicate ``new-axiom@N`` (its
   ``normalize.substitute_complicated_goal``). We translate the scene's problem once with all the tasks' goals,
   each compiled into *its own* derived predicate by Fast Downward itself (the same ``task.add_axiom([], goal)``
   call its normaliser makes for one goal); a task's SAS text is then that translation with the ``begin_goal``
   section naming only its own derived variable. The game checks ``won`` with Fast Downward's own axioms, as it
   would for a freshly translated problem; the other goals' axioms are evaluated but never asked.
2. **Memoised grammar parses**: TatSu parses in TextWorld are pure functions of the text; the results are cached
   (LRU) and every call gets a deep copy, because TextWorld later sets contexts on the parsed symbols -- but a
   conjunctive query's predicates, which nothing changes, are shared.
3. **Light derivation contexts**: TextWorld's ``textgen.copy_context`` deep-copies the ``variables`` and
   ``mapping`` dicts of a context so that a query can extend the copy. The values (``EntityInfo``, ``Placeholder``,
   ``Variable``) are only read while deriving text: ALFWorld's grammar evaluates only attribute reads such as
   ``{o.name}`` or ``{r.name or r.id}``. New dicts with the same values give the same text at a fraction of the cost.
4. **One grammar document parse per grammar version** (:class:`GrammarTemplate`): a game's grammar is
   ``alfred.twl2`` with one sentence (the goal placeholder of the rule ``task``) replaced; TatSu parses the whole
   document per game (~30 ms). The template is parsed once; a game gets new containers of its (read-only) actions
   and rules, with the ``task`` rule built by TextWorld's own ``ContextSensitiveGrammar.parse`` from the game's
   sentence. Sentences with characters that
   could change how the document itself parses (quotes, backslashes, grammar syntax) take the full parse.
5. **One initial state per game**: ``PddlEnv.load`` builds a ``PddlState`` (to list the game's entities) and
   ``reset`` builds another of the same problem (loading the SAS task into Fast Downward's library twice, reading
   every atom of the initial state back twice). Nothing runs between the two, so the first ``reset`` after a load
   gets the state ``load`` built, untouched (:meth:`tasks.muep.textworld_env.GameEngine._pddl_state`); every later
   ``reset`` builds a new one, as TextWorld does.
6. **Texts that cannot change, derived once per scene instance** (:class:`FixedTexts`): the command text of an
   action whose template reads only the action's entities and facts no action changes (``go to`` lists the
   receptacles at a location) is derived the first time a game of the scene asks for it, not at every step of
   every game.
7. **One read of the initial state per scene instance** (:func:`initial_facts`, :func:`state_without_read`): a new
   ``PddlState`` loads its game's SAS task into Fast Downward's library, then reads every atom of the initial state
   back and parses each into a fact (~10 ms of its ~20 ms for a 30-receptacle scene). The SAS texts of a scene
   translation's games differ only in their goal section, so that initial state is the same for all of them: the
   facts are read once per translation, and a later game's state is built by TextWorld's own ``PddlState``
   constructor with the library answering "no atoms" to that one read, then given the kept facts by the same
   ``add_facts`` call, in the same order, that the constructor would have made.

8. **One list of the facts per step** (:class:`_PinnedFacts`): after every reset and step, TextWorld's
   ``_gather_infos`` builds a derivation context for each applicable action, each with ``list(state.facts)``, a walk
   over every fact of the state (~50-100 actions a step, hundreds of facts). Nothing changes the state while it
   does, so the facts are listed once when it starts and every ``state.facts`` of that state until it returns
   iterates over that list: the same facts in the same order. A fact added or removed in between (nothing in
   TextWorld does) drops the list.

These replace module attributes of TextWorld and Fast Downward (monkeypatching), so they are used only with the
versions they were written and tested against (:data:`PINNED`); with any other version :func:`unsupported` says
why, and the engine falls back to TextWorld's plain path. ``tests/test_demos_fast.py`` checks that games played this
way give the same observations, admissible commands, ``won`` flags and facts as freshly built games.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata

#: The distributions whose internals the mechanisms above rely on, and the versions they were checked against.
PINNED = {"textworld": "1.7.0", "fast-downward-textworld": "20.6.4", "alfworld": "0.4.2"}
PARSE_CACHE_SIZE = 4096


@cache
def unsupported() -> str | None:
    """Why the mechanisms cannot be used here (a version other than the pinned one), or None."""
    for dist, wanted in PINNED.items():
        try:
            found = metadata.version(dist)
        except metadata.PackageNotFoundError:
            return f"{dist} is not installed"
        if found != wanted:
            return f"{dist} {found} is installed; the TextWorld speed-ups were checked against {dist}=={wanted}"
    return None


# --------------------------------------------------------------------------------------------------------------------
# 1. One Fast Downward translation for all the goals of a scene instance


@dataclass
class SceneTranslation:
    """Fast Downward's translation of one scene instance's problem with several goals, one derived variable each."""

    task: object                     # Fast Downward's normalised Python task (TextWorld reads objects, types, init)
    sas: str                         # the SAS text; its goal section asks for every goal at once
    goal_fact: dict[str, tuple[int, int]]  # ADL goal text -> (derived variable, value meaning "the goal holds")
    #: The facts of the initial state every game of this translation starts from (mechanism 7), once read.
    initial: tuple | None = field(default=None, compare=False, repr=False)

    def sas_for(self, goal: str) -> str:
        """The SAS text of the problem whose goal is ``goal``: only the goal section differs."""
        var, value = self.goal_fact[goal]
        start = self.sas.index("begin_goal\n")
        end = self.sas.index("end_goal\n", start) + len("end_goal\n")
        return f"{self.sas[:start]}begin_goal\n1\n{var} {value}\nend_goal\n{self.sas[end:]}"


_VARIABLE = re.compile(r"begin_variable\nvar(\d+)\n-?\d+\n\d+\n(.*?)end_variable\n", re.S)


def translate_scene(domain: str, problem_with_goal: Callable[[str], str], goals: Sequence[str]) -> SceneTranslation:
    """Translate once for several goals. ``problem_with_goal(goal)`` writes the scene's ADL problem with that goal
    (e.g. ``Problem.adl``); the goals are ADL conditions, distinct, none of them a plain conjunction of literals."""
    from fast_downward.interface import (
        pddl2sas,  # the original, also while :func:`patched` swaps the package's
    )
    from fast_downward.translate import normalize, pddl

    goals = list(dict.fromkeys(goals))
    names: list[str] = []

    def one_axiom_per_goal(task) -> None:
        parts = task.goal.parts if isinstance(task.goal, pddl.Conjunction) else (task.goal,)
        if len(parts) != len(goals):  # the parser merged or dropped a goal: these goals cannot be told apart
            raise ValueError(f"{len(goals)} goals became {len(parts)} conditions when parsed")
        atoms = []
        for part in parts:
            axiom = task.add_axiom([], part)  # what substitute_complicated_goal does for a single goal
            names.append(axiom.name)
            atoms.append(pddl.Atom(axiom.name, axiom.parameters))
        task.goal = pddl.Conjunction(atoms)

    combined = "(and\n    " + "\n    ".join(goals) + ")"
    original = normalize.substitute_complicated_goal
    normalize.substitute_complicated_goal = one_axiom_per_goal
    try:
        with argv_guard():
            task, sas = pddl2sas(domain, problem_with_goal(combined), verbose=False, optimize=False)
    finally:
        normalize.substitute_complicated_goal = original
    where: dict[str, tuple[int, int]] = {}
    for match in _VARIABLE.finditer(sas):
        for value, name in enumerate(match.group(2).splitlines()):
            found = re.fullmatch(r"Atom (new-axiom@\d+)\(\)", name)
            if found:
                where[found.group(1)] = (int(match.group(1)), value)
    missing = [n for n in names if n not in where]
    if missing:
        raise ValueError(f"no SAS variable for the goal axiom(s) {missing}")
    return SceneTranslation(task, sas, {g: where[n] for g, n in zip(goals, names, strict=True)})


def initial_facts(state) -> tuple:
    """The facts a ``PddlState`` just built read back from Fast Downward's library for its initial state: the
    library's current state, which nothing has changed since the constructor loaded the task."""
    from textworld.envs.pddl.logic import Atom

    lib = state.downward_lib
    atoms = (Atom * lib.get_state_size())()
    lib.get_state(atoms)
    facts = (atom.get_fact(state.name2type) for atom in atoms)
    return tuple(fact for fact in facts if not fact.is_negation)


class _InitialStateKnown:
    """Fast Downward's library as a ``PddlState`` constructor sees it in :func:`state_without_read`: every call goes
    to the library, except reading the initial state back, which gives no atoms."""

    def __init__(self, lib) -> None:
        self._lib = lib

    def __getattr__(self, name: str):
        return getattr(self._lib, name)

    @staticmethod
    def get_state_size() -> int:
        return 0

    @staticmethod
    def get_state(atoms) -> None:
        return None


def state_without_read(build: Callable, downward_lib, pddl_problem: str, logic):
    """``build(downward_lib, pddl_problem, logic)`` (TextWorld's ``PddlState``) without its initial state's facts:
    the constructor runs as shipped -- the task loaded into the library, its types, names and ``init`` facts -- but
    for reading the state back. The caller adds the facts (:func:`initial_facts`, read once per SAS task but for
    its goal) with ``add_facts``, as the constructor would have, after its ``init`` facts."""
    state = build(_InitialStateKnown(downward_lib), pddl_problem, logic)
    state.downward_lib = downward_lib
    return state


@contextmanager
def argv_guard() -> Iterator[None]:
    """TextWorld's fast-downward translation overwrites ``sys.argv``; put it back."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


# --------------------------------------------------------------------------------------------------------------------
# 2. and 3. Grammar parses and derivation contexts


class _ParseMemo:
    """An LRU cache in front of one TatSu ``_parse_and_convert`` function; every caller gets its own deep copy --
    except for the rules in ``shared``, whose results are lists of values nobody changes (TextWorld's ``Predicate``s
    of a conjunctive query, read-only once built): a caller gets a new list of the same objects."""

    def __init__(self, parse: Callable, size: int = PARSE_CACHE_SIZE, shared: frozenset[str] = frozenset()) -> None:
        self.parse, self.size, self.shared = parse, size, shared
        self.results: OrderedDict[tuple, object] = OrderedDict()
        self.hits = self.misses = 0

    def __call__(self, *args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key in self.results:
            self.results.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
            self.results[key] = self.parse(*args, **kwargs)
            if len(self.results) > self.size:
                self.results.popitem(last=False)
        if kwargs.get("rule_name") in self.shared:
            return list(self.results[key])
        return copy.deepcopy(self.results[key])


def _light_copy_context(context: dict) -> dict:
    """``textgen.copy_context`` with new ``variables`` / ``mapping`` dicts holding the same (read-only) values."""
    return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}


@cache
def _memos() -> tuple[_ParseMemo, _ParseMemo]:
    import textworld.logic as logic
    from textworld.envs.pddl import textgen

    return (_ParseMemo(logic._parse_and_convert, shared=frozenset({"conjunctiveQuery"})),  # noqa: SLF001
            _ParseMemo(textgen._parse_and_convert))  # noqa: SLF001


class GrammarTemplate:
    """A game grammar document that differs from game to game only in the sentence replacing ``placeholder``."""

    _PLAIN = re.compile(r'[^"\\#{}\[\]|<>\x00-\x1f]*')  # nothing JSON, TatSu or the grammar would read as syntax

    def __init__(self, template: str, placeholder: str) -> None:
        self.template, self.placeholder = template, placeholder
        found = re.findall(r'"([A-Za-z][\w.]*)": \[\s*\{\s*"rhs": "([^"\\]*)"\s*\}\s*\]', template)
        rules = [(name, rhs) for name, rhs in found if placeholder in rhs]
        self.usable = template.count(placeholder) == 1 and len(rules) == 1
        self.rule, self.rhs = rules[0] if self.usable else ("", "")
        self._parsed: tuple | None = None

    def parse(self, sentence: str, parse: Callable) -> tuple:
        """What ``parse(template.replace(placeholder, sentence), rule_name="pddlStart")`` returns."""
        from textworld.envs.pddl.textgen import ContextSensitiveGrammar

        if not (self.usable and self._PLAIN.fullmatch(sentence)):
            return parse(self.template.replace(self.placeholder, sentence), rule_name="pddlStart")
        if self._parsed is None:
            self._parsed = parse(self.template, rule_name="pddlStart")
        # New containers holding the template's parsed actions and rules: TextWorld only reads those (a derivation
        # deep-copies a rule's symbols before it gives them a context), so every game can share them.
        actions, template = self._parsed
        grammar = ContextSensitiveGrammar()
        for name, rules in template._rules.items():  # noqa: SLF001
            grammar._rules[name] = list(rules)  # noqa: SLF001
        rule = {self.rule: [{"rhs": self.rhs.replace(self.placeholder, sentence)}]}
        grammar._rules[self.rule] = ContextSensitiveGrammar.parse(json.dumps(rule))._rules[self.rule]  # noqa: SLF001
        return dict(actions), grammar


# --------------------------------------------------------------------------------------------------------------------
# 6. Texts that cannot change during a game


_PLAIN_EXPRESSION = re.compile(r"\s*[A-Za-z_][\w.]*(\s+or\s+[A-Za-z_][\w.]*)*\s*")  # "r.name", "r.name or r.id"


def _entity(info) -> tuple:
    """Everything a text can read of an entity (TextWorld's ``EntityInfo``: id, type, name, articles ...)."""
    values = (getattr(info, name, None) for name in getattr(type(info), "__slots__", ()))
    return (type(info).__name__, *(tuple(v) if isinstance(v, list) else v for v in values))


def changing_predicates(task) -> frozenset[str]:
    """The predicates whose facts can change during a game of Fast Downward's ``task``: those some action's effect
    sets or clears, and the derived ones (axioms). Every other predicate keeps its initial facts."""
    changing = {effect.literal.predicate for action in task.actions for effect in action.effects}
    changing |= {axiom.name for axiom in task.axioms}
    return frozenset(str(name).lower() for name in changing)


class FixedTexts:
    """The texts of one game that TextWorld re-derives at every step although they cannot change: the command of
    each admissible action (``_gather_infos`` derives one per action, every step: a quarter of a demonstration's
    time). A derivation's text is a function of its symbols, the action's variables (entity names, fixed once the
    game is loaded) and the facts its conditions and queries read. When none of those facts can change
    (:func:`changing_predicates`), the same start symbol with the same variables gives the same text all game long:
    it is derived once. Anything else (feedback, the intro, a symbol whose expansion reads a changing fact, or an
    expression other than attribute reads) is derived every time, as TextWorld does. One instance per game; the
    texts themselves are kept per scene instance (``texts``)."""

    def __init__(self, grammar, changing: frozenset[str], texts: dict[tuple, str] | None = None) -> None:
        """``texts``: where the derived texts are kept, shared by the games of one scene instance (their fixed
        facts are the same: their problems differ only in the goal) and one grammar version."""
        self.grammar, self.changing = grammar, changing
        self.fixed: dict[str, bool] = {}
        self.texts: dict[tuple, str] = {} if texts is None else texts
        self.hits = 0
        # what _entity reads of each of the game's entities, by object: the engine names a game's entities right
        # after its load, before any text is derived, and nothing changes them during the game
        self._entities: dict[int, tuple[object, tuple]] = {}

    def _entity_of(self, info) -> tuple:
        found = self._entities.get(id(info))
        if found is None or found[0] is not info:
            found = self._entities[id(info)] = (info, _entity(info))
        return found[1]

    def derive(self, original: Callable, grammar, start: str, context: dict | None = None, **kwargs) -> str:
        context = {} if context is None else context
        if grammar is not self.grammar or kwargs or not self._is_fixed(start):
            return original(grammar, start, context, **kwargs)
        # the key holds everything the text is a function of: the entities' fields, and each placeholder's and
        # variable's name and type (what their str() shows, and no less)
        key = (start, tuple(sorted((name, self._entity_of(info))
                                   for name, info in context.get("variables", {}).items())),
               tuple(sorted((ph.name, ph.type, var.name, var.type) for ph, var in context.get("mapping", {}).items())))
        text = self.texts.get(key)
        if text is None:
            text = self.texts[key] = original(grammar, start, context)
        else:
            self.hits += 1
        return text

    def _is_fixed(self, start: str) -> bool:
        if start not in self.fixed:
            from textworld.envs.pddl import textgen

            try:
                self.fixed[start] = self._symbols_fixed(textgen._parse_and_convert(start, rule_name="symbols"), set())  # noqa: SLF001
            except Exception:  # noqa: BLE001 - whatever TextWorld makes of it, it makes every time
                self.fixed[start] = False
        return self.fixed[start]

    def _query_fixed(self, query: str) -> bool:
        import textworld.logic as logic

        rule = logic.Rule.parse_conjunctive_query(query)
        return all(pred.name.lower() not in self.changing for pred in rule.preconditions)

    def _symbols_fixed(self, symbols, expanding: set[str]) -> bool:
        from textworld.envs.pddl import textgen

        for symbol in symbols:
            if isinstance(symbol, textgen.TerminalSymbol):
                continue
            if isinstance(symbol, textgen.EvalSymbol):
                if not _PLAIN_EXPRESSION.fullmatch(symbol.expression):
                    return False
            elif isinstance(symbol, textgen.ListSymbol):  # its items, joined by the list rules
                if not self._symbols_fixed([symbol.symbol], expanding) or not all(
                        self._rule_fixed(name, expanding)
                        for name in ("list_empty", "list_separator", "list_last_separator")):
                    return False
            elif isinstance(symbol, textgen.ConditionalSymbol):
                if (symbol.given and not self._query_fixed(symbol.given)) or \
                        not self._symbols_fixed([symbol.expression], expanding):
                    return False
            elif isinstance(symbol, textgen.NonterminalSymbol):
                if not self._rule_fixed(str(symbol), expanding):
                    return False
            else:
                return False
        return True

    def _rule_fixed(self, name: str, expanding: set[str]) -> bool:
        if name in expanding:  # a recursive rule: not worth proving
            return False
        rules = self.grammar._rules.get(name)  # noqa: SLF001
        if not rules:
            return False
        inner = expanding | {name}
        return all((not rule.condition or self._query_fixed(rule.condition)) and self._symbols_fixed(rule.rhs, inner)
                   for rule in rules)


# --------------------------------------------------------------------------------------------------------------------
# 8. One list of a state's facts while TextWorld gathers a step's infos


class _PinnedFacts:
    """While ``PddlEnv._gather_infos`` runs, its state's ``facts`` iterate over one list made when it started."""

    def __init__(self, facts_property: property) -> None:
        self.plain = facts_property.fget
        self.pinned: dict[int, tuple[object, list]] = {}  # id(state) -> (state, its facts)

    def facts(self, state) -> Iterator:
        found = self.pinned.get(id(state))
        if found is not None and found[0] is state:
            return iter(found[1])
        return self.plain(state)

    def unpin(self, state) -> None:
        self.pinned.pop(id(state), None)

    def gathering(self, plain_gather: Callable) -> Callable:
        def gather(env):
            state = env._pddl_state  # noqa: SLF001
            self.pinned[id(state)] = (state, list(self.plain(state)))
            try:
                return plain_gather(env)
            finally:
                self.unpin(state)
        return gather

    def changing(self, plain_change: Callable) -> Callable:
        def change(state, prop):
            if self.pinned:
                self.unpin(state)
            return plain_change(state, prop)
        return change


@contextmanager
def patched(pddl2sas: Callable, grammar: tuple[str, GrammarTemplate, str] | None = None,
            state: Callable | None = None, texts: Callable[[], FixedTexts | None] | None = None) -> Iterator[None]:
    """Inside: Fast Downward's ``pddl2sas`` is ``pddl2sas`` (the engine's translation lookup), TextWorld's grammar
    parses are memoised, its derivation contexts light, ``grammar`` = (document, template, sentence) is parsed
    from its template, ``state(PddlState, *args)`` (if given) makes TextWorld's ``PddlState(*args)`` (the engine
    hands a game's first ``reset`` the untouched state its ``load`` built: mechanism 5), and ``texts()`` (if given)
    is the current game's :class:`FixedTexts` (mechanism 6), or None; a step's facts are listed once (mechanism 8).
    Everything is put back on exit."""
    reason = unsupported()
    if reason:
        raise RuntimeError(f"the TextWorld speed-ups cannot be used: {reason}")
    import fast_downward
    import textworld.logic as logic
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.envs.pddl import textgen

    logic_memo, textgen_memo = _memos()
    original_document_parse = pddl_logic._parse_and_convert  # noqa: SLF001

    def document_parse(text, rule_name=None, **kwargs):
        if grammar is not None and rule_name == "pddlStart" and not kwargs and text == grammar[0]:
            return grammar[1].parse(grammar[2], original_document_parse)
        return original_document_parse(text, rule_name=rule_name, **kwargs)

    swaps = [(fast_downward, "pddl2sas", pddl2sas), (logic, "_parse_and_convert", logic_memo),
             (textgen, "_parse_and_convert", textgen_memo), (textgen, "copy_context", _light_copy_context),
             (pddl_logic, "_parse_and_convert", document_parse)]
    from textworld.envs.pddl.pddl import PddlEnv

    pinned = _PinnedFacts(logic.State.facts)
    swaps += [(PddlEnv, "_gather_infos", pinned.gathering(PddlEnv._gather_infos)),  # noqa: SLF001
              (logic.State, "facts", property(pinned.facts, doc=logic.State.facts.__doc__)),
              (logic.State, "add_fact", pinned.changing(logic.State.add_fact)),
              (logic.State, "remove_fact", pinned.changing(logic.State.remove_fact))]
    if state is not None:
        build = pddl_logic.PddlState
        swaps.append((pddl_logic, "PddlState", lambda *args: state(build, *args)))
    if texts is not None:
        plain_derive = textgen.ContextSensitiveGrammar.derive

        def derive(self, start, context={}, **kwargs):  # noqa: B006 - TextWorld's signature
            fixed = texts()
            if fixed is None:
                return plain_derive(self, start, context, **kwargs)
            return fixed.derive(plain_derive, self, start, context, **kwargs)

        swaps.append((textgen.ContextSensitiveGrammar, "derive", derive))
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, value in swaps:
        setattr(module, name, value)
    try:
        with argv_guard():
            yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
