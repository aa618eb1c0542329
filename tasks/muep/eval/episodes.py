"""Which episodes are played, in which batches, on which version of the data, and the few-shot demonstrations.

Two datasets hold test episodes: the demonstrations (``data/muep/demos/episodes.parquet``: splits ``seen_test``,
``unseen_test``, and ``train`` for debugging) and ALFWorld's 140 + 134 test games as the ``muep-alfworld`` stage
writes them (``data/muep/alfworld/episodes.parquet``: splits ``alfworld_seen``, ``alfworld_unseen``), each with its
own scene metadata. The episodes are the ``ok`` rows of the configured splits. With a cap of ``n`` episodes per
split they are taken round-robin over task types in an order fixed by a hash of the episode id (and, for the
demonstrations, the seed; ALFWorld's slice is the same for every seed), so a small evaluation still covers every
type.

Batches hold consecutive episodes of the same scene instances (in selection order within an instance), and every
agent plays each episode of its batch, so a worker translates a scene instance once for all its games.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from core.errors import DataError
from tasks.muep.eval.harness import EvalBatch
from tasks.muep.eval.records import EpisodeSpec

#: The dataset each split comes from.
SOURCES = {"train": "demos", "seen_test": "demos", "unseen_test": "demos", "alfworld_seen": "alfworld",
           "alfworld_unseen": "alfworld"}
#: The columns an episodes table must have to be evaluated (both datasets write the demonstrations' columns).
REQUIRED = ("episode_id", "scene", "split", "task_type", "instruction", "object_type", "target_type", "grammar",
            "status", "actions")
#: How episodes are cut into batches; part of the evaluation's fingerprint (tasks.muep.eval.store).
BATCHING = "scene-instance-all-agents-1"


def _h(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def check_index(index: pd.DataFrame, path: Path | str) -> pd.DataFrame:
    """``index`` (read from ``path``) has the columns the evaluation reads, and its 'ok' episodes have ids (unique),
    scenes, task types, object types and grammars."""
    missing = [c for c in REQUIRED if c not in index.columns]
    if missing:
        raise DataError(f"{path} lacks the column(s) {', '.join(missing)} that the evaluation reads.",
                        hint="It was written by another version of the pipeline: rerun `dvc repro`.")
    bad = index[index.status == "ok"]
    for column in ("episode_id", "scene", "task_type", "object_type", "grammar"):
        empty = bad[bad[column].isna() | (bad[column].astype(str) == "")]
        if len(empty):
            raise DataError(f"{path}: {len(empty)} 'ok' episode(s) have no {column} (e.g. "
                            f"{empty.episode_id.iloc[0]!r}).")
    dupes = bad.episode_id[bad.episode_id.duplicated()]
    if len(dupes):
        raise DataError(f"{path}: episode id {dupes.iloc[0]!r} occurs more than once among 'ok' episodes.")
    return index


def select(index: pd.DataFrame, splits: list[str], per_split: int | None, seed: int,
           caps: dict[str, int | None] | None = None) -> list[EpisodeSpec]:
    """The ``ok`` episodes of ``splits`` from ``index`` (the rows of one or both datasets), at most ``per_split``
    per split (``caps`` overrides it per split), round-robin over task types."""
    ok = index[index.status == "ok"]
    out: list[EpisodeSpec] = []
    for split in splits:
        source = SOURCES.get(split, "demos")
        rows = ok[ok.split == split].copy()
        if rows.empty:
            raise DataError(f"the {source} episodes table has no 'ok' episode in split {split!r} "
                            "(muep.eval.splits).",
                            hint="Raise muep.demos.episodes (or muep.alfworld.games), or drop the split from "
                            "muep.eval.splits.")
        salt = seed if source == "demos" else "alfworld"  # ALFWorld's slice is fixed, whatever the seed
        rows["_order"] = [_h("eval", salt, e) for e in rows.episode_id]
        rows["_rank"] = rows.sort_values("_order").groupby("task_type").cumcount()
        rows = rows.sort_values(["_rank", "task_type", "_order"])
        cap = caps[split] if caps and split in caps else per_split
        if cap is not None:
            rows = rows.head(cap)
        out += [EpisodeSpec(episode_id=r.episode_id, split=r.split, scene=r.scene, task_type=r.task_type,
                            instruction=r.instruction, object_type=r.object_type, target_type=r.target_type,
                            grammar=r.grammar, expert_actions=tuple(r.actions), source=source)
                for r in rows.itertuples()]
    return out


def make_batches(specs: list[EpisodeSpec], agents: list[tuple[str, str]], batch_size: int) -> list[EvalBatch]:
    """Batches of at most ``batch_size`` episodes, each played by every agent of ``agents`` ((name, label) pairs).

    Episodes are grouped by scene instance (dataset and scene; within an instance in selection order) and the
    groups follow each other in order of first selection, so a batch holds one or a few scene instances, and the
    batches a worker gets in a row share them. Each batch lists the goals of every selected episode of its scene
    instances (:attr:`EvalBatch.scene_goals`): the worker translates each instance once for all of them."""
    groups: dict[tuple[str, str], list[EpisodeSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.source, spec.scene), []).append(spec)
    ordered = [s for group in groups.values() for s in group]
    batches = []
    for k in range(0, len(ordered), batch_size):
        chunk = ordered[k:k + batch_size]
        keys = dict.fromkeys((s.source, s.scene) for s in chunk)
        goals = [(s.source, s.scene, s.task_type, s.object_type, s.target_type) for key in keys for s in groups[key]]
        batches.append(EvalBatch(f"b{k // batch_size:05d}", list(agents), chunk, list(dict.fromkeys(goals))))
    return batches


def dataset_version(root: Path, out_dir: Path, index: Path | None = None, stage: str = "muep-demos") -> str:
    """``dvc:<md5>``: DVC's hash of the ``stage``'s output ``out_dir`` (what dvc.lock records for it), computed from
    the folder's contents (:func:`core.io.dvc_md5`; dvc.lock itself is rewritten by other stages while this one runs).
    The ``index`` table (default ``out_dir/episodes.parquet``) must exist. ``root`` is kept for callers' sake."""
    from core.io import dvc_md5

    index = Path(index) if index is not None else out_dir / "episodes.parquet"
    if not index.exists():
        raise DataError(f"{index} does not exist.", hint=f"Run the {stage} stage first (`dvc repro {stage}`).")
    return f"dvc:{dvc_md5(out_dir).removesuffix('.dir')}"


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
