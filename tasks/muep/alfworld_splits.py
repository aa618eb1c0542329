"""ALFWorld's evaluation games as splits next to the generated ones: ``alfworld_seen`` (valid_seen, 140 games) and
``alfworld_unseen`` (valid_unseen, 134) -- MuEP's "#Seen" and "#Unseen" test tasks -- in the tables the rest of the
pipeline already reads.

For every selected game:

* its initial state becomes one **scene instance** (``FloorPlan<N>-<trial>``) in the tables and columns of the
  metadata stage (:func:`tasks.muep.metadata.scene_from_game`, keeping every ``inReceptacle`` fact: these are
  ALFWorld's games), so the evaluation rebuilds the game exactly as it rebuilds a generated one
  (``demos.scene_context`` -> ``pddl.Problem`` -> the TextWorld engine on ALFWorld's domain);
* its **episode row** has the columns of ``data/muep/demos/episodes.parquet``: the task (type, object, target), the
  instruction -- ALFWorld's templated goal, which MuEP's evaluation shows --, the initial-state id, and the expert
  plan: ALFWorld's walkthrough in the configured grammar version, replayed in the repository's engine to a win. A
  walkthrough that does not win there is replaced by an FF plan on the STRIPS twin (``search = gbf``); a game neither
  wins keeps its reason as ``status`` and is excluded from evaluation (the report counts them).

ALFWorld's training games are listed too (``train_games.parquet``: templated instruction, walkthrough, task fields,
initial-state id) as in-context examples: they are never evaluation games.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from tasks.muep import demos as demos_mod
from tasks.muep.alfworld_games import AlfGame, AlfTask
from tasks.muep.demos import EpisodeRecord, commands_from_plan, scene_context
from tasks.muep.metadata import (
    SceneMetadata,
    alfred_locations,
    scene_from_game,
)
from tasks.muep.pddl import Problem
from tasks.muep.planner import PlannerWorker
from tasks.muep.textworld_env import GameEngine, put_command
from tasks.muep.vocab import TASK_TYPES
from tasks.params import room_type_of

SPLIT_OF = {"valid_seen": "alfworld_seen", "valid_unseen": "alfworld_unseen"}
SPLITS = tuple(SPLIT_OF.values())
WALKTHROUGH = "walkthrough"


def scene_of(game: AlfGame) -> str:
    return f"FloorPlan{game.floorplan}-{game.trial}"


def select_games(games: list[AlfGame], per_split: int | None) -> list[AlfGame]:
    """``per_split`` games of each split (all with None): round-robin over the task types in a fixed order, each type's
    games in trial order -- so a small slice has every type once before any twice."""
    out = []
    for split in SPLIT_OF:
        by_type: dict[str, list[AlfGame]] = {}
        for g in sorted((g for g in games if g.split == split), key=lambda g: g.trial):
            by_type.setdefault(g.task_type, []).append(g)
        ranked = sorted(((rank, list(TASK_TYPES).index(t), g) for t, gs in by_type.items()
                         for rank, g in enumerate(gs)), key=lambda x: (x[0], x[1]))
        picked = [g for _, _, g in ranked][:per_split]
        out += sorted(picked, key=lambda g: (g.task_type, g.trial))
    return out


def game_metadata(game: AlfGame) -> SceneMetadata:
    """The game's scene tables, with every location of its problem (``alfred_locations.parquet``: the released
    protocol numbers locations as MuEP's client does from them)."""
    meta = scene_from_game(game, scene_of(game), 0, "unseen" if game.split == "valid_unseen" else "seen",
                           SPLIT_OF[game.split], keep_all_parents=True)
    meta.locations = alfred_locations(game, meta.scene.scene)
    return meta


def expert_commands(walkthrough: tuple[str, ...] | list[str], grammar: str) -> list[str]:
    """The walkthrough in ``grammar``: ALFWorld's game files say ``move X to Y``; MuEP's grammar ``put X in/on Y``."""
    out = []
    for cmd in walkthrough:
        if cmd.startswith("move ") and " to " in cmd:
            obj, rec = cmd[len("move "):].split(" to ", 1)
            cmd = put_command(obj, rec, grammar)
        out.append(cmd)
    return out


def places_object(game: AlfGame | AlfTask) -> bool:
    """Does the walkthrough put the task's object down? Eight of ALFWorld's evaluation walkthroughs (and 91 of its
    1,642 heat / cool / clean training ones) win without doing so: the object has a second ``inReceptacle`` fact
    (a mug in the coffee machine and on the countertop) that taking it from the other receptacle leaves in place."""
    if not TASK_TYPES[game.task_type].needs_receptacle:
        return True
    prefix = game.object_type.lower() + " "
    return any(c.startswith(("move " + prefix, "put " + prefix)) for c in game.walkthrough)


@dataclass
class Replay:
    status: str
    detail: str
    won: bool


def replay(engine: GameEngine, problem: Problem, instruction: str, grammar: str, commands: list[str]) -> Replay:
    try:
        game = engine.load(problem, instruction, grammar)
        game.reset()
    except Exception as exc:  # noqa: BLE001 - a game TextWorld cannot build is a recorded reject
        return Replay("textworld_error", f"{type(exc).__name__}: {exc}", False)
    for i, command in enumerate(commands, start=1):
        step = game.step(command, i)
        if not step.valid:
            return Replay("textworld_refused", f"step {i}: the game does not accept {command!r}", False)
    if not game.won():
        return Replay("textworld_not_won", "every command was accepted but the game's goal does not hold", False)
    return Replay("ok", "", True)


@dataclass(frozen=True)
class PlaySettings:
    grammar: str
    search: str
    plan_timeout_s: float
    max_plan_length: int


def play_game(game: AlfGame, metadata_dir: str, settings: PlaySettings, engine: GameEngine,
              planner: PlannerWorker) -> tuple[EpisodeRecord, dict[str, float]]:
    """The game's episode row: its expert plan (walkthrough, else FF) replayed to a win in the repository's engine,
    on the game rebuilt from the written scene tables exactly as the evaluation rebuilds it."""
    cost = {"load_s": 0.0, "plan_s": 0.0}
    ctx = scene_context(metadata_dir, scene_of(game))
    base = dict(episode_id=game.trial, task_id=game.trial, scene=scene_of(game), initial_state=ctx.initial_state,
                floorplan=game.floorplan, room_type=room_type_of(game.floorplan), split=SPLIT_OF[game.split],
                task_type=game.task_type, instruction=game.goal, object_type=game.object_type,
                target_type=game.target_type, batch="", grammar=settings.grammar, renderer="")

    def record(status: str, detail: str, actions: list[str], search: str) -> EpisodeRecord:
        return EpisodeRecord(**base, status=status, detail=detail, plan_length=len(actions), n_samples=0,
                             search=search, actions=list(actions))

    problem = Problem(f"alfworld_{game.trial}", ctx.receptacles, ctx.instances, game.task_type, game.object_type,
                      game.target_type)
    why = problem.check()
    if why:
        return record("not_posable", why, [], WALKTHROUGH), cost
    commands = expert_commands(game.walkthrough, settings.grammar)
    start = time.perf_counter()
    first = replay(engine, problem, game.goal, settings.grammar, commands)
    cost["load_s"] += time.perf_counter() - start
    if first.won:
        note = "" if places_object(game) else (
            "the walkthrough wins without putting the object down: it keeps a second inReceptacle fact in "
            "ALFWorld's initial state (as in ALFWorld's own game)")
        return record("ok", note, commands, WALKTHROUGH), cost
    start = time.perf_counter()
    plan = planner.solve(problem.strips(), settings.search, settings.plan_timeout_s)
    cost["plan_s"] += time.perf_counter() - start
    if plan.status != "solved":
        return record(first.status, f"walkthrough: {first.detail}; FF plan: {plan.status} {plan.detail}".strip(),
                      commands, WALKTHROUGH), cost
    ff = commands_from_plan(plan.steps, problem.names, settings.grammar, {r.name: r.location for r in ctx.receptacles})
    if len(ff) > settings.max_plan_length:
        return record("plan_too_long", f"walkthrough: {first.detail}; FF plan of {len(ff)} actions", ff,
                      settings.search), cost
    start = time.perf_counter()
    second = replay(engine, problem, game.goal, settings.grammar, ff)
    cost["load_s"] += time.perf_counter() - start
    detail = f"walkthrough not won here ({first.detail}); FF plan used"
    if not second.won:
        detail = f"walkthrough: {first.detail}; FF plan: {second.detail}"
    return record(second.status, detail, ff, settings.search), cost


def clear_scene_cache() -> None:
    """Scene tables are cached per metadata folder: forget them after rewriting the folder in this process."""
    demos_mod._tables.cache_clear()
    demos_mod.scene_context.cache_clear()


@dataclass(frozen=True)
class TrainGameRecord:
    """One ALFWorld training game, as an in-context example (never an evaluation game). Its initial state is a
    metadata scene instance where the metadata stage uses that trial (join on ``scenes.trial``; leave out the
    ``seen_test`` ones when examples must not come from held-out states)."""

    trial: str
    task_dir: str
    floorplan: int
    room_type: str
    task_type: str
    object_type: str
    target_type: str
    instruction: str         # ALFWorld's templated goal
    actions: list[str]       # the walkthrough in the configured grammar
    plan_length: int
    places_object: bool      # False: the walkthrough wins without putting the object down (see places_object)


def train_game_records(games: list[AlfTask], grammar: str) -> list[TrainGameRecord]:
    out = []
    for g in games:
        actions = expert_commands(g.walkthrough, grammar)
        out.append(TrainGameRecord(g.trial, g.task_dir, g.floorplan, room_type_of(g.floorplan), g.task_type,
                                   g.object_type, g.target_type, g.goal, actions, len(actions), places_object(g)))
    return out


def summarise(index: pd.DataFrame, available: dict[str, int], train: list[TrainGameRecord]) -> dict:
    ok = index[index.status == "ok"]
    return {
        "games_available": available,
        "games_selected": {s: int((index.split == s).sum()) for s in SPLITS},
        "episodes": {s: int((ok.split == s).sum()) for s in SPLITS},
        "excluded": {f"{r.split}:{r.episode_id}": f"{r.status}: {r.detail}" for r in index.itertuples()
                     if r.status != "ok"},
        "expert_plan": dict(sorted(Counter(ok.search).items())),
        "wins_without_placing": int(ok.detail.str.startswith("the walkthrough wins without").sum()),
        "by_split_and_type": {s: {t: int(n) for t, n in sorted(Counter(ok[ok.split == s].task_type).items())}
                              for s in SPLITS},
        "mean_plan_length": {s: round(float(ok[ok.split == s].plan_length.mean()), 3) if (ok.split == s).any()
                             else 0.0 for s in SPLITS},
        "initial_states": int(index.initial_state.nunique()),
        "train_games": len(train),
        "train_games_by_type": dict(sorted(Counter(g.task_type for g in train).items())),
        "train_mean_plan_length": round(sum(g.plan_length for g in train) / max(1, len(train)), 3),
    }
