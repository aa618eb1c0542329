"""The model ladder on RoboScript: each local model of ``ladder.models``, served by llama.cpp and asked through the
``openai`` backend like any OpenAI-compatible endpoint, writes the Table I tasks' code with the project's own prompts
and hierarchical generator (nothing tuned per model, greedy); the code is checked and run ``repeats`` times on the
sandboxed runners; one Table II block per model beside the template coder and the paper's rows, with 95 % intervals
over repeats and the code check's refusals by reason. docs/ladder.md."""

from __future__ import annotations

import logging
import time

from prefect import flow

from flows._robot_pool import GOAL_THREADS, run_goals
from flows._runtime import main
from robot.contract.catalog import load_catalog
from tasks import tracking
from tasks.ladder import (answer_cache, code_checks, ladder_eval_params, ladder_report, model_label, served_llm,
                          server_log)
from tasks.llm import build_client
from tasks.models import files
from tasks.models.llama_server import LlamaServer, OnDemandBackend
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.roboscript import layout
from tasks.roboscript.benchmark import load_benchmark
from tasks.roboscript.eval import evaluation
from tasks.roboscript.eval.leaderboard import EXPERIMENT as EVAL_EXPERIMENT

STAGE = "ladder-roboscript"
LADDER_OFF = ("# Table II, the model ladder\n\nOff: `ladder.models` is empty (the paper profile; the ladder profile "
              "runs every model: docs/ladder.md).\n")
log = logging.getLogger("embp")
LADDER_ROWS = ("Our rows are the model ladder (`dvc repro ladder-roboscript`, docs/ladder.md): each local GGUF model, "
               "served by llama.cpp and asked through the `openai` backend with the project's prompts (greedy), wrote "
               "the code; `ladder.roboscript.repeats` repeats on the PyBullet sim (the ladder profile: 10). The "
               "template coder's row is in reports/roboscript/table2.md.")


@flow(name=STAGE, task_runner=GOAL_THREADS)
def ladder_roboscript(params_file: str | None = None) -> dict:
    """The model ladder on RoboScript's Table I: code from each local model, run on the sandboxed runners."""
    params = load_params(params_file)
    ladder = params.ladder
    ep = ladder_eval_params(params)
    with StageLog(STAGE) as slog:
        benchmark = load_benchmark(load_catalog(), params.roboscript.worlds)
        tasks = evaluation.select_tasks(benchmark, ladder.roboscript.tasks)
        if not ladder.models:
            log.info("[%s] ladder.models is empty: the ladder is off (the ladder profile runs it)", STAGE)
            for folder in (layout.LADDER_CACHE, layout.GOAL_RESULTS / STAGE):   # kept: answers and finished goals
                folder.mkdir(parents=True, exist_ok=True)
            slog.write(layout.LADDER_REPORTS / "roboscript.json", ladder_report({}, params))
            slog.write(layout.LADDER_REPORTS / "roboscript_details.json", {})
            slog.write(layout.LADDER_REPORTS / "table2.md", LADDER_OFF)
            return {}
        for name in ladder.models:            # every model's file before the first answer: a missing one fails now
            files.gguf_path(files.get(name), "ladder.models")
        codes, speed = {}, {}
        for name in ladder.models:
            server = LlamaServer(name, ladder.serve, server_log(STAGE, name))
            llm = served_llm(ladder, name, server.base_url)
            client = build_client(llm, answer_cache(layout.LADDER_CACHE, name, ladder.serve))
            client.backend = OnDemandBackend(client.backend, server)
            started = time.perf_counter()
            try:
                codes[name], _ = evaluation.generate_code(tasks, params, llm=llm, client=client)
            finally:
                server.stop()
            speed[name] = {"answer_s": round(time.perf_counter() - started, 2), "llm_calls": client.calls,
                           "cache_hits": client.cache_hits}
            log.info("[%s] %s: %d LLM calls (%d cached) in %.1f s; %d of %d snippets pass the check", STAGE, name,
                     client.calls, client.cache_hits, speed[name]["answer_s"],
                     sum(c.check_ok for c in codes[name].values()), len(codes[name]))
        goals = {f"{name}__{t.id}": evaluation.goal_for(t, codes[name][t.id].code, ep)
                 for name in ladder.models for t in tasks if t.id in codes[name]}
        results, pool_info = run_goals(ep, goals, STAGE, "tasks")
        reports, all_details = {}, {}
        for name in ladder.models:
            mine = {key.split("__", 1)[1]: value for key, value in results.items() if key.startswith(f"{name}__")}
            report, details, facts = evaluation.build_report(tasks, codes[name], mine, model_label(name), ep,
                                                             pool_info)
            report |= {"provenance": files.provenance(files.get(name)), "code_checks": code_checks(codes[name]),
                       "tasks_of_benchmark": f"{len(tasks)} of {len(benchmark)}"}
            reports[name], all_details[name] = report, details
            run_params, tags = evaluation.mlflow_fields(report, params.model_copy(update={
                "llm": served_llm(ladder, name, "http://127.0.0.1/v1"),
                "roboscript": params.roboscript.model_copy(update={"eval": ep})}))
            run_params |= {"tasks_of_benchmark": report["tasks_of_benchmark"], "gguf_sha256": files.get(name).sha256,
                           "packages": " ".join(files.get(name).requirements), "server_threads": ladder.serve.threads,
                           "server_n_batch": ladder.serve.n_batch,
                           "max_tokens": ladder.max_tokens}
            tracking.log_run(params.tracking, EVAL_EXPERIMENT, report["model"], run_params=run_params,
                             tags=tags | {"stage": STAGE, "ladder": "true"},
                             metrics=evaluation.mlflow_metrics(report), dataset=evaluation.benchmark_dataset(goals),
                             started_at=slog.started_at)
            slog.run_facts(**{f"{name}.{k}": v for k, v in facts.items()})
        summary = ladder_report(reports, params)
        slog.write(layout.LADDER_REPORTS / "roboscript.json", summary)
        slog.write(layout.LADDER_REPORTS / "roboscript_details.json", all_details)
        slog.write(layout.LADDER_REPORTS / "table2.md",
                   evaluation.table2(next(iter(reports.values())), [evaluation.run_record(r) for r in reports.values()],
                                     origin=LADDER_ROWS))
        slog.run_facts(llm=speed)
        return {name: r["summary"] for name, r in reports.items()}


if __name__ == "__main__":
    main(STAGE, ladder_roboscript)
