"""The dataset card: statistics of the expert demonstrations, three figures, and a Markdown page that explains them.

Statistics come from ``episodes.parquet`` (every episode, its status, plan and sample count) and from one shard per
split read back with the webdataset reader (image size, renderer version, text-state length -- the things the index
does not record), and the episode-length comparison from ALFWorld's training games (``train_games.parquet`` of the
``muep-alfworld`` stage: their walkthroughs on ALFRED's real states). Nothing here reads params: the grammar,
renderer and planner search are read from the data.
"""

from __future__ import annotations

import io
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from PIL import Image

from core.errors import DataError
from core.io import read_parquet, write_text
from tasks.muep import card_figures
from tasks.muep.card_text import render_card
from tasks.muep.demo_reader import (
    check_against_index,
    episodes,
    read_index,
    read_shard,
    read_splits,
)
from tasks.muep.demos import REJECT_REASONS, SPLITS
from tasks.muep.vocab import TASK_TYPES

FIGURES = {"types": "episodes_by_task_type.png", "lengths": "plan_length_hist.png", "example": "example_episode.png"}
_NAME = re.compile(r"\b[a-z]+ \d+\b")  # an object or receptacle name in a command: "mug 2", "sinkbasin 1"


@dataclass(frozen=True)
class GroupStats:
    episodes: int
    pairs: int
    scenes: int
    mean_plan_length: float
    max_plan_length: int


@dataclass(frozen=True)
class ShardSample:
    shards: list[str]
    samples: int
    image_sizes: list[str]
    renderer_versions: list[str]
    mean_text_state_words: float


@dataclass(frozen=True)
class CardStats:
    total: GroupStats
    by_split: dict[str, GroupStats]
    by_type: dict[str, GroupStats]
    type_by_split: dict[str, dict[str, int]]
    plan_lengths: dict[str, list[int]]
    seen_scenes: int
    unseen_scenes: int
    episodes_attempted: int
    rejects: dict[str, int]
    distinct_actions: int
    action_templates: list[str]
    action_words: int
    grammars: list[str]
    renderers: list[str]
    searches: list[str]


@dataclass(frozen=True)
class LengthStats:
    """Why an episode has the length it has: our plans next to ALFWorld's walkthroughs on ALFRED's own states."""

    actions: float                       # mean actions per ok episode
    pairs: float                         # mean image-text pairs per ok episode
    by_type: dict[str, float]            # our mean actions per task type
    walkthrough_by_type: dict[str, float]  # ALFWorld's training walkthroughs, mean actions per task type
    walkthrough_mean: float
    walkthrough_games: int
    weighted: float                      # our per-type means weighted by ALFWorld's type mix
    opens: float                         # "open" commands per episode (objects inside closed receptacles)
    gotos: float                         # "go to" commands per episode (receptacles the expert visits)
    pick_two_one_put: tuple[int, int]    # pick-two plans that put one object down (one starts in place) / all


def length_stats(index: pd.DataFrame, walkthroughs: pd.DataFrame) -> LengthStats:
    ok = index[index.status == "ok"]
    if ok.empty or walkthroughs.empty:
        raise DataError("no ok episode or no ALFWorld walkthrough to compare episode lengths with.")
    by_type = {t: float(ok[ok.task_type == t].plan_length.mean()) for t in TASK_TYPES if (ok.task_type == t).any()}
    walk = {t: float(walkthroughs[walkthroughs.task_type == t].plan_length.mean()) for t in TASK_TYPES
            if (walkthroughs.task_type == t).any()}
    mix = walkthroughs.task_type.value_counts(normalize=True)
    shared = [t for t in by_type if t in walk]
    weighted = sum(by_type[t] * mix[t] for t in shared) / max(1e-9, sum(mix[t] for t in shared))
    two = ok[ok.task_type == "pick_two_obj_and_place"]
    puts = [sum(a.startswith(("move ", "put ")) for a in acts) for acts in two.actions]
    count = lambda prefix: float(statistics.fmean(sum(a.startswith(prefix) for a in acts)  # noqa: E731
                                                  for acts in ok.actions))
    return LengthStats(
        actions=float(ok.plan_length.mean()), pairs=float(ok.n_samples.mean()), by_type=by_type,
        walkthrough_by_type=walk, walkthrough_mean=float(walkthroughs.plan_length.mean()),
        walkthrough_games=int(len(walkthroughs)), weighted=float(weighted), opens=count("open "), gotos=count("go to "),
        pick_two_one_put=(sum(n == 1 for n in puts), len(puts)))


def _group(ok: pd.DataFrame) -> GroupStats:
    if ok.empty:
        return GroupStats(0, 0, 0, 0.0, 0)
    return GroupStats(int(len(ok)), int(ok.n_samples.sum()), int(ok.scene.nunique()),
                      round(float(ok.plan_length.mean()), 2), int(ok.plan_length.max()))


def action_template(action: str) -> str:
    """``take mug 2 from countertop 1`` -> ``take <x> from <y>``: the command with its names abstracted."""
    names = iter(("<x>", "<y>", "<z>"))
    return _NAME.sub(lambda _: next(names, "<w>"), action)


def compute_stats(index: pd.DataFrame) -> CardStats:
    ok = index[index.status == "ok"]
    rejected = index[index.status != "ok"]
    unknown = sorted(set(rejected.status) - set(REJECT_REASONS))
    if unknown:
        raise DataError(f"episodes.parquet: column 'status' has values that are neither 'ok' nor a reject reason: "
                        f"{', '.join(unknown)}.")
    actions = [a for acts in ok.actions for a in acts]
    types = [t for t in TASK_TYPES if t in set(ok.task_type)] + sorted(set(ok.task_type) - set(TASK_TYPES))
    return CardStats(
        total=_group(ok),
        by_split={s: _group(ok[ok.split == s]) for s in SPLITS},
        by_type={t: _group(ok[ok.task_type == t]) for t in types},
        type_by_split={t: {s: int(((ok.task_type == t) & (ok.split == s)).sum()) for s in SPLITS} for t in types},
        plan_lengths={s: sorted(int(n) for n in ok[ok.split == s].plan_length) for s in SPLITS},
        seen_scenes=int(ok[ok.split != "unseen_test"].scene.nunique()),
        unseen_scenes=int(ok[ok.split == "unseen_test"].scene.nunique()),
        episodes_attempted=int(len(index)),
        rejects={r: int((rejected.status == r).sum()) for r in REJECT_REASONS},
        distinct_actions=len(set(actions)),
        action_templates=sorted({action_template(a) for a in actions}),
        action_words=len({w for a in actions for w in a.split()}),
        grammars=sorted(set(index.grammar)), renderers=sorted(set(index.renderer)), searches=sorted(set(index.search)),
    )


def sample_shards(shards: list[Path], ref_root: Path) -> ShardSample:
    """Image sizes, renderer versions and text-state lengths of every sample of the given shards."""
    sizes, versions, words, n = set(), set(), [], 0
    for shard in shards:
        for step in read_shard(shard, images=True):
            with Image.open(io.BytesIO(step.png or b"")) as image:
                sizes.add(f"{image.width}x{image.height}")
            versions.add(step.renderer_version)
            words.append(len(step.text_state.split()))
            n += 1
    return ShardSample([_rel(s, ref_root) for s in shards], n, sorted(sizes), sorted(versions),
                       round(statistics.fmean(words), 1) if words else 0.0)


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def pick_example(index: pd.DataFrame) -> str:
    """An ordinary episode to show: ok, of the train split if there is one, plan length nearest the median."""
    ok = index[index.status == "ok"]
    if ok.empty:
        raise DataError("episodes.parquet has no episode with status 'ok': there is nothing to describe.",
                        hint="Look at reports/muep/demos.json for the reject reasons.")
    pool = ok[ok.split == "train"] if (ok.split == "train").any() else ok
    median = statistics.median(pool.plan_length)
    best = min(pool.itertuples(index=False), key=lambda r: (abs(r.plan_length - median), r.episode_id))
    return str(best.episode_id)


def example_steps(demos_dir: Path, index: pd.DataFrame, episode_id: str) -> list:
    rows = index[index.episode_id == episode_id]
    if rows.empty:
        raise DataError(f"{demos_dir}/episodes.parquet has no episode {episode_id}.")
    row = rows.iloc[0]
    shard = Path(demos_dir) / "shards" / f"{row['batch']}.tar"
    for episode in episodes(read_shard(shard, images=True)):
        if episode[0].episode_id == episode_id:
            check_against_index(episode, row, Path(demos_dir) / "episodes.parquet")
            return episode
    raise DataError(f"{shard}: episode {episode_id} (batch {row['batch']!r} in episodes.parquet) is not in its shard.")


def make_figures(stats: CardStats, example: list, figures_dir: Path) -> dict[str, Path]:
    out = {key: Path(figures_dir) / name for key, name in FIGURES.items()}
    card_figures.episodes_by_type(stats.type_by_split, out["types"])
    card_figures.plan_lengths(stats.plan_lengths, out["lengths"])
    card_figures.episode_strip(example, out["example"])
    return out


def build_card(demos_dir: Path, reports_dir: Path, ref_root: Path, example_id: str | None = None,
               walkthroughs: Path | None = None) -> dict:
    """Read the demonstrations, write ``dataset_card.md`` and its figures under ``reports_dir``; return the stats.
    ``walkthroughs``: ALFWorld's training games (``train_games.parquet``) for the episode-length section."""
    index = read_index(demos_dir)
    splits = read_splits(demos_dir)
    stats = compute_stats(index)
    lengths = length_stats(index, read_parquet(walkthroughs)) if walkthroughs is not None else None
    sample = sample_shards([shards[0] for shards in splits.values() if shards], ref_root)
    example_id = example_id or pick_example(index)
    example = example_steps(demos_dir, index, example_id)
    figures = make_figures(stats, example, Path(reports_dir) / "figures")
    card = Path(reports_dir) / "dataset_card.md"
    links = {key: path.relative_to(card.parent).as_posix() for key, path in figures.items()}
    write_text(card, render_card(stats, sample, example, links, lengths))
    return {"card": card, "figures": figures, "stats": stats, "sample": sample, "example": example_id,
            "lengths": lengths}
