"""The warm stage host of ``embp run`` (flows/_stage_host.py, issue #18): a stage handed to it runs as
``python -m`` would run it -- its arguments, directory, environment, streams, process group and exit code -- or,
when anything differs, runs cold; it dies with the process that handed it over, whatever kills that."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flows import _stage_host

REPO = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    out = Path(sys.argv.pop(1))
    out.write_text(f"{os.getpid()} {os.getpgrp()}")
    print("argv", sys.argv[1:], "cwd", os.getcwd(), "var", os.environ.get("PROBE_VAR"), "main", __name__)
    print("to stderr", file=sys.stderr)
    sys.stdout.flush()
    if "sleep" in sys.argv:
        time.sleep(120)
    if "nap" in sys.argv:
        time.sleep(3)
        sys.exit(5)
    if "modules" in sys.argv:  # what the fork inherited (LATER), and the host's threads but its main one
        host = f"/proc/{os.getppid()}/task"
        names = sorted(open(f"{host}/{t}/comm").read().strip() for t in os.listdir(host) if t != str(os.getppid()))
        print("torch" in sys.modules, "mlflow" in sys.modules and "peft" in sys.modules, ",".join(names) or "-",
              flush=True)
        if "torch" in sys.modules:
            import torch
            torch.set_num_threads(2)           # an OpenMP pool made in the fork works as in a cold process
            print(float(torch.ones(256, 256).matmul(torch.ones(256, 1)).sum()), flush=True)
    if "fail" in sys.argv:
        raise ValueError("probe failed")
    if "atexit" in sys.argv:  # as Prefect's temporary server: a child on the stage's streams, stopped at exit
        import atexit, subprocess, threading
        child = subprocess.Popen(["sleep", "300"])
        atexit.register(child.kill)
        atexit.register(print, "atexit ran", flush=True)
        threading.Thread(target=lambda: (time.sleep(0.5), print("thread joined", flush=True))).start()
    sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
""")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """A host started the way ``embp run`` starts it, and the environment its stages get."""
    root = tmp_path_factory.mktemp("root")
    probe_dir = tmp_path_factory.mktemp("probe")
    (probe_dir / "stage_probe.py").write_text(PROBE)
    # a large environment too: the hand-over is one message, longer than a socket takes at once
    big = {f"PROBE_BIG_{i}": "x" * 100_000 for i in range(3)}  # (one variable may not exceed 128 KiB)
    env = os.environ | {"PROBE_VAR": "from-the-run", "PYTHONPATH": str(probe_dir)} | big
    env.pop(_stage_host.ENV, None)
    with _stage_host.hosting(root, env) as run_env:
        assert _stage_host.ENV in run_env, (root / ".dvc" / "tmp" / "embp-stage-host" / "host.log").read_text()
        yield run_env, probe_dir


def _client(env: dict, out: Path, *args: str, cwd: Path | None = None, **popen) -> subprocess.Popen:
    """A process like a stage's: it hands the probe module to the host and exits with its code (9 = declined)."""
    code = ("import sys; from flows import _stage_host as h; "
            f"rc = h.delegate(h.os.environ[h.ENV], 'stage_probe', {[str(out), *args]!r}); "
            "sys.exit(9 if rc is None else rc)")
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=cwd or REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _probe_pid(out: Path, timeout_s: float = 20) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = out.read_text() if out.exists() else ""
        if text:
            pid, pgid = text.split()
            return int(pid), int(pgid)
        time.sleep(0.05)
    raise AssertionError("the probe never started")


def test_the_host_runs_the_module_as_main_with_the_stages_arguments_streams_and_exit_code(host, tmp_path):
    env, _ = host
    out = tmp_path / "probe.txt"
    proc = _client(env, out, "3", "x y", cwd=tmp_path, process_group=0)  # a group of its own, as under a shell
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr
    assert f"argv ['3', 'x y'] cwd {tmp_path} var from-the-run main __main__" in stdout
    assert "to stderr" in stderr
    pid, pgid = _probe_pid(out)
    assert pid != proc.pid  # a fork of the host ran it ...
    assert pgid == proc.pid  # ... in the stage's own process group (a Ctrl-C there reaches it)


def test_the_model_stack_is_imported_while_idle_and_forks_use_it_without_inherited_threads(host, tmp_path):
    env, _ = host
    deadline = time.monotonic() + 120
    while True:
        proc = _client(env, tmp_path / "pid", "modules")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        torch_loaded, rest_loaded, threads = out.splitlines()[1].split()
        # no thread of the host's own at a fork: no OpenMP pool (torch names its threads as the process), only the
        # background thread of pyarrow's allocator (jemalloc), which is fork-aware, as before LATER
        assert set(threads.split(",")) <= {"-", "jemalloc_bg_thd"}, threads
        if rest_loaded == "True" or time.monotonic() > deadline:   # peft comes after mlflow and torch
            break
        time.sleep(0.5)
    assert (torch_loaded, rest_loaded) == ("True", "True"), "the host never imported the LATER modules"
    assert out.splitlines()[2] == "65536.0"


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(host, tmp_path):
    env, _ = host
    proc = _client(env, tmp_path / "probe.txt", "fail")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "ValueError: probe failed" in stderr and "Traceback" in stderr


def test_the_fork_exits_as_an_interpreter_does_threads_joined_and_atexit_handlers_run(host, tmp_path):
    """A cold ``python -m`` joins its threads and runs its atexit handlers before it exits; a fork must too, or a
    child process they stop (Prefect's temporary server) lives on holding the stage's pipes: DVC, and whoever reads
    ``embp run``'s output, then wait for ever."""
    env, _ = host
    proc = _client(env, tmp_path / "probe.txt", "atexit")
    stdout, stderr = proc.communicate(timeout=60)  # returns only once no process holds the pipes
    assert proc.returncode == 0, stderr
    assert stdout.index("thread joined") < stdout.index("atexit ran")


def test_another_environment_runs_cold(host, tmp_path):
    env, _ = host
    proc = _client(env | {"PROBE_VAR": "changed"}, tmp_path / "probe.txt", "0")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 9  # declined: the caller runs the stage itself
    assert "stage host declined (environment differs in PROBE_VAR); running cold" in stderr
    assert not (tmp_path / "probe.txt").exists()


def test_killing_the_stages_process_kills_the_fork(host, tmp_path):
    env, _ = host
    out = tmp_path / "probe.txt"
    proc = _client(env, out, "sleep")
    pid, _ = _probe_pid(out)
    proc.kill()  # SIGKILL: nothing of the stage's process can pass a signal on
    proc.wait(timeout=10)
    assert _gone(pid, 10), "the fork outlived the stage's process"


def test_a_signal_to_the_stages_process_reaches_the_fork_and_its_code_comes_back(host, tmp_path):
    env, _ = host
    out = tmp_path / "probe.txt"
    proc = _client(env, out, "sleep")
    pid, _ = _probe_pid(out)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert _gone(pid, 5)


def test_a_ctrl_c_in_the_stages_process_group_interrupts_the_fork_once(host, tmp_path):
    env, _ = host
    out = tmp_path / "probe.txt"
    proc = _client(env, out, "sleep", process_group=0)
    pid, pgid = _probe_pid(out)
    assert pgid == proc.pid
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130 and stderr.count("KeyboardInterrupt") <= 1
    assert _gone(pid, 5)


def test_a_stage_outlives_a_stopped_host_and_keeps_its_exit_code(tmp_path):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "stage_probe.py").write_text(PROBE)
    env = os.environ | {"PROBE_VAR": "x", "PYTHONPATH": str(probe_dir)}
    env.pop(_stage_host.ENV, None)
    out = tmp_path / "probe.txt"
    with _stage_host.hosting(tmp_path, env) as run_env:
        proc = _client(run_env, out, "nap")
        _probe_pid(out)
    # the host is gone (embp run stopped it); the stage ends on its own and its code still comes back
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 5, stderr


def test_a_changed_project_file_is_declined(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("x = 1\n")
    files = {str(source): (source.stat().st_size, source.stat().st_mtime_ns)}
    request = {"executable": sys.executable, "env": dict(os.environ)}
    assert _stage_host._decline(request, dict(os.environ), files) is None
    source.write_text("x = 22\n")
    assert "module.py changed since the host imported it" in _stage_host._decline(request, dict(os.environ), files)
    assert "another interpreter" in _stage_host._decline(request | {"executable": "/usr/bin/python0"},
                                                         dict(os.environ), {})


def test_per_command_variables_may_differ_others_may_not():
    env = {"PATH": "/bin", "PREFECT_API_URL": "http://a"}
    shell = env | {"PWD": "/x", "SHLVL": "2", "DVC_STAGE": "muep-sft", "DVC_ROOT": "/r", "DVC_EXP_NAME": "e"}
    assert _stage_host.comparable_env(shell) == env
    assert _stage_host.comparable_env(env | {"PREFECT_API_URL": "http://b"}) != env


@pytest.mark.parametrize(("argv", "module"), [
    (["python", "-m", "flows.muep_sft", "--params", "p.yaml"], "flows.muep_sft"),
    (["python", "-m", "flows._stage_host"], None),
    (["python", "-m", "flows.cli"], None),
    (["python", "-X", "importtime", "-m", "flows.muep_sft"], None),  # interpreter options: run as asked, cold
    (["python", "-c", "import flows"], None),
    (["/venv/bin/embp", "run"], None),
])
def test_only_plain_stage_commands_are_handed_over(argv, module):
    assert _stage_host.stage_module(argv) == module
