"""What the robot flows share: their goals run on a runner pool, one Prefect task per goal, one in flight per runner
(``roboscript-eval``, ``roboscript-shapes``, ``roboscript-perception``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from robot import evaluation
from robot.params import RobotEvalParams
from tasks.params import load_params
from tasks.progress import Progress

log = logging.getLogger("embp")
_POOLS: dict[str, object] = {}
"""Pools of the running flows, by key: Prefect tasks get the key, never the pool itself."""


@task(name="run-goal", cache_policy=NO_CACHE)
def run_goal(request: dict, pool_key: str) -> dict:
    """One goal's repeats on the next free runner (a runner that dies mid-episode hands it to another)."""
    return _POOLS[pool_key].run(request)  # type: ignore[attr-defined]


def run_goals(ep: RobotEvalParams, goals: dict[str, dict], stage: str, unit: str) -> tuple[dict[str, dict], dict]:
    """Every goal's result by key, and the pool's description for the report."""
    results: dict[str, dict] = {}
    with evaluation.runner_pool(ep) as (pool, pool_info):
        key = str(id(pool))
        _POOLS[key] = pool
        log.info("[%s] %d %s on %d runner(s) %s", stage, len(goals), unit, pool.size, " ".join(pool_info["runners"]))
        try:
            with Progress(len(goals), f"{stage}: {unit}", unit=unit) as progress:
                futures = {run_goal.submit(request, key): name for name, request in goals.items()}
                for future in as_completed(list(futures)):
                    results[futures[future]] = future.result()
                    progress.advance(1)
        finally:
            _POOLS.pop(key, None)
    return results, pool_info


def on_pool(flow_fn, params_file: str | None) -> Callable:
    """The flow with a thread task runner as wide as the pool."""
    from prefect.task_runners import ThreadPoolTaskRunner

    workers = evaluation.pool_size(load_params(params_file).roboscript.eval)
    return flow_fn.with_options(task_runner=ThreadPoolTaskRunner(max_workers=workers))
