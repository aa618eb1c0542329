"""Which episodes are played, in which batches, on which version of the data, and the few-shot demonstrations.

The episodes are the ``ok`` rows of ``data/muep/demos/episodes.parquet`` in the configured splits. With a cap of
``n`` episodes per split they are taken round-robin over task types (in an order fixed by the seed), so a small
evaluation still covers every type.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import yaml

from core.errors import DataError
from tasks.muep.eval.harness import EvalBatch
from tasks.muep.eval.records import EpisodeSpec


def _h(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def select(index: pd.DataFrame, splits: list[str], per_split: int | None, seed: int) -> list[EpisodeSpec]:
    ok = index[index.status == "ok"]
    out: list[EpisodeSpec] = []
    for split in splits:
        rows = ok[ok.split == split].copy()
        if rows.empty:
            raise DataError(f"episodes.parquet has no 'ok' episode in split {split!r} (muep.eval.splits).",
                            hint="Raise muep.demos.episodes or drop the split from muep.eval.splits.")
        rows["_order"] = [_h("eval", seed, e) for e in rows.episode_id]
        rows["_rank"] = rows.sort_values("_order").groupby("task_type").cumcount()
        rows = rows.sort_values(["_rank", "task_type", "_order"])
        if per_split is not None:
            rows = rows.head(per_split)
        out += [EpisodeSpec(episode_id=r.episode_id, split=r.split, scene=r.scene, task_type=r.task_type,
                            instruction=r.instruction, object_type=r.object_type, target_type=r.target_type,
                            grammar=r.grammar, expert_actions=tuple(r.actions)) for r in rows.itertuples()]
    return out


def make_batches(specs: list[EpisodeSpec], agents: list[tuple[str, str]], batch_size: int) -> list[EvalBatch]:
    """One batch = one agent, one split, at most ``batch_size`` episodes. ``agents`` are (name, label) pairs."""
    batches = []
    for name, label in agents:
        for split in dict.fromkeys(s.split for s in specs):
            chunk = [s for s in specs if s.split == split]
            for k in range(0, len(chunk), batch_size):
                batches.append(EvalBatch(f"{name}-{split}-{k // batch_size:04d}", name, label, split,
                                         chunk[k:k + batch_size]))
    return batches


def _md5(path: Path) -> str:
    digest = hashlib.md5()  # noqa: S324 - DVC's content hash, not security
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_version(root: Path, demos_dir: Path) -> str:
    """``dvc:<md5>`` -- DVC's hash of data/muep/demos in dvc.lock -- when dvc.lock has it *and* the DVC cache's
    listing of that version holds the episodes.parquet that is on disk (a lock from an older run is not trusted);
    otherwise ``sha256:<16 hex>`` of episodes.parquet."""
    index = demos_dir / "episodes.parquet"
    if not index.exists():
        raise DataError(f"{index} does not exist.", hint="Run the muep-demos stage first (`dvc repro`).")
    fallback = "sha256:" + hashlib.sha256(index.read_bytes()).hexdigest()[:16]
    lock = root / "dvc.lock"
    try:
        stage = yaml.safe_load(lock.read_text(encoding="utf-8"))["stages"]["muep-demos"]
        md5 = next(o["md5"] for o in stage["outs"] if Path(root, o["path"]).resolve() == demos_dir.resolve())
        listing = root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
        entries = json.loads(listing.read_text(encoding="utf-8"))
        recorded = next(e["md5"] for e in entries if e["relpath"] == "episodes.parquet")
    except (OSError, KeyError, TypeError, StopIteration, ValueError, yaml.YAMLError):
        return fallback
    return f"dvc:{md5.removesuffix('.dir')}" if recorded == _md5(index) else fallback


def few_shot_examples(demos_dir: Path, per_type: int, seed: int) -> dict[str, list[str]]:
    """Up to ``per_type`` transcripts per task type from the *train* split's demonstrations (fixed by the seed)."""
    from tasks.muep.demo_reader import episodes, read_index, read_shard, read_splits
    from tasks.muep.eval.prompts import transcript

    if per_type <= 0:
        return {}
    index = read_index(demos_dir)
    train = index[(index.status == "ok") & (index.split == "train")].copy()
    train["_order"] = [_h("few-shot", seed, e) for e in train.episode_id]
    wanted = set(train.sort_values("_order").groupby("task_type").head(per_type).episode_id)
    found: dict[str, tuple[str, str]] = {}
    for shard in read_splits(demos_dir)["train"]:
        for episode in episodes(read_shard(shard)):
            if episode[0].episode_id in wanted:
                text = transcript([s.text_state for s in episode], [str(s.action) for s in episode[1:]])
                found[episode[0].episode_id] = (episode[0].task_type, text)
    out: dict[str, list[str]] = {}
    for eid in sorted(found, key=lambda e: _h("few-shot", seed, e)):
        kind, text = found[eid]
        out.setdefault(kind, []).append(text)
    return out
