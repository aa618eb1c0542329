"""Test settings shared by every test (a quiet, throw-away Prefect home and no telemetry anywhere) and the
RoboScript catalog and benchmark fixtures the robot tests share."""

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

REPO = Path(__file__).resolve().parent.parent

#: The isolation the robot tests run generated code in (set in pytest_configure, printed in the run's header):
#: bubblewrap where it can create namespaces, else `none` -- a CI container without namespaces still runs every
#: sandbox test, against the static layer, the guards, uid 65534, rlimits and seccomp. EMBP_TEST_ISOLATION=none
#: (or bwrap) forces one; tests/test_robot_sandbox_isolation.py checks both modes either way.
SANDBOX_ISOLATION = {"mode": "", "why": ""}


def pytest_configure(config):
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
