"""RoboScript stage 1: sample tabletop worlds from the asset catalog; world files, top views, scene text."""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from robot.contract.catalog import CATALOG_FILE, load_catalog
from tasks import paths
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript import layout
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.world_records import (
    BenchmarkTaskRecord,
    CatalogRejectRecord,
    PlacementFailureRecord,
    WorldRecord,
    benchmark_record,
    benchmark_tasks,
    sample_worlds,
    world_record,
    worlds_report,
    write_world_files,
)

STAGE = "roboscript-worlds"
log = logging.getLogger("embp")


@task(name="sample-worlds", cache_policy=NO_CACHE)
def build_worlds(params: WorldsParams, slog: StageLog) -> dict:
    catalog = load_catalog(strict=False)  # bad entries are recorded and left out; the run goes on
    slog.read(CATALOG_FILE, f"{len(catalog.assets)} assets, {len(catalog.issues)} rejected")
    for issue in catalog.issues:
        log.warning("[%s] catalog entry left out: %s", STAGE, issue)
    worlds = sample_worlds(catalog, params)
    files = write_world_files(worlds, layout.WORLDS, layout.PICTURES, params.picture_px, paths.ROOT)
    slog.wrote(layout.WORLDS, rows=len(worlds))
    records = [world_record(w, i, *f) for i, (w, f) in enumerate(zip(worlds, files, strict=True))]
    failures = [PlacementFailureRecord(w.world_id, f.asset, f.kind, f.reason, f.detail) for w in worlds
                for f in w.failures]
    rejects = [CatalogRejectRecord(i.source, i.line, i.entry, i.field, i.reason) for i in catalog.issues]
    for name, rows, cls in (("worlds.parquet", records, WorldRecord),
                            ("placement_failures.parquet", failures, PlacementFailureRecord),
                            ("catalog_rejects.parquet", rejects, CatalogRejectRecord)):
        slog.records(layout.WORLDS / name, rows, cls)

    tasks = benchmark_tasks(catalog, params)
    task_files = write_world_files([t.world for t in tasks], layout.BENCHMARK, layout.BENCHMARK / "pictures",
                                   params.picture_px, paths.ROOT)
    task_rows = [benchmark_record(t, *f) for t, f in zip(tasks, task_files, strict=True)]
    slog.records(layout.BENCHMARK / "tasks.parquet", task_rows, BenchmarkTaskRecord)

    report = worlds_report(catalog, worlds, records, failures, tasks)
    slog.write(layout.REPORTS / "worlds.json", report)
    return report


@flow(name=STAGE)
def roboscript_worlds(params_file: str | None = None) -> dict:
    """RoboScript stage 1: sample tabletop worlds from the asset catalog; world files, top views, scene text."""
    params = load_params(params_file).roboscript.worlds
    with StageLog(STAGE) as slog:
        return build_worlds(params, slog)


if __name__ == "__main__":
    main(STAGE, roboscript_worlds)
