"""Running generated code: the code-check policy first, then a child process with limits, the tools by proxy.

1. :data:`~robot.contract.code_policy.DEFAULT_POLICY` checks the snippet statically; a snippet that fails never runs
   (status ``refused``).
2. It runs in a child process forked from a clean fork server (no ROS threads, no simulator): the address space is
   capped (``RLIMIT_AS``: what the interpreter already maps + ``memory_mb``), files cannot be written
   (``RLIMIT_FSIZE`` 0), CPU time is capped, and the globals are :meth:`CodePolicy.namespace` of the same policy
   object -- the allowed builtins only, ``np`` reduced to the allow-listed attributes, and one proxy per tool.
3. A proxy sends ``(tool, args, kwargs)`` over a pipe; the parent (the runner, which owns the robot) checks the
   wall-clock limit and cancellation, runs the real tool, reports the step and sends back the result or the error.
   The simulator never shares a process with the untrusted code, so a crash, a memory bomb or an endless loop in
   the code costs one repeat, not the runner.

Statuses: ``ok`` (ran to the end), ``robot_error`` (a tool raised RobotError: unreachable, blocked, outside the
workspace), ``code_error`` (an exception from the code itself or a ToolArgumentError), ``refused``, ``timeout``,
``memory``, ``crashed`` (the child died), ``cancelled``. The first two count as grammatically correct.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

from robot.contract.code_policy import DEFAULT_POLICY, CodePolicy
from robot.contract.outcomes import GRAMMATICAL
from robot.contract.tool_api import ToolAPI
from robot.errors import TOOL_EXCEPTIONS, RobotError, ToolArgumentError

MAX_STDOUT = 4000


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 60.0
    memory_mb: int = 512
    max_tool_calls: int = 5000


@dataclass
class Outcome:
    status: str
    error: str | None = None
    steps: int = 0
    stdout: str = ""
    reasons: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def grammatical(self) -> bool:
        return self.status in GRAMMATICAL

    def as_dict(self) -> dict:
        return asdict(self)


class _Interrupted(BaseException):
    """Raised inside a running tool (through the backend's interrupt hook) to stop a motion at once."""


# ------------------------------------------------------------------------------------------------------------- child


def _snippet_line(tb) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == "<snippet>":
            line = lineno
    return line


def _limit_memory(memory_mb: int, cpu_s: float) -> None:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[0])
    current = pages * os.sysconf("SC_PAGE_SIZE")
    budget = current + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(cpu_s) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _child(conn, code: str, memory_mb: int, cpu_s: float, policy: CodePolicy) -> None:
    printed: list[str] = []

    def sandbox_print(*args: Any, sep: str = " ", end: str = "\n", **_: Any) -> None:
        if sum(len(p) for p in printed) < MAX_STDOUT:
            printed.append(sep.join(str(a) for a in args) + end)

    def proxy(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            conn.send(("call", name, args, kwargs))
            reply = conn.recv()
            if reply[0] == "ok":
                return reply[1]
            raise TOOL_EXCEPTIONS.get(reply[1], RobotError)(reply[2])

        call.__name__ = name
        return call

    tools = SimpleNamespace(**{name: proxy(name) for name in policy.tools})
    namespace = policy.namespace(tools)  # type: ignore[arg-type]  (np: the allow-listed view of numpy)
    namespace["__builtins__"] = dict(namespace["__builtins__"], print=sandbox_print)
    status, error = "ok", None
    try:
        _limit_memory(memory_mb, cpu_s)
        exec(compile(code, "<snippet>", "exec"), namespace)  # noqa: S102 - checked code, restricted globals
    except MemoryError:
        status, error = "memory", "MemoryError: the code exceeded its memory limit"
    except RobotError as exc:
        status, error = "robot_error", f"{type(exc).__name__}: {exc}"
    except BaseException as exc:  # noqa: BLE001 - everything the code raises ends the repeat
        where = _snippet_line(exc.__traceback__)
        status = "code_error"
        error = f"{type(exc).__name__}: {exc}" + (f" (line {where})" if where else "")
    printed_text = "".join(printed)[:MAX_STDOUT]
    try:
        conn.send(("done", status, error, printed_text))
    except Exception:  # noqa: BLE001 - e.g. memory exhausted while pickling; the parent sees the exit code
        os._exit(3)


# ------------------------------------------------------------------------------------------------------------ parent

_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the child's numpy must not map threads' stacks
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["numpy", "robot.sandbox"])
        _CONTEXT = ctx
    return _CONTEXT


def prepare() -> None:
    """Start the fork server now (before ROS starts its threads), so the first repeat does not pay for it."""
    run_code("x = 1", ToolAPIStub(), Limits(timeout_s=30))


class ToolAPIStub:
    """No tools at all: for :func:`prepare` and tests of the sandbox itself."""


def run_code(code: str, tools: ToolAPI | Any, limits: Limits = Limits(), policy: CodePolicy = DEFAULT_POLICY,
             on_step: Callable[[dict], None] | None = None,
             should_stop: Callable[[], bool] | None = None) -> Outcome:
    """Check and run one snippet against ``tools``; never raises for anything the code does."""
    start = time.monotonic()
    verdict = policy.check(code)
    if not verdict.ok:
        return Outcome("refused", "the code check refused the snippet: " + "; ".join(verdict.messages()[:5]),
                       reasons=list(verdict.codes), wall_s=0.0)
    ctx = _context()
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_child, args=(child, code, limits.memory_mb, limits.timeout_s, policy), daemon=True)
    process.start()
    child.close()
    deadline = start + limits.timeout_s
    steps = 0

    def finish(status: str, error: str | None, stdout: str = "") -> Outcome:
        if process.is_alive():
            process.kill()
        process.join(5)
        parent.close()
        return Outcome(status, error, steps, stdout, wall_s=round(time.monotonic() - start, 4))

    while True:
        if should_stop is not None and should_stop():
            return finish("cancelled", "the goal was cancelled")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return finish("timeout", f"the code ran longer than {limits.timeout_s:g} s")
        try:
            ready = parent.poll(min(0.05, remaining))
            message = parent.recv() if ready else None
        except (EOFError, OSError):
            message = ("died",)
        if message is None:
            if not process.is_alive() and not parent.poll():
                message = ("died",)
            else:
                continue
        if message[0] == "done":
            return finish(message[1], message[2], message[3])
        if message[0] == "died":
            process.join(5)
            code_ = process.exitcode
            if code_ is not None and code_ < 0 and -code_ in (9, 24):  # SIGKILL/SIGXCPU: the kernel's limits
                return finish("memory" if -code_ == 9 else "timeout", f"the code was killed (signal {-code_})")
            return finish("crashed", f"the code's process died (exit code {code_})")
        _, name, args, kwargs = message
        steps += 1
        if steps > limits.max_tool_calls:
            return finish("code_error", f"more than {limits.max_tool_calls} tool calls")
        reply, step = _call_tool(tools, name, args, kwargs, deadline, should_stop)
        if reply is None:
            status = "cancelled" if should_stop is not None and should_stop() else "timeout"
            return finish(status, "the goal was cancelled" if status == "cancelled"
                          else f"the code ran longer than {limits.timeout_s:g} s (inside {name})")
        step.update(step=steps, t=round(time.monotonic() - start, 3))
        if on_step is not None:
            on_step(step)
        try:
            parent.send(reply)
        except (BrokenPipeError, OSError):
            continue  # the child died meanwhile; the next poll reports it


def _call_tool(tools: Any, name: str, args: tuple, kwargs: dict, deadline: float,
               should_stop: Callable[[], bool] | None) -> tuple[tuple | None, dict]:
    """Run one tool for the child: (reply to send, step record); reply None when interrupted."""
    backend = getattr(tools, "backend", None)

    def interrupt() -> None:
        if time.monotonic() > deadline or (should_stop is not None and should_stop()):
            raise _Interrupted()

    if backend is not None:
        backend.interrupt = interrupt
    step: dict[str, Any] = {"tool": name, "ok": True}
    try:
        result = getattr(tools, name)(*args, **kwargs)
        reply: tuple | None = ("ok", result)
    except _Interrupted:
        return None, step
    except (ToolArgumentError, RobotError) as exc:
        reply = ("error", type(exc).__name__, str(exc))
        step.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    except TypeError as exc:  # wrong arguments for the tool's signature
        reply = ("error", "ToolArgumentError", f"{name}: {exc}")
        step.update(ok=False, error=f"ToolArgumentError: {name}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a fault of the robot side: the code sees a RobotError
        print(f"tool {name} failed: {traceback.format_exc()}", file=sys.stderr)
        reply = ("error", "RobotError", f"{name} failed inside the robot: {type(exc).__name__}: {exc}")
        step.update(ok=False, error=f"RobotError: {type(exc).__name__}: {exc}")
    finally:
        if backend is not None:
            backend.interrupt = None
    notes = getattr(tools, "notes", None)
    if notes:
        step["notes"] = list(notes)
        notes.clear()
    return reply, step
