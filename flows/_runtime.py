"""What every stage entry point shares: logging, validating params before Prefect starts, readable errors, the one
place a Prefect task runner is built, and fanning a task out over many inputs with progress and collected failures.

Every flow has the same thin shape: read params, call ``tasks`` functions (as Prefect tasks where they fan out),
write reports through :meth:`tasks.progress.StageLog.write`, log MLflow runs through :func:`tasks.tracking.log_run`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Hashable, Mapping
from contextlib import contextmanager
from typing import Any

from core.errors import PipelineError
from tasks.params import load_params

log = logging.getLogger("embp")

TASK_RUNNERS = ("sequential", "threads", "processes", "dask")


def task_runner(kind: str, workers: int, dask_address: str | None = None):
    """The Prefect task runner a stage's params ask for (the only place one is built).

    ``sequential`` and ``threads`` share the flow's process; ``processes`` is a process pool of ``workers``; ``dask``
    a local Dask cluster of ``workers`` single-threaded processes, or the scheduler at ``dask_address``."""
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    if kind == "sequential":
        return ThreadPoolTaskRunner(max_workers=1)
    if kind == "threads":
        return ThreadPoolTaskRunner(max_workers=workers)
    if kind == "processes":
        return ProcessPoolTaskRunner(max_workers=workers, initializer=_exit_without_teardown)
    if kind == "dask":
        from prefect_dask import DaskTaskRunner

        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": None})
    raise ValueError(f"unknown task runner {kind!r}; known: {', '.join(TASK_RUNNERS)}")


def _exit_without_teardown() -> None:
    """Process-pool worker initializer: when the pool shuts the worker down, end it right after the exit handlers
    (Prefect's event and log flushes, registered later, run first) instead of tearing down its interpreter. A worker
    that played TextWorld games or held a model spent 2-7 s in the interpreter's final garbage collection, while the
    stage waited for it (py-spy: ``gc_collect_main``). Nothing of a task's output depends on it: tasks write their
    files atomically before they return, and multiprocessing has flushed its queues before the exit handlers run."""
    import atexit

    atexit.register(_exit_now)      # registered first, so it runs last


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(0)


def fan_out(task, jobs: Mapping[Hashable, tuple], stage: str, unit: str,
            weight: Callable[[Hashable], int] = lambda key: 1) -> tuple[dict, list[str]]:
    """Submit ``task(*args)`` for every job, collect results as they finish (with progress and ETA in ``unit``).
    Returns ``({key: result}, [failure lines])``: one job's exception never stops the others."""
    from prefect.futures import as_completed

    from tasks.progress import Progress

    results: dict = {}
    failures: list[str] = []
    with Progress(sum(weight(k) for k in jobs), f"{stage}: {unit}", unit=unit) as progress:
        futures = {task.submit(*args): key for key, args in jobs.items()}
        for future in as_completed(list(futures)):
            key = futures[future]
            try:
                results[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - reported together by the caller
                failures.append(f"{key}: {type(exc).__name__}: {exc}")
            progress.advance(weight(key))
    return results, failures


class _PipelineErrorsWithoutTraceback(logging.Filter):
    """Prefect logs a traceback for every failed run; for our own readable errors the paragraph is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PipelineError):
            record.exc_info = None
            record.exc_text = None
        return True


def configure_logging() -> None:
    level = os.environ.get("EMBP_LOG_LEVEL", "INFO").upper()
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(level)
    for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.engine"):
        logging.getLogger(name).addFilter(_PipelineErrorsWithoutTraceback())


def _drain_prefect_workers() -> None:
    for module, name in (("prefect.logging.handlers", "APILogWorker"), ("prefect.events.worker", "EventsWorker")):
        try:
            worker = getattr(__import__(module, fromlist=[name]), name)
            worker.drain_all(timeout=5)
        except Exception:  # noqa: BLE001 - logs and events are best effort; the stage's outcome is decided
            pass


@contextmanager
def shared_prefect_server():
    """Point this stage (and its worker processes) at the run's shared Prefect server (``flows._prefect_server``:
    started by the first stage of a run, stopped when idle). With ``PREFECT_API_URL`` set, runs go to that
    server and nothing is started.

    On the shared server a flow run sends no heartbeats. They let a long-lived server mark the runs of a process that
    died as crashed; this server lives only as long as the run, and `dvc repro` / `embp run` see a dead stage
    themselves. Prefect's heartbeat thread sleeps in 1-s steps, and the end of every flow waited for it: 0.5-1 s a
    stage. Runs against a server of your own (``PREFECT_API_URL``) keep Prefect's heartbeats."""
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    from flows._prefect_server import lease

    with lease() as url, temporary_settings(updates={PREFECT_API_URL: url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        os.environ["PREFECT_API_URL"] = url  # for the stage's worker processes
        _refresh_global_settings()  # and for threads that start without this context
        try:
            yield
        finally:
            _drain_prefect_workers()  # send the last run logs and events while the server still listens
            os.environ.pop("PREFECT_API_URL", None)
            _refresh_global_settings()


def _refresh_global_settings() -> None:
    """Rebuild Prefect's process-wide settings from the environment. Threads that Prefect starts without copying
    the caller's context (the process pool task runner's message forwarder, the events worker) read these, made at
    import time without ``PREFECT_API_URL``: they would start Prefect's temporary API server, seconds of a 2-core
    machine, in every stage with a process pool."""
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()


STAGE_BORN: float | None = None
"""Set in a fork of the warm stage host (flows/_stage_host.py): when the stage's own process started."""


def record_overhead(ready: float, ended: float) -> None:
    """Add to the run facts this process wrote what the process took around the stage's own work:
    ``process_s`` (interpreter start to flow end), ``startup_s`` (interpreter, imports, params check, Prefect server
    lease) and ``overhead_s`` = process_s - wall_s (everything that is not the stage's work: orchestration)."""
    import psutil

    from core.io import write_json
    from tasks.progress import FACTS_WRITTEN

    born = STAGE_BORN or psutil.Process().create_time()
    for path in FACTS_WRITTEN:
        try:
            facts = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        process_s = ended - born
        write_json(path, facts | {"process_s": round(process_s, 2), "startup_s": round(ready - born, 2),
                                  "overhead_s": round(process_s - float(facts.get("wall_s", 0.0)), 2)})
    FACTS_WRITTEN.clear()


def run_stage(stage: str, flow: Callable[..., Any], params_file: str | None = None) -> int:
    """Validate params, run the flow, and turn failures into one paragraph and an exit code."""
    configure_logging()
    try:
        load_params(params_file)  # fail on bad params before Prefect starts or anything is written
        with shared_prefect_server():
            ready = time.time()
            flow(params_file=params_file)
        record_overhead(ready, time.time())
    except PipelineError as exc:
        print(f"\nerror in stage {stage}: {exc.paragraph()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nstage {stage} interrupted; finished files are kept, rerun to resume.", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a readable message
        if os.environ.get("EMBP_DEBUG"):
            raise
        print(
            f"\nerror in stage {stage}: unexpected {type(exc).__name__}: {exc}. This is a bug or an environment "
            "problem; rerun with EMBP_DEBUG=1 to see the traceback.",
            file=sys.stderr,
        )
        return 1
    return 0


def main(stage: str, flow: Callable[..., Any], argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m flows.{stage.replace('-', '_')}",
                                     description=(flow.__doc__ or stage).strip().splitlines()[0])
    parser.add_argument("--params", default=None, metavar="FILE",
                        help="params file to use instead of params.yaml at the repository root")
    args = parser.parse_args(argv)
    sys.exit(run_stage(stage, flow, args.params))
