"""Stage 1, metadata collection: AI2-THOR scene configuration -> typed scene tables and the scene instances' initial
states (object placements and quantities).

**Real initial states first.** ALFWorld's 3,553 training games hold ALFRED's real initial states of 108 floorplans
(4 to 108 trials each). Where a floorplan has them, its scene instances *are* those states
(:func:`scene_from_game`): ALFWorld's receptacles with their names, locations and openable flags, every object in the
receptacle(s) it starts in, its initial marks (some objects start cold), per-object ``pickupable``. The trials of a
floorplan are taken in a seeded order (sha-256 of seed and trial id), the first ``instantiations`` for training.

**Seeded placement only where none exists** (the 12 floorplans without training games, or more instantiations than
a floorplan has trials): per floorplan we read the object types present (``-objects.json``), the receptacle instances
with their interaction poses (``-openable.json``) and the navigable grid (``-layout.npy``), and attach ALFWorld's
operational attributes. The pose file is incomplete (StoveBurner, CoffeeMachine, Toaster are missing in every
kitchen, GarbageCan in most scenes...): a receptacle type present in the objects file but absent from the pose file
gets one instance whose pose is synthesised -- a seeded navigable grid point, facing north, looking down 30 degrees --
and is marked ``pose_synthesized``. :func:`instantiate` then draws counts and placements reproducibly from a seed:
every pickupable type present gets ``min..max`` instances, each placed in a receptacle instance whose type can hold
it according to ALFWorld's ``VAL_RECEPTACLE_OBJECTS`` table.

**Splits are decided per initial state** (``SceneRecord.state_split``): every instance of an unseen floorplan is
``unseen_test``; on a ``seen_test_fraction`` share of the seen floorplans (per room type) one further instance --
never used for training -- is ``seen_test``; all other instances are ``train``. So #Seen test episodes play in
familiar rooms with initial states no training episode has, as MuEP's #Seen split is defined.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from core.errors import DataError
from tasks.muep import alfworld_data, alfworld_games
from tasks.muep.alfworld_games import AlfGame
from tasks.muep.vocab import ATTRIBUTES, LAMP_HOSTS, catalog, instance_prefix
from tasks.params import MetadataParams, SceneParams, room_type_of
from tasks.records import write_records

SYNTH_ROTATION = 0
SYNTH_HORIZON = 30


@dataclass(frozen=True)
class SceneRecord:
    scene: str
    """``FloorPlanN`` for the first instantiation of a floorplan, ``FloorPlanN-K`` for the K-th further one."""
    floorplan: int
    instantiation: int
    room_type: str
    split: str
    n_object_types: int
    n_receptacles: int
    n_receptacles_synthesized: int
    n_instances: int
    n_unplaced: int
    grid_points: int
    grid_x_min: float
    grid_x_max: float
    grid_z_min: float
    grid_z_max: float
    source: str
    """Where the initial state comes from: ``alfred_train`` / ``alfred_valid_seen`` / ``alfred_valid_unseen`` (an
    ALFWorld game's real state) or ``seeded`` (:func:`instantiate`)."""
    trial: str
    """The ALFRED trial of a real state ("trial_T20190909_044715_250790"); "" for a seeded one."""
    state_split: str
    """The split of every episode on this initial state: train | seen_test | unseen_test (| alfworld_seen |
    alfworld_unseen for ALFWorld's evaluation games)."""
    initial_state: str
    """Id of the initial state (:func:`initial_state_id`): equal ids, equal object placements and quantities."""


@dataclass(frozen=True)
class ObjectTypeRecord:
    scene: str
    object_type: str
    count: int
    """Instances in the instantiated scene (receptacles from the pose file, objects as drawn); 0 for scenery."""
    known_to_alfworld: bool
    pickupable: bool
    receptacle: bool
    openable: bool
    heatable: bool
    coolable: bool
    cleanable: bool
    sliceable: bool
    toggleable: bool


@dataclass(frozen=True)
class ReceptacleRecord:
    scene: str
    name: str
    receptacle_type: str
    thor_id: str
    x: float
    z: float
    rotation: float
    horizon: float
    pose_synthesized: bool
    openable: bool
    initially_open: bool


@dataclass(frozen=True)
class InstanceRecord:
    scene: str
    name: str
    object_type: str
    parent: str
    """Name of the receptacle instance it starts in/on."""
    parent_type: str
    pickupable: bool
    movable_receptacle: bool
    toggleable: bool
    placement_synthesized: bool
    """True for lamps of seeded states, whose hosts are our choice rather than ALFWorld's tables."""
    also_in: list[str]
    """Further receptacles it starts in: ALFWorld gives some objects two ``inReceptacle`` facts (a mug in the coffee
    machine and on the countertop). Only ALFWorld's evaluation games keep them (see :func:`scene_from_game`)."""
    initial_marks: list[str]
    """State predicates true at the start, e.g. ``["isCool"]`` (ALFRED has objects that start cold in a fridge)."""


@dataclass(frozen=True)
class UnplacedRecord:
    scene: str
    object_type: str
    reason: str


@dataclass(frozen=True)
class AlfredLocationRecord:
    """One location of an ALFWorld game's PDDL problem (ALFWorld's evaluation games only: table
    ``alfred_locations.parquet`` of their metadata). Our games have one location per receptacle pose and a start of
    their own; MuEP's released client numbers every location of ALFRED's problem ("loc N"), so the released
    protocol needs them all to show the client's numbers."""

    scene: str
    location: str
    """The id as TextWorld reads it (``tasks.muep.alfworld_games.mangle``), e.g. ``loc_bar__minus_6_bar_2_bar_3_bar_60``."""
    receptacles: list[str]
    """Names of the receptacles at it (none for an object's or the start's own pose)."""
    agent_start: bool


ALFRED_LOCATIONS = "alfred_locations.parquet"


@dataclass
class SceneMetadata:
    scene: SceneRecord
    object_types: list[ObjectTypeRecord]
    receptacles: list[ReceptacleRecord]
    instances: list[InstanceRecord]
    unplaced: list[UnplacedRecord]
    locations: list[AlfredLocationRecord] = field(default_factory=list)
    """ALFRED's locations of the problem (:func:`alfred_locations`): ALFWorld's evaluation games only."""


def scene_name(floorplan: int, instantiation: int = 0) -> str:
    return f"FloorPlan{floorplan}" if instantiation == 0 else f"FloorPlan{floorplan}-{instantiation}"


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def receptacle_type_of(thor_id: str) -> str:
    """``Cabinet|+00.68|+00.50|-02.20`` -> Cabinet; ``Sink|...|SinkBasin`` -> SinkBasin (the basin is the receptacle)."""
    parts = thor_id.split("|")
    return parts[-1] if len(parts) > 4 else parts[0]


def collect_receptacles(files: alfworld_data.SceneFiles, seed: int, instantiation: int = 0) -> list[ReceptacleRecord]:
    """Receptacles and their poses. They belong to the floorplan: every instantiation gets the same ones."""
    cat = catalog()
    scene = scene_name(files.floorplan, instantiation)
    raw: list[tuple[str, str, list[float], bool]] = []
    for thor_id, pose in sorted(files.receptacle_poses.items()):
        raw.append((receptacle_type_of(thor_id), thor_id, [float(v) for v in pose], False))
    posed = {t for t, *_ in raw}
    rng = _rng("synth-pose", seed, files.floorplan)
    for rtype in sorted(set(files.object_types)):
        if rtype in cat.static_receptacles and rtype not in posed:
            x, z = files.grid[rng.randrange(len(files.grid))]
            raw.append((rtype, f"{rtype}|synthesized", [float(x), float(z), SYNTH_ROTATION, SYNTH_HORIZON], True))
    numbering: Counter[str] = Counter()
    out = []
    for rtype, thor_id, pose, synthesized in sorted(raw, key=lambda r: (r[0], r[1])):
        numbering[rtype] += 1
        openable = rtype in cat.openable
        out.append(
            ReceptacleRecord(
                scene=scene, name=f"{instance_prefix(rtype)} {numbering[rtype]}", receptacle_type=rtype,
                thor_id=thor_id, x=pose[0], z=pose[1], rotation=pose[2], horizon=pose[3],
                pose_synthesized=synthesized, openable=openable, initially_open=not openable,
            )
        )
    return out


def instantiate(
    files: alfworld_data.SceneFiles, receptacles: list[ReceptacleRecord], params: MetadataParams,
    instantiation: int = 0,
) -> tuple[list[InstanceRecord], list[UnplacedRecord]]:
    """Draw instance counts and initial placements for one scene, reproducibly from ``params.seed`` (and the
    instantiation number: each instantiation of a floorplan is another initial state, as ALFRED's trials are)."""
    cat = catalog()
    scene = scene_name(files.floorplan, instantiation)
    rng = _rng("instantiate", params.seed, files.floorplan, *([instantiation] if instantiation else []))
    present = sorted(set(files.object_types))
    instances: list[InstanceRecord] = []
    unplaced: list[UnplacedRecord] = []
    for obj_type in present:
        if obj_type in cat.pickupable:
            hosts = [r for r in receptacles if cat.holds(r.receptacle_type, obj_type)]
            count = rng.randint(params.min_instances_per_type, params.max_instances_per_type)
            synthesized = False
        elif obj_type in cat.toggleable and obj_type in LAMP_HOSTS:
            hosts = [r for r in receptacles if r.receptacle_type in LAMP_HOSTS[obj_type]]
            count, synthesized = 1, True
        else:
            continue  # furniture, appliances, scenery: present, but not instantiated as movable objects
        if not hosts:
            unplaced.append(UnplacedRecord(scene, obj_type, "no receptacle in this scene can hold it"))
            continue
        for i in range(1, count + 1):
            host = rng.choice(hosts)
            instances.append(
                InstanceRecord(
                    scene=scene, name=f"{instance_prefix(obj_type)} {i}", object_type=obj_type, parent=host.name,
                    parent_type=host.receptacle_type, pickupable=obj_type in cat.pickupable,
                    movable_receptacle=obj_type in cat.movable_receptacles, toggleable=obj_type in cat.toggleable,
                    placement_synthesized=synthesized, also_in=[], initial_marks=[],
                )
            )
    return instances, unplaced


def initial_state_id(floorplan: int, receptacles: list[ReceptacleRecord], instances: list[InstanceRecord]) -> str:
    """A scene instance's initial state as a 16-hex id: the floorplan, its receptacles (name, type, openable) and
    every object's name, type, receptacle(s) and initial marks. Two instances with the same id have the same object
    placements and quantities; the id does not depend on the scene's name, its split or row order."""
    blob = json.dumps({
        "floorplan": int(floorplan),
        "receptacles": sorted([r.name, r.receptacle_type, bool(r.openable)] for r in receptacles),
        "instances": sorted([i.name, i.object_type, i.parent, sorted(i.also_in), sorted(i.initial_marks)]
                            for i in instances),
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _scene_record(scene: str, floorplan: int, instantiation: int, split: str, source: str, trial: str,
                  state_split: str, types: list[str], receptacles: list[ReceptacleRecord],
                  instances: list[InstanceRecord], unplaced: list[UnplacedRecord], grid) -> SceneRecord:
    return SceneRecord(
        scene=scene, floorplan=floorplan, instantiation=instantiation, room_type=room_type_of(floorplan), split=split,
        n_object_types=len(types), n_receptacles=len(receptacles),
        n_receptacles_synthesized=sum(r.pose_synthesized for r in receptacles), n_instances=len(instances),
        n_unplaced=len(unplaced), grid_points=len(grid),
        grid_x_min=float(grid[:, 0].min()), grid_x_max=float(grid[:, 0].max()),
        grid_z_min=float(grid[:, 1].min()), grid_z_max=float(grid[:, 1].max()),
        source=source, trial=trial, state_split=state_split,
        initial_state=initial_state_id(floorplan, receptacles, instances),
    )


def _object_types(scene: str, present: set[str], receptacles: list[ReceptacleRecord],
                  instances: list[InstanceRecord]) -> list[ObjectTypeRecord]:
    cat = catalog()
    counts = Counter(r.receptacle_type for r in receptacles) + Counter(i.object_type for i in instances)
    return [ObjectTypeRecord(scene=scene, object_type=t, count=counts.get(t, 0), known_to_alfworld=t in cat.types,
                             **cat.attributes(t))
            for t in sorted(present | set(counts))]


def seeded_scene(floorplan: int, scenes: SceneParams, params: MetadataParams, instantiation: int = 0,
                 state_split: str | None = None) -> SceneMetadata:
    """A scene instance with a seeded initial state (:func:`instantiate`) on the pose file's receptacles."""
    files = alfworld_data.read_scene(floorplan)
    scene = scene_name(floorplan, instantiation)
    receptacles = collect_receptacles(files, params.seed, instantiation)
    instances, unplaced = instantiate(files, receptacles, params, instantiation)
    object_types = _object_types(scene, set(files.object_types), receptacles, instances)
    split = "unseen" if floorplan in scenes.unseen else "seen"
    record = _scene_record(scene, floorplan, instantiation, split, "seeded", "",
                           state_split or ("unseen_test" if split == "unseen" else "train"),
                           [o.object_type for o in object_types], receptacles, instances, unplaced, files.grid)
    return SceneMetadata(record, object_types, receptacles, instances, unplaced)


def game_state(game: AlfGame, scene: str, keep_all_parents: bool
               ) -> tuple[list[ReceptacleRecord], list[InstanceRecord]]:
    """The receptacle and instance rows of an ALFWorld game's initial state (see :func:`scene_from_game`)."""
    cat = catalog()
    receptacles = []
    for r in game.receptacles:
        x, z, rotation, horizon = alfworld_games.decode_location(r.location)
        receptacles.append(ReceptacleRecord(
            scene=scene, name=r.name, receptacle_type=r.type, thor_id=r.thor_id, x=x, z=z, rotation=rotation,
            horizon=horizon, pose_synthesized=False, openable=r.openable, initially_open=not r.openable))
    rtype = {r.name: r.type for r in game.receptacles}
    instances = [
        InstanceRecord(scene=scene, name=o.name, object_type=o.type, parent=o.parents[0],
                       parent_type=rtype[o.parents[0]], pickupable=o.pickupable,
                       movable_receptacle=o.type in cat.movable_receptacles, toggleable=o.toggleable,
                       placement_synthesized=False, also_in=list(o.parents[1:]) if keep_all_parents else [],
                       initial_marks=list(o.marks))
        for o in game.objects
    ]
    return receptacles, instances


def alfred_locations(game: AlfGame, scene: str) -> list[AlfredLocationRecord]:
    """Every location of the game's PDDL problem, with the receptacles at each and the agent's start."""
    at: dict[str, list[str]] = {}
    for r in game.receptacles:
        at.setdefault(alfworld_games.mangle(r.location), []).append(r.name)
    start = alfworld_games.mangle(game.agent_start)
    missing = sorted((set(at) | {start}) - set(game.locations))
    if missing:
        raise DataError(f"{game.member}: location {missing[0]} of a receptacle or the start is not among the "
                        "problem's locations.")
    return [AlfredLocationRecord(scene, loc, sorted(at.get(loc, [])), loc == start) for loc in game.locations]


def scene_from_game(game: AlfGame, scene: str, instantiation: int, split: str, state_split: str,
                    keep_all_parents: bool) -> SceneMetadata:
    """A scene instance whose initial state is an ALFWorld game's (ALFRED's real state of that trial).

    Receptacles keep ALFWorld's names, openable flags and locations (their poses are decoded from the location ids,
    so receptacles sharing an ALFWorld location share a game location here too). Objects in no receptacle (scenery,
    things on the floor, floor lamps) are no instances: ALFWorld's actions cannot reach them either; a pickupable or
    switchable type with no instance is listed in ``unplaced``.

    ``keep_all_parents``: keep every ``inReceptacle`` fact of an object (``also_in``), as the evaluation games must to
    be ALFWorld's games. Training states keep one (the receptacle at the object's recorded location): ALFWorld's
    domain removes only the fact of the receptacle an object is taken from, so with two the object stays "in" the
    other one while held, and a plan can win without ever placing it (91 of ALFWorld's 1,642 heat / cool / clean
    training walkthroughs do) -- not a demonstration to learn from.
    """
    cat = catalog()
    receptacles, instances = game_state(game, scene, keep_all_parents)
    rtype = {r.name: r.type for r in game.receptacles}
    placed = {i.object_type for i in instances}
    unplaced = [UnplacedRecord(scene, t, "outside every receptacle in ALFRED's initial state (on the floor or "
                               "fixed): ALFWorld's actions cannot reach it")
                for t in sorted({t for _, t in game.loose} - placed) if t in cat.pickupable or t in LAMP_HOSTS]
    present = {t for _, t in game.loose} | placed | set(rtype.values())
    object_types = _object_types(scene, present, receptacles, instances)
    grid = alfworld_data.read_scene(game.floorplan).grid
    record = _scene_record(scene, game.floorplan, instantiation, split, f"alfred_{game.split}", game.trial,
                           state_split, [o.object_type for o in object_types], receptacles, instances, unplaced, grid)
    return SceneMetadata(record, object_types, receptacles, instances, unplaced)


# --------------------------------------------------------------------------------------------------------------------
# Which initial state each scene instance gets


@dataclass(frozen=True)
class StatePlan:
    floorplan: int
    instantiation: int
    state_split: str       # train | seen_test | unseen_test
    member: str | None     # the ALFWorld training game whose initial state it is; None = seeded placement


@cache
def alfred_trials() -> dict[int, tuple[str, ...]]:
    """Floorplan -> the archive paths of its ALFWorld training games (ALFRED's real initial states)."""
    out: dict[int, list[str]] = {}
    for member in alfworld_games.member_names(alfworld_games.TRAIN_ARCHIVE):
        floorplan = int(member.split("/")[1].rsplit("-", 1)[1])
        out.setdefault(floorplan, []).append(member)
    return {f: tuple(sorted(ms)) for f, ms in sorted(out.items())}


def state_order(floorplan: int, seed: int) -> list[str]:
    """The floorplan's training games in the seeded order their states become instances (sha-256 of seed and
    trial id; the first ``instantiations`` are training states, the next one a held-out seen-test state)."""
    members = alfred_trials().get(floorplan, ())
    return sorted(members, key=lambda m: (hashlib.sha256(f"alfred-state:{seed}:{alfworld_games.trial_of(m)}"
                                                          .encode()).hexdigest(), m))


def seen_test_floorplans(scenes: SceneParams, params: MetadataParams) -> set[int]:
    """The seen floorplans that get one held-out (seen-test) initial state: per room type, the
    ``round(seen_test_fraction x seen floorplans of the type)`` first in a seeded order (at least one when the
    fraction is positive), so every room type has #Seen test states."""
    if params.seen_test_fraction <= 0:
        return set()
    by_room: dict[str, list[int]] = {}
    for f in scenes.selected():
        if f not in scenes.unseen:
            by_room.setdefault(room_type_of(f), []).append(f)
    chosen: set[int] = set()
    for floorplans in by_room.values():
        ranked = sorted(floorplans, key=lambda f: hashlib.sha256(f"seen-test:{params.seed}:{f}".encode()).hexdigest())
        chosen |= set(ranked[:max(1, round(params.seen_test_fraction * len(ranked)))])
    return chosen


def plan_states(scenes: SceneParams, params: MetadataParams) -> list[StatePlan]:
    """Every scene instance of the selected floorplans, in order, with its split and its source of initial state."""
    held_out = seen_test_floorplans(scenes, params)
    plans = []
    for floorplan in scenes.selected():
        order = state_order(floorplan, params.seed)
        unseen = floorplan in scenes.unseen
        n = params.instantiations + (floorplan in held_out)
        for k in range(n):
            split = "unseen_test" if unseen else ("seen_test" if k == params.instantiations else "train")
            plans.append(StatePlan(floorplan, k, split, order[k] if k < len(order) else None))
    return plans


_ALFRED: dict[str, AlfGame] = {}


def alfred_games(members: list[str]) -> dict[str, AlfGame]:
    """The parsed training games at ``members`` (one pass through the archive for those not parsed before)."""
    missing = set(members) - set(_ALFRED)
    if missing:
        for member, raw in alfworld_games.iter_members(alfworld_games.TRAIN_ARCHIVE, missing.__contains__):
            _ALFRED[member] = alfworld_games.parse_game(member, raw, alfworld_games.TRAIN_ARCHIVE)
        lost = missing - set(_ALFRED)
        if lost:
            raise DataError(f"the ALFWorld archive {alfworld_games.TRAIN_ARCHIVE} lacks {min(lost)}.")
    return {m: _ALFRED[m] for m in members}


def build_scene(plan: StatePlan, scenes: SceneParams, params: MetadataParams,
                games: dict[str, AlfGame] | None = None) -> SceneMetadata:
    if plan.member is None:
        return seeded_scene(plan.floorplan, scenes, params, plan.instantiation, plan.state_split)
    game = (games or alfred_games([plan.member]))[plan.member]
    return scene_from_game(game, scene_name(plan.floorplan, plan.instantiation),
                           plan.instantiation, "unseen" if plan.floorplan in scenes.unseen else "seen",
                           plan.state_split, keep_all_parents=False)


def collect_scene(floorplan: int, scenes: SceneParams, params: MetadataParams, instantiation: int = 0,
                  ) -> SceneMetadata:
    """One scene instance, as :func:`collect_all` builds it."""
    for plan in plan_states(SceneParams(floorplans=[floorplan], unseen=scenes.unseen), params):
        if plan.instantiation == instantiation:
            return build_scene(plan, scenes, params)
    raise ValueError(f"FloorPlan{floorplan} has no instantiation {instantiation} with these params")


def collect_all(scenes: SceneParams, params: MetadataParams, on_scene=None,
                plans: list | None = None) -> list[SceneMetadata]:
    """Every selected floorplan x instantiation (and held-out seen-test instance), in order; ``on_scene()`` is
    called after each (progress). ``plans``: :func:`plan_states`'s answer where the caller already has it (to size
    a progress bar)."""
    plans = plan_states(scenes, params) if plans is None else plans
    games = alfred_games([p.member for p in plans if p.member is not None])
    out = []
    for plan in plans:
        out.append(build_scene(plan, scenes, params, games))
        if on_scene is not None:
            on_scene()
    return out


TABLES = {"scenes": SceneRecord, "object_types": ObjectTypeRecord, "receptacles": ReceptacleRecord,
          "instances": InstanceRecord, "unplaced": UnplacedRecord}


def write_tables(metas: list[SceneMetadata], out_dir: Path, on_write=None) -> dict:
    """Write the five tables (atomically) and return the stage report."""
    rows = {
        "scenes": [m.scene for m in metas],
        "object_types": [r for m in metas for r in m.object_types],
        "receptacles": [r for m in metas for r in m.receptacles],
        "instances": [r for m in metas for r in m.instances],
        "unplaced": [r for m in metas for r in m.unplaced],
    }
    for name, cls in TABLES.items():
        path = Path(out_dir) / f"{name}.parquet"
        n = write_records(path, rows[name], cls)
        if on_write is not None:
            on_write(path, n)
    locations = [r for m in metas for r in m.locations]
    if locations:  # only ALFWorld's evaluation games have them: the generated scenes' folder has no such table
        n = write_records(Path(out_dir) / ALFRED_LOCATIONS, locations, AlfredLocationRecord)
        if on_write is not None:
            on_write(Path(out_dir) / ALFRED_LOCATIONS, n)
    scenes = rows["scenes"]
    return {
        "scenes": len(scenes),
        "floorplans": len({s.floorplan for s in scenes}),
        "scenes_by_room": dict(sorted(Counter(s.room_type for s in scenes).items())),
        "scenes_by_split": dict(sorted(Counter(s.split for s in scenes).items())),
        "scenes_by_state_split": dict(sorted(Counter(s.state_split for s in scenes).items())),
        "scenes_by_source": dict(sorted(Counter(s.source for s in scenes).items())),
        "distinct_initial_states": len({s.initial_state for s in scenes}),
        "receptacles": len(rows["receptacles"]),
        "receptacles_pose_synthesized": sum(r.pose_synthesized for r in rows["receptacles"]),
        "object_instances": sum(s.n_instances for s in scenes),
        "objects_starting_marked": sum(bool(len(i.initial_marks)) for i in rows["instances"]),
        "object_types_unplaced": sum(s.n_unplaced for s in scenes),
        "mean_object_types_per_scene": round(sum(s.n_object_types for s in scenes) / max(1, len(scenes)), 2),
    }


assert set(ATTRIBUTES) <= set(ObjectTypeRecord.__dataclass_fields__)
