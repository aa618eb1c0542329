"""One repeat of one snippet, in a process forked from the zygote (``zygote.py``).

Before the snippet is even read, in this order: the two pipes become fds 3 and 4 and every other descriptor is closed
(0-2 are /dev/null); resource limits (address space, CPU, no files, no processes, no core dumps); as root, uid and
gid 65534 with no supplementary groups and an empty capability bounding set; the parent-death signal; the seccomp
filter (``seccomp.py``). Then the ``start`` message: the snippet is compiled by the restricted compiler and run with
the guarded globals of the runner's policy (``robot/contract/restricted.py``), the tools as :class:`ToolProxy`
objects.

The process's exit status -- reported to the runner by the zygote, not by this process -- is all the runner takes
from here to classify the repeat, and it checks that against its own bookkeeping: :data:`EXIT_ROBOT_ERROR` counts
only if the runner really answered the call the child names with a robot error. Messages carry printed text,
capped error text and tool calls, never a verdict.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import resource
import signal
import sys
import traceback
from typing import Any

import robot.sandbox.seccomp as seccomp
import robot.sandbox.wire as wire
from robot.contract.code_policy import CodePolicy
from robot.contract.restricted import SNIPPET, SandboxViolation, compile_snippet
from robot.contract.tool_api import VALUE_CLASSES
from robot.errors import TOOL_EXCEPTIONS, RobotError, ToolArgumentError

EXIT_OK, EXIT_CODE_ERROR, EXIT_ROBOT_ERROR, EXIT_MEMORY, EXIT_VIOLATION, EXIT_PROTOCOL, EXIT_SETUP = (
    0, 10, 11, 12, 13, 14, 15)
IN_FD, OUT_FD = 3, 4
MAX_REPLY = 16 << 20
"""Longest answer of the runner the child accepts (a tool result)."""
NOBODY = 65534
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP = 1, 24


# --------------------------------------------------------------------------------------------------------- setup


def _move_fds(in_fd: int, out_fd: int) -> None:
    high_in, high_out = os.dup(in_fd), os.dup(out_fd)  # out of the way of 3 and 4 first
    os.dup2(high_in, IN_FD)
    os.dup2(high_out, OUT_FD)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(OUT_FD + 1, 65536)  # the zygote's control socket and everything else


def _limits(memory_mb: int, cpu_s: float) -> None:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[0])
    budget = pages * os.sysconf("SC_PAGE_SIZE") + memory_mb * 1024 * 1024
    cpu = int(cpu_s) + 5
    for limit, value in ((resource.RLIMIT_AS, (budget, budget)), (resource.RLIMIT_CPU, (cpu, cpu + 5)),
                         (resource.RLIMIT_FSIZE, (0, 0)), (resource.RLIMIT_CORE, (0, 0)),
                         (resource.RLIMIT_NOFILE, (OUT_FD + 1, OUT_FD + 1)), (resource.RLIMIT_NPROC, (0, 0)),
                         (resource.RLIMIT_MEMLOCK, (0, 0)), (resource.RLIMIT_MSGQUEUE, (0, 0))):
        resource.setrlimit(limit, value)


def _drop_privileges(libc: Any, uid: int) -> None:
    """As root (the zygote keeps CAP_SETUID, CAP_SETGID, CAP_SETPCAP and nothing else in bwrap): empty bounding set,
    uid and gid ``uid``, no groups. Changing every uid away from 0 clears the permitted and effective capabilities;
    RLIMIT_NPROC only binds a process that is not root."""
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("the uid did not change")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError("the child could become root again")


def setup(in_fd: int, out_fd: int, memory_mb: int, cpu_s: float, uid: int | None, zygote_pid: int) -> None:
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.setsid()
    _move_fds(in_fd, out_fd)
    _limits(memory_mb, cpu_s)
    libc = ctypes.CDLL(None, use_errno=True)
    if uid is not None and os.geteuid() == 0:
        _drop_privileges(libc, uid)
    # after the uid change, which clears it: die with the zygote, whatever kills it
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote_pid:
        raise OSError("the zygote is gone")
    os.environ.clear()  # unsetenv too: the snippet's process has no environment at all (see isolation.py)
    seccomp.install("none")


# ------------------------------------------------------------------------------------------------------- channel


class Channel:
    def __init__(self) -> None:
        self.reader = wire.LineReader(max_line=MAX_REPLY, max_total=1 << 62)
        self.pending: list[bytes] = []

    def send(self, message: dict) -> None:
        data = wire.dumps(message)
        while data:
            data = data[os.write(OUT_FD, data):]

    def receive(self) -> dict:
        while not self.pending:
            chunk = os.read(IN_FD, 1 << 16)
            if not chunk:
                raise EOFError("the runner closed the channel")
            self.pending += self.reader.feed(chunk)
        return wire.loads(self.pending.pop(0), "runner", MAX_REPLY)


class ToolProxy:
    """One tool as the snippet sees it: checks the call against the tool's signature when it is called, sends it
    and waits for the runner's answer. Not a function: it has no globals, closure or code object to walk from, and
    the guards refuse every attribute of it."""

    __slots__ = ("name", "signature", "harness")

    def __init__(self, name: str, params: list[str], n_required: int, harness: Harness):
        self.name = name
        self.signature = inspect.Signature([
            inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=inspect.Parameter.empty if i < n_required else None)
            for i, p in enumerate(params)])
        self.harness = harness

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ToolArgumentError(f"{self.name}: {exc}") from None
        return self.harness.call(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


class Harness:
    def __init__(self, channel: Channel, max_stdout: int):
        self.channel = channel
        self.codec = wire.Codec(VALUE_CLASSES)
        self.max_stdout = max_stdout
        self.printed: list[str] = []
        self.printed_len = 0
        self.calls = 0
        self.robot_errors: dict[int, tuple[BaseException, int]] = {}  # id(raised) -> (it, call id)
        """The RobotErrors the runner's answers raised that no ``except`` handler has caught yet."""

    def print(self, *args: Any, sep: Any = " ", end: Any = "\n", **_: Any) -> None:
        if self.printed_len >= self.max_stdout:
            return
        text = str(sep).join(str(a) for a in args) + str(end)
        text = text[: self.max_stdout - self.printed_len]
        self.printed.append(text)
        self.printed_len += len(text)

    def flush(self) -> None:
        if self.printed:
            self.channel.send({"t": "print", "text": "".join(self.printed)})
            self.printed.clear()

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            message = {"t": "call", "id": self.calls + 1, "tool": name, "args": [self.codec.encode(a) for a in args],
                       "kwargs": {k: self.codec.encode(v) for k, v in kwargs.items()}, "line": _calling_line()}
            data = wire.dumps(message)
        except (wire.ProtocolError, RecursionError, ValueError, TypeError, OverflowError) as exc:
            raise ToolArgumentError(wire.clip(f"{name}: {exc}", 500)) from None
        if len(data) > wire.MAX_LINE // 2:
            raise ToolArgumentError(f"{name}: the arguments are too large to send to the robot")
        self.flush()
        self.calls += 1
        self.channel.send(message)
        reply = self.channel.receive()
        if reply.get("id") != self.calls:
            raise wire.ProtocolError("the answer is for another call")
        if reply["t"] == "result":
            return self.codec.decode(reply["value"])
        if reply["t"] == "raise":
            exc = TOOL_EXCEPTIONS.get(reply["exc"], RobotError)(reply["text"])
            if isinstance(exc, RobotError):
                self.robot_errors[id(exc)] = (exc, self.calls)
            raise exc
        raise wire.ProtocolError(f"unexpected answer {reply['t']!r}")

    def caught(self) -> None:
        """First thing in every ``except`` handler of the snippet: the exception it handles no longer ends the repeat
        as the runner's answer -- the code went on after it, so re-raising it later is the code's own error."""
        handled = sys.exception()
        if handled is not None:
            self.robot_errors.pop(id(handled), None)

    def violation(self, what: str) -> None:
        self.end(EXIT_VIOLATION, "violation", f"sandbox violation: {what}")

    def end(self, code: int, kind: str | None = None, text: str = "", line: int | None = None,
            ref: int | None = None) -> None:
        try:
            self.flush()
            if kind is not None:
                self.channel.send({"t": "error", "kind": kind, "text": wire.clip(text), "line": line, "ref": ref})
        except BaseException:  # noqa: BLE001 - the exit status says what happened anyway
            pass
        os._exit(code)

    def run(self, start: dict) -> None:
        lists = start["policy"]
        policy = CodePolicy(builtins=frozenset(lists["builtins"]), modules={"np": frozenset(lists["np"])},
                            methods=frozenset(lists["methods"]), attributes=frozenset(lists["attributes"]),
                            constructors=frozenset(lists["constructors"]))
        tools = {name: ToolProxy(name, spec[0], spec[1], self) for name, spec in start["tools"].items()}
        compiled, errors = compile_snippet(start["code"])
        if compiled is None:
            self.end(EXIT_CODE_ERROR, "code", "the restricted compiler refused the snippet: "
                     + "; ".join(message for _, message in errors[:3]))
        namespace = policy.runtime_globals(tools, print_fn=self.print, violation=self.violation,
                                           exception_types=tuple(TOOL_EXCEPTIONS.values()), caught=self.caught)
        try:
            exec(compiled, namespace)  # noqa: S102 - restricted code object, guarded globals, confined process
        except MemoryError:
            self.end(EXIT_MEMORY, "memory", "MemoryError: the code exceeded its memory limit")
        except SandboxViolation as exc:  # the hook normally ends the process first
            self.end(EXIT_VIOLATION, "violation", f"sandbox violation: {exc}")
        except wire.ProtocolError:
            self.end(EXIT_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - everything the code raises ends the repeat
            self._code_raised(exc)
        self.end(EXIT_OK)

    def _code_raised(self, exc: BaseException) -> None:
        line = _snippet_line(exc)
        try:
            text = f"{type(exc).__name__}: {str(exc)[:wire.MAX_TEXT]}"
        except BaseException:  # noqa: BLE001 - a str() that recurses or runs out of memory
            text = wire.clip(type(exc).__name__, 200)
        text = wire.clip(text, wire.MAX_TEXT - 20) + (f" (line {line})" if line is not None else "")
        entry = self.robot_errors.get(id(exc))
        if entry is not None and entry[0] is exc:
            self.end(EXIT_ROBOT_ERROR, "robot", text, line, entry[1])
        self.end(EXIT_CODE_ERROR, "code", text, line)


def _calling_line() -> int | None:
    """The snippet's line running now (its innermost frame: a line of a helper the snippet defined, if in one)."""
    frame = inspect.currentframe()
    try:
        while frame is not None and frame.f_code.co_filename != SNIPPET:
            frame = frame.f_back
        return frame.f_lineno if frame is not None else None
    finally:
        del frame


def _snippet_line(exc: BaseException) -> int | None:
    line = None
    try:
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            if frame.f_code.co_filename == SNIPPET:
                line = lineno
    except BaseException:  # noqa: BLE001
        return None
    return line


def main(in_fd: int, out_fd: int, memory_mb: int, cpu_s: float, uid: int | None, zygote_pid: int,
         allow_probe: bool = False) -> None:
    """Entry point in the forked child; never returns."""
    try:
        setup(in_fd, out_fd, memory_mb, cpu_s, uid, zygote_pid)
    except BaseException:  # noqa: BLE001 - a child that cannot be confined must not run anything
        os._exit(EXIT_SETUP)
    channel = Channel()
    try:
        start = channel.receive()
        if start["t"] == "probe" and allow_probe:
            _probe(channel, start["code"])
        if start["t"] != "start":
            raise wire.ProtocolError("expected start")
    except BaseException:  # noqa: BLE001
        os._exit(EXIT_PROTOCOL)
    Harness(channel, start["max_stdout"]).run(start)


def _probe(channel: Channel, code: str) -> None:
    """Tests only (a zygote started with ``allow_probe``): run *unrestricted* Python in the confined child -- what a
    snippet that escaped every static and runtime guard could still do -- to test the process layer on its own."""
    def report(*args: Any) -> None:
        channel.send({"t": "print", "text": " ".join(str(a) for a in args)[:3000] + "\n"})

    try:
        exec(code, {"__builtins__": __builtins__, "report": report, "OUT_FD": OUT_FD, "IN_FD": IN_FD})  # noqa: S102
    except BaseException as exc:  # noqa: BLE001
        report(f"probe raised {type(exc).__name__}: {exc}")
        os._exit(EXIT_CODE_ERROR)
    os._exit(EXIT_OK)
