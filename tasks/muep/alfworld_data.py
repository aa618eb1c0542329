"""ALFWorld's package data, read as data: scene layouts, attribute tables and the PDDL domain.

We never import ``alfworld`` itself (its ``__init__`` may pull its heavy optional dependencies); we locate the
installed package and load ``gen/constants.py`` by path -- it is a plain module of tables.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np

from core.errors import DataError

_INSTALL_HINT = (
    "Install it with `make setup`, or `pip install --no-deps alfworld==0.4.2` (without its dependencies: we only "
    "read its package data)."
)


@cache
def alfworld_root() -> Path:
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the `alfworld` package is not installed, so there is no AI2-THOR scene data to read.",
                        hint=_INSTALL_HINT)
    root = Path(list(spec.submodule_search_locations)[0])
    for needed in ("gen/constants.py", "gen/layouts", "data/alfred.pddl", "data/alfred.twl2"):
        if not (root / needed).exists():
            raise DataError(f"the installed `alfworld` package at {root} lacks {needed}.", hint=_INSTALL_HINT)
    return root


def layouts_dir() -> Path:
    return alfworld_root() / "gen" / "layouts"


def domain_file() -> Path:
    return alfworld_root() / "data" / "alfred.pddl"


def grammar_file() -> Path:
    return alfworld_root() / "data" / "alfred.twl2"


@cache
def constants() -> ModuleType:
    path = alfworld_root() / "gen" / "constants.py"
    spec = importlib.util.spec_from_file_location("_alfworld_constants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # pragma: no cover - only with a broken install
        raise DataError(f"cannot read ALFWorld's attribute tables {path}: {exc}.", hint=_INSTALL_HINT) from None
    return module


@dataclass(frozen=True)
class SceneFiles:
    floorplan: int
    object_types: list[str]
    receptacle_poses: dict[str, list[float]]
    grid: np.ndarray  # (n, 2) navigable points (x, z), 0.25 m apart


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"scene file {path} is missing from the alfworld package.", hint=_INSTALL_HINT) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"scene file {path} is not valid JSON (line {exc.lineno}: {exc.msg}).") from None


def read_scene(floorplan: int) -> SceneFiles:
    base = layouts_dir() / f"FloorPlan{floorplan}"
    objects = _load_json(Path(f"{base}-objects.json"))
    poses = _load_json(Path(f"{base}-openable.json"))
    if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
        raise DataError(f"{base}-objects.json: expected a list of object type names.")
    if not isinstance(poses, dict):
        raise DataError(f"{base}-openable.json: expected a mapping of receptacle id -> pose.")
    for key, pose in poses.items():
        if not (isinstance(pose, list) and len(pose) == 4):
            raise DataError(f"{base}-openable.json: pose of {key!r} should be [x, z, rotation, horizon], got {pose!r}.")
    try:
        grid = np.load(f"{base}-layout.npy")
    except (OSError, ValueError) as exc:
        raise DataError(f"{base}-layout.npy cannot be read: {exc}.") from None
    if grid.ndim != 2 or grid.shape[1] != 2:
        raise DataError(f"{base}-layout.npy: expected an (n, 2) array of grid points, got shape {grid.shape}.")
    return SceneFiles(floorplan=floorplan, object_types=objects, receptacle_poses=poses, grid=grid)
