"""MuEP stage 1: scene metadata from ALFWorld's AI2-THOR configuration, instantiated from a seed."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks.muep import alfworld_data, layout
from tasks.muep.metadata import SceneMetadata, collect_all, plan_states, write_tables
from tasks.params import MetadataParams, SceneParams, load_params
from tasks.progress import Progress, StageLog

STAGE = "muep-metadata"


@task(name="collect-scenes", cache_policy=NO_CACHE)
def collect_scenes(scenes: SceneParams, params: MetadataParams) -> list[SceneMetadata]:
    plans = plan_states(scenes, params)   # instantiations and the held-out seen-test states: the real total
    with Progress(len(plans), f"{STAGE}: scenes", unit="scenes") as progress:
        return collect_all(scenes, params, on_scene=progress.advance, plans=plans)


@task(name="write-tables", cache_policy=NO_CACHE)
def write_outputs(metas: list[SceneMetadata], slog: StageLog) -> dict:
    report = write_tables(metas, layout.METADATA, on_write=slog.wrote)
    report_path = layout.REPORTS / "metadata.json"
    slog.write(report_path, report)
    return report


@flow(name=STAGE)
def muep_metadata(params_file: str | None = None) -> dict:
    """MuEP stage 1: scene metadata from ALFWorld's AI2-THOR configuration, instantiated from a seed."""
    params = load_params(params_file).muep
    with StageLog(STAGE) as slog:
        slog.read(alfworld_data.layouts_dir(), f"{len(params.scenes.selected())} floorplans")
        metas = collect_scenes(params.scenes, params.metadata)
        return write_outputs(metas, slog)


if __name__ == "__main__":
    main(STAGE, muep_metadata)
