"""MuEP stage 4: expert demonstrations (FF plan, TextWorld replay, rendered states) into webdataset shards."""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.errors import PipelineError
from core.io import write_parquet
from flows._runtime import fan_out, main, task_runner
from tasks.muep import layout
from tasks.muep.demos import (
    COSTS,
    SPLITS,
    Batch,
    DemoSettings,
    collect_index,
    done_batches,
    ensure_disk_space,
    fingerprint,
    make_batches,
    prepare_output,
    run_batch,
    scene_runs,
    select_episodes,
    split_leakage,
    summarise,
)
from tasks.muep.generate import TaskRecord
from tasks.muep.metadata import SceneRecord
from tasks.params import load_params
from tasks.progress import StageLog
from tasks.records import read_table

STAGE = "muep-demos"
DEMOS = layout.DEMOS
log = logging.getLogger("embp")


@task(name="rollout-batches", cache_policy=NO_CACHE)
def rollout_batches(batches: list[Batch], settings: DemoSettings) -> dict:
    """A run of consecutive batches (:func:`~tasks.muep.demos.scene_runs`) on one worker, each committed on its own;
    one batch's failure is reported and the run goes on with the next."""
    done: dict[str, dict] = {}
    failures: list[str] = []
    for batch in batches:
        try:
            records, costs = run_batch(batch, settings)
        except Exception as exc:  # noqa: BLE001 - reported with the others by the flow
            failures.append(f"{batch.batch_id}: {type(exc).__name__}: {exc}")
            continue
        done[batch.batch_id] = {"episodes": len(records), "ok": sum(r.status == "ok" for r in records),
                                "costs": costs}
    return {"done": done, "failures": failures}


@flow(name=f"{STAGE}-rollouts")
def _rollouts(params_file: str | None = None) -> dict:
    """Plays the pending batches on the task runner ``muep_demos`` chose, then indexes the shards."""
    params = load_params(params_file)
    demos = params.muep.demos
    with StageLog(STAGE) as slog:
        accepted = read_table(layout.ACCEPTED, TaskRecord)
        scenes = read_table(layout.SCENES, SceneRecord)
        alfworld_scenes = read_table(layout.ALFWORLD_SCENES, SceneRecord)
        slog.read(layout.ACCEPTED, f"{len(accepted)} accepted tasks")
        slog.read(layout.SCENES)
        slog.read(layout.ALFWORLD_SCENES, "ALFWorld's evaluation states, which no training state may equal")
        leakage = split_leakage(scenes, alfworld_scenes)
        selected = select_episodes(accepted, scenes, demos.episodes, demos.seed)
        settings = DemoSettings(grammar=demos.grammar, search=demos.search, plan_timeout_s=demos.plan_timeout_s,
                                max_plan_length=demos.max_plan_length, renderer=demos.renderer,
                                render_size=demos.render_size, metadata_dir=str(layout.METADATA),
                                out_dir=str(DEMOS))
        DEMOS.mkdir(parents=True, exist_ok=True)
        ensure_disk_space(DEMOS, needed_mb=len(selected) * 0.2)
        prepare_output(DEMOS, fingerprint(selected, settings, {"seed": demos.seed, "batch_size": demos.batch_size}))
        batches = make_batches(selected, demos.batch_size)
        finished = done_batches(DEMOS)
        pending = [b for b in batches if b.batch_id not in finished]
        log.info("[%s] %d episodes in %d batches; %d already done, %d to run on %s x%d", STAGE, len(selected),
                 len(batches), len(batches) - len(pending), len(pending), demos.task_runner, demos.workers)
        runs = {f"{run[0].batch_id}..{run[-1].batch_id}": run for run in scene_runs(pending, demos.workers)}
        ran, failures = fan_out(rollout_batches, {key: (run, settings) for key, run in runs.items()}, STAGE,
                                "episodes", weight=lambda key: sum(len(b.tasks) for b in runs[key]))
        results = {b: r for out in ran.values() for b, r in out["done"].items()}
        failures = [f for out in ran.values() for f in out["failures"]] + failures
        if failures:
            failed = len(pending) - len(results)
            raise PipelineError(f"{failed} of {len(pending)} batches failed ({'; '.join(failures[:3])}).",
                                hint="Finished batches are kept; rerun the stage to retry only the failed ones.")
        index = collect_index(DEMOS)
        write_parquet(DEMOS / "episodes.parquet", index)
        slog.wrote(DEMOS / "episodes.parquet", len(index))
        splits = {s: sorted(f"shards/{b.batch_id}.tar" for b in batches if b.split == s) for s in SPLITS}
        slog.write(DEMOS / "splits.json", splits)
        report = summarise(index) | {"split_leakage": leakage}
        slog.write(layout.REPORTS / "demos.json", report)
        costs = {b: r["costs"] for b, r in sorted(results.items())}
        slog.run_facts(note="seconds measured in this run's batches (batches finished by an earlier run are not in it)",
                       batches=costs,
                       totals={c: round(sum(e[c] for b in costs.values() for e in b.values()), 3) for c in COSTS})
        return report


@flow(name=STAGE)
def muep_demos(params_file: str | None = None) -> dict:
    """MuEP stage 4: expert demonstrations (FF plan, TextWorld replay, rendered states) into webdataset shards."""
    demos = load_params(params_file).muep.demos
    runner = task_runner(demos.task_runner, demos.workers, demos.dask_address)
    return _rollouts.with_options(task_runner=runner)(params_file=params_file)


if __name__ == "__main__":
    main(STAGE, muep_demos)
