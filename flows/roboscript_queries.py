"""RoboScript stage 2: the LLM suggests task queries for each world's scene text; one query per parsed line."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks.llm import build_client
from tasks.params import Params, load_params
from tasks.progress import StageLog
from tasks.records import read_table
from tasks.roboscript import layout
from tasks.roboscript.queries import QueryRecord, QueryRejectRecord, generate_queries
from tasks.roboscript.world_records import WorldRecord

STAGE = "roboscript-queries"


@task(name="suggest-tasks", cache_policy=NO_CACHE)
def suggest_tasks(params: Params, slog: StageLog) -> dict:
    worlds_path = layout.WORLDS / "worlds.parquet"
    worlds = read_table(worlds_path, WorldRecord)
    slog.read(worlds_path, f"{len(worlds)} worlds")
    client = build_client(params.llm, layout.QUERIES_CACHE)
    queries, rejects, report = generate_queries(worlds, params.roboscript.queries, params.llm, client)
    for name, rows, cls in (("queries.parquet", queries, QueryRecord), ("rejects.parquet", rejects,
                                                                         QueryRejectRecord)):
        slog.records(layout.QUERIES / name, rows, cls)
    slog.write(layout.REPORTS / "queries.json", report)
    return report


@flow(name=STAGE)
def roboscript_queries(params_file: str | None = None) -> dict:
    """RoboScript stage 2: the LLM suggests task queries for each world's scene text; one query per parsed line."""
    params = load_params(params_file)
    with StageLog(STAGE) as slog:
        return suggest_tasks(params, slog)


if __name__ == "__main__":
    main(STAGE, roboscript_queries)
