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
