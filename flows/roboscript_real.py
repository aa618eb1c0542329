"""RoboScript with a real language model (``real_model.llm``, SmolLM2-135M-Instruct by default) on fixed slices: task
queries for the first worlds (the roboscript-queries prompt and parser), code for some kept queries (the hierarchical
generator and the code check of roboscript-codegen), and the code of Table I tasks run on the sandboxed runners -- a
Table II block in the leaderboard, marked with how many of the tasks it covers."""

from __future__ import annotations

import logging
import time

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._robot_pool import GOAL_THREADS, run_goals
from flows._runtime import main
from robot.contract.catalog import load_catalog
from tasks import tracking
from tasks.ladder import refusal_reasons
from tasks.llm import backend_kind, build_client, client_speed, describe_backend
from tasks.params import Params, load_params
from tasks.progress import Progress, StageLog
from tasks.records import read_table
from tasks.roboscript import layout
from tasks.roboscript.benchmark import load_benchmark
from tasks.roboscript.codegen import (
    CodeJob,
    HelperRecord,
    HierarchicalGenerator,
    SnippetRecord,
    summarise,
    to_records,
)
from tasks.roboscript.eval import evaluation
from tasks.roboscript.eval.leaderboard import EXPERIMENT as EVAL_EXPERIMENT
from tasks.roboscript.params import CodegenParams, QueriesParams
from tasks.roboscript.queries import QueryRecord, QueryRejectRecord, generate_queries
from tasks.roboscript.world_records import WorldRecord

STAGE = "roboscript-real"
log = logging.getLogger("embp")


def codegen_params(params: Params) -> CodegenParams:
    rs = params.real_model.roboscript
    return CodegenParams(n_examples=rs.n_examples, max_depth=rs.max_depth, max_helpers=rs.max_helpers)


@task(name="queries-and-code", cache_policy=NO_CACHE)
def queries_and_code(params: Params, client, slog: StageLog) -> dict:
    """Task queries for the first worlds, then code for the first kept queries; every reject with its reason."""
    rs, llm = params.real_model.roboscript, params.real_model.llm
    worlds_path = layout.WORLDS / "worlds.parquet"
    worlds = read_table(worlds_path, WorldRecord).sort_values("world_id").head(rs.worlds)
    slog.read(worlds_path, f"the first {len(worlds)} worlds")
    queries, rejects, qreport = generate_queries(
        worlds, QueriesParams(per_world=rs.queries_per_world, max_words=params.roboscript.queries.max_words),
        llm.model_copy(update={"max_tokens": rs.query_max_tokens}), client)
    jobs = [CodeJob(q.query_id, q.world_id, q.instruction, q.query) for q in queries[:rs.codegen_queries]]
    code_llm = llm.model_copy(update={"max_tokens": rs.code_max_tokens})
    with Progress(len(jobs), f"{STAGE}: code for kept queries", unit="snippets") as progress:
        snippets = HierarchicalGenerator(client, code_llm, codegen_params(params)).generate(jobs, progress)
    rows, helpers = to_records(snippets)
    for name, records, cls in (("queries.parquet", queries, QueryRecord), ("query_rejects.parquet", rejects,
                                                                           QueryRejectRecord),
                               ("snippets.parquet", rows, SnippetRecord), ("helpers.parquet", helpers, HelperRecord)):
        slog.records(layout.REAL / name, records, cls)
    code = summarise(rows, helpers, client)
    lines = qreport["queries"] + qreport["rejects"]
    return {"worlds": worlds.world_id.tolist(),
            "queries": {"requests": qreport["requests"], "lines": lines, "kept": qreport["queries"],
                        "rejected": qreport["rejects"], "rejects_by_reason": qreport["rejects_by_reason"]},
            "code_for_kept_queries": {k: code[k] for k in ("snippets", "passing", "failing", "pass_rate",
                                                             "failing_by_reason", "notes_by_reason", "helper_requests",
                                                             "helpers_defined")}}


@flow(name=STAGE, task_runner=GOAL_THREADS)
def roboscript_real(params_file: str | None = None) -> dict:
    """RoboScript with a real language model on fixed slices: queries, code, Table I on the sandboxed runners."""
    params = load_params(params_file)
    rs, llm = params.real_model.roboscript, params.real_model.llm
    ep = params.roboscript.eval.model_copy(update={"repeats": rs.repeats, "runners": rs.runners, "tasks": rs.tasks,
                                                   "code": "generate"})
    with StageLog(STAGE) as slog:
        benchmark = load_benchmark(load_catalog(), params.roboscript.worlds)
        tasks = evaluation.select_tasks(benchmark, rs.tasks)           # unknown task ids: an error before the model
        started = time.perf_counter()
        client = build_client(llm, layout.REAL_CACHE)
        loaded = time.perf_counter()
        data = queries_and_code(params, client, slog)
        code_llm = llm.model_copy(update={"max_tokens": rs.code_max_tokens})
        codes, _ = evaluation.generate_code(tasks, params, llm=code_llm, codegen=codegen_params(params), client=client)
        answered = time.perf_counter()
        model = f"{evaluation.coder_name(code_llm)} ({len(tasks)} of {len(benchmark)} tasks)"
        goals = {t.id: evaluation.goal_for(t, codes[t.id].code, ep) for t in tasks if t.id in codes}
        results, pool_info = run_goals(ep, goals, STAGE, "tasks")
        ran = time.perf_counter()
        report, details, facts = evaluation.build_report(tasks, codes, results, model, ep, pool_info)
        report["llm"] = describe_backend(code_llm)
        report["llm_kind"] = backend_kind(code_llm)
        report["code_checks"] = {"tasks": len(codes), "passing": sum(c.check_ok for c in codes.values()),
                                 "failing_by_reason": refusal_reasons(codes)}
        data |= {"model": describe_backend(llm), "kind": backend_kind(llm),
                 "sampling": {"temperature": llm.temperature, "top_p": llm.top_p, "seed": llm.seed,
                              "query_max_tokens": rs.query_max_tokens, "code_max_tokens": rs.code_max_tokens}}
        outputs = [slog.write(layout.REAL_REPORTS / "generate.json", data),
                   slog.write(layout.REAL_REPORTS / "eval.json", report),
                   slog.write(layout.REAL_REPORTS / "eval_details.json", details),
                   slog.write(layout.REAL_REPORTS / "table2.md",
                              evaluation.table2(report, [evaluation.run_record(report)]))]
        as_run = params.model_copy(update={"llm": code_llm,
                                           "roboscript": params.roboscript.model_copy(update={"eval": ep})})
        run_params, tags = evaluation.mlflow_fields(report, as_run)
        run_params |= {"tasks_of_benchmark": f"{len(tasks)} of {len(benchmark)}", "repeats": rs.repeats}
        tracking.log_run(params.tracking, EVAL_EXPERIMENT, model, run_params=run_params,
                         tags=tags | {"stage": STAGE}, metrics=evaluation.mlflow_metrics(report), artifacts=outputs,
                         dataset=evaluation.benchmark_dataset(goals), started_at=slog.started_at)
        # what this run measured (times, speed, the pool): run facts and MLflow, never the DVC outputs
        speed = {"load_s": round(loaded - started, 2), "answer_s": round(answered - loaded, 2),
                 "robot_s": round(ran - answered, 2), "llm_calls": client.calls,
                 "cache_hits": client.cache_hits} | client_speed(client)
        slog.run_facts(**facts, llm=speed)
        tracking.log_run(params.tracking, "real-model", STAGE, run_params={"model": report["llm"]}, metrics=speed,
                         tags={"stage": STAGE}, started_at=slog.started_at)
        log.info("[%s] %s: %d LLM calls (%d cached) in %.1f s; Table I %s", STAGE, report["llm"], client.calls,
                 client.cache_hits, answered - loaded, report["summary"])
        return report["summary"]


if __name__ == "__main__":
    main(STAGE, roboscript_real)
