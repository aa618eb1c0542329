"""MuEP stage 2: in-context task generation with the configured LLM backend (offline by default)."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks.llm import build_client
from tasks.muep import layout
from tasks.muep.generate import ParseRejectRecord, TaskRecord, generate
from tasks.muep.metadata import ObjectTypeRecord, SceneRecord
from tasks.params import Params, load_params
from tasks.progress import StageLog
from tasks.records import read_table

STAGE = "muep-generate"


@task(name="generate-tasks", cache_policy=NO_CACHE)
def generate_tasks(params: Params, slog: StageLog) -> dict:
    scenes = read_table(layout.SCENES, SceneRecord)
    object_types = read_table(layout.OBJECT_TYPES, ObjectTypeRecord)
    slog.read(layout.SCENES, f"{len(scenes)} scenes")
    slog.read(layout.OBJECT_TYPES)
    client = build_client(params.llm, layout.LLM_CACHE)
    tasks, rejects, report = generate(scenes, object_types, params.muep.generate, params.llm, client)
    slog.records(layout.TASKS, tasks, TaskRecord)
    slog.records(layout.PARSE_REJECTS, rejects, ParseRejectRecord)
    slog.write(layout.REPORTS / "generate.json", report)
    return report


@flow(name=STAGE)
def muep_generate(params_file: str | None = None) -> dict:
    """MuEP stage 2: in-context task generation with the configured LLM backend (offline by default)."""
    params = load_params(params_file)
    with StageLog(STAGE) as slog:
        return generate_tasks(params, slog)


if __name__ == "__main__":
    main(STAGE, muep_generate)
