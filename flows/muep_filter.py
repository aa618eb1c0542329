"""MuEP stage 3: four-fold task filtering (room, item, attributes, already satisfied) plus duplicates."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks.muep import layout
from tasks.muep.filter import RejectedTask, filter_tasks, scene_facts
from tasks.muep.generate import TaskRecord
from tasks.muep.metadata import (
    InstanceRecord,
    ObjectTypeRecord,
    ReceptacleRecord,
    SceneRecord,
)
from tasks.params import FilterParams, load_params
from tasks.progress import StageLog
from tasks.records import read_records, read_table

STAGE = "muep-filter"


@task(name="filter-tasks", cache_policy=NO_CACHE)
def filter_generated(params: FilterParams, slog: StageLog) -> dict:
    meta = layout.METADATA
    inputs = {name: meta / f"{name}.parquet" for name in ("scenes", "object_types", "instances", "receptacles")}
    facts = scene_facts(read_table(inputs["scenes"], SceneRecord), read_table(inputs["object_types"], ObjectTypeRecord),
                        read_table(inputs["instances"], InstanceRecord),
                        read_table(inputs["receptacles"], ReceptacleRecord))
    for path in inputs.values():
        slog.read(path)
    tasks_path = layout.TASKS
    tasks = read_records(tasks_path, TaskRecord)
    slog.read(tasks_path, f"{len(tasks)} tasks")
    accepted, rejected, report = filter_tasks(tasks, facts, drop_duplicates=params.drop_duplicates)
    out = layout.FILTER
    slog.records(out / "accepted.parquet", accepted, TaskRecord)
    slog.records(out / "rejected.parquet", rejected, RejectedTask)
    report_path = layout.REPORTS / "filter.json"
    slog.write(report_path, report)
    return report


@flow(name=STAGE)
def muep_filter(params_file: str | None = None) -> dict:
    """MuEP stage 3: four-fold task filtering (room, item, attributes, already satisfied) plus duplicates."""
    params = load_params(params_file).muep.filter
    with StageLog(STAGE) as slog:
        return filter_generated(params, slog)


if __name__ == "__main__":
    main(STAGE, muep_filter)
