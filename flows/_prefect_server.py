"""One Prefect server for every stage of a run: the first stage of a ``dvc repro`` starts it, the later stages reuse
it, and it stops by itself once no stage has held it for ``IDLE_EXIT_S`` seconds (``embp run`` stops it at once).

Without this, each stage would start Prefect's temporary server (6-9 s a stage). The server is Prefect's own API app
served by uvicorn in a small daemon process (``python -m flows._prefect_server``), in its own session so that it
outlives the stage that started it. Its address and pid live in ``.dvc/tmp/embp-prefect/server.json`` of the
repository (ignored by git and DVC); each stage holds a lease file named after its pid while it runs. With
``PREFECT_API_URL`` set, none of this happens: runs go to that server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from core.io import file_lock

IDLE_EXIT_S = float(os.environ.get("EMBP_PREFECT_IDLE_EXIT_S", "20"))
START_TIMEOUT_S = 120.0


def state_dir() -> Path:
    from tasks import paths

    return paths.ROOT / ".dvc" / "tmp" / "embp-prefect"


def _alive(pid: int) -> bool:
    """True while ``pid`` runs. A server this process started (``embp run``'s lease) is its child: once it has
    exited it stays a zombie, which ``kill(pid, 0)`` still finds, until it is reaped here (before this, every
    ``embp run`` ended by waiting out :func:`stop`'s 15 s for a server that had exited within a second or two)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:       # not our child: its parent (or init) reaps it
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(url: str, timeout_s: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def _read_state(directory: Path) -> dict | None:
    try:
        state = json.loads((directory / "server.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and _alive(int(state.get("pid", 0))) else None


def _start_daemon(directory: Path) -> str:
    log = open(directory / "server.log", "ab")
    env = dict(os.environ) | {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                              "PREFECT__SERVER_FINAL": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "flows._prefect_server", "--state", str(directory)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
                            cwd=str(directory.parent.parent.parent))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = _read_state(directory)
        if state is not None and state.get("pid") == proc.pid:
            return state["url"]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    tail = (directory / "server.log").read_text(encoding="utf-8", errors="replace")[-2000:]
    raise RuntimeError(f"the shared Prefect server did not start within {START_TIMEOUT_S:.0f} s: {tail}")


@contextlib.contextmanager
def lease() -> Iterator[str]:
    """The shared server's API URL, started if none is running; held (a lease file) until the block ends."""
    directory = state_dir()
    with file_lock(directory / "lock"):
        state = _read_state(directory)
        url = state["url"] if state is not None and _healthy(state["url"]) else _start_daemon(directory)
        leases = directory / "leases"
        leases.mkdir(exist_ok=True)
        mine = leases / str(os.getpid())
        mine.touch()
    try:
        yield url
    finally:
        mine.unlink(missing_ok=True)


def stop(directory: Path | None = None, timeout_s: float = 15.0) -> bool:
    """Stop the shared server of this repository now (``embp run`` calls it at the end). True if one was running."""
    directory = directory or state_dir()
    state = _read_state(directory)
    if state is None:
        return False
    os.kill(int(state["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(int(state["pid"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True


# ------------------------------------------------------------------------------------------------------------------
# The daemon


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _busy(leases: Path) -> bool:
    held = False
    for entry in leases.glob("*") if leases.is_dir() else []:
        if entry.name.isdigit() and _alive(int(entry.name)):
            held = True
        else:
            entry.unlink(missing_ok=True)  # a stage that died without releasing its lease
    return held


def serve(directory: Path, idle_exit_s: float = IDLE_EXIT_S) -> int:
    import uvicorn

    from core.io import write_json

    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=port,
                            log_level="error", lifespan="on")
    server = uvicorn.Server(config)
    stopping = threading.Event()

    def _stop(*_: object) -> None:
        stopping.set()
        server.should_exit = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def _watch() -> None:
        while not server.started and not stopping.is_set():
            time.sleep(0.05)
        if stopping.is_set():
            return
        write_json(directory / "server.json", {"pid": os.getpid(), "url": url})
        last_held = time.monotonic()
        while not stopping.wait(1.0):
            if _busy(directory / "leases"):
                last_held = time.monotonic()
            elif time.monotonic() - last_held > idle_exit_s:
                _stop()

    watcher = threading.Thread(target=_watch, daemon=True)
    watcher.start()
    try:
        server.run()
    finally:
        state = directory / "server.json"
        with contextlib.suppress(OSError, ValueError):
            if json.loads(state.read_text(encoding="utf-8")).get("pid") == os.getpid():
                state.unlink()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, required=True, help="the folder of server.json and the leases")
    parser.add_argument("--idle-exit", type=float, default=IDLE_EXIT_S, help="seconds without a lease before exit")
    args = parser.parse_args(argv)
    return serve(args.state, args.idle_exit)


if __name__ == "__main__":
    code = main()
    # the server has shut down (its lifespan closed the database); tearing the interpreter down module by module
    # (Prefect's server, SQLAlchemy, FastAPI) would take another ~1.3 s that `embp run` waits for at its end
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
