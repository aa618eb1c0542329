"""MuEP stage 4: expert demonstrations (FF plan, TextWorld replay, rendered states) into webdataset shards."""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from flows._runtime import main
from tasks import paths
from tasks.errors import PipelineError
from tasks.io import write_json, write_parquet
from tasks.muep.demos import (SPLITS, Batch, DemoSettings, collect_index, done_batches, ensure_disk_space,
                              fingerprint, make_batches, prepare_output, run_batch, select_episodes, summarise)
from tasks.muep.generate import TaskRecord
from tasks.muep.metadata import SceneRecord
from tasks.params import DemosParams, load_params
from tasks.progress import Progress, StageLog
from tasks.records import read_table

STAGE = "muep-demos"
DEMOS = paths.MUEP_DATA / "demos"
log = logging.getLogger("embp")


def task_runner(params: DemosParams):
    """The Prefect task runner the params ask for. Every choice runs at most one game per process."""
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    if params.task_runner == "sequential":
        return ThreadPoolTaskRunner(max_workers=1)
    if params.task_runner == "processes":
        return ProcessPoolTaskRunner(max_workers=params.workers)
    from prefect_dask import DaskTaskRunner

    if params.dask_address:
        return DaskTaskRunner(address=params.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": params.workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


@task(name="rollout-batch", cache_policy=NO_CACHE)
def rollout_batch(batch: Batch, settings: DemoSettings) -> dict:
    records = run_batch(batch, settings)
    return {"batch": batch.batch_id, "episodes": len(records), "ok": sum(r.status == "ok" for r in records)}


@flow(name=STAGE)
def _demos_flow(params_file: str | None = None) -> dict:
    params = load_params(params_file)
    demos = params.muep.demos
    with StageLog(STAGE) as slog:
        accepted_path = paths.MUEP_FILTER / "accepted.parquet"
        scenes_path = paths.MUEP_METADATA / "scenes.parquet"
        accepted = read_table(accepted_path, TaskRecord)
        scenes = read_table(scenes_path, SceneRecord)
        slog.read(accepted_path, f"{len(accepted)} accepted tasks")
        slog.read(scenes_path)
        selected = select_episodes(accepted, scenes, demos.episodes, demos.seen_test_fraction, demos.seed)
        settings = DemoSettings(grammar=demos.grammar, search=demos.search, plan_timeout_s=demos.plan_timeout_s,
                                max_plan_length=demos.max_plan_length, renderer=demos.renderer,
                                render_size=demos.render_size, metadata_dir=str(paths.MUEP_METADATA),
                                out_dir=str(DEMOS))
        DEMOS.mkdir(parents=True, exist_ok=True)
        ensure_disk_space(DEMOS, needed_mb=len(selected) * 0.2)
        prepare_output(DEMOS, fingerprint(selected, settings, {"seed": demos.seed, "batch_size": demos.batch_size,
                                                               "fraction": demos.seen_test_fraction}))
        batches = make_batches(selected, demos.batch_size)
        finished = done_batches(DEMOS)
        pending = [b for b in batches if b.batch_id not in finished]
        log.info("[%s] %d episodes in %d batches; %d already done, %d to run on %s x%d", STAGE, len(selected),
                 len(batches), len(batches) - len(pending), len(pending), demos.task_runner, demos.workers)
        failures = []
        with Progress(sum(len(b.tasks) for b in pending), f"{STAGE}: episodes", unit="episodes") as progress:
            futures = {rollout_batch.submit(b, settings): b for b in pending}
            for future in as_completed(list(futures)):
                batch = futures[future]
                try:
                    future.result()
                except Exception as exc:  # noqa: BLE001 - reported together below; other batches go on
                    failures.append(f"{batch.batch_id}: {type(exc).__name__}: {exc}")
                progress.advance(len(batch.tasks))
        if failures:
            raise PipelineError(f"{len(failures)} of {len(pending)} batches failed ({'; '.join(failures[:3])}).",
                                hint="Finished batches are kept; rerun the stage to retry only the failed ones.")
        index = collect_index(DEMOS)
        write_parquet(DEMOS / "episodes.parquet", index)
        slog.wrote(DEMOS / "episodes.parquet", len(index))
        splits = {s: sorted(f"shards/{b.batch_id}.tar" for b in batches if b.split == s) for s in SPLITS}
        write_json(DEMOS / "splits.json", splits)
        slog.wrote(DEMOS / "splits.json")
        report = summarise(index)
        write_json(paths.MUEP_REPORTS / "demos.json", report)
        slog.wrote(paths.MUEP_REPORTS / "demos.json")
        return report


def muep_demos(params_file: str | None = None) -> dict:
    """MuEP stage 4: expert demonstrations (FF plan, TextWorld replay, rendered states) into webdataset shards."""
    demos = load_params(params_file).muep.demos
    return _demos_flow.with_options(task_runner=task_runner(demos))(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_demos)
