"""The repository root and its top-level artifact folders. Each pipeline names its own artifacts in its layout module
(``tasks/muep/layout.py``, ``tasks/roboscript/layout.py``), built on these."""

from __future__ import annotations

import os
from pathlib import Path

#: Repository root. ``EMBP_ROOT`` overrides it (tests run the pipeline in a temporary copy of the repository).
ROOT = Path(os.environ.get("EMBP_ROOT", Path(__file__).resolve().parent.parent))

PARAMS_FILE = ROOT / "params.yaml"
PROFILES_DIR = ROOT / "profiles"
DATA = ROOT / "data"
MODELS = ROOT / "models"
REPORTS = ROOT / "reports"


def rel(path: Path) -> str:
    """A path as the user sees it: relative to the repository root when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT.resolve()))
    except ValueError:
        return str(path)
