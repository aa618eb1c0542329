"""Atomic file (and folder) writes: a crash leaves either the old file or the new one, never half of one; and one
inter-process lock on a file."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give: mkstemp's 0600 is too strict for shared outputs
_DIR_MODE = 0o777 & ~_umask()   # what mkdir would give (mkdtemp's 0700, likewise)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created with its folder if missing) for the block: one process at a
    time on this machine. The kernel drops the lock when its holder dies, so a killed process never leaves it held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed over ``path`` in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _FILE_MODE)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success it replaces ``path`` (two renames, the old folder
    removed after), on an exception it is deleted and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    old = tmp.with_suffix(".old")
    try:
        yield tmp
        os.chmod(tmp, _DIR_MODE)
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, engine="pyarrow")


def read_parquet(path: Path) -> pd.DataFrame:
    from core.errors import DataError

    path = Path(path)
    if not path.exists():
        raise DataError(
            f"input file {path} does not exist.", hint="Run the stage that produces it first (`dvc repro`)."
        )
    import pandas as pd

    return pd.read_parquet(path, engine="pyarrow")


def dvc_md5(path: Path) -> str:
    """The md5 DVC records in dvc.lock for the output ``path`` (a folder: ``<md5>.dir``), computed from its contents
    with DVC's own hashing (dvc-data), as ``dvc repro`` does when it records the output. A stage that names the
    version of its input takes it from here, never from dvc.lock: under ``embp run`` other stages rewrite the lock
    while a stage runs, so a read could catch it half-written, and the recorded name would depend on timing."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_objects.fs.local import LocalFileSystem

    fs = LocalFileSystem()
    with tempfile.TemporaryDirectory() as scratch:
        _, _, obj = build(HashFileDB(fs, scratch), str(Path(path).resolve()), fs, "md5")
    return obj.hash_info.value
