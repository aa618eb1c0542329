"""MuEP task generation by a real language model (``real_model.llm``, SmolLM2-135M-Instruct by default) on a fixed
slice of scenes: the muep-generate prompt, parser and the muep-filter checks, with every reject counted by reason."""

from __future__ import annotations

import logging
import time

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import tracking
from tasks.llm import backend_kind, build_client, client_speed, describe_backend
from tasks.muep import layout
from tasks.muep.filter import RejectedTask, filter_tasks, scene_facts
from tasks.muep.generate import ParseRejectRecord, TaskRecord, generate
from tasks.muep.metadata import InstanceRecord, ObjectTypeRecord, SceneRecord
from tasks.params import GenerateParams, Params, load_params
from tasks.progress import StageLog
from tasks.records import read_table

STAGE = "muep-real-generate"
log = logging.getLogger("embp")


def slice_scenes(scenes, n: int):
    """The first ``n`` scenes taken round-robin over room types (by floorplan number within a type): 1 = FloorPlan1,
    4 = one kitchen, living room, bedroom and bathroom."""
    ordered = scenes.sort_values("floorplan").copy()
    ordered["_rank"] = ordered.groupby("room_type").cumcount()
    return ordered.sort_values(["_rank", "floorplan"]).head(n).drop(columns="_rank")


@task(name="generate-with-real-model", cache_policy=NO_CACHE)
def generate_slice(params: Params, slog: StageLog) -> dict:
    real = params.real_model
    scenes = read_table(layout.SCENES, SceneRecord)
    object_types = read_table(layout.OBJECT_TYPES, ObjectTypeRecord)
    instances = read_table(layout.METADATA / "instances.parquet", InstanceRecord)
    slog.read(layout.SCENES, f"{len(scenes)} scenes")
    chosen = slice_scenes(scenes, real.generate.muep_scenes)
    gen = GenerateParams(tasks_per_request=real.generate.tasks_per_request, requests_per_scene=1,
                         n_examples=real.generate.n_examples)
    llm = real.llm.model_copy(update={"max_tokens": real.generate.muep_max_tokens})
    started = time.perf_counter()
    client = build_client(llm, layout.REAL_LLM_CACHE)
    loaded = time.perf_counter()
    tasks, parse_rejects, generated = generate(chosen, object_types, gen, llm, client)
    answered = time.perf_counter()
    accepted, rejected, filtered = filter_tasks(tasks, scene_facts(scenes, object_types, instances))
    out = layout.REAL_GENERATE
    for name, rows, cls in (("tasks.parquet", tasks, TaskRecord), ("parse_rejects.parquet", parse_rejects,
                                                                    ParseRejectRecord),
                            ("accepted.parquet", accepted, TaskRecord), ("rejected.parquet", rejected, RejectedTask)):
        slog.records(out / name, rows, cls)
    lines = generated["tasks_parsed"] + generated["lines_rejected"]
    report = {
        "model": describe_backend(llm), "kind": backend_kind(llm),
        "scenes": chosen.scene.tolist(), "tasks_per_request": gen.tasks_per_request,
        "sampling": {"temperature": llm.temperature, "top_p": llm.top_p, "max_tokens": llm.max_tokens,
                     "seed": llm.seed},
        "answers": {"requests": generated["requests"], "truncated": generated["truncated_responses"],
                    "lines": lines},
        "parser": {"tasks_parsed": generated["tasks_parsed"], "lines_rejected": generated["lines_rejected"],
                   "rejected_by_reason": generated["rejected_by_reason"]},
        "filter": {k: filtered[k] for k in ("proposed", "accepted", "rejected", "acceptance_rate",
                                            "rejected_by_reason", "accepted_by_type")},
        "accepted_of_asked": f"{filtered['accepted']} of {gen.tasks_per_request * len(chosen)}",
    }
    slog.write(layout.REAL_REPORTS / "generate.json", report)
    timing = {"load_s": round(loaded - started, 2), "answer_s": round(answered - loaded, 2),
              "llm_calls": client.calls, "cache_hits": client.cache_hits} | client_speed(client)
    slog.run_facts(llm=timing)           # what this run measured: run facts and MLflow, never the DVC outputs
    tracking.log_run(params.tracking, "real-model", STAGE, run_params={"model": report["model"],
                     "scenes": len(chosen), "tasks_per_request": gen.tasks_per_request},
                     metrics=timing | {"accepted": filtered["accepted"], "tasks_parsed": generated["tasks_parsed"]},
                     tags={"stage": STAGE}, started_at=slog.started_at)
    log.info("[%s] %d requests (%d calls, %d cached) in %.1f s; %d tasks parsed, %d lines rejected, %d accepted by "
             "the filter", STAGE, generated["requests"], client.calls, client.cache_hits, answered - loaded,
             generated["tasks_parsed"], generated["lines_rejected"], filtered["accepted"])
    return report


@flow(name=STAGE)
def muep_real_generate(params_file: str | None = None) -> dict:
    """MuEP task generation by a real language model on a fixed slice of scenes, through the same parser and filter."""
    params = load_params(params_file)
    with StageLog(STAGE) as slog:
        return generate_slice(params, slog)


if __name__ == "__main__":
    main(STAGE, muep_real_generate)
