"""Resumable training state: ``<model_dir>/checkpoints/step-NNNNNN/`` with the trainable tensors, the optimizer,
the schedule, the RNG states and the run's bookkeeping.

A checkpoint is written to a temporary folder and renamed in one step, so a kill leaves the previous complete one.
Each carries the run's fingerprint (baseline, profile, hyper-parameters, dataset digest); a checkpoint of another
configuration is discarded with a log line instead of being resumed into a different run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from tasks.train.models import ADAPTER_FILE, load_adapter, save_adapter

log = logging.getLogger("embp")
KEEP = 2


@dataclass
class TrainState:
    step: int = 0                                             # optimizer steps done
    losses: list[list[float]] = field(default_factory=list)   # [step, loss]
    tokens: int = 0
    seconds: float = 0.0
    mlflow_run_id: str | None = None
    fingerprint: str = ""


def _steps(directory: Path) -> list[Path]:
    if not directory.exists():
        return []
    return sorted(p for p in directory.glob("step-*") if (p / "state.json").exists() and (p / ADAPTER_FILE).exists())


def save(directory: Path, model, optimizer, scheduler, state: TrainState) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{state.step:06d}"
    tmp = directory / f".tmp-step-{state.step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_adapter(model, tmp)
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng},
               tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(asdict(state)), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in _steps(directory)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(directory: Path, fingerprint: str) -> Path | None:
    """The newest complete checkpoint of this configuration; checkpoints of another one are removed."""
    found = _steps(directory)
    if not found:
        return None
    state = json.loads((found[-1] / "state.json").read_text(encoding="utf-8"))
    if state.get("fingerprint") != fingerprint:
        log.info("checkpoints in %s belong to another configuration; starting afresh", directory)
        shutil.rmtree(directory, ignore_errors=True)
        return None
    return found[-1]


def restore(path: Path, model, optimizer, scheduler) -> TrainState:
    load_adapter(model, path)
    blob = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    torch.set_rng_state(blob["rng"]["torch"])
    if "cuda" in blob["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(blob["rng"]["cuda"])
    return TrainState(**json.loads((path / "state.json").read_text(encoding="utf-8")))


def clear(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
