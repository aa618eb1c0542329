"""Process-pool workers of a stage (``flows._runtime.task_runner("processes", ...)``) end right after their exit
handlers, without the interpreter's final teardown -- and the handlers registered after the pool's initializer (Prefect's
event and log flushes) still run."""

from __future__ import annotations

import atexit
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from flows._runtime import _exit_without_teardown, task_runner


def _register_flush(path: str) -> int:
    def flush() -> None:
        Path(path).write_text("flushed", encoding="utf-8")

    atexit.register(flush)         # as Prefect's workers register theirs: after the pool's initializer
    return 1


def test_exit_handlers_registered_later_still_run(tmp_path):
    marker = tmp_path / "flushed"
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_exit_without_teardown) as pool:
        assert pool.submit(_register_flush, str(marker)).result(timeout=120) == 1
    assert marker.read_text(encoding="utf-8") == "flushed"


def test_the_stages_process_pool_uses_it():
    runner = task_runner("processes", 2)
    assert runner._initializer is _exit_without_teardown
    assert runner.duplicate()._initializer is _exit_without_teardown   # Prefect copies runners for subflows
