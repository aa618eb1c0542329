"""The MuEP demonstrations and SFT export as Hugging Face ``datasets`` (one ``DatasetDict`` per call, a split per
``data/muep/demos`` split)::

    from tasks.muep.hf_datasets import load_demos, load_sft
    demos = load_demos()        # image (PIL), text_state, action, task_type, instruction, episode_id, step, split, ...
    sft = load_sft()            # one row per expert action: task, history, observation, image ref, target_action

The SFT export is plain JSON lines, so ``datasets``' own ``json`` builder reads it as well (:data:`SFT_ONE_LINER`).
The shards are read through :mod:`tasks.muep.demo_reader`, which checks every sample against the documented format,
with explicit features: ``datasets``' ``webdataset`` builder cannot read them on its own, since ``action`` is null at
step 0 and ``world_state`` has a key per object (here it is a JSON string).
"""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import DataError
from tasks.muep import layout

SFT_ONE_LINER = ('load_dataset("json", data_files={s: f"data/muep/sft/{s}.jsonl" '
                 'for s in ("train", "seen_test", "unseen_test")})')
"""What the dataset card and docs/muep-stages.md print: the SFT export with ``datasets`` alone."""


def demo_features():
    from datasets import Features, Image, Value

    text = Value("string")
    return Features({"image": Image(), "text_state": text, "action": text, "task_type": text, "instruction": text,
                     "episode_id": text, "step": Value("int32"), "split": text, "scene": text, "grammar": text,
                     "renderer": text, "world_state": text, "key": text})


def _demo_rows(shards: list[str]):
    from tasks.muep.demo_reader import read_shard

    for shard in shards:
        for s in read_shard(Path(shard), images=True):
            yield {"image": {"bytes": s.png, "path": None}, "text_state": s.text_state, "action": s.action,
                   "task_type": s.task_type, "instruction": s.instruction, "episode_id": s.episode_id,
                   "step": s.step, "split": s.split, "scene": s.scene, "grammar": s.grammar, "renderer": s.renderer,
                   "world_state": json.dumps(s.world_state, sort_keys=True), "key": s.key}


def load_demos(demos_dir: Path | str | None = None, splits: list[str] | None = None, cache_dir: str | None = None):
    """The demonstration shards as a ``datasets.DatasetDict``: one row per state (step 0 = the initial state, its
    ``action`` None), with its image. ``splits``: default every split with shards."""
    from datasets import Dataset, DatasetDict

    from tasks.muep.demo_reader import read_splits

    shards = read_splits(Path(demos_dir or layout.DEMOS))
    wanted = splits or [s for s, files in shards.items() if files]
    unknown = [s for s in wanted if s not in shards]
    if unknown:
        raise DataError(f"no split {unknown[0]!r} in {demos_dir or layout.DEMOS}/splits.json; known: "
                        f"{', '.join(shards)}.")
    return DatasetDict({s: Dataset.from_generator(_demo_rows, features=demo_features(), cache_dir=cache_dir,
                                                  gen_kwargs={"shards": [str(p) for p in shards[s]]})
                        for s in wanted})


def load_sft(sft_dir: Path | str | None = None, cache_dir: str | None = None):
    """The SFT export (``data/muep/sft/<split>.jsonl``) with ``datasets``' ``json`` builder."""
    from datasets import load_dataset

    folder = Path(sft_dir or layout.SFT)
    files = {p.stem: str(p) for p in sorted(folder.glob("*.jsonl")) if p.stat().st_size}
    if not files:
        raise DataError(f"{folder} holds no SFT records (*.jsonl).", hint="Run `dvc repro muep-sft` first.")
    return load_dataset("json", data_files=files, cache_dir=cache_dir)
