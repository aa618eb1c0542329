"""The MuEP agent with a real language model: the model as published (zero-shot) and the baseline muep-real-train
fine-tuned from it play the same fixed slice of test episodes, each with the configured action selections; one MLflow
run per (row, split) in the muep-eval experiment, so the leaderboard shows them beside the other agents."""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.errors import ConfigError, PipelineError
from flows._runtime import fan_out, main, task_runner
from tasks import paths, tracking
from tasks.muep import layout
from tasks.muep.demo_reader import read_index
from tasks.muep.eval import metrics
from tasks.muep.eval.agents import AGENTS, AgentContext
from tasks.muep.eval.episodes import dataset_version, make_batches, select
from tasks.muep.eval.harness import EvalBatch, EvalSettings, run_batch
from tasks.muep.eval.records import EpisodeResult
from tasks.muep.eval.runs import log_run, run_fields, write_results
from tasks.params import EvalParams, HFAgentParams, Params, load_params
from tasks.progress import StageLog

STAGE = "muep-real-eval"
log = logging.getLogger("embp")


def rows(params: Params) -> dict[str, EvalParams]:
    """One ``muep.eval`` per row (model x action selection): the ``hf`` agent's block points at the model."""
    real = params.real_model.eval
    models = []
    if real.zero_shot:
        models.append(("zero-shot", real.zero_shot))
    if real.fine_tuned:
        folder = paths.ROOT / params.real_model.train.output_dir / real.fine_tuned
        if not (folder / "baseline.json").exists():
            raise ConfigError(f"real_model.eval.fine_tuned is {real.fine_tuned!r} but {paths.rel(folder)} holds no "
                              "finished training run (no baseline.json).",
                              hint="Run the muep-real-train stage first (`dvc repro muep-real-train`), or set "
                              "real_model.eval.fine_tuned: null.")
        models.append(("fine-tuned", str(folder)))
    out = {}
    for tag, model in models:
        for selection in real.action_selection:
            hf = HFAgentParams(model_path=model, action_selection=selection, dtype=real.dtype,
                               max_new_tokens=real.max_new_tokens, threads=real.threads)
            out[f"{tag}-{selection}"] = params.muep.eval.model_copy(update={"agents": ["hf"], "hf": hf,
                                                                          "splits": list(real.splits)})
    if not out:
        raise ConfigError("real_model.eval has neither zero_shot nor fine_tuned: nothing to evaluate.")
    return out


@task(name="evaluate-batch", cache_policy=NO_CACHE)
def evaluate_batch(batch: EvalBatch, settings: EvalSettings) -> tuple[list[EpisodeResult], dict]:
    """Play the batch; also return where the time went (for MLflow, never for the results)."""
    started, cpu = time.perf_counter(), time.process_time()
    results = run_batch(batch, settings).results
    decisions = sum(r.agent_calls for r in results)
    return results, {"wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu,
                     "decisions": decisions}


def compare(reports: dict[str, dict], selections: list[str]) -> dict:
    """What fine-tuning changed, per action selection, on the same episodes (rates in [0, 1]; differences)."""
    out = {}
    for selection in selections:
        before, after = reports.get(f"zero-shot-{selection}"), reports.get(f"fine-tuned-{selection}")
        if before is None or after is None:
            continue
        keys = ("sr", "gcs", "lc", "rdi", "pr", "is_all")
        out[selection] = {k: {"zero_shot": before["overall"].get(k), "fine_tuned": after["overall"].get(k),
                              "change": None if before["overall"].get(k) is None or after["overall"].get(k) is None
                              else round(after["overall"][k] - before["overall"][k], 4)} for k in keys}
    return out


@flow(name=f"{STAGE}-batches")
def _evaluate(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    real = params.real_model.eval
    with StageLog(STAGE) as slog:
        index = read_index(layout.DEMOS)
        slog.read(layout.EPISODES, f"{len(index)} episodes")
        variants = rows(params)
        for ev in variants.values():
            AGENTS.load("hf").preflight(ev)
        infos = {row: AGENTS.load("hf").describe(ev) for row, ev in variants.items()}
        ev0 = params.muep.eval
        specs = select(index, real.splits, real.episodes, ev0.seed)
        context = AgentContext(seed=ev0.seed, history_window=params.muep.sft.history_window)
        jobs = {}
        size = real.batch_size or len(specs)       # default: a row's episodes in one batch, one model load
        for row, ev in variants.items():
            settings = EvalSettings(metadata_dir=str(layout.METADATA), params=ev, context=context,
                                    alfworld_metadata_dir=str(layout.ALFWORLD_METADATA))
            for batch in make_batches(specs, [("hf", infos[row].label)], size):   # muep-eval's batching
                batch = replace(batch, batch_id=f"{row}/{batch.batch_id}")
                jobs[batch.batch_id] = (batch, settings)
        log.info("[%s] %d rows x %d episodes (%s) in %d batches on %s x%d", STAGE, len(variants), len(specs),
                 ", ".join(real.splits), len(jobs), real.task_runner, real.workers)
        done, failures = fan_out(evaluate_batch, jobs, STAGE, "episodes", weight=lambda i: len(jobs[i][0].episodes))
        if failures:
            raise PipelineError(f"{len(failures)} of {len(jobs)} real-model evaluation batches failed "
                                f"({'; '.join(failures[:3])}).")
        results: dict[tuple[str, str], list[EpisodeResult]] = defaultdict(list)
        timing: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for batch_id, (batch_results, spent) in done.items():
            row = batch_id.split("/", 1)[0]
            for result in batch_results:
                results[(row, result.split)].append(result)
            for key, value in spent.items():
                timing[row][key] += value

        version = dataset_version(paths.ROOT, layout.DEMOS)
        episodes_sha = hashlib.sha256(layout.EPISODES.read_bytes()).hexdigest()[:16]
        grammar = ",".join(sorted({s.grammar for s in specs}))
        shutil.rmtree(layout.REAL_EVAL, ignore_errors=True)
        reports = {}
        for row, ev in variants.items():
            info = infos[row]
            row_results = []
            for split in real.splits:
                split_results = results[(row, split)]
                row_results += split_results
                path = write_results(layout.REAL_EVAL / row / f"{split}.jsonl", split_results)
                run_params, tags = run_fields("hf", info, ev, split, len(split_results), version, episodes_sha,
                                              grammar)
                run_params |= {"action_selection": ev.hf.action_selection, "dtype": ev.hf.dtype, "row": row}
                log_run(params.tracking, info.label, split, run_params, tags | {"real_model_row": row},
                        split_results, path)
            model = paths.rel(Path(info.model)) if Path(info.model).is_absolute() else info.model
            reports[row] = metrics.report(row_results) | {"label": info.label, "model": model,
                                                           "action_selection": ev.hf.action_selection}
        report = {"episodes": [s.episode_id for s in specs], "splits": list(real.splits),
                  "episodes_per_split": real.episodes, "dataset_version": version, "rows": reports,
                  "fine_tuning_effect": compare(reports, list(real.action_selection)),
                  "rules": {"max_steps": ev0.max_steps, "max_invalid_streak": ev0.max_invalid_streak}}
        slog.write(layout.REAL_REPORTS / "eval.json", report)
        speed = {f"{row}/{k}": v for row, t in timing.items() for k, v in t.items()}
        speed |= {f"{row}/cpu_s_per_decision": t["cpu_s"] / t["decisions"] for row, t in timing.items()
                  if t["decisions"]}
        slog.run_facts(rows={row: {k: round(v, 3) for k, v in speed.items() if k.startswith(f"{row}/")}
                             for row in variants})      # times: run facts and MLflow, never the DVC outputs
        tracking.log_run(params.tracking, "real-model", STAGE, run_params={"rows": ",".join(variants),
                         "episodes": len(specs), "workers": real.workers}, metrics=speed, tags={"stage": STAGE},
                         started_at=slog.started_at)
        for row, t in timing.items():
            log.info("[%s] %s: %d decisions, %.2f CPU s each (%.0f s wall in its batches)", STAGE, row,
                     t["decisions"], t["cpu_s"] / max(1, t["decisions"]), t["wall_s"])
        return {row: r["overall"] for row, r in reports.items()}


@flow(name=STAGE)
def muep_real_eval(params_file: str | None = None) -> dict:
    """The MuEP agent with a real language model, zero-shot and fine-tuned, on the same slice of test episodes."""
    real = load_params(params_file).real_model.eval
    runner = task_runner(real.task_runner, real.workers)
    return _evaluate.with_options(task_runner=runner)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_real_eval)
