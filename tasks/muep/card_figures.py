"""The dataset card's figures (matplotlib, Agg backend): episodes per task type, plan lengths, one example episode.

Each figure is written atomically as a PNG without a timestamp or software tag, so the same data gives the same
bytes on the same machine (DVC then sees no change).
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from core.io import atomic_path  # noqa: E402
from tasks.muep.demo_reader import DemoStep  # noqa: E402
from tasks.muep.demos import SPLITS  # noqa: E402
from tasks.muep.vocab import TASK_TYPES  # noqa: E402

SPLIT_COLOURS = {"train": "#4C72B0", "seen_test": "#DD8452", "unseen_test": "#55A868"}
SPLIT_LABELS = {"train": "train", "seen_test": "seen test", "unseen_test": "unseen test"}
BANNER = "-= Welcome to TextWorld, ALFRED! =-"


def _save(fig: plt.Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def type_label(task_type: str) -> str:
    return TASK_TYPES[task_type].label if task_type in TASK_TYPES else task_type


def episodes_by_type(counts: dict[str, dict[str, int]], path: Path) -> None:
    """Horizontal bars, one per task type, stacked by split. ``counts``: task type -> split -> episodes."""
    types = sorted(counts, key=lambda t: list(TASK_TYPES).index(t) if t in TASK_TYPES else len(TASK_TYPES))
    fig, ax = plt.subplots(figsize=(8, 0.55 * max(len(types), 1) + 1.6))
    left = [0] * len(types)
    for split in SPLITS:
        values = [counts[t].get(split, 0) for t in types]
        ax.barh([type_label(t) for t in types], values, left=left, color=SPLIT_COLOURS[split],
                label=SPLIT_LABELS[split])
        left = [a + b for a, b in zip(left, values, strict=True)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total}", va="center", fontsize=11)
    ax.invert_yaxis()
    ax.set_xlabel("episodes (status ok)", fontsize=11)
    ax.set_title("Episodes per task type", fontsize=13)
    ax.tick_params(labelsize=11)
    ax.set_xlim(0, max(left, default=0) * 1.15 + 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(SPLITS), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def plan_lengths(lengths: dict[str, Sequence[int]], path: Path) -> None:
    """Histogram of plan lengths (actions per episode), one integer per bin, stacked by split."""
    all_values = [v for values in lengths.values() for v in values]
    lo, hi = (min(all_values), max(all_values)) if all_values else (0, 1)
    bins = list(range(lo, hi + 1))
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0] * len(bins)
    for split in SPLITS:
        heights = [list(lengths.get(split, [])).count(b) for b in bins]
        ax.bar(bins, heights, bottom=bottom, width=0.8, color=SPLIT_COLOURS[split], label=SPLIT_LABELS[split])
        bottom = [a + b for a, b in zip(bottom, heights, strict=True)]
    ax.set_xticks(bins)
    ax.set_xlabel("plan length (actions per episode)", fontsize=11)
    ax.set_ylabel("episodes", fontsize=11)
    ax.set_title("Plan lengths of the expert demonstrations", fontsize=13)
    ax.tick_params(labelsize=10)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _caption(step: DemoStep, width: int, max_lines: int) -> str:
    text = " ".join(step.text_state.replace(BANNER, "").split())
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 3].rstrip() + "..."
    return "\n".join(lines)


def episode_strip(steps: Sequence[DemoStep], path: Path, columns: int = 4, max_panels: int = 12) -> None:
    """Every state of one episode: its image, and beneath it the step, the action taken and the text state."""
    shown = list(steps)
    if len(shown) > max_panels:  # keep the start and the end of a long episode
        shown = shown[: max_panels - 1] + shown[-1:]
    columns = min(columns, len(shown))
    rows = -(-len(shown) // columns)
    fig = plt.figure(figsize=(4.4 * columns, 5.9 * rows + 0.6))
    grid = fig.add_gridspec(rows * 2, columns, height_ratios=[4.0, 1.9] * rows, hspace=0.1, wspace=0.1,
                            top=1 - 0.6 / (5.9 * rows + 0.6), bottom=0.0)
    for n, step in enumerate(shown):
        r, c = divmod(n, columns)
        image = Image.open(io.BytesIO(step.png or b""))
        ax = fig.add_subplot(grid[2 * r, c])
        ax.imshow(image)
        ax.set_xticks([])
        ax.set_yticks([])
        title = "step 0: initial state" if step.action is None else f"step {step.step}: {step.action}"
        ax.set_title("\n".join(textwrap.wrap(title, 32)), fontsize=12, fontweight="bold", loc="left")
        text_ax = fig.add_subplot(grid[2 * r + 1, c])
        text_ax.axis("off")
        text_ax.text(0.0, 1.0, _caption(step, 38, 9), va="top", ha="left", fontsize=10.5, family="DejaVu Sans",
                     transform=text_ax.transAxes)
    first = steps[0]
    fig.suptitle(f"\u201c{first.instruction}\u201d \u2014 {first.scene}, {type_label(first.task_type)}, "
                 f"episode {first.episode_id} ({first.split})", fontsize=14, y=1 - 0.15 / (5.9 * rows + 0.6), va="top")
    _save(fig, path)
