"""The suite's own rules about time: a test that asks for the default pipeline's data (``default_data``) gets the
pipeline's budget on top of its own limit, and a command a test waits on dies with its whole process group when the
wait is cut short."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import DEFAULT_DATA_BUDGET_S, pytest_collection_modifyitems
from repo_copy import run_checked


class _Item:
    """What the hook reads of a collected test: its fixtures and its markers (closest first, as pytest keeps them)."""

    def __init__(self, fixtures: tuple[str, ...], *marks):
        self.fixturenames = fixtures
        self.marks = list(marks)

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark, append=True):
        mark = getattr(mark, "mark", mark)
        self.marks.insert(len(self.marks) if append else 0, mark)


class _Config:
    def getini(self, name):
        assert name == "timeout"
        return "900"


def _limit(item) -> float | None:
    marker = item.get_closest_marker("timeout")
    return None if marker is None else float(marker.args[0])


def test_the_pipeline_budget_is_added_to_each_test_that_asks_for_default_data():
    plain = _Item(("tmp_path",))
    first = _Item(("default_data",))
    own = _Item(("default_data", "tmp_path"), pytest.mark.timeout(3600).mark)
    unlimited = _Item(("default_data",), pytest.mark.timeout(0).mark)
    pytest_collection_modifyitems(_Config(), [plain, first, own, unlimited])
    assert _limit(plain) is None                                   # the suite's 900 s applies as before
    assert _limit(first) == 900 + DEFAULT_DATA_BUDGET_S
    assert _limit(own) == 3600 + DEFAULT_DATA_BUDGET_S
    assert _limit(unlimited) == 0


def test_a_cut_short_wait_kills_the_commands_children_too(tmp_path):
    """`dvc repro` runs each stage in a child process: a timeout must not leave them running."""
    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
              "time.sleep(120)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_checked([sys.executable, "-c", script], tmp_path, dict(os.environ), timeout=5)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
        # a killed child that its (killed) parent never reaped is a zombie until init reaps it
        if _zombie(grandchild):
            return
    pytest.fail(f"the command's child {grandchild} still runs after the wait was cut short")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return False
