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

#: Model weights derived from installed packages (``tasks/hf/local_models.py``: the SmolLM2 export), shared by every
#: checkout and temporary copy on the machine, like the Hugging Face cache. ``EMBP_MODEL_CACHE`` moves it; the default
#: is ``$XDG_CACHE_HOME/embp/models`` (``~/.cache/embp/models``). Not versioned: re-created from the package on demand.
MODEL_CACHE = Path(os.environ.get("EMBP_MODEL_CACHE")
                   or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "embp" / "models")


def rel(path: Path) -> str:
    """A path as the user sees it: relative to the repository root when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT.resolve()))
    except ValueError:
        return str(path)
