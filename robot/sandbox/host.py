"""The runner's side of the sandbox: start the zygote, run one repeat, decide how it ended.

How a repeat ends comes from the runner's own bookkeeping and the child's exit status as the zygote reports it
(the zygote runs no untrusted code), never from a message the child sends:

=====================  ===================================================================================
what happened          status
=====================  ===================================================================================
cancel / wall clock    ``cancelled`` / ``timeout`` (the runner had the child killed)
a bad message          ``crashed`` ("protocol violation: ..."): not JSON, an unknown type or field, too long,
                       an unknown tool, more than MAX_TOTAL bytes
exit 0                 ``ok``
exit 10                ``code_error`` (the child's text, cleaned and clipped to MAX_TEXT characters)
exit 11                ``robot_error`` only if the child names a call the runner answered with a RobotError
                       (the text is then the runner's own); otherwise ``crashed`` ("forged robot error").
                       The child exits 11 only when the exception that ended the code is the very object that
                       answer raised and no ``except`` handler of the snippet ever handled it (the restricted
                       compiler makes every handler report what it handles): caught and re-raised later -- the
                       code went on after the answer -- it is the code's own error, exit 10
exit 12 / SIGKILL      ``memory``
exit 13                ``code_error`` ("sandbox violation: ...")
SIGXCPU                ``timeout``
anything else          ``crashed``
=====================  ===================================================================================
"""

from __future__ import annotations

import inspect
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import robot.sandbox.child as exits
import robot.sandbox.isolation as isolation
import robot.sandbox.wire as wire
from core.errors import PipelineError
from robot import lifetime
from robot.contract.code_policy import DEFAULT_POLICY, CodePolicy
from robot.contract.outcomes import GRAMMATICAL
from robot.contract.tool_api import VALUE_CLASSES
from robot.errors import RobotError, ToolArgumentError

log = logging.getLogger("embp.sandbox")
READY_TIMEOUT_S = 60.0
NONE_WARNING = ("generated code runs WITHOUT namespaces (isolation: none): it sees the host's file system, "
                "processes and network interfaces; only the restricted compiler, the guards, uid 65534, rlimits "
                "and seccomp stand between it and the machine")


def _sandbox_env() -> dict[str, str]:
    """The zygote's whole environment: one BLAS thread, and the instruction-set caps the stage runs under
    (core/cpu.py: its numpy computes the bytes the stage's does, on any machine), both read when numpy is imported.
    Nothing else of the host's; and each child clears even these before it reads a snippet (``child.setup``)."""
    from core import cpu

    return {"OPENBLAS_NUM_THREADS": "1"} | {name: os.environ[name] for name in (*cpu.AVX2_PINS, cpu.ENV)
                                            if name in os.environ}


class SandboxUnavailable(PipelineError):
    """The zygote did not start (bubblewrap refused, or the interpreter failed inside it)."""


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
    isolation: str = ""
    calls: list[dict] = field(default_factory=list)
    """The first :data:`KEPT_CALLS` tool calls: ``step``, ``tool``, ``line`` (the snippet's), ``args`` and ``result``
    (clipped reprs) or ``error``, ``ok``. No times or notes: a repeat's record is a DVC output's content."""

    @property
    def grammatical(self) -> bool:
        return self.status in GRAMMATICAL

    def as_dict(self) -> dict:
        return asdict(self)


#: Tool calls a repeat's outcome keeps (a runaway loop makes up to ``Limits.max_tool_calls``); each text is clipped to
#: :data:`CALL_TEXT` characters.
KEPT_CALLS = 300
CALL_TEXT = 300


def _call_text(value: Any) -> str:
    try:
        return wire.clip(repr(value), CALL_TEXT)
    except Exception:  # noqa: BLE001 - a repr that fails must not fail the tool call
        return f"<{type(value).__name__}>"


class _Interrupted(BaseException):
    """Raised inside a running tool (through the backend's interrupt hook) to stop a motion at once."""


# -------------------------------------------------------------------------------------------------- the zygote


class SandboxHost:
    """One zygote, started once (per runner process) and again when it died. ``isolation``: ``auto`` / ``bwrap``
    (bubblewrap; :class:`~robot.sandbox.isolation.IsolationUnavailable` when it cannot work here) or ``none``."""

    def __init__(self, isolation_mode: str = "auto", uid: int = exits.NOBODY, allow_probe: bool = False):
        self.requested = isolation.check_mode(isolation_mode)
        self.uid = uid
        self.allow_probe = allow_probe  # tests only: run_probe may run unrestricted code in a confined child
        self.process: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.mode = ""
        self.next_id = 0
        self.lock = threading.RLock()
        self.stderr_tail = b""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        with self.lock:
            if self.alive:
                return
            self.close()
            mode = isolation.resolve(self.requested)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            config = {"control_fd": theirs.fileno(), "uid": self.uid, "isolation": mode,
                      "allow_probe": self.allow_probe}
            from robot.sandbox.zygote import BOOT

            if mode == "bwrap":
                argv = isolation.bwrap_argv(isolation.python_command(BOOT, isolation.sandbox_paths(), config),
                                            os.geteuid() == 0)
            else:
                argv = isolation.python_command(BOOT, isolation.plain_paths(), config)
            try:
                self.process = lifetime.spawn(argv, pdeathsig=None, pass_fds=[theirs.fileno()],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, env=_sandbox_env(), cwd="/")
            finally:
                theirs.close()
            self.control = ours
            self.mode = mode
            self.stderr_tail = b""
            drain = threading.Thread(target=self._drain_stderr, args=(self.process,), daemon=True)
            drain.start()
            ready = self._receive(READY_TIMEOUT_S)
            if ready is None or ready["t"] != "ready":
                self.close()
                drain.join(2)
                text = self.stderr_tail.decode(errors="replace").strip()[-600:] or "no message"
                error = isolation.IsolationUnavailable if mode == "bwrap" else SandboxUnavailable
                raise error(f"the sandbox's fork server did not start ({mode}): {text}")
            if mode == "none":
                log.warning("sandbox: %s", NONE_WARNING)

    def _drain_stderr(self, process: subprocess.Popen) -> None:
        for chunk in iter(lambda: process.stderr.read(4096), b""):
            self.stderr_tail = (self.stderr_tail + chunk)[-4096:]

    def _receive(self, timeout_s: float) -> dict | None:
        ready, _, _ = select.select([self.control], [], [], timeout_s)
        if not ready:
            return None
        data = self.control.recv(1 << 16)
        return wire.loads(data.rstrip(b"\n"), "zygote") if data else None

    def spawn(self, memory_mb: int, cpu_s: float) -> tuple[int, int, int]:
        """(repeat id, fd to write to the child, fd to read from the child)."""
        self.start()
        self.next_id += 1
        rid = self.next_id
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            socket.send_fds(self.control, [wire.dumps({"t": "spawn", "id": rid, "memory_mb": memory_mb,
                                                       "cpu_s": cpu_s})], [to_child_r, from_child_w])
        except OSError:
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        return rid, to_child_w, from_child_r

    def kill(self, rid: int) -> None:
        try:
            self.control.send(wire.dumps({"t": "kill", "id": rid}))
        except (OSError, AttributeError):
            pass

    def close(self) -> None:
        with self.lock:
            if self.control is not None:
                self.control.close()
                self.control = None
            if self.process is not None:
                if self.process.poll() is None:
                    self.process.kill()
                try:
                    self.process.wait(5)
                except subprocess.TimeoutExpired:
                    pass
                self.process = None


_DEFAULT_MODE = "auto"
_HOSTS: dict[str, SandboxHost] = {}
_HOSTS_LOCK = threading.Lock()


def configure(mode: str) -> None:
    """Set the isolation of this process's sandbox (what :func:`run_code` uses without a ``host``)."""
    global _DEFAULT_MODE
    _DEFAULT_MODE = isolation.check_mode(mode)


def default_mode() -> str:
    return _DEFAULT_MODE


def host_for(mode: str | None = None) -> SandboxHost:
    """This process's sandbox host for ``mode`` (default: :func:`configure`'s), started on first use."""
    mode = isolation.check_mode(mode or _DEFAULT_MODE)
    with _HOSTS_LOCK:
        host = _HOSTS.get(mode)
        if host is None:
            host = _HOSTS[mode] = SandboxHost(mode)
    host.start()
    return host


def prepare(mode: str | None = None) -> SandboxHost:
    """Start the sandbox now (a runner does this before serving): IsolationUnavailable when ``mode`` needs
    bubblewrap and bubblewrap does not work here."""
    if mode is not None:
        configure(mode)
    return host_for()


# ---------------------------------------------------------------------------------------------------- a repeat


def run_code(code: str, tools: Any, limits: Limits = Limits(), policy: CodePolicy = DEFAULT_POLICY,
             on_step: Callable[[dict], None] | None = None, should_stop: Callable[[], bool] | None = None,
             host: SandboxHost | None = None) -> Outcome:
    """Check and run one snippet against ``tools``; never raises for anything the code does (a sandbox that cannot
    start at all raises :class:`SandboxUnavailable` / ``IsolationUnavailable``)."""
    start = time.monotonic()
    host = host or host_for()
    verdict = policy.check(code)
    if not verdict.ok:
        messages = [wire.clip(m, 300) for m in verdict.messages()[:5]]
        return Outcome("refused", wire.clip("the code check refused the snippet: " + "; ".join(messages)),
                       reasons=list(verdict.codes), isolation=host.mode)
    if host.mode == "none":
        log.warning("sandbox: %s", NONE_WARNING)
    with host.lock:
        return _Repeat(code, tools, limits, policy, host, on_step, should_stop, start).run()


def run_probe(code: str, host: SandboxHost, limits: Limits = Limits(timeout_s=10)) -> Outcome:
    """Tests only: run *unrestricted* ``code`` in a confined child (what a snippet that escaped every guard could
    do). The host must have been made with ``allow_probe=True``."""
    if not host.allow_probe:
        raise ValueError("run_probe needs a SandboxHost(allow_probe=True)")
    with host.lock:
        return _Repeat(code, object(), limits, DEFAULT_POLICY, host, None, None, time.monotonic(), probe=True).run()


def _signature(params: tuple[str, ...], n_required: int) -> inspect.Signature:
    return inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                default=inspect.Parameter.empty if i < n_required else None)
                              for i, p in enumerate(params)])


class _Repeat:
    def __init__(self, code: str, tools: Any, limits: Limits, policy: CodePolicy, host: SandboxHost,
                 on_step: Callable[[dict], None] | None, should_stop: Callable[[], bool] | None, start: float,
                 probe: bool = False):
        self.code, self.tools, self.limits, self.policy, self.host = code, tools, limits, policy, host
        self.on_step, self.should_stop, self.start, self.probe = on_step, should_stop, start, probe
        self.deadline = start + limits.timeout_s
        self.codec = wire.Codec(VALUE_CLASSES)
        self.steps = 0
        self.calls: list[dict] = []
        self.stdout: list[str] = []
        self.stdout_len = 0
        self.robot_errors: dict[int, str] = {}  # call id -> the runner's own error text
        self.child_error: dict | None = None
        self.wfd = self.rfd = -1

    def outcome(self, status: str, error: str | None) -> Outcome:
        return Outcome(status, None if error is None else wire.clip(error), self.steps,
                       wire.clip("".join(self.stdout), wire.MAX_STDOUT), wall_s=round(time.monotonic() - self.start, 4),
                       isolation=self.host.mode, calls=self.calls)

    def run(self) -> Outcome:
        host = self.host
        try:
            rid, self.wfd, self.rfd = host.spawn(self.limits.memory_mb, self.limits.timeout_s)
        except OSError as exc:
            host.close()  # the next repeat starts a fresh zygote
            return self.outcome("crashed", f"the sandbox could not start the code: {exc}")
        os.set_blocking(self.wfd, False)
        reader = wire.LineReader()
        verdict: tuple[str, str | None] | None = None
        exit_info: dict | None = None
        eof = False
        try:
            if self.probe:
                self._write({"t": "probe", "code": self.code})
            else:
                self._write({"t": "start", "code": self.code, "max_stdout": wire.MAX_STDOUT,
                             "tools": {n: [list(s.param_names), s.n_required] for n, s in self.policy.tools.items()},
                             "policy": {"builtins": sorted(self.policy.builtins),
                                        "np": sorted(self.policy.modules["np"]),
                                        "methods": sorted(self.policy.methods),
                                        "attributes": sorted(self.policy.attributes),
                                        "constructors": sorted(self.policy.constructors)}})
            while exit_info is None or not eof:
                if verdict is None and self.should_stop is not None and self.should_stop():
                    verdict = ("cancelled", "the goal was cancelled")
                    host.kill(rid)
                if verdict is None and time.monotonic() > self.deadline:
                    verdict = ("timeout", f"the code ran longer than {self.limits.timeout_s:g} s")
                    host.kill(rid)
                if verdict is not None and time.monotonic() > self.deadline + 10:
                    break  # the zygote did not report the kill in time
                watch = [host.control] + ([] if eof else [self.rfd])
                ready, _, _ = select.select(watch, [], [], 0.05)
                if host.control in ready:
                    data = host.control.recv(1 << 16)
                    if not data:
                        host.close()
                        return self.outcome(verdict[0] if verdict else "crashed",
                                            verdict[1] if verdict else "the sandbox's fork server died")
                    message = wire.loads(data.rstrip(b"\n"), "zygote")
                    if message["t"] == "exit" and message["id"] == rid:
                        exit_info = message
                    elif message["t"] == "spawn_failed" and message["id"] == rid:
                        return self.outcome("crashed", f"the sandbox could not start the code: {message['text']}")
                if self.rfd in ready and not eof:
                    chunk = os.read(self.rfd, 1 << 16)
                    if not chunk:
                        eof = True
                        continue
                    if verdict is not None:
                        continue  # killed: whatever it still says does not matter
                    try:
                        for line in reader.feed(chunk):
                            verdict = self._message(wire.loads(line, "child"))
                            if verdict is not None:
                                host.kill(rid)
                                break
                    except wire.ProtocolError as exc:
                        verdict = ("crashed", f"protocol violation: {exc}")
                        host.kill(rid)
        except TimeoutError:
            verdict = verdict or ("timeout", f"the code ran longer than {self.limits.timeout_s:g} s")
            host.kill(rid)
        finally:
            os.close(self.wfd)
            os.close(self.rfd)
        if verdict is not None:
            return self.outcome(*verdict)
        if exit_info is None:
            return self.outcome("crashed", "the sandbox lost the code's process")
        return self.outcome(*self._classify(exit_info["code"], exit_info["signal"]))

    # ------------------------------------------------------------------------------------------------ messages

    def _write(self, message: dict) -> None:
        data = wire.dumps(message)
        while data:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            _, ready, _ = select.select([], [self.wfd], [], min(remaining, 0.05))
            if ready:
                try:
                    data = data[os.write(self.wfd, data):]
                except BrokenPipeError:
                    return  # the child died; its exit status says why

    def _message(self, message: dict) -> tuple[str, str | None] | None:
        kind = message["t"]
        if kind == "print":
            room = wire.MAX_STDOUT - self.stdout_len
            if room > 0:
                self.stdout.append(message["text"][:room])
                self.stdout_len += min(room, len(message["text"]))
            return None
        if kind == "error":
            if self.child_error is None:
                message["text"] = wire.clip(message["text"])
                self.child_error = message
            return None
        name = message["tool"]
        if name not in self.policy.tools:
            raise wire.ProtocolError(f"call of an unknown tool {name[:40]!r}")
        self.steps += 1
        if self.steps > self.limits.max_tool_calls:
            return "code_error", f"more than {self.limits.max_tool_calls} tool calls"
        try:
            args = [self.codec.decode(a) for a in message["args"]]
            kwargs = {str(k): self.codec.decode(v) for k, v in message["kwargs"].items()}
        except wire.ProtocolError as exc:
            raise wire.ProtocolError(f"tool arguments: {exc}") from None
        reply, step = self._call_tool(message["id"], name, args, kwargs)
        step.update(step=self.steps, line=message["line"], args=wire.clip(", ".join(
            [_call_text(a) for a in args] + [f"{k}={_call_text(v)}" for k, v in kwargs.items()]), CALL_TEXT))
        if len(self.calls) < KEPT_CALLS:  # without the notes: free text that may name times
            self.calls.append({k: v for k, v in step.items() if k != "notes"})
        if reply is None:
            if self.should_stop is not None and self.should_stop():
                return "cancelled", "the goal was cancelled"
            return "timeout", f"the code ran longer than {self.limits.timeout_s:g} s (inside {name})"
        step.update(t=round(time.monotonic() - self.start, 3))
        if self.on_step is not None:
            self.on_step(step)
        self._write(reply)
        return None

    def _call_tool(self, call_id: int, name: str, args: list, kwargs: dict) -> tuple[dict | None, dict]:
        """Run one tool for the child: (the answer to send, the step record); answer None when interrupted."""
        backend = getattr(self.tools, "backend", None)

        def interrupt() -> None:
            if time.monotonic() > self.deadline or (self.should_stop is not None and self.should_stop()):
                raise _Interrupted()

        if backend is not None:
            backend.interrupt = interrupt
        step: dict[str, Any] = {"tool": name, "ok": True}
        spec = self.policy.tools[name]
        try:
            try:
                _signature(spec.param_names, spec.n_required).bind(*args, **kwargs)
            except TypeError as exc:
                raise ToolArgumentError(f"{name}: {exc}") from None
            try:
                result = getattr(self.tools, name)(*args, **kwargs)
            except TypeError as exc:  # wrong arguments for the tool's own signature
                raise ToolArgumentError(f"{name}: {exc}") from None
            step["result"] = _call_text(result)
            try:
                reply: dict = {"t": "result", "id": call_id, "value": self.codec.encode(result)}
            except wire.ProtocolError as exc:
                raise RuntimeError(f"its result cannot be sent to the code: {exc}") from None
        except _Interrupted:
            return None, step
        except (ToolArgumentError, RobotError) as exc:
            text = wire.clip(str(exc))
            reply = {"t": "raise", "id": call_id, "exc": type(exc).__name__, "text": text}
            step.update(ok=False, error=f"{type(exc).__name__}: {text}")
            if isinstance(exc, RobotError):
                self.robot_errors[call_id] = f"{type(exc).__name__}: {text}"
        except Exception as exc:  # noqa: BLE001 - a fault of the robot side: the code sees a RobotError
            log.error("tool %s failed: %s", name, traceback.format_exc())
            text = wire.clip(f"{name} failed inside the robot: {type(exc).__name__}: {exc}")
            reply = {"t": "raise", "id": call_id, "exc": "RobotError", "text": text}
            step.update(ok=False, error=f"RobotError: {text}")
            self.robot_errors[call_id] = f"RobotError: {text}"
        finally:
            if backend is not None:
                backend.interrupt = None
        notes = getattr(self.tools, "notes", None)
        if notes:
            step["notes"] = [wire.clip(str(n), 500) for n in notes]
            notes.clear()
        return reply, step

    # ------------------------------------------------------------------------------------------------- verdict

    def _classify(self, code: int | None, sig: int | None) -> tuple[str, str | None]:
        error = self.child_error or {}
        text = error.get("text") or ""
        if sig is not None:
            if sig == signal.SIGXCPU:
                return "timeout", f"the code used more than its CPU time (signal {sig})"
            if sig == signal.SIGKILL:
                return "memory", f"the code was killed (signal {sig}), most likely for its memory"
            if sig == signal.SIGSYS:
                return "crashed", "the code made a forbidden system call (SIGSYS)"
            return "crashed", f"the code's process died (signal {sig})"
        if code == exits.EXIT_OK:
            return "ok", None
        if code == exits.EXIT_CODE_ERROR:
            return "code_error", text or "the code raised an exception"
        if code == exits.EXIT_ROBOT_ERROR:
            ref = error.get("ref")
            if error.get("kind") == "robot" and ref in self.robot_errors:
                line = error.get("line")
                return "robot_error", self.robot_errors[ref] + (f" (line {line})" if line else "")
            return "crashed", "protocol violation: the code claimed a robot error the runner never raised"
        if code == exits.EXIT_MEMORY:
            return "memory", "MemoryError: the code exceeded its memory limit"
        if code == exits.EXIT_VIOLATION:
            return "code_error", text or "sandbox violation"
        if code == exits.EXIT_SETUP:
            return "crashed", "the sandbox could not confine the code's process"
        if code == exits.EXIT_PROTOCOL:
            return "crashed", "protocol violation: the code's process broke the protocol"
        return "crashed", f"the code's process died (exit code {code})"
