"""What the robot flows share (``roboscript-eval``, ``roboscript-shapes``, ``roboscript-perception``): their goals run on
a runner pool, one Prefect task per goal. A goal's task blocks until a runner of the pool is free, so the flows'
thread task runner (:data:`GOAL_THREADS`) only bounds how many wait at once.

A finished goal's result is kept in the stage's work directory (``data/cache/roboscript-goals/<stage>``, a DVC
``persist`` output), one file per goal, written atomically under a fingerprint of the goal, the robot it runs on and
the code the stage runs; a rerun after an interruption reuses the results whose fingerprint matches and runs only
the other goals."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from core.errors import PipelineError
from flows._imports import code_digest
from flows._runtime import fan_out
from tasks.roboscript import layout
from tasks.roboscript.eval import evaluation
from tasks.roboscript.params import RobotEvalParams

log = logging.getLogger("embp")
#: As many goals in flight as the largest pool the params allow (``roboscript.eval.runners`` <= 64).
GOAL_THREADS = ThreadPoolTaskRunner(max_workers=64)


@task(name="run-goal", cache_policy=NO_CACHE)
def run_goal(request: dict, pool, directory: str = "", key: str = "", fingerprint: str = "") -> dict:
    """One goal's repeats on the next free runner (a runner that dies mid-episode hands it to another); the result
    is kept in ``directory`` for a rerun."""
    result = pool.run(request)
    for warning in result.get("warnings", []):  # isolation: none -- said on every episode
        log.warning("[%s] %s", result.get("episode_id"), warning)
    if directory:
        evaluation.store_result(Path(directory), key, fingerprint, result)
    return result


def run_goals(ep: RobotEvalParams, goals: dict[str, dict], stage: str, unit: str,
              ready: Callable[[], object] | None = None) -> tuple[dict[str, dict], dict]:
    """Every goal's result by key, and the pool's description for the report. Goals finished by an earlier,
    interrupted run of the same stage (same goal, robot and code) are not run again. ``ready`` (e.g. a future's
    ``result``) is called once the pool is up and before any goal is sent: what the goals need that was prepared
    while the runners started (its exception stops the stage; the pool stops as always)."""
    directory = layout.GOAL_RESULTS / stage
    code = code_digest(f"flows.{stage.replace('-', '_')}")
    fingerprints = {key: evaluation.goal_fingerprint(request, ep, code) for key, request in goals.items()}
    results = {key: found for key in goals
               if (found := evaluation.stored_result(directory, key, fingerprints[key])) is not None}
    pending = {key: request for key, request in goals.items() if key not in results}
    with evaluation.runner_pool(ep) as (pool, pool_info):
        log.info("[%s] %d %s on %d runner(s) %s: %d already done, %d to run", stage, len(goals), unit, pool.size,
                 " ".join(pool_info["runners"]), len(results), len(pending))
        if ready is not None:
            ready()
        if pool_info.get("isolation") == "none":
            log.warning("[%s] roboscript.eval.isolation is none: the runners run generated code WITHOUT namespaces "
                        "(docs/robot.md, Sandbox)", stage)
        done, failures = fan_out(run_goal, {key: (request, quote(pool), str(directory), key, fingerprints[key])
                                            for key, request in pending.items()}, stage, unit)
    if failures:
        raise PipelineError(f"{len(failures)} of {len(goals)} {unit} failed ({'; '.join(failures[:3])}).",
                            hint="Finished goals are kept; rerun the stage to run only the others.")
    results |= done
    return {key: results[key] for key in goals}, pool_info
