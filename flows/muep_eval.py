"""MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC metrics."""

from __future__ import annotations

import hashlib
import logging
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.errors import DataError, PipelineError
from flows._imports import code_digest
from flows._runtime import fan_out, main, task_runner
from tasks import paths
from tasks.muep import layout
from tasks.muep.demo_reader import read_index
from tasks.muep.eval import metrics
from tasks.muep.eval.agents import AGENTS, AgentContext
from tasks.muep.eval.episodes import (
    BATCHING,
    SOURCES,
    check_index,
    dataset_version,
    few_shot_examples,
    make_batches,
    select,
)
from tasks.muep.eval.harness import EvalBatch, EvalSettings, run_batch
from tasks.muep.eval.runs import log_run, run_fields, write_results
from tasks.muep.eval.store import EvalStore, file_digest, fingerprint
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.viewer import muep as viewer

STAGE = "muep-eval"
log = logging.getLogger("embp")

#: Per dataset: its DVC stage, output directory, episodes table and scene metadata.
DATASETS = {"demos": ("muep-demos", layout.DEMOS, layout.EPISODES, layout.METADATA),
            "alfworld": ("muep-alfworld", layout.ALFWORLD, layout.ALFWORLD_EPISODES, layout.ALFWORLD_METADATA)}
#: ``muep.eval`` keys that only choose or schedule the work: not part of an agent's fingerprint.
SCHEDULING = {"agents", "splits", "episodes", "alfworld_episodes", "batch_size", "task_runner", "workers",
              "dask_address"}


@task(name="evaluate-batch", cache_policy=NO_CACHE)
def evaluate_batch(batch: EvalBatch, settings: EvalSettings, work_dir: str) -> dict:
    """Play the batch, then commit it to the work directory (from the worker: a kill after this keeps it). Returns
    where its time went (run facts: never in the work directory, the results or the reports)."""
    output = run_batch(batch, settings)
    EvalStore(Path(work_dir)).commit(batch, output)
    return {"pid": output.pid, "max_rss_mb": output.max_rss_mb, "announce_s": round(output.announce_s, 4),
            "agents": sorted(label for _, label in batch.agents), "episodes": [asdict(t) for t in output.timings]}


def _read(source: str, slog: StageLog) -> pd.DataFrame:
    stage, _, table, metadata = DATASETS[source]
    if source == "demos":
        index = read_index(layout.DEMOS)
    else:
        if not table.exists():
            raise DataError(f"{table} does not exist: muep.eval.splits lists ALFWorld's test games "
                            f"({', '.join(s for s, src in SOURCES.items() if src == source)}).",
                            hint=f"Run the {stage} stage first (`dvc repro {stage}`), or drop those splits from "
                            "muep.eval.splits.")
        index = pd.read_parquet(table)
    if not (metadata / "scenes.parquet").exists():
        raise DataError(f"{metadata}/scenes.parquet does not exist: the scene metadata of {table}.",
                        hint=f"Run the {stage} stage first (`dvc repro {stage}`).")
    slog.read(table, f"{len(index)} episodes")
    return check_index(index, table)


def _data_files(source: str) -> list[Path]:
    _, _, table, metadata = DATASETS[source]
    return [table, *sorted(metadata.glob("*.parquet"))]


def _timing_summary(timings: list[dict]) -> str:
    rows = [e for t in timings for e in t["episodes"]]
    if not rows:
        return "no new agent-episodes timed"
    n = len(rows)
    parts = {p: sum(r[f"{p}_s"] for r in rows) / n for p in ("load", "game", "agent", "metrics", "total")}
    rss = defaultdict(float)
    for run in timings:
        rss[run["pid"]] = max(rss[run["pid"]], run["max_rss_mb"])
    return (f"{n} agent-episodes timed: per agent-episode " + ", ".join(f"{p} {v:.3f} s" for p, v in parts.items())
            + f"; peak RSS per worker {statistics.median(rss.values()):.0f} MB median, {max(rss.values()):.0f} MB max")


@flow(name=f"{STAGE}-batches")
def _evaluate(params_file: str | None = None) -> dict:
    """Plays the pending (batch, agent) pairs on the task runner ``muep_eval`` chose, then writes the results,
    reports and MLflow runs from every finished batch."""
    params = load_params(params_file)
    ev = params.muep.eval
    clock = {"start": time.perf_counter()}
    with StageLog(STAGE) as slog:
        sources = list(dict.fromkeys(SOURCES[s] for s in ev.splits))
        index = pd.concat([_read(source, slog) for source in sources], ignore_index=True)
        infos = {name: AGENTS.load(name).describe(ev) for name in ev.agents}
        for name in ev.agents:  # missing model paths, a wrong key, an endpoint that does not answer: stop now
            AGENTS.load(name).preflight(ev)
        caps = {s: ev.alfworld_episodes for s in ev.splits if SOURCES[s] == "alfworld"}
        specs = select(index, ev.splits, ev.episodes, ev.seed, caps)
        too_long = [s.episode_id for s in specs if len(s.expert_actions) > ev.max_steps]
        if too_long:  # the oracle cannot win them: SR < 1 says the cap, not the harness
            log.warning("[%s] %d episode(s) need more actions than muep.eval.max_steps=%d (expert plan), e.g. %s: "
                        "an agent that needs as many cannot win them", STAGE, len(too_long), ev.max_steps,
                        too_long[0])
        examples = (few_shot_examples(layout.DEMOS, ev.openai.few_shot, ev.seed)
                    if "openai" in ev.agents and ev.openai.few_shot else {})
        context = AgentContext(seed=ev.seed, history_window=params.muep.sft.history_window, examples=examples)
        settings = EvalSettings(metadata_dir=str(layout.METADATA), params=ev, context=context,
                                alfworld_metadata_dir=str(layout.ALFWORLD_METADATA),
                                images_dir=str(layout.EVAL_WORK / "images"))
        batches = make_batches(specs, [(n, infos[n].label) for n in ev.agents], ev.batch_size)

        code = code_digest("flows.muep_eval")
        data = {s: file_digest(_data_files(s)) for s in sources}
        rules = {"max_steps": ev.max_steps, "loop_stop": ev.loop_stop, "max_invalid_streak": ev.max_invalid_streak,
                 "seed": ev.seed}
        common = fingerprint(code, data, [(s.source, s.episode_id) for s in specs], BATCHING, ev.batch_size, rules)
        agent_settings = ev.model_dump(mode="json", exclude=SCHEDULING)
        context_fp = fingerprint(asdict(context))
        agent_fps = {n: fingerprint(n, asdict(infos[n]), agent_settings, context_fp) for n in ev.agents}
        store = EvalStore(layout.EVAL_WORK, common, agent_fps)
        for what, why in store.prepare().items():
            log.info("[%s] discarded the finished batches of %s: %s", STAGE, what, why)
        pending = store.pending(batches)
        total = sum(b.agent_episodes for b in batches)
        todo = sum(b.agent_episodes for b in pending)
        log.info("[%s] %d agents x %d episodes (%s) in %d batches: %d agent-episodes, %d already done, %d to play "
                 "on %s x%d", STAGE, len(ev.agents), len(specs), ", ".join(ev.splits), len(batches), total,
                 total - todo, todo, ev.task_runner, ev.workers)
        by_id = {b.batch_id: b for b in pending}
        clock["play"] = time.perf_counter()
        played, failures = fan_out(evaluate_batch, {i: (b, settings, str(layout.EVAL_WORK)) for i, b in by_id.items()},
                              STAGE, "agent-episodes", weight=lambda i: by_id[i].agent_episodes)
        if failures:
            raise PipelineError(f"{len(failures)} of {len(pending)} evaluation batches failed "
                                f"({'; '.join(failures[:3])}).",
                                hint="Finished batches are kept; rerun the stage to play only the missing ones.")
        clock["write"] = time.perf_counter()
        timings = [played[i] for i in sorted(played)]  # this run's batches only (a resumed run's others are not)
        log.info("[%s] %s", STAGE, _timing_summary(timings))
        timing_by = {(e["agent"], e["episode_id"]): e for t in timings for e in t["episodes"]}

        versions, shas = {}, {}
        for source in sources:
            stage, out_dir, table, _ = DATASETS[source]
            versions[source] = dataset_version(paths.ROOT, out_dir, table, stage)
            shas[source] = hashlib.sha256(table.read_bytes()).hexdigest()[:16]
        grammar = ",".join(sorted({s.grammar for s in specs}))
        batch_ids = [b.batch_id for b in batches]
        shutil.rmtree(layout.EVAL, ignore_errors=True)
        by_agent = {}
        for name in ev.agents:
            by_agent[name] = defaultdict(list)
            for r in store.results(name, batch_ids):
                by_agent[name][r.split].append(r)
        clock["viewer"] = time.perf_counter()
        shown_runs = [(n, infos[n].label, s, by_agent[n][s]) for n in ev.agents for s in ev.splits]
        viewer.sweep_images(settings.images_dir, shown_runs)
        shown, _ = viewer.build(layout.VIEWER, shown_runs, settings.images_dir)
        clock["viewer"] = time.perf_counter() - clock["viewer"]
        slog.wrote(layout.VIEWER / "index.html")
        log.info("[%s] episode viewer: %s/index.html (%d pages, %d images, %.1f MB, %.1f s)", STAGE,
                 paths.rel(layout.VIEWER), shown["pages"], shown["images"], shown["bytes"] / 1e6, clock["viewer"])
        staging = tempfile.TemporaryDirectory(prefix="embp-viewer-")
        reports = {}
        mlflow_s = 0.0
        for name in ev.agents:
            info = infos[name]
            by_split = by_agent[name]
            agent_results = []
            for split in ev.splits:
                split_results = by_split[split]
                agent_results += split_results
                source = SOURCES[split]
                path = write_results(layout.EVAL / name / f"{split}.jsonl", split_results)
                pages, book = viewer.stage_artifact(info.label, split, split_results, settings.images_dir,
                                                    Path(staging.name) / f"{name}-{split}")
                run_fp = fingerprint(common, agent_fps[name], split, versions[source])
                run_params, tags = run_fields(name, info, ev, split, len(split_results), versions[source],
                                              shas[source], grammar, DATASETS[source][0], run_fp)
                run_timings = [timing_by[k] for r in split_results if (k := (r.agent, r.episode_id)) in timing_by]
                run_id, took, new = log_run(params.tracking, info.label, split, run_params, tags, split_results, path,
                                            run_timings, viewer=pages)
                mlflow_s += took
                log.info("[%s] MLflow run %s (%s, %s) %s in %.2f s; its viewer/episodes.html: %.2f MB, %d images"
                         "%s", STAGE, run_id, info.label, split, "logged" if new else "already logged, kept", took,
                         book["bytes"] / 1e6, book["images"], f" ({book['left_out']} left out)" if book["left_out"]
                         else "")
            report = metrics.report(agent_results) | {"agent": name, "label": info.label,
                                                      "dataset_versions": dict(sorted(versions.items()))}
            slog.write(layout.REPORTS / f"eval_{name}.json", report)
            reports[name] = report["overall"]
        staging.cleanup()
        end = time.perf_counter()
        # where this run's time went (run facts: reports/timings/muep-eval.json, no DVC output)
        slog.run_facts(
            note="seconds and memory measured in this run's batches (batches finished by an earlier run are not in it)",
            agent_episodes=total, played=todo, batches=len(batches), played_batches=len(pending),
            workers=ev.workers, task_runner=ev.task_runner, batch_size=ev.batch_size,
            prepare_s=round(clock["play"] - clock["start"], 3), play_s=round(clock["write"] - clock["play"], 3),
            write_s=round(end - clock["write"] - mlflow_s - clock["viewer"], 3), mlflow_s=round(mlflow_s, 3),
            viewer_s=round(clock["viewer"], 3),
            timings={i: played[i] for i in sorted(played)})
        return reports


@flow(name=STAGE)
def muep_eval(params_file: str | None = None) -> dict:
    """MuEP evaluation: agents play the test episodes' games; SR / IS / GCS / LC / RDI / PR to MLflow and DVC."""
    ev = load_params(params_file).muep.eval
    runner = task_runner(ev.task_runner, ev.workers, ev.dask_address)
    return _evaluate.with_options(task_runner=runner)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_eval)
