"""Isolation modes of the sandbox (issue #14): without bubblewrap -- missing, or unable to create namespaces as in an
unprivileged Docker container -- ``auto`` and ``bwrap`` refuse to start (the sandbox, a runner, a local pool) with a
message naming ``roboscript.eval.isolation``; ``none`` runs, still confines the child, and warns on every repeat and
episode. The fork server survives the thread that started it, comes back when killed, and dies with its process.

Every test runs whether or not bubblewrap works on this machine: where it does, a container without namespaces is
simulated by a fake ``bwrap`` or by running inside bubblewrap with Docker's default capabilities.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import sandbox_corpus as corpus
from processes import descendants, survivors

from core.errors import PipelineError
from robot import sandbox
from robot.sandbox import IsolationUnavailable, Limits, SandboxHost, isolation, run_code
from robot.sandbox import host as host_module

REPO = Path(__file__).resolve().parent.parent
LIMITS = Limits(timeout_s=5.0, memory_mb=256)
NO_NAMESPACES = "bwrap: Creating new namespace failed: Operation not permitted"
#: Docker's default capabilities: root in an unprivileged container has these and not CAP_SYS_ADMIN.
DOCKER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
               "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")


@pytest.fixture
def no_namespaces(tmp_path, monkeypatch):
    """A ``bwrap`` first on PATH that fails the way bubblewrap does where namespaces are not allowed."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho '{NO_NAMESPACES}' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    path = f"{fake.parent}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(isolation, "_STATUS", None)
    yield path
    isolation._STATUS = None


@pytest.mark.parametrize("mode", ["auto", "bwrap"])
def test_auto_and_bwrap_refuse_to_start_without_namespaces(mode, no_namespaces, monkeypatch):
    with pytest.raises(IsolationUnavailable) as refused:
        SandboxHost(mode).start()
    paragraph = refused.value.paragraph()
    assert "Creating new namespace failed" in paragraph and "roboscript.eval.isolation: none" in paragraph
    monkeypatch.setattr(host_module, "_HOSTS", {})  # a process whose sandbox has not started yet
    monkeypatch.setattr(host_module, "_DEFAULT_MODE", host_module._DEFAULT_MODE)  # prepare() sets it
    with pytest.raises(IsolationUnavailable):
        sandbox.prepare(mode)


def test_auto_refuses_to_start_when_bubblewrap_is_missing(monkeypatch):
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    monkeypatch.setattr(isolation, "_STATUS", None)
    with pytest.raises(IsolationUnavailable, match="not installed") as refused:
        SandboxHost("auto").start()
    assert "apt-get install bubblewrap" in refused.value.paragraph()
    isolation._STATUS = None


def test_an_unknown_isolation_is_a_clear_error():
    with pytest.raises(PipelineError, match="isolation must be one of auto, bwrap, none, got 'chroot'"):
        SandboxHost("chroot")


def test_a_runner_refuses_to_start_without_namespaces_unless_told_none(no_namespaces, tmp_path):
    env = dict(os.environ, PATH=no_namespaces, ROS_MASTER_URI="http://localhost:9/", ROS_LOG_DIR=str(tmp_path),
               ROS_HOME=str(tmp_path))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "robot.runner", "--ns", "/refusing", "--isolation", "auto"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert "refusing to start" in done.stderr and "roboscript.eval.isolation: none" in done.stderr
    assert "Creating new namespace failed" in done.stderr
    assert time.monotonic() - started < 60  # before ROS, before the simulator


def test_a_local_pool_refuses_before_starting_anything(no_namespaces):
    from robot.pool import LocalPool

    pool = LocalPool(1, isolation="auto")
    with pytest.raises(IsolationUnavailable) as refused:
        pool.start()
    assert "roboscript.eval.isolation: none" in refused.value.paragraph()
    assert pool.master is None and pool.processes == {}


def test_isolation_none_runs_and_warns_on_every_repeat(caplog):
    host = SandboxHost("none")
    host.start()
    try:
        for _ in range(2):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="embp.sandbox"):
                outcome = run_code("x = sorted(['b', 'a'])\nprint(x)", corpus.FakeRobot(), LIMITS, host=host)
            assert outcome.status == "ok" and outcome.isolation == "none" and outcome.stdout == "['a', 'b']\n"
            assert any("WITHOUT namespaces" in r.getMessage() for r in caplog.records)
    finally:
        host.close()


def test_where_namespaces_are_not_allowed_auto_refuses_and_none_still_confines(tmp_path):
    """A CI container without namespaces, for real: root with Docker's default capabilities (no CAP_SYS_ADMIN) --
    simulated with bubblewrap where it works here, and this very machine where it does not."""
    secret = tmp_path / "secret.txt"
    secret.write_text(corpus.SECRET_TEXT)
    secret.chmod(0o644)
    tmp_path.chmod(0o755)
    script = tmp_path / "container.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'tests')!r}]
        import sandbox_corpus as corpus
        from robot.sandbox import IsolationUnavailable, Limits, SandboxHost, run_code, run_probe
        out = {{}}
        try:
            SandboxHost("auto").start()
            out["auto"] = "started"
        except IsolationUnavailable as exc:
            out["auto"] = exc.paragraph()
        host = SandboxHost("none", allow_probe=True)
        host.start()
        out["none"] = run_code("print(sorted(['b', 'a']))", corpus.FakeRobot(), Limits(timeout_s=10), host=host).status
        probe = corpus.PROBE_HELPERS + '''
        report('uid', os.getuid())
        attempt('read', lambda: open({str(secret)!r}).read())
        attempt('create', lambda: open({str(tmp_path / 'pwned')!r}, 'w'))
        attempt('fork', os.fork)
        import socket
        attempt('socket', lambda: socket.socket())
        '''
        out["probe"] = run_probe(probe, host).stdout
        host.close()
        print(json.dumps(out))
    """))
    command = [sys.executable, str(script)]
    if sandbox.bwrap_status()[0]:
        caps = [arg for cap in DOCKER_CAPS for arg in ("--cap-add", f"CAP_{cap}")]
        command = ["bwrap", "--dev-bind", "/", "/", "--die-with-parent", "--cap-drop", "ALL", *caps, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "roboscript.eval.isolation: none" in out["auto"], out["auto"]
    assert out["none"] == "ok"
    expected_uid = "65534" if os.geteuid() == 0 else str(os.getuid())
    for line in (f"uid {expected_uid}", "read DENIED", "create DENIED", "fork DENIED", "socket DENIED"):
        assert line in out["probe"], out["probe"]
    assert corpus.SECRET_TEXT not in done.stdout and not (tmp_path / "pwned").exists()


def test_the_zygote_outlives_the_thread_that_started_it():
    """The parent-death signal follows the *thread* that forked: a fork server started from a short-lived thread
    (an actionlib callback) must not die with it."""
    host = SandboxHost(sandbox.default_mode())
    worker = threading.Thread(target=host.start)
    worker.start()
    worker.join()
    time.sleep(1.0)
    try:
        assert host.alive, "the zygote died with the thread that started it"
        assert run_code("x = 1", corpus.FakeRobot(), LIMITS, host=host).status == "ok"
    finally:
        host.close()


def test_a_killed_zygote_costs_one_repeat_and_comes_back():
    host = SandboxHost(sandbox.default_mode())
    host.start()
    try:
        host.process.kill()
        host.process.wait()
        first = run_code("x = 1", corpus.FakeRobot(), LIMITS, host=host)
        assert first.status in ("ok", "crashed")
        assert run_code("x = 1", corpus.FakeRobot(), LIMITS, host=host).status == "ok"
    finally:
        host.close()


def test_the_sandbox_dies_with_the_process_that_runs_it(tmp_path):
    """SIGKILL a process in the middle of a repeat: its fork server and the code's process go with it."""
    script = tmp_path / "busy.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'tests')!r}]
        import sandbox_corpus as corpus
        from robot import sandbox
        sandbox.configure({sandbox.default_mode()!r})
        print("running", flush=True)
        sandbox.run_code("n = 0\\nwhile n < 1:\\n    n = n * 1\\n", corpus.FakeRobot(), sandbox.Limits(timeout_s=120))
    """))
    busy = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert busy.stdout.readline().strip() == "running"
        deadline = time.monotonic() + 60
        below: set[int] = set()
        while time.monotonic() < deadline and len(below) < 2:  # the zygote (in bwrap: bwrap, its init) + the child
            time.sleep(0.2)
            below = descendants(busy.pid)
        assert len(below) >= 2, below
        time.sleep(0.5)
        below = descendants(busy.pid)
        os.kill(busy.pid, signal.SIGKILL)
        busy.wait(10)
        assert survivors(below, within_s=10) == {}
    finally:
        if busy.poll() is None:
            os.killpg(busy.pid, signal.SIGKILL)


@pytest.mark.sim
def test_episodes_say_their_isolation_and_none_warns_on_every_episode(tasks, caplog):
    from robot_goals import goal

    from robot.backends import create_backend
    from robot.episode import EpisodeRunner

    backend = create_backend("sim")
    try:
        plain = EpisodeRunner(backend, "/plain", isolation="none")
        for _ in range(2):
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                result = plain.run(goal(tasks["Simple_0"], "x = 1"))
            assert result["ok"] and result["isolation"] == "none" and result["repeats"][0]["status"] == "ok"
            assert "WITHOUT namespaces" in result["warnings"][0]
            assert any("WITHOUT namespaces" in r.getMessage() for r in caplog.records if r.name == "embp.runner")
        refused = plain.run(goal(tasks["Simple_0"], "x = 1", isolation="auto"))
        assert not refused["ok"] and "isolation: none" in refused["error"] and "isolation: auto" in refused["error"]
        usual = EpisodeRunner(backend, "/usual").run(goal(tasks["Simple_0"], "x = 1", isolation="none"))
        assert usual["ok"] and usual["isolation"] == sandbox.default_mode()
        assert (usual["warnings"] == []) == (sandbox.default_mode() == "bwrap")
    finally:
        backend.close()
