"""Check one snippet file and run it once in the sandbox against the simulated robot, on a benchmark task's world:
what ``embp roboscript try-snippet PATH [--task Simple_0]`` prints (as JSON) and exits with.

The code check comes first (a refused snippet never starts the simulator); then one repeat on an in-process
:class:`~robot.episode.EpisodeRunner` with the sim backend, the task's world and evaluation items, and the
``roboscript.eval`` settings (arm, perception, limits, isolation) of the params file. The outcome says what the
runner would say for that repeat, plus every tool call. ``success`` is true only where the evaluation would count
it: the repeat's status is one scoring evaluates (``scoring.repeat_scores``: ``ok``) and every item holds; a repeat
that ended ``code_error`` with the items holding shows ``success: false`` and ``items_held: true``.

Whatever happens, it prints one JSON object and exits with one of the codes below: a snippet the check cannot
finish on is refused (``too_complex``), and a failure of the tool itself is reported as ``status: error``, exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from core.errors import DataError, PipelineError
from robot.contract.code_policy import DEFAULT_POLICY
from robot.contract.outcomes import GRAMMATICAL
from robot.sandbox import isolation as modes
from robot.sandbox import wire
from tasks.roboscript.eval import scoring

EXIT_RAN, EXIT_REFUSED, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
"""0: the code ran to its end (ok; a failed motion returns False and the code goes on); 1: the code check refused
it; 2: the file, task or settings are unusable (or the sandbox cannot start, or try-snippet itself failed); 3: it
failed when run (code_error, robot_error under ``motion_failure: raise``, timeout, memory, crashed)."""
MAX_CODE_BYTES = 200_000
MAX_CALLS_SHOWN = 200


def read_snippet(path: Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read the snippet file {path}: {exc.strerror or exc}.") from None
    if len(data) > MAX_CODE_BYTES:
        raise DataError(f"the snippet file {path} holds {len(data)} bytes; at most {MAX_CODE_BYTES} are accepted.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"the snippet file {path} is not UTF-8 text (byte {exc.start}).") from None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Keep what the simulator prints at the C level (pybullet's banner) off stdout, which carries the JSON."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def try_snippet(path: Path, task_id: str = "Simple_0", params_file: Path | None = None,
                isolation: str | None = None) -> tuple[int, dict]:
    """(exit status, outcome as a JSON-able dict) of checking and running the snippet in ``path`` once; never
    raises (but for KeyboardInterrupt)."""
    outcome: dict = {"file": str(path), "task": task_id, "ran": False}
    try:
        status, outcome = _try_snippet(path, task_id, params_file, isolation, outcome)
    except Exception as exc:  # noqa: BLE001 - the documented contract: JSON and an exit code, never a traceback
        status, outcome = EXIT_USAGE, outcome | {"ran": False, "status": "error",
                                                 "error": wire.clip(f"try-snippet failed: {type(exc).__name__}: "
                                                                    f"{exc}")}
    return status, json.loads(json.dumps(outcome))  # what is printed is exactly what round-trips


def _try_snippet(path: Path, task_id: str, params_file: Path | None, isolation: str | None,
                 outcome: dict) -> tuple[int, dict]:
    try:
        code = read_snippet(path)
        from robot.contract.catalog import load_catalog
        from tasks.params import load_params
        from tasks.roboscript.benchmark import load_benchmark

        params = load_params(params_file)
        ep = params.roboscript.eval
        mode = modes.check_mode(isolation or ep.isolation)
        tasks = {t.id: t for t in load_benchmark(load_catalog(), params.roboscript.worlds)}
        if task_id not in tasks:
            raise DataError(f"unknown task {task_id!r}; the benchmark tasks are {', '.join(sorted(tasks))}.")
    except PipelineError as exc:
        return EXIT_USAGE, outcome | {"status": "error", "error": exc.paragraph()}
    task = tasks[task_id]
    outcome |= {"instruction": task.instruction, "isolation": mode}
    verdict = DEFAULT_POLICY.check(code)
    outcome["check"] = {"ok": verdict.ok, "reasons": [wire.clip(m, 300) for m in verdict.messages()[:20]],
                        "codes": list(verdict.codes)}
    if not verdict.ok:
        return EXIT_REFUSED, outcome | {"status": "refused", "error": "the code check refused the snippet"}
    try:
        result, calls = _run(task, code, ep, mode)
    except PipelineError as exc:  # the sandbox cannot start with this isolation
        return EXIT_USAGE, outcome | {"status": "error", "error": exc.paragraph()}
    if not result["ok"]:
        return EXIT_USAGE, outcome | {"status": "error", "error": result["error"]}
    repeat = result["repeats"][0]
    counted = scoring.repeat_scores(repeat, len(repeat["items"] or []))[0] == 1
    outcome |= {"ran": repeat["status"] in GRAMMATICAL, "isolation": result["isolation"],
                "warnings": result["warnings"], "status": repeat["status"], "grammatical": repeat["grammatical"],
                "error": repeat["error"], "stdout": repeat["stdout"], "steps": repeat["steps"],
                "calls": calls[:MAX_CALLS_SHOWN], "counted": counted,
                "success": bool(repeat["success"]) and counted, "items_held": repeat["success"],
                "items": repeat["items"], "wall_s": repeat["wall_s"]}
    return (EXIT_RAN if outcome["ran"] else EXIT_FAILED), outcome


def _run(task, code: str, ep, isolation: str) -> tuple[dict, list[dict]]:
    from robot.backends import create_backend
    from robot.episode import EpisodeRunner, parse_goal

    items = [{k: v for k, v in asdict(i).items() if v is not None} for i in task.evaluation]
    goal = {"episode_id": f"try-snippet/{task.id}", "task_id": task.id, "world": task.world.to_json(), "code": code,
            "repeats": 1, **ep.episode_settings(), "isolation": isolation, "evaluation": items}
    calls: list[dict] = []

    def feedback(record: dict) -> None:
        if "tool" in record:
            calls.append({k: record[k] for k in ("tool", "ok", "error", "notes") if k in record})

    with _stdout_to_stderr():
        backend = create_backend("sim", arm=ep.arm)
        try:
            result = EpisodeRunner(backend, "try-snippet", isolation=isolation).run(
                parse_goal(json.dumps(goal)), on_feedback=feedback)
        finally:
            backend.close()
    return result, calls
