"""Test settings shared by every test: a quiet, throw-away Prefect home and no telemetry anywhere."""

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
