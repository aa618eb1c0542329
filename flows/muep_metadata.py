"""MuEP stage 1: scene metadata from ALFWorld's AI2-THOR configuration, instantiated from a seed."""

from __future__ import annotations

from collections import Counter

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import paths
from tasks.io import write_json
from tasks.muep import alfworld_data
from tasks.muep.metadata import (InstanceRecord, ObjectTypeRecord, ReceptacleRecord, SceneMetadata, SceneRecord,
                                 UnplacedRecord, collect_scene)
from tasks.params import MetadataParams, SceneParams, load_params
from tasks.progress import Progress, StageLog
from tasks.records import write_records

STAGE = "muep-metadata"


@task(name="collect-scenes", cache_policy=NO_CACHE)
def collect_scenes(scenes: SceneParams, params: MetadataParams) -> list[SceneMetadata]:
    out = []
    total = len(scenes.selected()) * params.instantiations
    with Progress(total, f"{STAGE}: scenes", unit="scenes") as progress:
        for floorplan in scenes.selected():
            for k in range(params.instantiations):
                out.append(collect_scene(floorplan, scenes, params, k))
                progress.advance()
    return out


@task(name="write-tables", cache_policy=NO_CACHE)
def write_tables(metas: list[SceneMetadata], slog: StageLog) -> dict:
    tables = {
        "scenes.parquet": ([m.scene for m in metas], SceneRecord),
        "object_types.parquet": ([r for m in metas for r in m.object_types], ObjectTypeRecord),
        "receptacles.parquet": ([r for m in metas for r in m.receptacles], ReceptacleRecord),
        "instances.parquet": ([r for m in metas for r in m.instances], InstanceRecord),
        "unplaced.parquet": ([r for m in metas for r in m.unplaced], UnplacedRecord),
    }
    for name, (records, cls) in tables.items():
        path = paths.MUEP_METADATA / name
        slog.wrote(path, write_records(path, records, cls))
    scenes = [m.scene for m in metas]
    receptacles = [r for m in metas for r in m.receptacles]
    report = {
        "scenes": len(scenes),
        "floorplans": len({s.floorplan for s in scenes}),
        "scenes_by_room": dict(sorted(Counter(s.room_type for s in scenes).items())),
        "scenes_by_split": dict(sorted(Counter(s.split for s in scenes).items())),
        "receptacles": len(receptacles),
        "receptacles_pose_synthesized": sum(r.pose_synthesized for r in receptacles),
        "object_instances": sum(s.n_instances for s in scenes),
        "object_types_unplaced": sum(s.n_unplaced for s in scenes),
        "mean_object_types_per_scene": round(sum(s.n_object_types for s in scenes) / max(1, len(scenes)), 2),
    }
    report_path = paths.MUEP_REPORTS / "metadata.json"
    write_json(report_path, report)
    slog.wrote(report_path)
    return report


@flow(name=STAGE)
def muep_metadata(params_file: str | None = None) -> dict:
    """MuEP stage 1: scene metadata from ALFWorld's AI2-THOR configuration, instantiated from a seed."""
    params = load_params(params_file).muep
    with StageLog(STAGE) as slog:
        slog.read(alfworld_data.layouts_dir(), f"{len(params.scenes.selected())} floorplans")
        metas = collect_scenes(params.scenes, params.metadata)
        return write_tables(metas, slog)


if __name__ == "__main__":
    main(STAGE, muep_metadata)
