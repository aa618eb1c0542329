"""MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC metrics."""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections import defaultdict

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.errors import PipelineError
from flows._runtime import fan_out, main, task_runner
from tasks import paths
from tasks.muep import layout
from tasks.muep.demo_reader import read_index
from tasks.muep.eval import metrics
from tasks.muep.eval.agents import AGENTS, AgentContext
from tasks.muep.eval.episodes import (
    dataset_version,
    few_shot_examples,
    make_batches,
    select,
)
from tasks.muep.eval.harness import EvalBatch, EvalSettings, run_batch
from tasks.muep.eval.records import EpisodeResult
from tasks.muep.eval.runs import log_run, run_fields, write_results
from tasks.params import load_params
from tasks.progress import StageLog

STAGE = "muep-eval"
log = logging.getLogger("embp")


@task(name="evaluate-batch", cache_policy=NO_CACHE)
def evaluate_batch(batch: EvalBatch, settings: EvalSettings) -> list[EpisodeResult]:
    return run_batch(batch, settings)


@flow(name=f"{STAGE}-batches")
def _evaluate(params_file: str | None = None) -> dict:
    """Plays every (agent, episode) batch on the task runner ``muep_eval`` chose; writes results and MLflow runs."""
    params = load_params(params_file)
    ev = params.muep.eval
    demos = layout.DEMOS
    with StageLog(STAGE) as slog:
        index = read_index(demos)
        slog.read(layout.EPISODES, f"{len(index)} episodes")
        infos = {name: AGENTS.load(name).describe(ev) for name in ev.agents}
        for name in ev.agents:  # missing model paths, a wrong key, an endpoint that does not answer: stop now
            AGENTS.load(name).preflight(ev)
        specs = select(index, ev.splits, ev.episodes, ev.seed)
        examples = (few_shot_examples(demos, ev.openai.few_shot, ev.seed)
                    if "openai" in ev.agents and ev.openai.few_shot else {})
        settings = EvalSettings(metadata_dir=str(layout.METADATA), params=ev,
                                context=AgentContext(seed=ev.seed, history_window=params.muep.sft.history_window,
                                                     examples=examples))
        batches = {b.batch_id: b for b in make_batches(specs, [(n, infos[n].label) for n in ev.agents],
                                                      ev.batch_size)}
        log.info("[%s] %d agents x %d episodes (%s) in %d batches on %s x%d", STAGE, len(ev.agents), len(specs),
                 ", ".join(ev.splits), len(batches), ev.task_runner, ev.workers)
        done, failures = fan_out(evaluate_batch, {i: (b, settings) for i, b in batches.items()}, STAGE, "episodes",
                                 weight=lambda i: len(batches[i].episodes))
        if failures:
            raise PipelineError(f"{len(failures)} of {len(batches)} evaluation batches failed "
                                f"({'; '.join(failures[:3])}).")
        results: dict[tuple[str, str], list[EpisodeResult]] = defaultdict(list)
        for batch_id, batch_results in done.items():
            results[(batches[batch_id].agent, batches[batch_id].split)] += batch_results

        version = dataset_version(paths.ROOT, demos)
        episodes_sha = hashlib.sha256(layout.EPISODES.read_bytes()).hexdigest()[:16]
        grammar = ",".join(sorted({s.grammar for s in specs}))
        shutil.rmtree(layout.EVAL, ignore_errors=True)
        reports = {}
        for name in ev.agents:
            info = infos[name]
            agent_results = []
            for split in ev.splits:
                split_results = results[(name, split)]
                agent_results += split_results
                path = write_results(layout.EVAL / name / f"{split}.jsonl", split_results)
                run_params, tags = run_fields(name, info, ev, split, len(split_results), version, episodes_sha,
                                              grammar)
                run_id, took = log_run(params.tracking, info.label, split, run_params, tags, split_results, path)
                log.info("[%s] MLflow run %s (%s, %s) logged in %.2f s", STAGE, run_id, info.label, split, took)
            report = metrics.report(agent_results) | {"agent": name, "label": info.label,
                                                      "dataset_version": version}
            slog.write(layout.REPORTS / f"eval_{name}.json", report)
            reports[name] = report["overall"]
        return reports


@flow(name=STAGE)
def muep_eval(params_file: str | None = None) -> dict:
    """MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC."""
    ev = load_params(params_file).muep.eval
    runner = task_runner(ev.task_runner, ev.workers, ev.dask_address)
    return _evaluate.with_options(task_runner=runner)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_eval)
