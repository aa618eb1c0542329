"""Shared helpers of the training tests (no tests here): a small SFT export in the format of ``tasks/muep/sft.py``
(records + a webdataset-style tar of rendered states), MLflow in a temporary store, quick training params."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tasks.params import TrackingParams, TrainParams

EPISODES = {
    "ep-apple": ("Put a clean apple in the fridge.", [
        ("You are in the middle of a room. Looking quickly around you, you see a countertop 1, a fridge 1, a "
         "sinkbasin 1, and a microwave 1.", "go to countertop 1"),
        ("You arrive at countertop 1. On the countertop 1, you see a apple 1, and a knife 1.",
         "take apple 1 from countertop 1"),
        ("You pick up the apple 1 from the countertop 1.", "go to sinkbasin 1"),
        ("You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.", "clean apple 1 with sinkbasin 1"),
    ]),
    "ep-book": ("Examine the book with the desklamp.", [
        ("You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, and a "
         "desklamp 1.", "go to desk 1"),
        ("You arrive at desk 1. On the desk 1, you see a book 2, and a desklamp 1.", "take book 2 from desk 1"),
        ("You pick up the book 2 from the desk 1.", "use desklamp 1"),
    ]),
}
COLOURS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40), (40, 200, 200)]


def _png(step: int) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (96, 96), (250, 250, 250))
    ImageDraw.Draw(image).rectangle([10 + 5 * step, 10, 60 + 5 * step, 60], fill=COLOURS[step % len(COLOURS)])
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _records(eid: str, instruction: str, steps, shard: str, split: str, window: int = 5) -> list[dict]:
    out = []
    for t, (observation, action) in enumerate(steps, 1):
        history = [{"observation": o, "action": a} for o, a in steps[max(0, t - 1 - window): t - 1]]
        out.append({"id": f"{eid}_s{t:03d}", "episode_id": eid, "step": t, "split": split, "scene": "FloorPlan1",
                    "task_type": "pick_clean_then_place_in_recep", "instruction": instruction, "history": history,
                    "observation": observation, "image": {"shard": shard, "key": f"{eid}_s{t - 1:03d}"},
                    "target_action": action, "grammar": "alfworld-0.4", "renderer": "schematic"})
    return out


def make_sft(root: Path, with_images: bool = True, sft: Path | None = None, shard: Path | None = None,
             shard_ref: str | None = None) -> Path:
    """``root/sft/{train,seen_test,unseen_test}.jsonl`` and ``root/shards/train-00000.tar``; the records name the
    shard by ``shard_ref`` (default: its absolute path)."""
    root = Path(root)
    shard = shard or root / "shards" / "train-00000.tar"
    shard.parent.mkdir(parents=True, exist_ok=True)
    ref = shard_ref or str(shard)
    records = [r for eid, (instr, steps) in EPISODES.items() for r in _records(eid, instr, steps, ref, "train")]
    if with_images:
        with tarfile.open(shard, "w") as tar:
            for rec in records:
                data = _png(rec["step"])
                info = tarfile.TarInfo(f"{rec['image']['key']}.png")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    sft = sft or root / "sft"
    sft.mkdir(parents=True, exist_ok=True)
    held = [dict(r, split="seen_test") for r in records[:2]]
    for name, rows in (("train", records), ("seen_test", held), ("unseen_test", held)):
        (sft / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return sft


def quick_params(name: str, out: Path, **overrides) -> TrainParams:
    """A few steps on one fixed batch (2 records, batch of 2): the loss must go down."""
    values = {"baselines": [name], "max_steps": 6, "batch_size": 2, "grad_accum": 1, "max_train_records": 2,
              "learning_rate": 1e-2, "max_seq_len": 160, "history_window": 1, "save_every": 3, "eval_batches": 1,
              "cpu_threads": 1, "output_dir": str(out)}
    return TrainParams(**(values | overrides))


def tracking_in(directory: Path) -> TrackingParams:
    return TrackingParams(uri=f"sqlite:///{Path(directory) / 'mlflow.db'}")


@pytest.fixture(autouse=True)
def restore_torch_threads():
    """Training sets torch's thread count (train.cpu_threads); give the other tests of the process theirs back."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
