"""Instruction-following (SFT) records from the expert demonstrations: one record per action of every episode.

An episode of stage 4 is the sequence ``o0, a1, o1, a2, o2, ..., an, on`` -- ``o0`` the initial observation (sample
``_s000``) and ``ok`` the text state after action ``ak`` (sample ``_s00k``). The record for step ``t >= 1`` asks for
``a_t`` given:

* the task ``instruction`` (and, as metadata, its ``task_type``);
* ``history``: the last ``window`` (observation, action) pairs before it, ``(o_{k-1}, a_k)`` for
  ``k = max(1, t - window) .. t - 1``, oldest first; ``window = 0`` gives none;
* ``observation``: ``o_{t-1}``, the text state *before* the action (never repeated inside ``history``);
* ``image``: the shard and sample key of that same state (``<episode>_s{t-1:03d}``), the visual observation an LMM
  gets with it.

``target_action`` is ``a_t``. :func:`render_prompt` is the reference plain-text rendering of a record (what the
report's prompt lengths measure); training code may render the same fields with a chat template of its own.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from core.errors import DataError
from core.io import atomic_path
from tasks.muep.demo_reader import (
    DemoStep,
    check_against_index,
    episodes,
    read_index,
    read_shard,
    read_splits,
)
from tasks.muep.demos import SPLITS


@dataclass(frozen=True)
class HistoryTurn:
    observation: str
    action: str


@dataclass(frozen=True)
class ImageRef:
    shard: str        # path of the webdataset shard, relative to the repository root
    key: str          # the sample's __key__ in that shard


@dataclass(frozen=True)
class SFTRecord:
    id: str
    episode_id: str
    step: int
    split: str
    scene: str
    task_type: str
    instruction: str
    history: list[HistoryTurn]
    observation: str
    image: ImageRef
    target_action: str
    grammar: str
    renderer: str


@dataclass
class SplitStats:
    records: int = 0
    episodes: int = 0
    prompt_chars: list[int] = field(default_factory=list)


def records_for_episode(episode: list[DemoStep], shard_ref: str, window: int) -> list[SFTRecord]:
    """One record per action of the episode (its samples in step order, as :func:`episodes` yields them)."""
    if window < 0:
        raise ValueError(f"history window must be >= 0, got {window}")
    out = []
    for t in range(1, len(episode)):
        before, after = episode[t - 1], episode[t]
        history = [HistoryTurn(episode[k - 1].text_state, str(episode[k].action)) for k in range(max(1, t - window), t)]
        out.append(SFTRecord(
            id=after.key, episode_id=after.episode_id, step=t, split=after.split, scene=after.scene,
            task_type=after.task_type, instruction=after.instruction, history=history,
            observation=before.text_state, image=ImageRef(shard_ref, before.key), target_action=str(after.action),
            grammar=after.grammar, renderer=after.renderer,
        ))
    return out


def render_prompt(record: SFTRecord) -> str:
    """The reference text prompt: task, history, current observation, then the cue for the next action."""
    lines = [f"Task: {record.instruction}"]
    for turn in record.history:
        lines += [f"Observation: {turn.observation}", f"Action: {turn.action}"]
    lines += [f"Observation: {record.observation}", "Next action:"]
    return "\n".join(lines)


def _ok_episodes(index: pd.DataFrame, split: str) -> dict[str, dict]:
    ok = index[(index.status == "ok") & (index.split == split)]
    return {row["episode_id"]: row for row in ok.to_dict("records")}


def export_split(split: str, shards: list[Path], index: pd.DataFrame, index_path: Path, out_path: Path, window: int,
                 ref_root: Path) -> SplitStats:
    """Write one split's records to ``out_path`` (JSON lines, atomically), checking the shards against the index."""
    expected = _ok_episodes(index, split)
    stats = SplitStats()
    found: set[str] = set()
    with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
        for shard in shards:
            shard_ref = os.path.relpath(shard, ref_root)
            for episode in episodes(read_shard(shard)):
                eid = episode[0].episode_id
                if episode[0].split != split:
                    raise DataError(f"{shard}: episode {eid} has split {episode[0].split!r} but the shard is listed "
                                    f"under {split!r} in splits.json.")
                if eid not in expected:
                    raise DataError(f"{shard}: episode {eid} is not an 'ok' episode of split {split!r} in "
                                    f"{index_path}.", hint="The shards and the index disagree: rerun muep-demos.")
                check_against_index(episode, expected[eid], index_path)
                found.add(eid)
                stats.episodes += 1
                for record in records_for_episode(episode, shard_ref, window):
                    stream.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
                    stats.records += 1
                    stats.prompt_chars.append(len(render_prompt(record)))
    missing = sorted(set(expected) - found)
    if missing:
        raise DataError(f"{len(missing)} 'ok' episodes of split {split!r} in {index_path} are in none of its shards "
                        f"({', '.join(missing[:3])}).", hint="The demonstrations are incomplete: rerun muep-demos.")
    return stats


def export_sft(demos_dir: Path, out_dir: Path, window: int, ref_root: Path) -> dict:
    """All splits: ``out_dir/<split>.jsonl`` for each split, and the report's numbers."""
    index_path = Path(demos_dir) / "episodes.parquet"
    index = read_index(demos_dir)
    shards = read_splits(demos_dir)
    report: dict = {"history_window": window, "records_by_split": {}, "episodes_by_split": {},
                    "mean_prompt_chars_by_split": {}}
    all_chars: list[int] = []
    for split in SPLITS:
        stats = export_split(split, shards[split], index, index_path, Path(out_dir) / f"{split}.jsonl", window,
                             ref_root)
        report["records_by_split"][split] = stats.records
        report["episodes_by_split"][split] = stats.episodes
        report["mean_prompt_chars_by_split"][split] = _mean(stats.prompt_chars)
        all_chars += stats.prompt_chars
    report["records"] = len(all_chars)
    report["mean_prompt_chars"] = _mean(all_chars)
    report["max_prompt_chars"] = max(all_chars, default=0)
    return report


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0
