"""The run's shared Prefect server: started by the first stage, reused by the next, gone once idle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flows import _prefect_server

pytestmark = pytest.mark.prefect

ROOT = Path(__file__).resolve().parent.parent

STAGE = textwrap.dedent("""
    import json, os, sys, threading
    from flows._runtime import shared_prefect_server
    from prefect import flow
    from prefect.settings import get_current_settings

    @flow(name="probe")
    def probe():
        return os.environ["PREFECT_API_URL"], get_current_settings().flows.heartbeat_frequency  # as the engine reads it

    def bare_thread_url():  # as Prefect's own threads see it (the process pool's forwarder): no copied context
        seen = []
        thread = threading.Thread(target=lambda: seen.append(get_current_settings().api.url))
        thread.start()
        thread.join()
        return seen[0]

    outside = get_current_settings().flows.heartbeat_frequency
    with shared_prefect_server():
        url, heartbeat = probe()
        print(json.dumps({"url": url, "server": json.load(open(sys.argv[1])), "thread_url": bare_thread_url(),
                          "heartbeat": heartbeat, "heartbeat_outside": outside}))
""")


def _stage(root: Path, state: Path) -> dict:
    env = dict(os.environ) | {"EMBP_ROOT": str(root), "EMBP_PREFECT_IDLE_EXIT_S": "15"}
    env.pop("PREFECT_API_URL", None)
    out = subprocess.run([sys.executable, "-c", STAGE, str(state / "server.json")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_stages_share_one_server_that_stops_when_idle(tmp_path):
    state = tmp_path / ".dvc" / "tmp" / "embp-prefect"
    first = _stage(tmp_path, state)
    second = _stage(tmp_path, state)
    assert first["url"] == second["url"] == first["server"]["url"]
    # Prefect's threads see it too: else the events worker starts Prefect's temporary server in such a thread
    assert first["thread_url"] == first["url"]
    # no heartbeat thread on the run's own server (each flow's end waited up to 1 s for it); Prefect's default outside
    assert first["heartbeat"] is None and first["heartbeat_outside"] is not None
    assert first["server"]["pid"] == second["server"]["pid"]
    pid = first["server"]["pid"]
    deadline = time.monotonic() + 60
    while _prefect_server._alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _prefect_server._alive(pid), "the idle server did not stop"
    assert not (state / "server.json").exists()
    assert not list((state / "leases").iterdir())


def test_stop_ends_a_running_server(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBP_ROOT", str(tmp_path))
    state = tmp_path / ".dvc" / "tmp" / "embp-prefect"
    first = _stage(tmp_path, state)
    assert _prefect_server.stop(state)
    assert not _prefect_server._alive(first["server"]["pid"])
    assert not _prefect_server.stop(state)  # nothing left to stop


def test_a_child_that_exited_is_not_alive():
    """``embp run`` starts the server as its own child: once that exits it is a zombie, which ``kill(pid, 0)`` still
    finds; ``_alive`` reaps it (else ``stop`` waited out its whole time-out at the end of every run)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as stat:     # wait until it is a zombie, without reaping it
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    os.kill(child.pid, 0)                                    # a zombie still answers the signal test
    assert not _prefect_server._alive(child.pid)
    assert _prefect_server._alive(os.getpid())
