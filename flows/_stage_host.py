"""A warm process that runs the stages of one ``embp run`` (issue #18: per-stage overhead).

Each stage of ``dvc repro`` is a new ``python -m flows.<stage>`` process, and about two of its seconds go to
importing Prefect, pandas, pyarrow and the project before its flow starts. ``embp run`` therefore starts this host
beside ``dvc repro``: one process that has made those imports once and waits on a Unix socket (its path in
``EMBP_STAGE_HOST``, which the stages inherit through DVC). A stage's process, still started by DVC as always,
finds the variable in ``flows/__init__.py``, hands the host its arguments, working directory, environment and
standard streams (the file descriptors themselves, over the socket), and waits. The host forks; the fork takes the
stage's streams, directory, environment and process group and runs ``flows.<stage>`` as ``__main__``, exactly what
``python -m`` would run, then exits with the stage's code, which the waiting process exits with. The same
``python -m flows.<stage>`` without the variable (plain ``dvc repro``, a test, a user) runs cold as before.

What keeps a fork from being a different run than a cold start:

* **Same environment or cold.** Settings such as Prefect's are read from the environment at import time, so the
  host serves a stage only when the stage's environment equals the host's, but for the variables a shell and DVC
  set per command (``SAME_ENV_EXCEPT``). Otherwise the stage runs cold, and says so at debug level.
* **Same code or cold.** The host remembers the size and modification time of every project file it imported; if
  one changed since, it refuses, and exits (the next run starts a new one).
* **Nothing ran yet.** The host only imports; it runs no flow and holds no thread, connection or event loop, so each
  fork starts from freshly imported modules, as a cold process would.
* **Ends as an interpreter ends.** After the module, the fork joins its threads and runs its ``atexit`` handlers
  (what ``os._exit`` would skip), so what a stage started and stops at exit (Prefect's temporary server) does not
  outlive it holding the stage's streams.
* **Dies with the stage's process.** A thread in the fork reads the socket; when the waiting process disappears,
  SIGKILL included, the fork kills itself with SIGKILL too, and the robot pool it started follows (robot/lifetime.py).
  Signals sent to the waiting process (DVC's SIGTERM, a ``kill``) are passed on to the fork; a Ctrl-C in the
  terminal reaches the fork directly, as it is in the stage's process group.
* **Ends with ``embp run``.** The host exits when ``embp run`` stops it or dies; a stage still running then goes on
  (its exit code comes from the fork itself).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

ENV = "EMBP_STAGE_HOST"
"""The host's socket path; set by ``embp run`` for ``dvc repro`` and so for every stage."""
SAME_ENV_EXCEPT = ("PWD", "OLDPWD", "SHLVL", "_", "DVC_ROOT", "DVC_STAGE", "LINES", "COLUMNS")
"""Variables a shell or DVC sets per command; every other one must equal the host's (``DVC_EXP_*`` too may differ)."""
PRELOAD = ("numpy", "pandas", "pyarrow", "pyarrow.parquet", "pydantic", "pydantic.v1", "yaml", "httpx", "networkx",
           "matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg", "prefect", "prefect.flows",
           "prefect.tasks", "prefect.task_runners", "prefect.client.orchestration", "prefect.cache_policies",
           "prefect.transactions", "prefect.flow_runs", "core.io", "tasks.params", "tasks.paths", "tasks.progress",
           "tasks.records", "flows._runtime", "flows._prefect_server", "robot.contract.catalog",
           "robot.contract.world", "psutil", "fastapi.encoders", "pyarrow.dataset", "prefect.flow_engine",
           "prefect.task_engine", "prefect.utilities.visualization")
"""What most stages import (about 2 s), before the host serves."""
LATER = ("mlflow", "mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store", "torch", "transformers",
         "transformers.modeling_utils", "peft", "bitsandbytes")
"""What many stages import later in their run: MLflow and its SQL store (about 3 s; every stage that logs a run), and
the model stack (about 8 s; the trainings, the real-model steps, the perception's detector), most of it on the run's
critical path, as the real-model steps run alone. The host imports them after it serves, one module at a time and
only while no stage is waiting, so a stage that comes meanwhile waits at most one import (about 3 s, in the run's
first seconds, when the first stages wait for the Prefect server anyway). Importing them starts no thread and no
OpenMP pool (tests/test_stage_host.py); a fork that never uses them shares their pages with the host (copy-on-write,
the host's objects frozen out of the garbage collector)."""
START_TIMEOUT_S = 60.0


def _send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = struct.pack("!I", len(data)) + data
    if fds:
        sent = sock.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        sock.sendall(payload[sent:])  # the descriptors went with the first part; the rest as a stream
    else:
        sock.sendall(payload)


def _recv(sock: socket.socket, with_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One message (None at end of stream) and the file descriptors that came with it."""
    fds: list[int] = []
    buffer = b""
    while len(buffer) < 4:
        if with_fds and not fds:
            chunk, fds, _, _ = socket.recv_fds(sock, 4 - len(buffer), with_fds)
            fds = list(fds)
        else:
            chunk = sock.recv(4 - len(buffer))
        if not chunk:
            return None, fds
        buffer += chunk
    (size,) = struct.unpack("!I", buffer)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data), fds


def comparable_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in SAME_ENV_EXCEPT and not k.startswith("DVC_EXP_")}


# ------------------------------------------------------------------------------------------------------------------
# The stage's side: python -m flows.<stage> with EMBP_STAGE_HOST set


def stage_module(argv: list[str]) -> str | None:
    """``flows.<stage>`` when this interpreter was started as ``python -m flows.<stage> ...`` (no interpreter options,
    not a private module or the CLI), else None."""
    if len(argv) >= 3 and argv[1] == "-m" and argv[2].startswith("flows."):
        name = argv[2].removeprefix("flows.")
        if name and not name.startswith("_") and name != "cli" and "." not in name:
            return argv[2]
    return None


def delegate(path: str, module: str, args: list[str]) -> int | None:
    """Have the host at ``path`` run ``module`` with ``args`` on this process's streams; its exit code, or None when
    there is no host or it declines (run cold then)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        _send(sock, {"module": module, "args": args, "cwd": os.getcwd(), "env": dict(os.environ),
                     "path": sys.path, "executable": sys.executable, "pgid": os.getpgrp()}, [0, 1, 2])
        reply, _ = _recv(sock)
    except OSError:
        sock.close()
        return None
    if not reply or not reply.get("pid"):
        sock.close()
        if reply:
            print(f"stage host declined ({reply.get('why')}); running cold", file=sys.stderr)
        return None
    pid = int(reply["pid"])

    def _forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            if signum in (signal.SIGINT, signal.SIGQUIT) and os.getpgid(pid) == os.getpgrp():
                return  # from the terminal: the fork, in this process group, has it already
            os.kill(pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, _forward)
    while True:
        try:
            ended, _ = _recv(sock)
            break
        except InterruptedError:
            continue
    if ended is None:  # the host died with the stage unfinished
        print("stage host disappeared before the stage ended", file=sys.stderr)
        return 1
    code = int(ended["exit"])
    return code if code >= 0 else 128 - code


def delegate_if_stage() -> None:
    """Called by ``flows/__init__.py`` first thing: exit with the stage's code if the host ran it."""
    path = os.environ.get(ENV)
    module = stage_module(getattr(sys, "orig_argv", []))
    if not path or module is None:
        return
    code = delegate(path, module, sys.orig_argv[3:])
    if code is not None:
        sys.stdout.flush()
        os._exit(code)


# ------------------------------------------------------------------------------------------------------------------
# The host


def _project_files(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root) and ".venv" not in Path(file).parts:
            with contextlib.suppress(OSError):
                stat = os.stat(file)
                out[file] = (stat.st_size, stat.st_mtime_ns)
    return out


def _changed(files: dict[str, tuple[int, int]]) -> str | None:
    for file, (size, mtime) in files.items():
        try:
            stat = os.stat(file)
        except OSError:
            return file
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
            return file
    return None


def _decline(request: dict, env: dict[str, str], files: dict) -> str | None:
    if request.get("executable") != sys.executable:
        return f"another interpreter ({request.get('executable')})"
    mine, theirs = comparable_env(env), comparable_env(request.get("env", {}))
    if mine != theirs:
        keys = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        return f"environment differs in {', '.join(keys[:5])}"
    changed = _changed(files)
    if changed:
        return f"{changed} changed since the host imported it"
    return None


def _run_child(conn: socket.socket, request: dict, fds: list[int], closing: list) -> None:
    """In the fork: become the stage's process and run its module as ``__main__``; never returns."""
    import runpy
    import threading

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for item in closing:
            with contextlib.suppress(OSError):
                item.close()
        with contextlib.suppress(OSError):
            os.setpgid(0, int(request["pgid"]))  # the stage's process group: a Ctrl-C there reaches the fork too
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        sys.stdin = os.fdopen(0, "r", closefd=False)
        sys.stdout = os.fdopen(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = request["path"]
        peer = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        client = struct.unpack("3i", peer)[0]

        def _watch() -> None:  # the stage's process went away (killed): so does the fork
            with contextlib.suppress(OSError):
                while conn.recv(64):
                    pass
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=_watch, name="embp-stage-watch", daemon=True).start()
        import flows._runtime as runtime

        with contextlib.suppress(Exception):
            import psutil

            runtime.STAGE_BORN = psutil.Process(client).create_time()  # startup_s from the real process start
        sys.argv = [request["module"], *request["args"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:  # noqa: BLE001 - what an uncaught exception does to python -m: traceback, exit 1
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        _finalize()
        with contextlib.suppress(Exception):
            _send(conn, {"exit": code})  # first-hand, should the host be gone; it sends the status again
        os._exit(code)


def _finalize() -> None:
    """What the interpreter does at the end of a cold ``python -m`` before it exits, which ``os._exit`` skips: wait
    for the stage's non-daemon threads, run its ``atexit`` handlers (Prefect stops a temporary API server it started
    there; without them such a server outlives the stage and holds its output pipes open), flush the streams."""
    import atexit
    import threading

    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]  # the join Py_Finalize does first
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()  # prints a failing handler's traceback itself, as at a normal exit
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()


def _import_later(name: str) -> None:
    """Import one of ``LATER`` (third-party: no project file to watch); a failure only means that the stages needing
    it import it themselves, and report what fails."""
    import importlib

    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - not installed or broken here
        print(f"embp stage host: {name} not preloaded ({exc})", file=sys.stderr)


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


def serve(path: Path) -> int:
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    later = list(LATER)
    gc.freeze()
    env = dict(os.environ)
    files = _project_files(Path(__file__).resolve().parent.parent)
    parent = os.getppid()
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stopping = []
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the run is for its stages; embp run stops the host
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}
    try:
        while not stopping and os.getppid() == parent:
            events = selector.select(timeout=0 if later else 1.0)
            if not events and later:       # nobody waits: the next heavy module (LATER), then look again
                _import_later(later.pop(0))
                gc.freeze()                # what a fork inherits stays out of its collections (and its pages shared)
                continue
            for key, _ in events:
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    request, fds = _recv(conn, with_fds=3)
                    why = "bad request" if request is None or len(fds) != 3 else _decline(request, env, files)
                    if why:
                        for fd in fds:
                            os.close(fd)
                        with contextlib.suppress(OSError):
                            _send(conn, {"why": why})
                        conn.close()
                        if "changed since" in why:
                            stopping.append(True)
                        continue
                    pid = os.fork()
                    if pid == 0:
                        _run_child(conn, request, fds, [listener, selector, *running.values(),
                                                        *(_Fd(fd) for fd in (wake_r, wake_w))])
                    for fd in fds:
                        os.close(fd)
                    running[pid] = conn
                    with contextlib.suppress(OSError):
                        _send(conn, {"pid": pid})
                else:
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        os.read(wake_r, 512)
            while running:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = running.pop(pid, None)
                if conn is not None:
                    with contextlib.suppress(OSError):
                        _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
                    conn.close()
    finally:  # a stage still running goes on: it lives and dies with its own process, which has its exit code
        listener.close()
        path.unlink(missing_ok=True)
    return 0


@contextlib.contextmanager
def hosting(root: Path, env: dict[str, str]):
    """Start a host for the stages of one run (``embp run``); yields the environment to give ``dvc repro`` (``env``
    plus ``EMBP_STAGE_HOST``), stops the host at the end. The host runs with that same environment. Waits until it
    serves (its imports, about 2 s); a host that does not come up is left out (``env`` as given: stages run cold)."""
    import tempfile

    directory = root / ".dvc" / "tmp" / "embp-stage-host"
    directory.mkdir(parents=True, exist_ok=True)
    sockets = Path(tempfile.mkdtemp(prefix="embp-stage-host-"))  # short: a socket path is at most 107 bytes
    path = sockets / "host.sock"
    env = env | {ENV: str(path)}
    log = open(directory / "host.log", "ab")
    proc = subprocess.Popen([sys.executable, "-c", f"from flows._stage_host import main; main({str(path)!r})"], env=env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(root))
    try:
        ready = wait_ready(path, proc=proc)
        if not ready:
            print(f"the warm stage host did not start (see {directory / 'host.log'}); stages start cold",
                  file=sys.stderr)
        yield env if ready else {k: v for k, v in env.items() if k != ENV}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            sockets.rmdir()


def wait_ready(path: Path, timeout_s: float = START_TIMEOUT_S, proc: subprocess.Popen | None = None) -> bool:
    """True once the host at ``path`` accepts connections; False after ``timeout_s`` or if ``proc`` ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as sock:
            try:
                sock.connect(str(path))
                return True
            except OSError:
                time.sleep(0.05)
    return False


def main(path: str) -> None:
    """The host's process (``python -c``, not ``-m``: ``flows/__init__.py`` imports this module before ``-m`` would
    run it again as ``__main__``)."""
    raise SystemExit(serve(Path(path)))
