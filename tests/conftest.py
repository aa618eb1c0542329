"""Test settings shared by every test (a quiet, throw-away Prefect home and no telemetry anywhere), the rule that
no test skips without an explicit ``allowed_skip`` marker, the default pipeline's data built once in a throw-away
copy of the repository, and the RoboScript catalog and benchmark fixtures the robot tests share."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="embp-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DVC_NO_ANALYTICS"] = "1"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# In-process tests compute at the level the stages do (core/cpu.py), and every subprocess inherits it.
from core import cpu as _cpu  # noqa: E402

_cpu.pin()

REPO = Path(__file__).resolve().parent.parent
# Subprocesses (flows, `embp`, dvc's `python -m flows...`) run this checkout's code even when the environment's
# editable install points at another checkout (a git worktree sharing a virtualenv).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

#: The isolation the robot tests run generated code in (set in pytest_configure, printed in the run's header):
#: bubblewrap where it can create namespaces, else `none` -- a CI container without namespaces still runs every
#: sandbox test, against the static layer, the guards, uid 65534, rlimits and seccomp. EMBP_TEST_ISOLATION=none
#: (or bwrap) forces one; tests/test_robot_sandbox_isolation.py checks both modes either way.
SANDBOX_ISOLATION = {"mode": "", "why": ""}


def pytest_configure(config):
    config.addinivalue_line("markers", "allowed_skip(reason): the test may skip for the stated reason without "
                                       "failing the run")
    from robot import sandbox

    forced = os.environ.get("EMBP_TEST_ISOLATION", "")
    ok, why = sandbox.bwrap_status()
    mode = forced or ("bwrap" if ok else "none")
    SANDBOX_ISOLATION.update(mode=mode, why=why)
    sandbox.configure(mode)


def pytest_report_header(config):
    mode, why = SANDBOX_ISOLATION["mode"], SANDBOX_ISOLATION["why"]
    if mode == "bwrap":
        return "sandbox isolation for the robot tests: bwrap (bubblewrap namespaces)"
    reason = f"bubblewrap cannot create namespaces here: {why}" if why else "forced by EMBP_TEST_ISOLATION"
    return (f"sandbox isolation for the robot tests: NONE -- {reason}; the sandbox tests run without namespaces "
            "(restricted compiler, guards, uid 65534, rlimits, seccomp)")


@pytest.fixture(autouse=True)
def _run_facts_stay_out_of_the_checkout(tmp_path_factory, monkeypatch):
    """A stage run in the test process (a flow called directly, a ``StageLog``) writes its run facts under
    ``paths.REPORTS / "timings"``: in a test that is a temporary folder, never the checkout's ``reports/timings/``,
    where the next ``embp run`` would take them for the last run's stage times (a robot test's tiny evaluation made
    roboscript-eval look light, and it was started early, slowing the run's critical path). A test that sets
    ``paths.REPORTS`` itself overrides this."""
    from tasks import paths

    monkeypatch.setattr(paths, "REPORTS", tmp_path_factory.mktemp("reports"))


# ------------------------------------------------------------------------------------------------------------------
# No silent skips: a skip fails the run unless the test carries @pytest.mark.allowed_skip(reason=...).

_SKIPPED: list[str] = []




@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("allowed_skip") is None:
        _SKIPPED.append(f"{item.nodeid}: {report.longrepr[2] if isinstance(report.longrepr, tuple) else ''}")


def pytest_collectreport(report):
    if report.skipped:
        _SKIPPED.append(f"{report.nodeid} (whole module): "
                        f"{report.longrepr[2] if isinstance(report.longrepr, tuple) else ''}")


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED:
        terminalreporter.section("skips that are not allowed")
        for line in _SKIPPED:
            terminalreporter.write_line(line)
        terminalreporter.write_line("A test that cannot run here fails the run: install what it needs (make test "
                                    "does), or mark it @pytest.mark.allowed_skip(reason=...).")


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED and exitstatus == 0:
        session.exitstatus = 1


#: The most the default pipeline's one run (the ``default_data`` fixture below) may take: run_checked's own limit on
#: it. pytest-timeout counts a test's fixture set-up against the test's limit, and the first test to ask for the
#: fixture pays for the whole pipeline (a plain `dvc repro`, cold processes: 5.3 min on 2 fast idle cores in CI,
#: 2026-12-04; over 15 min on 2 AVX2-only ones before the real-model steps took one thread each).
DEFAULT_DATA_BUDGET_S = 3600


def pytest_collection_modifyitems(config, items):
    """Every test that asks for ``default_data`` gets the pipeline's budget on top of its own limit (its
    ``@pytest.mark.timeout`` or the suite's ``timeout``): whichever of them runs first pays for the pipeline, and
    which one that is depends on the selection (-k, a single file)."""
    ini = float(config.getini("timeout") or 0)
    for item in items:
        if "default_data" not in getattr(item, "fixturenames", ()):
            continue
        marker = item.get_closest_marker("timeout")
        own = float(marker.args[0] if marker and marker.args else (marker.kwargs.get("timeout", ini) if marker
                                                                    else ini))
        if own > 0:   # 0: no limit at all; leave it so
            item.add_marker(pytest.mark.timeout(own + DEFAULT_DATA_BUDGET_S), append=False)


@pytest.fixture(scope="session")
def default_data(tmp_path_factory) -> Path:
    """The default pipeline (``dvc repro``, every stage) run once per test session in a throw-away copy of the
    repository: the data the tests of built outputs read, and the first of the two runs the reproducibility test
    compares. Returns the copy's root."""
    from repo_copy import copy_repo, run_checked

    work = tmp_path_factory.mktemp("default-data")
    env = copy_repo(work)
    run_checked(["dvc", "repro"], work, env, timeout=DEFAULT_DATA_BUDGET_S)
    return work


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def catalog():
    """RoboScript's object catalog (robot/contract/assets.yaml)."""
    from robot.contract.catalog import load_catalog

    return load_catalog()


@pytest.fixture(scope="session")
def tasks(catalog):
    """RoboScript's benchmark tasks (Table I and the drawer study) by id, on the default worlds params."""
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    return {t.id: t for t in load_benchmark(catalog, WorldsParams())}
