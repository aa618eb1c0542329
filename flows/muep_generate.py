"""MuEP stage 2: in-context task generation with the configured LLM backend (offline by default)."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import paths
from tasks.io import write_json
from tasks.llm import build_client
from tasks.muep.generate import ParseRejectRecord, TaskRecord, generate
from tasks.muep.metadata import ObjectTypeRecord, SceneRecord
from tasks.params import Params, load_params
from tasks.progress import StageLog
from tasks.records import read_table, write_records

STAGE = "muep-generate"


@task(name="generate-tasks", cache_policy=NO_CACHE)
def generate_tasks(params: Params, slog: StageLog) -> dict:
    scenes_path = paths.MUEP_METADATA / "scenes.parquet"
    types_path = paths.MUEP_METADATA / "object_types.parquet"
    scenes = read_table(scenes_path, SceneRecord)
    object_types = read_table(types_path, ObjectTypeRecord)
    slog.read(scenes_path, f"{len(scenes)} scenes")
    slog.read(types_path)
    client = build_client(params.llm, paths.LLM_CACHE)
    tasks, rejects, report = generate(scenes, object_types, params.muep.generate, params.llm, client)
    out = paths.MUEP_GENERATE
    slog.wrote(out / "tasks.parquet", write_records(out / "tasks.parquet", tasks, TaskRecord))
    slog.wrote(out / "parse_rejects.parquet", write_records(out / "parse_rejects.parquet", rejects, ParseRejectRecord))
    report_path = paths.MUEP_REPORTS / "generate.json"
    write_json(report_path, report)
    slog.wrote(report_path)
    return report


@flow(name=STAGE)
def muep_generate(params_file: str | None = None) -> dict:
    """MuEP stage 2: in-context task generation with the configured LLM backend (offline by default)."""
    params = load_params(params_file)
    with StageLog(STAGE) as slog:
        return generate_tasks(params, slog)


if __name__ == "__main__":
    main(STAGE, muep_generate)
