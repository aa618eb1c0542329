"""What the robot flows share (``roboscript-eval``, ``roboscript-shapes``, ``roboscript-perception``): their goals run on
a runner pool, one Prefect task per goal. A goal's task blocks until a runner of the pool is free, so the flows'
thread task runner (:data:`GOAL_THREADS`) only bounds how many wait at once."""

from __future__ import annotations

import logging

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from core.errors import PipelineError
from flows._runtime import fan_out
from tasks.roboscript.eval import evaluation
from tasks.roboscript.params import RobotEvalParams

log = logging.getLogger("embp")
#: As many goals in flight as the largest pool the params allow (``roboscript.eval.runners`` <= 64).
GOAL_THREADS = ThreadPoolTaskRunner(max_workers=64)


@task(name="run-goal", cache_policy=NO_CACHE)
def run_goal(request: dict, pool) -> dict:
    """One goal's repeats on the next free runner (a runner that dies mid-episode hands it to another)."""
    result = pool.run(request)
    for warning in result.get("warnings", []):  # isolation: none -- said on every episode
        log.warning("[%s] %s", result.get("episode_id"), warning)
    return result


def run_goals(ep: RobotEvalParams, goals: dict[str, dict], stage: str, unit: str) -> tuple[dict[str, dict], dict]:
    """Every goal's result by key, and the pool's description for the report."""
    with evaluation.runner_pool(ep) as (pool, pool_info):
        log.info("[%s] %d %s on %d runner(s) %s", stage, len(goals), unit, pool.size, " ".join(pool_info["runners"]))
        if pool_info.get("isolation") == "none":
            log.warning("[%s] roboscript.eval.isolation is none: the runners run generated code WITHOUT namespaces "
                        "(docs/robot.md, Sandbox)", stage)
        results, failures = fan_out(run_goal, {key: (request, quote(pool)) for key, request in goals.items()},
                                    stage, unit)
    if failures:
        raise PipelineError(f"{len(failures)} of {len(goals)} {unit} failed ({'; '.join(failures[:3])}).")
    return results, pool_info
