"""`embp roboscript try-snippet PATH [--task ...]`: one snippet checked and run once in the sandbox against the
simulated robot, the outcome printed as JSON; exit 0 when it ran, 1 when refused, 2 for unusable input, 3 when it
failed."""

from __future__ import annotations

import json

import pytest
from robot_goals import SIMPLE_0
from typer.testing import CliRunner

from flows.cli import app
from robot import sandbox

runner = CliRunner()


def _try(tmp_path, code: str, *extra: str) -> tuple[int, dict]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(code)
    result = runner.invoke(app, ["roboscript", "try-snippet", str(snippet), "--isolation", sandbox.default_mode(),
                                 *extra])
    return result.exit_code, json.loads(result.stdout)


def test_help():
    result = runner.invoke(app, ["roboscript", "try-snippet", "--help"])
    assert result.exit_code == 0 and "--task" in result.output and "JSON" in result.output


@pytest.mark.sim
def test_a_snippet_that_does_the_task_runs_and_succeeds(tmp_path):
    status, outcome = _try(tmp_path, SIMPLE_0 + "print('placed')\n")
    assert status == 0 and outcome["ran"] and outcome["status"] == "ok" and outcome["success"] is True
    assert outcome["stdout"] == "placed\n" and outcome["isolation"] == sandbox.default_mode()
    assert [c["tool"] for c in outcome["calls"]][:2] == ["detect_objects", "open_gripper"]
    assert outcome["items"][0]["ok"] and outcome["check"] == {"ok": True, "reasons": [], "codes": []}


@pytest.mark.sim
def test_a_failing_snippet_exits_3_with_its_error(tmp_path):
    status, outcome = _try(tmp_path, "detect_objects()\nx = [1, 2][5]\n", "--task", "Hard_0")
    assert status == 3 and not outcome["ran"] and outcome["status"] == "code_error"
    assert "IndexError" in outcome["error"] and "line 2" in outcome["error"] and outcome["task"] == "Hard_0"


def test_a_refused_snippet_exits_1_with_the_reasons_and_never_starts_the_robot(tmp_path):
    status, outcome = _try(tmp_path, "import os\nos.remove('/tmp/x')\n")
    assert status == 1 and outcome["status"] == "refused" and outcome["check"]["codes"][0] == "forbidden_import"
    assert "import of os" in outcome["check"]["reasons"][0] and "calls" not in outcome


def test_unusable_input_exits_2_and_says_what_is_wrong(tmp_path):
    status, outcome = _try(tmp_path, "x = 1\n", "--task", "Hard_9")
    assert status == 2 and "unknown task 'Hard_9'" in outcome["error"] and "Simple_0" in outcome["error"]
    result = runner.invoke(app, ["roboscript", "try-snippet", str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "cannot read the snippet file" in json.loads(result.stdout)["error"]
    status, outcome = _try(tmp_path, "x = 1\n", "--isolation", "chroot")
    assert status == 2 and "isolation must be one of auto, bwrap, none" in outcome["error"]


def test_a_snippet_the_check_cannot_finish_on_is_refused_as_json(tmp_path):
    """Deep nesting, an endless expression, a huge file: the check refuses (too_complex) before parsing; the output
    is JSON and the exit code 1, never a traceback."""
    for code in ("x = " + "(" * 500 + "1" + ")" * 500 + "\n", "x = " + "1+" * 40_000 + "1\n",
                 "x = 1\n" * 20_000, "def f():\n" + "".join(" " * (i + 1) + "if 1:\n" for i in range(90))):
        status, outcome = _try(tmp_path, code)
        assert status == 1 and outcome["status"] == "refused", outcome
        assert outcome["check"]["codes"] == ["too_complex"]


def test_a_failure_of_try_snippet_itself_is_json_with_exit_2(tmp_path, monkeypatch):
    import tasks.roboscript.eval.try_snippet as module

    def broken(*_):
        raise RuntimeError("the simulator \x1b[31mexploded\udc80")

    monkeypatch.setattr(module, "_run", broken)
    snippet = tmp_path / "s.py"
    snippet.write_text("x = 1\n")
    status, outcome = module.try_snippet(snippet, isolation=sandbox.default_mode())
    assert status == module.EXIT_USAGE and outcome["status"] == "error" and not outcome["ran"]
    assert "RuntimeError: the simulator \\x1b[31mexploded\\udc80" in outcome["error"]
    json.dumps(outcome).encode("utf-8")


@pytest.mark.sim
def test_success_is_shown_only_where_the_status_counts(tmp_path):
    """The task's items hold, but the code then raised: scoring counts the repeat 0, so success is false."""
    status, outcome = _try(tmp_path, SIMPLE_0 + "x = [1, 2][5]\n")
    assert status == 3 and outcome["status"] == "code_error" and not outcome["counted"]
    assert outcome["items_held"] is True and outcome["success"] is False
