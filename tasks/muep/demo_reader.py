"""Reading stage 4's output back: the episode index, the split -> shard list and the webdataset shards.

Shared by the stages that consume the demonstrations (``muep-sft``, ``muep-card``). Every sample is checked against
the documented format (``docs/muep-stages.md``; written by ``tasks.muep.demos.run_episode``) and every episode
against its row of ``episodes.parquet``, so a stale or foreign file fails with the file, the sample key and the field
named instead of producing a quietly wrong dataset.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from core.errors import DataError
from tasks.muep.demos import SPLITS, EpisodeRecord
from tasks.records import read_table

#: Fields of a sample's ``json`` and the Python types they must have (``action`` is None at step 0 only).
SAMPLE_FIELDS: dict[str, tuple[type, ...]] = {
    "scene": (str,), "instruction": (str,), "task_type": (str,), "episode_id": (str,), "split": (str,),
    "grammar": (str,), "renderer": (str,), "renderer_version": (str,), "step": (int,), "action": (str, type(None)),
    "text_state": (str,), "world_state": (dict,),
}


@dataclass(frozen=True)
class DemoStep:
    """One sample of a shard: the state after ``action`` (the initial state at step 0, where ``action`` is None)."""

    key: str
    shard: Path
    scene: str
    instruction: str
    task_type: str
    episode_id: str
    split: str
    grammar: str
    renderer: str
    renderer_version: str
    step: int
    action: str | None
    text_state: str
    world_state: dict
    png: bytes | None = None


def read_index(demos_dir: Path) -> pd.DataFrame:
    """``episodes.parquet``, checked for the columns of an :class:`EpisodeRecord` table."""
    return read_table(Path(demos_dir) / "episodes.parquet", EpisodeRecord)


def read_splits(demos_dir: Path) -> dict[str, list[Path]]:
    """``splits.json`` as split -> absolute shard paths; every split present, every shard existing."""
    path = Path(demos_dir) / "splits.json"
    if not path.exists():
        raise DataError(f"input file {path} does not exist.", hint="Run the muep-demos stage first (`dvc repro`).")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"{path} is not valid JSON: {exc}.") from None
    if not isinstance(raw, dict) or set(raw) != set(SPLITS):
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise DataError(f"{path} must map exactly the splits {', '.join(SPLITS)} to shard lists; got {got}.")
    out: dict[str, list[Path]] = {}
    for split in SPLITS:
        shards = [Path(demos_dir) / rel for rel in raw[split]]
        missing = [str(s) for s in shards if not s.exists()]
        if missing:
            raise DataError(f"{path} lists shards of split {split!r} that do not exist: {', '.join(missing[:3])}.",
                            hint="The demonstrations are incomplete: rerun the muep-demos stage.")
        out[split] = shards
    return out


def _step_from(sample: dict[str, Any], shard: Path, images: bool) -> DemoStep:
    key = sample.get("__key__", "?")
    if "json" not in sample:
        raise DataError(f"{shard}: sample {key} has no json field.")
    try:
        meta = json.loads(sample["json"])
    except ValueError as exc:
        raise DataError(f"{shard}: sample {key}: the json field is not valid JSON ({exc}).") from None
    if not isinstance(meta, dict):
        raise DataError(f"{shard}: sample {key}: the json field must be an object, got {type(meta).__name__}.")
    for name, types in SAMPLE_FIELDS.items():
        if name not in meta:
            raise DataError(f"{shard}: sample {key}: the json field lacks {name!r}.")
        value = meta[name]
        if not isinstance(value, types) or (name == "step" and isinstance(value, bool)):
            raise DataError(f"{shard}: sample {key}: json field {name!r} must be "
                            f"{' or '.join(t.__name__ for t in types)}, got {type(value).__name__}.")
    if (meta["step"] == 0) != (meta["action"] is None):
        raise DataError(f"{shard}: sample {key}: json field 'action' must be null exactly at step 0 "
                        f"(step {meta['step']}, action {meta['action']!r}).")
    expected_key = f"{meta['episode_id']}_s{meta['step']:03d}"
    if key != expected_key:
        raise DataError(f"{shard}: sample {key}: the key does not match episode_id and step ({expected_key}).")
    png = sample.get("png")
    if images and not png:
        raise DataError(f"{shard}: sample {key} has no png field.")
    return DemoStep(key=key, shard=shard, png=png if images else None, **{n: meta[n] for n in SAMPLE_FIELDS})


def read_shard(shard: Path, images: bool = False) -> Iterator[DemoStep]:
    """The samples of one shard, in the order they were written, read with the webdataset reader."""
    import webdataset as wds

    shard = Path(shard)
    dataset = wds.WebDataset([str(shard)], shardshuffle=False, empty_check=False)
    try:
        for sample in dataset:
            yield _step_from(sample, shard, images)
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise DataError(f"{shard} is not a readable webdataset shard ({type(exc).__name__}: {exc}).",
                        hint="Rerun the muep-demos stage to rewrite it.") from None


def episodes(steps: Iterable[DemoStep]) -> Iterator[list[DemoStep]]:
    """Group consecutive samples into episodes, checking that each episode is contiguous and numbered 0, 1, ..."""
    seen: set[str] = set()
    current: list[DemoStep] = []
    for step in steps:
        if current and step.episode_id != current[0].episode_id:
            yield _checked(current)
            current = []
        if not current:
            if step.episode_id in seen:
                raise DataError(f"{step.shard}: episode {step.episode_id} appears twice (again at {step.key}).")
            seen.add(step.episode_id)
        current.append(step)
    if current:
        yield _checked(current)


def _checked(episode: list[DemoStep]) -> list[DemoStep]:
    numbers = [s.step for s in episode]
    if numbers != list(range(len(episode))):
        raise DataError(f"{episode[0].shard}: episode {episode[0].episode_id} has steps {numbers}; "
                        f"expected 0..{len(episode) - 1} in order.")
    return episode


def check_against_index(episode: list[DemoStep], row: pd.Series | dict, index_path: Path) -> None:
    """The shard's episode must be the one the index describes: same split, samples and actions."""
    first = episode[0]
    where = f"{first.shard}: episode {first.episode_id}"
    actions = [s.action for s in episode[1:]]
    if list(row["actions"]) != actions:
        raise DataError(f"{where}: its actions {actions} differ from the 'actions' of {index_path} "
                        f"({list(row['actions'])}).")
    if int(row["n_samples"]) != len(episode):
        raise DataError(f"{where}: {len(episode)} samples, but 'n_samples' in {index_path} says {row['n_samples']}.")
    if row["split"] != first.split:
        raise DataError(f"{where}: split {first.split!r}, but 'split' in {index_path} says {row['split']!r}.")
