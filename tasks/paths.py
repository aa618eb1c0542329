"""Where every artifact lives: one place, so stages, tests and the DVC file agree."""

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

MUEP_DATA = DATA / "muep"
MUEP_METADATA = MUEP_DATA / "metadata"
MUEP_GENERATE = MUEP_DATA / "generate"
MUEP_FILTER = MUEP_DATA / "filter"
MUEP_REPORTS = REPORTS / "muep"

#: LLM response cache. A DVC ``persist`` output: it survives reruns of the generation stage.
LLM_CACHE = DATA / "cache" / "llm"


def rel(path: Path) -> str:
    """A path as the user sees it: relative to the repository root when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT.resolve()))
    except ValueError:
        return str(path)
