"""Expert plans: pyperplan's FF-heuristic search on the STRIPS twin, with a hard per-problem time-out.

The search runs in a separate worker process (not a fork: the caller may be a threaded Prefect worker, where forking
is unsafe), so a search that runs too long is killed, not waited for: a time-out becomes a recorded reject, never a
hang.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from tasks.muep.pddl import STRIPS_DOMAIN

SEARCHES = ("gbf", "ehc")


@dataclass
class PlanResult:
    status: str            # "solved" | "unsolvable" | "timeout" | "error"
    steps: list[tuple[str, ...]]  # ground operators without the finish-* bookkeeping, e.g. ("take", "obj_apple_1", ...)
    seconds: float
    detail: str = ""


def _search(domain: str, problem: str, search: str) -> list[tuple[str, ...]] | None:
    from pyperplan import grounding
    from pyperplan.heuristics.relaxation import hFFHeuristic
    from pyperplan.pddl.parser import Parser
    from pyperplan.search import enforced_hillclimbing_search, greedy_best_first_search

    with tempfile.TemporaryDirectory(prefix="muep-plan-") as tmp:
        dom, prob = os.path.join(tmp, "domain.pddl"), os.path.join(tmp, "problem.pddl")
        with open(dom, "w") as f:
            f.write(domain)
        with open(prob, "w") as f:
            f.write(problem)
        parser = Parser(dom, prob)
        task = grounding.ground(parser.parse_problem(parser.parse_domain()))
    heuristic = hFFHeuristic(task)
    if search == "ehc":
        solution = enforced_hillclimbing_search(task, heuristic)
    else:
        solution = greedy_best_first_search(task, heuristic)
    if solution is None:
        return None
    return [tuple(op.name.strip("()").split()) for op in solution]


class PlannerWorker:
    """A long-lived planner process (``python -m tasks.muep.planner``) fed one problem per line.

    Keeping it warm saves importing pyperplan per problem; a search past its time-out is ended by killing the
    process, and the next problem starts a fresh one. Safe to use from threads: one lock per worker.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tasks.muep.planner"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=os.environ | {"PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0"},  # same plan every run
            )
        return self._proc

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            self._proc = None

    def solve(self, problem_pddl: str, search: str = "gbf", timeout_s: float = 30.0,
              domain: str = STRIPS_DOMAIN) -> PlanResult:
        if search not in SEARCHES:
            raise ValueError(f"unknown search {search!r}; known: {SEARCHES}")
        with self._lock:
            start = time.perf_counter()
            proc = self._start()
            request = json.dumps({"domain": domain, "problem": problem_pddl, "search": search}) + "\n"
            try:
                proc.stdin.write(request.encode())
                proc.stdin.flush()
            except BrokenPipeError:
                self._kill()
                return PlanResult("error", [], time.perf_counter() - start, "planner process died")
            ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
            if not ready:
                self._kill()
                return PlanResult("timeout", [], time.perf_counter() - start, f"no plan within {timeout_s:g} s")
            line = proc.stdout.readline()
            seconds = time.perf_counter() - start
            if not line:
                self._kill()
                return PlanResult("error", [], seconds, "planner process died")
            kind, payload = json.loads(line)
        if kind == "error":
            return PlanResult("error", [], seconds, payload)
        if payload is None:
            return PlanResult("unsolvable", [], seconds, "the search space holds no plan")
        return PlanResult("solved", [tuple(s) for s in payload if not s[0].startswith("finish-")], seconds)

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._kill()
            self._proc = None

    def __enter__(self) -> PlannerWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve() -> None:
    """The worker loop: one JSON request per stdin line, one JSON answer per stdout line."""
    import logging

    logging.disable(logging.CRITICAL)  # pyperplan logs every search at INFO
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = ["ok", _search(request["domain"], request["problem"], request["search"])]
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a reject reason
            answer = ["error", f"{type(exc).__name__}: {exc}"]
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
