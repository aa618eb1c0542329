"""Typed records at stage boundaries: a list of dataclass records <-> a parquet table with fixed columns.

A table always has the columns of its record type, also when it is empty, and reading one checks them, so a stage
fed a stale or foreign file fails with the file and the missing columns named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from core.errors import DataError
from core.io import read_parquet, write_parquet

R = TypeVar("R")


def columns(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def to_frame(records: Iterable[Any], cls: type) -> pd.DataFrame:
    rows = [dataclasses.asdict(r) for r in records]
    return pd.DataFrame(rows, columns=columns(cls))


def write_records(path: Path, records: Iterable[Any], cls: type) -> int:
    frame = to_frame(records, cls)
    write_parquet(path, frame)
    return len(frame)


def read_table(path: Path, cls: type) -> pd.DataFrame:
    frame = read_parquet(path)
    missing = [c for c in columns(cls) if c not in frame.columns]
    if missing:
        raise DataError(
            f"{path} lacks the columns {', '.join(missing)} of a {cls.__name__} table.",
            hint="It was written by another version of the pipeline: rerun `dvc repro`.",
        )
    return frame


def read_records(path: Path, cls: type[R]) -> list[R]:
    frame = read_table(path, cls)
    names = columns(cls)
    return [cls(**{k: _plain(v) for k, v in zip(names, row, strict=True)}) for row in frame[names].itertuples(index=False)]


def _plain(value: Any) -> Any:
    """numpy scalars and arrays back to Python values; missing values (NaN, NA) back to None."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return value
