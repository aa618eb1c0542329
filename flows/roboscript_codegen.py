"""RoboScript stage 3: hierarchical code generation for every task query, each snippet checked; dataset card."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import paths
from tasks.llm import build_client
from tasks.params import Params, load_params
from tasks.progress import Progress, StageLog
from tasks.records import read_records, read_table
from tasks.roboscript import layout
from tasks.roboscript.card import data_metrics, dataset_card
from tasks.roboscript.codegen import (
    CodeJob,
    HelperRecord,
    HierarchicalGenerator,
    SnippetRecord,
    summarise,
    to_records,
)
from tasks.roboscript.queries import QueryRecord, QueryRejectRecord
from tasks.roboscript.render import render_grid
from tasks.roboscript.world_records import (
    CatalogRejectRecord,
    PlacementFailureRecord,
    WorldRecord,
)

STAGE = "roboscript-codegen"
GRID_WORLDS = 12


@task(name="generate-code", cache_policy=NO_CACHE)
def generate_code(params: Params, slog: StageLog) -> tuple[list[SnippetRecord], dict]:
    queries_path = layout.QUERIES / "queries.parquet"
    queries = read_records(queries_path, QueryRecord)
    slog.read(queries_path, f"{len(queries)} queries")
    cg = params.roboscript.codegen
    if cg.max_queries is not None:
        queries = queries[:cg.max_queries]
    jobs = [CodeJob(q.query_id, q.world_id, q.instruction, q.query) for q in queries]
    client = build_client(params.llm, layout.CODEGEN_CACHE)
    with Progress(len(jobs), f"{STAGE}: main-agent requests", unit="snippets") as progress:
        snippets = HierarchicalGenerator(client, params.llm, cg).generate(jobs, progress)
    rows, helpers = to_records(snippets)
    for name, records, cls in (("snippets.parquet", rows, SnippetRecord), ("helpers.parquet", helpers,
                                                                            HelperRecord)):
        slog.records(layout.CODEGEN / name, records, cls)
    report = summarise(rows, helpers, client)
    slog.write(layout.REPORTS / "codegen.json", report)
    return rows, report


@task(name="dataset-card", cache_policy=NO_CACHE)
def write_card(params: Params, rows: list[SnippetRecord], report: dict, slog: StageLog) -> dict:
    tables = {name: read_table(layout.WORLDS / f"{name}.parquet", cls) for name, cls in (
        ("worlds", WorldRecord), ("placement_failures", PlacementFailureRecord),
        ("catalog_rejects", CatalogRejectRecord))}
    queries = read_table(layout.QUERIES / "queries.parquet", QueryRecord)
    rejects = read_table(layout.QUERIES / "rejects.parquet", QueryRejectRecord)
    metrics = data_metrics(tables["worlds"], tables["placement_failures"], tables["catalog_rejects"], queries,
                           rejects, rows, report)
    slog.write(layout.REPORTS / "data.json", metrics)
    pictures = [paths.ROOT / p for p in tables["worlds"]["picture_file"].tolist()[:GRID_WORLDS]]
    grid = layout.REPORTS / "worlds_grid.png"
    render_grid(pictures, grid)
    slog.wrote(grid)
    cg = params.roboscript.codegen
    knobs = {"llm.backend": params.llm.backend, "llm.model": params.llm.model,
             "llm.temperature": params.llm.temperature, "roboscript.codegen.n_examples": cg.n_examples,
             "roboscript.codegen.max_depth": cg.max_depth, "roboscript.codegen.max_helpers": cg.max_helpers}
    card = layout.REPORTS / "dataset_card.md"
    slog.write(card, dataset_card(metrics, rows, grid.name, knobs))
    return metrics


@flow(name=STAGE)
def roboscript_codegen(params_file: str | None = None) -> dict:
    """RoboScript stage 3: hierarchical code generation for every task query, each snippet checked; dataset card."""
    params = load_params(params_file)
    with StageLog(STAGE) as slog:
        rows, report = generate_code(params, slog)
        return write_card(params, rows, report, slog)


if __name__ == "__main__":
    main(STAGE, roboscript_codegen)
