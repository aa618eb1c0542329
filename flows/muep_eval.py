"""MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC metrics."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import defaultdict

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from flows._runtime import main
from flows.muep_demos import task_runner
from tasks import paths, tracking
from tasks.errors import PipelineError
from tasks.io import atomic_path, write_json
from tasks.muep.demo_reader import read_index
from tasks.muep.eval import metrics
from tasks.muep.eval.agents import AGENTS, AgentContext
from tasks.muep.eval.episodes import dataset_version, few_shot_examples, make_batches, select
from tasks.muep.eval.harness import EvalBatch, EvalSettings, run_batch
from tasks.muep.eval.records import EpisodeResult
from tasks.muep.eval.runs import EXPERIMENT, log_run
from tasks.params import load_params
from tasks.progress import Progress, StageLog

STAGE = "muep-eval"
log = logging.getLogger("embp")


def demos_dir():
    return paths.MUEP_DATA / "demos"


def out_dir():
    return paths.MUEP_DATA / "eval"


@task(name="evaluate-batch", cache_policy=NO_CACHE)
def evaluate_batch(batch: EvalBatch, settings: EvalSettings) -> list[EpisodeResult]:
    return run_batch(batch, settings)


def _write_jsonl(path, results: list[EpisodeResult]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
        for r in sorted(results, key=lambda r: r.episode_id):
            stream.write(json.dumps(r.to_json() | {"metrics": metrics.episode_metrics(r).__dict__},
                                    ensure_ascii=False) + "\n")


@flow(name=STAGE)
def _eval_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    ev = params.muep.eval
    demos = demos_dir()
    with StageLog(STAGE) as slog:
        index = read_index(demos)
        slog.read(demos / "episodes.parquet", f"{len(index)} episodes")
        infos = {name: AGENTS.get(name).describe(ev) for name in ev.agents}
        for name in ev.agents:  # missing model paths, a wrong key, an endpoint that does not answer: stop now
            AGENTS.get(name).preflight(ev)
        specs = select(index, ev.splits, ev.episodes, ev.seed)
        examples = (few_shot_examples(demos, ev.openai.few_shot, ev.seed)
                    if "openai" in ev.agents and ev.openai.few_shot else {})
        settings = EvalSettings(metadata_dir=str(paths.MUEP_METADATA), params=ev,
                                context=AgentContext(seed=ev.seed, history_window=params.muep.sft.history_window,
                                                     examples=examples))
        batches = make_batches(specs, [(n, infos[n].label) for n in ev.agents], ev.batch_size)
        log.info("[%s] %d agents x %d episodes (%s) in %d batches on %s x%d", STAGE, len(ev.agents), len(specs),
                 ", ".join(ev.splits), len(batches), ev.task_runner, ev.workers)
        results: dict[tuple[str, str], list[EpisodeResult]] = defaultdict(list)
        failures = []
        with Progress(len(specs) * len(ev.agents), f"{STAGE}: episodes", unit="episodes") as progress:
            futures = {evaluate_batch.submit(b, settings): b for b in batches}
            for future in as_completed(list(futures)):
                batch = futures[future]
                try:
                    results[(batch.agent, batch.split)] += future.result()
                except Exception as exc:  # noqa: BLE001 - reported together below
                    failures.append(f"{batch.batch_id}: {type(exc).__name__}: {exc}")
                progress.advance(len(batch.episodes))
        if failures:
            raise PipelineError(f"{len(failures)} of {len(batches)} evaluation batches failed "
                                f"({'; '.join(failures[:3])}).")

        version = dataset_version(paths.ROOT, demos)
        episodes_sha = hashlib.sha256((demos / "episodes.parquet").read_bytes()).hexdigest()[:16]
        grammar = ",".join(sorted({s.grammar for s in specs}))
        experiment_id = tracking.setup(params.tracking, EXPERIMENT)
        from mlflow import MlflowClient

        client = MlflowClient(tracking.tracking_uri(params.tracking))
        shutil.rmtree(out_dir(), ignore_errors=True)
        reports = {}
        for name in ev.agents:
            info = infos[name]
            agent_results = []
            for split in ev.splits:
                split_results = results[(name, split)]
                agent_results += split_results
                path = out_dir() / name / f"{split}.jsonl"
                _write_jsonl(path, split_results)
                run_params = {"agent": name, "label": info.label, "model": info.model, "adapter": info.adapter,
                              "grammar": grammar, "renderer": ev.renderer if info.multimodal else "none",
                              "dataset_version": version, "episodes_sha256": episodes_sha, "split": split,
                              "episodes": len(split_results), "max_steps": ev.max_steps,
                              "max_invalid_streak": ev.max_invalid_streak, "seed": ev.seed}
                if name == "openai":
                    o = ev.openai
                    run_params |= {"base_url": o.base_url or "", "temperature": o.temperature,
                                   "max_tokens": o.max_tokens, "few_shot": o.few_shot,
                                   "max_calls_per_episode": o.max_calls_per_episode}
                tags = {"agent": name, "agent_label": info.label, "split": split, "dataset_version": version,
                        "stage": STAGE}
                run_id, took = log_run(client, experiment_id, info.label, split, run_params, tags, split_results,
                                       path)
                log.info("[%s] MLflow run %s (%s, %s) logged in %.2f s", STAGE, run_id, info.label, split, took)
            report = metrics.report(agent_results) | {"agent": name, "label": info.label,
                                                      "dataset_version": version}
            target = paths.MUEP_REPORTS / f"eval_{name}.json"
            write_json(target, report)
            slog.wrote(target)
            reports[name] = report["overall"]
        return reports


def muep_eval(params_file: str | None = None) -> dict:
    """MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC."""
    ev = load_params(params_file).muep.eval
    return _eval_flow.with_options(task_runner=task_runner(ev))(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_eval)
