"""Stage 1, metadata collection: AI2-THOR scene configuration -> typed scene tables and a seeded initial state.

Per floorplan we read the object types present (``-objects.json``), the receptacle instances with their
interaction poses (``-openable.json``) and the navigable grid (``-layout.npy``), and attach ALFWorld's operational
attributes. The pose file is incomplete (StoveBurner, CoffeeMachine, Toaster are missing in every kitchen,
GarbageCan in most scenes...): a receptacle type present in the objects file but absent from the pose file gets one
instance whose pose is synthesised -- a seeded navigable grid point, facing north, looking down 30 degrees -- and is
marked ``pose_synthesized``.

The files give no counts or placements of small objects, so :func:`instantiate` draws them reproducibly from a seed:
every pickupable type present gets ``min..max`` instances, each placed in a receptacle instance whose type can hold
it according to ALFWorld's ``VAL_RECEPTACLE_OBJECTS`` table. That initial state is the object dictionary the task
generator is constrained by.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tasks.muep import alfworld_data
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
    """True for lamps, whose hosts are our choice rather than ALFWorld's tables."""


@dataclass(frozen=True)
class UnplacedRecord:
    scene: str
    object_type: str
    reason: str


@dataclass
class SceneMetadata:
    scene: SceneRecord
    object_types: list[ObjectTypeRecord]
    receptacles: list[ReceptacleRecord]
    instances: list[InstanceRecord]
    unplaced: list[UnplacedRecord]


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
                    placement_synthesized=synthesized,
                )
            )
    return instances, unplaced


def collect_scene(floorplan: int, scenes: SceneParams, params: MetadataParams, instantiation: int = 0,
                  ) -> SceneMetadata:
    cat = catalog()
    files = alfworld_data.read_scene(floorplan)
    scene = scene_name(floorplan, instantiation)
    receptacles = collect_receptacles(files, params.seed, instantiation)
    instances, unplaced = instantiate(files, receptacles, params, instantiation)
    counts = Counter(r.receptacle_type for r in receptacles) + Counter(i.object_type for i in instances)
    types = sorted(set(files.object_types) | set(counts))
    object_types = [
        ObjectTypeRecord(scene=scene, object_type=t, count=counts.get(t, 0), known_to_alfworld=t in cat.types,
                         **cat.attributes(t))
        for t in types
    ]
    grid = files.grid
    record = SceneRecord(
        scene=scene, floorplan=floorplan, instantiation=instantiation, room_type=room_type_of(floorplan),
        split="unseen" if floorplan in scenes.unseen else "seen",
        n_object_types=len(types), n_receptacles=len(receptacles),
        n_receptacles_synthesized=sum(r.pose_synthesized for r in receptacles), n_instances=len(instances),
        n_unplaced=len(unplaced), grid_points=len(grid),
        grid_x_min=float(grid[:, 0].min()), grid_x_max=float(grid[:, 0].max()),
        grid_z_min=float(grid[:, 1].min()), grid_z_max=float(grid[:, 1].max()),
    )
    return SceneMetadata(record, object_types, receptacles, instances, unplaced)


def collect_all(scenes: SceneParams, params: MetadataParams, on_scene=None) -> list[SceneMetadata]:
    """Every selected floorplan x instantiation, in order; ``on_scene()`` is called after each (progress)."""
    out = []
    for floorplan in scenes.selected():
        for k in range(params.instantiations):
            out.append(collect_scene(floorplan, scenes, params, k))
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
    scenes = rows["scenes"]
    return {
        "scenes": len(scenes),
        "floorplans": len({s.floorplan for s in scenes}),
        "scenes_by_room": dict(sorted(Counter(s.room_type for s in scenes).items())),
        "scenes_by_split": dict(sorted(Counter(s.split for s in scenes).items())),
        "receptacles": len(rows["receptacles"]),
        "receptacles_pose_synthesized": sum(r.pose_synthesized for r in rows["receptacles"]),
        "object_instances": sum(s.n_instances for s in scenes),
        "object_types_unplaced": sum(s.n_unplaced for s in scenes),
        "mean_object_types_per_scene": round(sum(s.n_object_types for s in scenes) / max(1, len(scenes)), 2),
    }


assert set(ATTRIBUTES) <= set(ObjectTypeRecord.__dataclass_fields__)
