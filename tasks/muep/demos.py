"""Stage 4, expert demonstrations: plan, replay in TextWorld, render, write webdataset shards -- one batch at a time.

For each accepted task: a planning problem from the instantiated scene (``tasks.muep.pddl``), an FF plan on the
STRIPS twin (``tasks.muep.planner``), the plan's commands replayed in the real TextWorld game on ALFWorld's ADL
domain (``tasks.muep.textworld_env``) -- every command must be admissible and the game must end won -- and, after
every action, the textual state from the game and an image of the game's state from the configured renderer.

Work is cut into batches of episodes of one split, the episodes of one scene instance next to each other, so that a
worker process translates each scene instance's game once for all its tasks (``textworld_env.GameEngine``). A batch
writes its shard (``shards/<batch>.tar``) and then its index part (``parts/<batch>.parquet``), each atomically. The
part is the batch's commit mark: on a rerun, batches with a part are skipped, so an interrupted run (even ``kill
-9``) finishes only the remaining batches and never leaves a half-written shard. A manifest fingerprints the inputs,
params and batching; when they change, old batches are discarded rather than mixed in.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from core.errors import DataError
from core.io import atomic_path, write_json
from tasks.muep import alfworld_data
from tasks.muep.metadata import ALFRED_LOCATIONS, AlfredLocationRecord, InstanceRecord, ReceptacleRecord, SceneRecord
from tasks.muep.pddl import Instance, Problem, Receptacle
from tasks.muep.planner import PlannerWorker, PlanResult
from tasks.muep.render.layout import layout_from_metadata
from tasks.muep.textworld_env import (
    START_LOCATION,
    Game,
    GameEngine,
    load_game,
    put_command,
    released_location_names,
)
from tasks.muep.vocab import TASK_TYPES, catalog
from tasks.muep.world_state import SceneLayout, WorldState
from tasks.records import columns, read_table, to_frame

SPLITS = ("train", "seen_test", "unseen_test")
#: Per-episode costs (seconds) a batch measures; they go to the stage's report, never into the data files.
COSTS = ("plan_s", "load_s", "steps_s", "render_s", "write_s")
REJECT_REASONS = ("not_posable", "unknown_receptacle", "plan_timeout", "unsolvable", "planner_error",
                  "plan_too_long", "textworld_refused", "textworld_not_won", "textworld_error", "render_error")


@dataclass(frozen=True)
class DemoSettings:
    """What a batch worker needs to know (plain values: it crosses process boundaries)."""

    grammar: str
    search: str
    plan_timeout_s: float
    max_plan_length: int
    renderer: str
    render_size: int
    metadata_dir: str
    out_dir: str


@dataclass(frozen=True)
class EpisodeRecord:
    episode_id: str
    task_id: str
    scene: str
    initial_state: str       # the scene instance's initial-state id (metadata.initial_state_id): splits never share one
    floorplan: int
    room_type: str
    split: str
    task_type: str
    instruction: str
    object_type: str
    target_type: str
    status: str              # "ok", or a reject reason from REJECT_REASONS
    detail: str
    plan_length: int
    n_samples: int
    batch: str
    grammar: str
    renderer: str
    search: str
    actions: list[str]


#: How episodes are cut into batches; part of the output fingerprint, so batches cut another way are never mixed in.
BATCHING = "scene-grouped-1"


@dataclass
class Batch:
    batch_id: str
    split: str
    tasks: list[dict]        # TaskRecord fields + "split"
    #: (scene, task type, object type, target type) of every selected task of this batch's scenes, in any batch:
    #: what a worker translates a scene instance's game for, once
    scene_goals: list[tuple[str, str, str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------------------------
# Selection and batching (in the flow process)


def _h(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def select_episodes(accepted: pd.DataFrame, scenes: pd.DataFrame, episodes: int | None, seed: int) -> pd.DataFrame:
    """Give each accepted task the split of its scene instance's initial state (``scenes.state_split``: decided per
    initial state by the metadata stage, so no two splits share one) and pick ``episodes`` of them, round-robin
    over (split, task type) groups so a small slice still covers every split and type. ``None`` takes them all."""
    frame = accepted.copy()
    known = scenes.set_index("scene")
    missing = sorted(set(frame.scene) - set(known.index))
    if missing:
        raise DataError(f"accepted tasks name scenes the metadata does not have ({', '.join(missing[:3])}).",
                        hint="The metadata changed since the tasks were generated: rerun `dvc repro`.")
    frame["split"] = [known.at[s, "state_split"] for s in frame.scene]
    frame["initial_state"] = [known.at[s, "initial_state"] for s in frame.scene]
    frame["_order"] = [_h("order", seed, t) for t in frame.task_id]
    frame = frame.sort_values(["split", "task_type", "_order"])
    if episodes is not None and episodes < len(frame):
        frame["_rank"] = frame.groupby(["split", "task_type"]).cumcount()
        frame = frame.sort_values(["_rank", "split", "task_type", "_order"]).head(episodes)
        frame = frame.drop(columns="_rank")
    return frame.sort_values(["split", "_order"]).drop(columns="_order").reset_index(drop=True)


def split_leakage(scenes: pd.DataFrame, alfworld_scenes: pd.DataFrame | None = None) -> dict:
    """Check that the splits are split by initial state; raise :class:`DataError` when they are not.

    * no initial state is in two of train / seen_test / unseen_test, nor in ALFWorld's evaluation games;
    * every seen_test floorplan has training states (#Seen = familiar rooms), no unseen_test or alfworld_unseen
      floorplan has any (#Unseen = rooms never trained on).

    Returns counts for the report, including ``alfworld_seen_floorplans_without_training_states`` (0 when every
    floorplan is selected: all 76 of ALFWorld's valid_seen floorplans are training floorplans).
    """
    frames = [scenes[["scene", "floorplan", "state_split", "initial_state"]]]
    if alfworld_scenes is not None:
        frames.append(alfworld_scenes[["scene", "floorplan", "state_split", "initial_state"]])
    rows = pd.concat(frames, ignore_index=True)
    shared = rows.groupby("initial_state").state_split.nunique()
    shared = shared[shared > 1]
    if len(shared):
        state = shared.index[0]
        where = sorted(set(rows[rows.initial_state == state].state_split))
        raise DataError(f"{len(shared)} initial state(s) belong to more than one split (e.g. {state} in "
                        f"{' and '.join(where)}): test episodes would play in states training episodes use.")
    train_fp = set(rows[rows.state_split == "train"].floorplan)
    seen_fp = set(rows[rows.state_split == "seen_test"].floorplan)
    if seen_fp - train_fp:
        raise DataError(f"seen_test floorplans without training states: {sorted(seen_fp - train_fp)}.")
    unseen_fp = set(rows[rows.state_split.isin(["unseen_test", "alfworld_unseen"])].floorplan)
    if unseen_fp & train_fp:
        raise DataError(f"unseen floorplans {sorted(unseen_fp & train_fp)} also have training states; "
                        "muep.scenes.unseen must hold ALFWorld's valid_unseen floorplans (10, 219, 308, 424).")
    alf_seen = set(rows[rows.state_split == "alfworld_seen"].floorplan)
    return {
        "initial_states": {s: int(n) for s, n in rows.groupby("state_split").initial_state.nunique().items()},
        "shared_initial_states": 0,
        "training_floorplans": len(train_fp),
        "alfworld_seen_floorplans_without_training_states": len(alf_seen - train_fp),
    }


def _target(task: dict) -> str | None:
    return task["receptacle_type"] if TASK_TYPES[task["task_type"]].needs_receptacle else task["light_type"]


def make_batches(selected: pd.DataFrame, batch_size: int) -> list[Batch]:
    """Batches of ``batch_size`` episodes of one split. Within a split, the episodes of a scene instance are next
    to each other (in selection order); the batches come scene instance by scene instance, across splits, so the
    batches a worker gets in a row mostly share a scene. Each batch lists the goals of all the selected tasks of
    its scenes (:attr:`Batch.scene_goals`)."""
    goals: dict[str, dict[tuple[str, str, str, str], None]] = {}
    for task in selected.to_dict("records"):
        goal = (task["scene"], task["task_type"], task["object_type"], _target(task))
        goals.setdefault(task["scene"], {})[goal] = None
    batches = []
    for split in SPLITS:
        rows = selected[selected.split == split]
        rows = rows.sort_values("scene", kind="stable").to_dict("records")
        for k in range(0, len(rows), batch_size):
            chunk = rows[k:k + batch_size]
            scenes = dict.fromkeys(t["scene"] for t in chunk)
            batches.append(Batch(f"{split}-{k // batch_size:05d}", split, chunk,
                                 [g for scene in scenes for g in goals[scene]]))
    return sorted(batches, key=lambda b: (b.tasks[0]["scene"], SPLITS.index(b.split), b.batch_id))


#: The most batches one worker task runs in a row (:func:`scene_runs`).
RUN_BATCHES = 8


def scene_runs(batches: list[Batch], workers: int, most: int = RUN_BATCHES) -> list[list[Batch]]:
    """``batches`` in order, cut into runs of consecutive batches, each run for one worker task.

    A worker translates a scene instance's games once for all of them (``GameEngine``), but a scene instance's
    episodes often fill two or three batches, and a pool hands consecutive batches to different workers: each of
    them then translated the scene again (a paper-scale selection: ~690 translations for 372 scene instances, a
    translation ~0.5 s). A run keeps the batches that share a scene instance together: it is cut where two
    consecutive batches share none, and a longer chain is cut into near-equal runs of at most ``most`` batches
    (fewer when there are too few runs for ``workers`` to share: at least four runs per worker). Each batch of a run
    still commits on its own, so resuming and the outputs are as with one task per batch."""
    if not batches:
        return []
    most = max(1, min(most, len(batches) // (4 * max(1, workers))))
    chains: list[list[Batch]] = [[batches[0]]]
    for before, batch in zip(batches, batches[1:], strict=False):
        if {t["scene"] for t in before.tasks} & {t["scene"] for t in batch.tasks}:
            chains[-1].append(batch)
        else:
            chains.append([batch])
    runs: list[list[Batch]] = []
    for chain in chains:
        pieces = -(-len(chain) // most)
        size, extra = divmod(len(chain), pieces)
        start = 0
        for i in range(pieces):
            end = start + size + (i < extra)
            runs.append(chain[start:end])
            start = end
    return runs


def fingerprint(selected: pd.DataFrame, settings: DemoSettings, extra: dict) -> str:
    keys = [c for c in ("task_id", "split", "initial_state") if c in selected.columns]  # a task and where it plays
    tasks = sorted(":".join(map(str, row)) for row in selected[keys].itertuples(index=False))
    blob = json.dumps({"tasks": tasks, "settings": asdict(settings) | {"out_dir": "",
                       "metadata_dir": ""}, "batching": BATCHING, **extra}, sort_keys=True, default=str)
    return _h(blob)[:16]


def prepare_output(out_dir: Path, fp: str) -> None:
    """Keep finished batches of the same inputs; discard everything else."""
    manifest = out_dir / "manifest.json"
    if manifest.exists():
        try:
            same = json.loads(manifest.read_text()).get("fingerprint") == fp
        except (ValueError, OSError):
            same = False
        if not same:
            for sub in ("shards", "parts"):
                shutil.rmtree(out_dir / sub, ignore_errors=True)
    for sub in ("shards", "parts"):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
        for stray in (out_dir / sub).glob(".*.tmp"):  # left by a writer killed mid-file (kill -9, power loss)
            stray.unlink()
    write_json(manifest, {"fingerprint": fp})


def done_batches(out_dir: Path) -> set[str]:
    return {p.stem for p in (out_dir / "parts").glob("*.parquet")}


# --------------------------------------------------------------------------------------------------------------------
# Scene context (per worker process, cached)


@dataclass
class SceneContext:
    receptacles: list[Receptacle]
    instances: list[Instance]
    layout: SceneLayout
    unknown_receptacles: list[str] = field(default_factory=list)
    initial_state: str = ""  # the scene instance's initial-state id (metadata.initial_state_id)
    released_locations: dict[str, str] = field(default_factory=dict)
    """Location id (``loc_3``, ``loc_start``) -> "loc N" as MuEP's released client numbers ALFRED's locations of
    the game (:func:`_released_location_map`); empty for a scene without ALFRED's location table (the generated ones)."""


@cache
def _tables(metadata_dir: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    meta = Path(metadata_dir)
    locations = meta / ALFRED_LOCATIONS
    return (read_table(meta / "scenes.parquet", SceneRecord), read_table(meta / "receptacles.parquet", ReceptacleRecord),
            read_table(meta / "instances.parquet", InstanceRecord),
            read_table(locations, AlfredLocationRecord) if locations.exists() else None)


def _released_location_map(rows: list, receptacles: list[Receptacle], where: str) -> dict[str, str]:
    """Our location ids -> the released client's names of ALFRED's locations there (``rows``: the scene's
    :class:`~tasks.muep.metadata.AlfredLocationRecord` rows): its ``Demangler`` numbers every location of the
    problem, and each of ours is one of them (a receptacle's pose; ``loc_start`` the agent's start)."""
    names = released_location_names(r.location for r in rows)
    alfred_of: dict[str, str] = {}
    for row in rows:
        for name in row.receptacles:
            alfred_of[name] = row.location
    out: dict[str, str] = {}
    starts = [row.location for row in rows if row.agent_start]
    if len(starts) != 1:
        raise DataError(f"{where}: {len(starts)} agent start locations, expected one.")
    out[START_LOCATION] = names[starts[0]]
    for r in receptacles:
        if r.name not in alfred_of:
            raise DataError(f"{where}: receptacle {r.name} is at none of the locations.")
        name = names[alfred_of[r.name]]
        if out.setdefault(r.location, name) != name:
            raise DataError(f"{where}: the receptacles at {r.location} are at different locations of ALFRED's.")
    return out


@cache
def scene_context(metadata_dir: str, scene: str) -> SceneContext:
    scenes, receptacles, instances, alfred_locations = _tables(metadata_dir)
    rows = list(scenes[scenes.scene == scene].itertuples(index=False))
    if not rows:
        raise DataError(f"scene {scene} is not in {metadata_dir}/scenes.parquet.")
    recs = list(receptacles[receptacles.scene == scene].itertuples(index=False))
    locations: dict[tuple, str] = {}
    out_recs, unknown = [], []
    for r in recs:
        key = (r.x, r.z, r.rotation, r.horizon)  # receptacles with one interaction pose share one game location
        locations.setdefault(key, f"loc_{len(locations) + 1}")
        out_recs.append(Receptacle(r.name, r.receptacle_type, locations[key], bool(r.openable)))
        if r.receptacle_type not in catalog().static_receptacles:
            unknown.append(r.name)
    insts = [Instance(i.name, i.object_type, i.parent, tuple(i.also_in), tuple(i.initial_marks), bool(i.pickupable))
             for i in instances[instances.scene == scene].itertuples()]
    grid = alfworld_data.read_scene(int(rows[0].floorplan)).grid
    layout = layout_from_metadata(SimpleNamespace(scene=rows[0], receptacles=recs), grid)
    located = {}
    if alfred_locations is not None:
        rows_here = list(alfred_locations[alfred_locations.scene == scene].itertuples(index=False))
        located = _released_location_map(rows_here, out_recs, f"{metadata_dir}/{ALFRED_LOCATIONS}, scene {scene}")
    return SceneContext(out_recs, insts, layout, unknown, str(rows[0].initial_state), located)


# --------------------------------------------------------------------------------------------------------------------
# One episode


def commands_from_plan(steps: Iterable[tuple[str, ...]], names: dict[str, str], grammar: str,
                       location_of: dict[str, str] | None = None) -> list[str]:
    """Game commands for the twin's operators. ``location_of`` (receptacle name -> location id) drops a "go to"
    whose receptacle shares the agent's current location: the twin stands at receptacles, the game at locations,
    and TextWorld does not offer "go to" the place the agent already is."""
    out = []
    here: str | None = None
    for op, *args in steps:
        a = [names.get(x, x) for x in args]
        if op == "goto":
            there = (location_of or {}).get(a[1])
            if there is not None and there == here:
                continue
            here = there
            out.append(f"go to {a[1]}")
        elif op in ("open", "close"):
            out.append(f"{op} {a[0]}")
        elif op == "take":
            out.append(f"take {a[0]} from {a[1]}")
        elif op == "put":
            out.append(put_command(a[0], a[1], grammar))
        elif op in ("heat", "cool", "clean"):
            out.append(f"{op} {a[0]} with {a[1]}")
        elif op == "toggle":
            out.append(f"use {a[0]}")
        else:
            raise ValueError(f"the planner returned an operator with no game command: {op}")
    return out


@dataclass
class Sample:
    key: str
    image: bytes
    meta: dict


class _Timer:
    def __init__(self) -> None:
        self.t: dict[str, float] = {"plan": 0.0, "load": 0.0, "steps": 0.0, "render": 0.0, "write": 0.0}

    def add(self, what: str, start: float) -> None:
        self.t[what] += time.perf_counter() - start


def run_episode(task: dict, settings: DemoSettings, planner: PlannerWorker, renderer, batch_id: str,
                games: GameEngine | None = None) -> tuple[EpisodeRecord, list[Sample], _Timer]:
    """One episode. ``games`` builds the TextWorld game (fast, shared per scene instance); without it the game is
    built from scratch (:func:`~tasks.muep.textworld_env.load_game`). Both play the same game."""
    timer = _Timer()
    target = _target(task)
    ctx = scene_context(settings.metadata_dir, task["scene"])
    base = dict(episode_id=task["task_id"], task_id=task["task_id"], scene=task["scene"],
                initial_state=ctx.initial_state, floorplan=int(task["floorplan"]), room_type=task["room_type"], split=task["split"],
                task_type=task["task_type"], instruction=task["instruction"], object_type=task["object_type"],
                target_type=target or "", batch=batch_id, grammar=settings.grammar, renderer=settings.renderer,
                search=settings.search)

    def result(status: str, detail: str = "", actions=(), samples=()) -> tuple[EpisodeRecord, list[Sample], _Timer]:
        record = EpisodeRecord(**base, status=status, detail=detail, plan_length=len(actions),
                               n_samples=len(samples), actions=list(actions))
        return record, list(samples), timer

    if ctx.unknown_receptacles:
        return result("unknown_receptacle", f"{task['scene']} has receptacles that are not ALFWorld receptacle types "
                      f"({', '.join(ctx.unknown_receptacles)}); the domain and grammar cannot describe them")
    problem = Problem(f"muep_{task['task_id']}", ctx.receptacles, ctx.instances, task["task_type"],
                      task["object_type"], target)
    why = problem.check()
    if why:
        return result("not_posable", why)

    start = time.perf_counter()
    plan: PlanResult = planner.solve(problem.strips(), settings.search, settings.plan_timeout_s)
    timer.add("plan", start)
    if plan.status != "solved":
        status = {"timeout": "plan_timeout", "unsolvable": "unsolvable"}.get(plan.status, "planner_error")
        return result(status, plan.detail)
    commands = commands_from_plan(plan.steps, problem.names, settings.grammar,
                                  {r.name: r.location for r in ctx.receptacles})
    if len(commands) > settings.max_plan_length:
        return result("plan_too_long", f"{len(commands)} actions > max_plan_length {settings.max_plan_length}",
                      commands)

    try:
        start = time.perf_counter()
        game: Game = (games.load if games is not None else load_game)(problem, task["instruction"], settings.grammar)
        observation, state = game.reset()
        timer.add("load", start)
    except Exception as exc:  # noqa: BLE001 - a game TextWorld cannot build is a recorded reject
        return result("textworld_error", f"{type(exc).__name__}: {exc}", commands)

    samples: list[Sample] = []
    common = {"scene": task["scene"], "instruction": task["instruction"], "task_type": task["task_type"],
              "episode_id": task["task_id"], "split": task["split"], "grammar": settings.grammar,
              "renderer": settings.renderer, "renderer_version": getattr(renderer, "version", "")}

    def snap(step: int, action: str | None, text: str, world: WorldState) -> None:
        start = time.perf_counter()
        image = renderer.render(ctx.layout, world)
        timer.add("render", start)
        samples.append(Sample(f"{task['task_id']}_s{step:03d}", image,
                              common | {"step": step, "action": action, "text_state": text,
                                        "world_state": world.to_json()}))

    try:
        renderer.begin_scene(ctx.layout)
        snap(0, None, observation, state)
        for i, command in enumerate(commands, start=1):
            start = time.perf_counter()
            step = game.step(command, i)
            timer.add("steps", start)
            if not step.valid:
                return result("textworld_refused", f"step {i}: the game does not accept {command!r} "
                              f"({step.observation.strip()})", commands)
            snap(i, command, step.observation, step.state)
    except Exception as exc:  # noqa: BLE001
        return result("render_error", f"{type(exc).__name__}: {exc}", commands)
    if not game.won():
        return result("textworld_not_won", "every command was accepted but the game's goal does not hold",
                      commands)
    return result("ok", "", commands, samples)


# --------------------------------------------------------------------------------------------------------------------
# One batch (in a worker process)

_WORKER: dict[str, object] = {}


def _worker_tools(settings: DemoSettings):
    """One planner process, one renderer and one game engine per worker process, kept across batches."""
    from tasks.muep.render import build_renderer

    if "planner" not in _WORKER:
        _WORKER["planner"] = PlannerWorker()
        _WORKER["games"] = GameEngine()
    key = f"renderer:{settings.renderer}:{settings.render_size}"
    if key not in _WORKER:
        _WORKER[key] = build_renderer(settings.renderer, size=settings.render_size)
    return _WORKER["planner"], _WORKER[key], _WORKER["games"]


def expect_games(games: GameEngine, batch: Batch, metadata_dir: str) -> None:
    """Tell the engine every goal of the batch's scene instances, so each is translated once for all of them."""
    problems = []
    for scene, task_type, object_type, target in batch.scene_goals:
        if not target:
            continue
        ctx = scene_context(metadata_dir, scene)
        problem = Problem("expected", ctx.receptacles, ctx.instances, task_type, object_type, target)
        if not ctx.unknown_receptacles and problem.check() is None:
            problems.append(problem)
    games.expect(problems)


SHARD_MTIME = 0.0  # the epoch: shard members carry no time of writing


def run_batch(batch: Batch, settings: DemoSettings) -> tuple[list[EpisodeRecord], dict[str, dict[str, float]]]:
    """Roll out a batch and commit it: shard first, then the index part (the commit mark), both atomic. Returns the
    records and each episode's costs (seconds per :data:`COSTS`), which belong in the report, not the data."""
    import webdataset as wds

    planner, renderer, games = _worker_tools(settings)
    expect_games(games, batch, settings.metadata_dir)
    out = Path(settings.out_dir)
    records: list[EpisodeRecord] = []
    costs: dict[str, dict[str, float]] = {}
    all_samples: list[Sample] = []
    for task in batch.tasks:
        record, samples, timer = run_episode(task, settings, planner, renderer, batch.batch_id, games)
        records.append(record)
        costs[record.episode_id] = {f"{k}_s": v for k, v in timer.t.items()}
        all_samples.extend(samples)
    start = time.perf_counter()
    shard = out / "shards" / f"{batch.batch_id}.tar"
    with atomic_path(shard) as tmp:
        with open(tmp, "wb") as stream:
            # Fixed member mtime, owner and mode: webdataset stamps each member with the wall clock otherwise, and
            # a shard is a DVC output that must be the same bytes for the same inputs.
            writer = wds.TarWriter(stream, mtime=SHARD_MTIME, user="", group="", mode=0o444)
            for s in all_samples:
                writer.write({"__key__": s.key, "png": s.image, "json": json.dumps(s.meta).encode("utf-8")})
            writer.close()
    write_s = (time.perf_counter() - start) / max(1, len(records))
    for c in costs.values():
        c["write_s"] = write_s
    with atomic_path(out / "parts" / f"{batch.batch_id}.parquet") as tmp:
        to_frame(records, EpisodeRecord).to_parquet(tmp, index=False)
    return records, costs


def collect_index(out_dir: Path) -> pd.DataFrame:
    parts = sorted((out_dir / "parts").glob("*.parquet"))
    if not parts:
        return pd.DataFrame(columns=columns(EpisodeRecord))
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def summarise(index: pd.DataFrame) -> dict:
    ok = index[index.status == "ok"]
    rejects = index[index.status != "ok"]
    return {
        "episodes_attempted": int(len(index)),
        "episodes": int(len(ok)),
        "image_text_pairs": int(ok.n_samples.sum()) if len(ok) else 0,
        "scenes": int(ok.scene.nunique()) if len(ok) else 0,
        "episodes_by_type": {t: int(n) for t, n in sorted(ok.task_type.value_counts().items())},
        "episodes_by_split": {s: int((ok.split == s).sum()) for s in SPLITS},
        "rejects_by_reason": {r: int((rejects.status == r).sum()) for r in REJECT_REASONS},
        "mean_plan_length": round(float(ok.plan_length.mean()), 3) if len(ok) else 0.0,
        "max_plan_length": int(ok.plan_length.max()) if len(ok) else 0,
    }


def ensure_disk_space(out_dir: Path, needed_mb: float) -> None:
    free = shutil.disk_usage(out_dir if out_dir.exists() else out_dir.parent).free / 2**20
    if free < needed_mb:
        raise DataError(f"only {free:.0f} MiB free under {out_dir}; the demonstrations need about {needed_mb:.0f} MiB.",
                        hint="Free disk space or lower muep.demos.episodes; finished batches are kept.")

