"""Code tests of the `embp` commands that start a tool (`embp ui` -> MLflow, `embp run` -> DVC and the stages'
Python): they run the venv's executables whatever PATH says, as `.venv/bin/embp` called without activating the venv."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flows import cli

VENV_BIN = Path(sys.executable).parent
#: A PATH without the venv: what a shell that never ran `source .venv/bin/activate` has.
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tools_are_the_venvs_whatever_path_says(monkeypatch):
    monkeypatch.setenv("PATH", BARE_PATH)
    assert cli.tool("mlflow") == str(VENV_BIN / "mlflow") and cli.tool("dvc") == str(VENV_BIN / "dvc")
    env = cli.tool_env({"PATH": f"/usr/bin{os.pathsep}{VENV_BIN}{os.pathsep}/bin"})
    assert env["PATH"].split(os.pathsep) == [str(VENV_BIN), "/usr/bin", "/bin"]
    assert cli.tool_env({})["PATH"] == str(VENV_BIN)


def test_a_missing_tool_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "tool_bin", lambda: tmp_path)
    with pytest.raises(cli.PipelineError, match=r"mlflow is not installed next to this Python") as caught:
        cli.tool("mlflow")
    assert "make setup" in caught.value.paragraph()


@pytest.mark.network
def test_embp_ui_starts_the_venvs_mlflow_without_the_venv_on_path(tmp_path):
    """`.venv/bin/embp ui` with PATH=/usr/bin:/bin: MLflow's UI answers on the port, and the experiment links print."""
    if not (VENV_BIN / "embp").exists():
        pytest.skip(f"no embp script next to {sys.executable} (the package is not installed into this Python)")
    store = tmp_path / "mlflow.db"
    params = tmp_path / "params.yaml"
    params.write_text(f"tracking:\n  uri: sqlite:///{store}\n  experiment_prefix: embp\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "MLFLOW_TRACKING_URI")}
    env |= {"PATH": BARE_PATH, "HOME": str(tmp_path)}
    proc = subprocess.Popen([str(VENV_BIN / "embp"), "ui", "--port", str(port), "--params", str(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline, answer = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    answer = response.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        if answer is None:
            proc.kill()
            output = proc.communicate(timeout=30)[0].decode(errors="replace")
            pytest.fail(f"embp ui did not serve MLflow on port {port} (exit {proc.returncode}):\n{output[-3000:]}")
        assert answer.strip() == "OK"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    output = proc.stdout.read().decode(errors="replace")
    assert "Traceback" not in output, output[-3000:]
