"""Progress and stage logs for long stages: done / total, rate and time left, and what was read and written.

On a terminal the bar is drawn by ``rich``; elsewhere (CI, ``dvc repro`` piping, log files) a line is logged at most
every few seconds, so the output stays readable either way.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

from tasks.paths import rel

log = logging.getLogger("embp")

# The run-facts files this process wrote (``StageLog.__exit__``): the stage's entry point adds what the whole process
# took around the flow (flows._runtime.run_stage), so every run measures its own orchestration overhead.
FACTS_WRITTEN: list[Path] = []


def _fmt_s(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class Progress:
    """A thread-safe counter that reports ``done/total``, items per second and the estimated time left."""

    def __init__(self, total: int, description: str, unit: str = "items", every_s: float = 5.0):
        self.total = max(0, total)
        self.description = description
        self.unit = unit
        self.every_s = every_s
        self.done = 0
        self._start = time.perf_counter()
        self._last = 0.0
        self._lock = threading.Lock()
        self._bar = None
        if sys.stderr.isatty() and self.total:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                ProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress
            from rich.text import Text

            class _Rate(ProgressColumn):
                def render(self, task) -> Text:  # type: ignore[override]
                    return Text(f"{task.speed or 0.0:.1f} {unit}/s")

            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _Rate(), TimeRemainingColumn(),
            )
            self._task = self._bar.add_task(description, total=self.total)
            self._bar.start()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(self._task, advance=n)
                return
            now = time.perf_counter() - self._start
            if now - self._last >= self.every_s or self.done == self.total:   # the last item: once
                self._last = now
                log.info("%s", self.line())

    def line(self) -> str:
        elapsed = time.perf_counter() - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = max(0, self.total - self.done) / rate if rate > 0 else float("nan")
        eta = _fmt_s(left) if rate > 0 else "?"
        return f"{self.description}: {self.done}/{self.total} {self.unit}, {rate:.1f} {self.unit}/s, {eta} left"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StageLog:
    """Logs what a stage read and wrote and how long it took, and writes its reports::

        with StageLog("muep-metadata") as slog:
            slog.read(path)
            slog.write(report_path, report)        # atomic JSON/text write, logged
            slog.wrote(path, rows=120)             # an output written by a task function
    """

    def __init__(self, stage: str):
        self.stage = stage
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.facts: dict = {}

    def run_facts(self, **facts) -> None:
        """What this run measured or where it ran -- wall times, hosts, ports, which runner took which goal -- as
        opposed to what it computed. They go to ``reports/timings/<stage>.json`` (written at the end of the stage,
        not a DVC output and not in git), never into a data output, so the same inputs give the same bytes."""
        self.facts.update(facts)

    def __enter__(self) -> StageLog:
        self._start = time.perf_counter()
        self.started_at = time.time()  # epoch seconds: MLflow runs logged at the end take it as their start
        log.info("[%s] started", self.stage)
        return self

    def read(self, path: Path | str, what: str = "") -> None:
        self.reads.append(str(path))
        log.info("[%s] read %s%s", self.stage, rel(Path(path)), f" ({what})" if what else "")

    def write(self, path: Path, content) -> Path:
        """Write one stage output atomically and log it: a dict or list as JSON (``.json``), a string as text
        (``.md``, ``.html``, ``.txt``...). Every flow writes its reports through here."""
        from core.io import write_json, write_text

        path = Path(path)
        if path.suffix == ".json":
            write_json(path, content)
        elif isinstance(content, str):
            write_text(path, content)
        else:
            raise TypeError(f"StageLog.write: {path.name} needs a str (or a .json name), got {type(content).__name__}")
        self.wrote(path)
        return path

    def records(self, path: Path, rows, record_type) -> Path:
        """Write typed records as a parquet table (``tasks.records.write_records``) and log how many."""
        from tasks.records import write_records

        self.wrote(path, write_records(path, rows, record_type))
        return Path(path)

    def wrote(self, path: Path, rows: int | None = None) -> None:
        self.writes.append(rel(path))
        log.info("[%s] wrote %s%s", self.stage, rel(path), f" ({rows} rows)" if rows is not None else "")

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        seconds = time.perf_counter() - self._start
        took = _fmt_s(seconds)
        if exc_type is None:
            from core.io import write_json
            from tasks.paths import REPORTS

            facts_file = REPORTS / "timings" / f"{self.stage}.json"
            write_json(facts_file, {"stage": self.stage, "wall_s": round(seconds, 2)} | self.facts)
            FACTS_WRITTEN.append(facts_file)
            log.info("[%s] done in %s: read %d inputs, wrote %d outputs", self.stage, took, len(self.reads),
                     len(self.writes))
        else:
            log.info("[%s] failed after %s", self.stage, took)
