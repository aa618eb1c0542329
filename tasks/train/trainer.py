"""The training loop (accelerate: device placement, mixed precision, gradient scaling), checkpoint/resume, and MLflow.

:func:`fit` runs ``hyper.max_steps`` optimizer steps of ``grad_accum`` micro-batches each. The data order is a
function of the step alone (one seeded permutation per epoch), and checkpoints restore the optimizer, the schedule and
the RNG, so a run killed at any point and resumed from its last checkpoint continues exactly where an uninterrupted
run would be. Throughput counts the non-padding tokens (visual tokens included) per second of training compute.
"""

from __future__ import annotations

import logging
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tasks.hf.hardware import effective_dtype
from tasks.train import checkpoints
from tasks.train.checkpoints import TrainState
from tasks.train.data import collate
from tasks.train.models import Hyper

log = logging.getLogger("embp")


class Batcher:
    """Micro-batch ``i`` of an endless, epoch-wise shuffled stream of the features -- reproducible from ``i``."""

    def __init__(self, features: list[dict], batch_size: int, seed: int, pad_id: int,
                 image_loader: Callable | None = None, image_processor=None):
        if not features:
            raise ValueError("no training features")
        self.features = features
        self.batch_size = batch_size
        self.seed = seed
        self.pad_id = pad_id
        self.image_loader = image_loader
        self.image_processor = image_processor
        self._perms: dict[int, list[int]] = {}

    def _index(self, position: int) -> int:
        epoch, offset = divmod(position, len(self.features))
        if epoch not in self._perms:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perms = {epoch: torch.randperm(len(self.features), generator=gen).tolist()}
        return self._perms[epoch][offset]

    def batch(self, i: int) -> dict:
        feats = [self.features[self._index(i * self.batch_size + k)] for k in range(self.batch_size)]
        out = collate(feats, self.pad_id)
        if "image" in feats[0]:
            images = [self.image_loader(*f["image"]) for f in feats]
            out["pixel_values"] = self.image_processor(images, return_tensors="pt")["pixel_values"]
        return out


@dataclass
class FitResult:
    steps: int
    losses: list[list[float]]
    tokens: int
    seconds: float
    resumed_from: int
    peak_memory_mb: float
    eval_loss: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def peak_memory_mb(device: str) -> float:
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def _to(batch: dict, device, dtype) -> dict:
    out = {}
    for k, v in batch.items():
        v = v.to(device)
        out[k] = v.to(dtype) if k == "pixel_values" else v
    return out


def _mixed_precision(device: str, precision: str = "auto") -> str:
    """accelerate's mixed precision: ``auto`` = bf16 (fp16 without bf16 support) on CUDA, none on CPU; ``bfloat16``
    = bf16 autocast wherever the device computes bf16 natively (CPUs with AVX-512 / AMX: about 1.3x faster), none on
    a CPU without (:mod:`tasks.hf.hardware`); ``float32`` = none."""
    if effective_dtype(precision, device) == "bfloat16":
        return "bf16"
    if precision == "float32" or device != "cuda":
        return "no"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def fit(model, batcher: Batcher, hyper: Hyper, *, device: str, ckpt_dir: Path, fingerprint: str,
        logger: RunLogger | None = None, on_step: Callable[[int, float], None] | None = None) -> FitResult:
    """Train ``model`` (its ``requires_grad`` parameters) for ``hyper.max_steps`` steps, resuming if possible."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    # accelerate keeps one process-wide state and refuses another mixed precision later in the same process (two
    # baselines of one flow, one bf16 and one fp32): each fit starts from a fresh state.
    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator(cpu=device == "cpu", mixed_precision=_mixed_precision(device, hyper.precision))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hyper.learning_rate, weight_decay=0.0)
    warmup = max(0, hyper.warmup_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / (warmup + 1)))
    model, optimizer = accelerator.prepare(model, optimizer)
    state = TrainState(fingerprint=fingerprint)
    found = checkpoints.latest(ckpt_dir, fingerprint)
    if found is not None:
        state = checkpoints.restore(found, model, optimizer, scheduler)
        log.info("resuming from %s (step %d of %d)", found, state.step, hyper.max_steps)
    resumed_from = state.step
    if logger is not None:
        state.mlflow_run_id = logger.start(state.mlflow_run_id)
    pixel_dtype = next((p.dtype for n, p in model.named_parameters() if "vision" in n), torch.float32)
    model.train()
    timings: list[tuple[int, float]] = []      # (tokens, seconds) of each step run in this process
    while state.step < hyper.max_steps:
        start = time.perf_counter()
        step_loss, step_tokens = 0.0, 0
        for micro in range(hyper.grad_accum):
            batch = _to(batcher.batch(state.step * hyper.grad_accum + micro), accelerator.device, pixel_dtype)
            loss = model(**batch).loss
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"loss is {loss.item()} at step {state.step}")
            accelerator.backward(loss / hyper.grad_accum)
            step_loss += loss.item() / hyper.grad_accum
            step_tokens += int(batch["attention_mask"].sum())
        if hyper.max_grad_norm > 0:
            accelerator.clip_grad_norm_(params, hyper.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        state.step += 1
        state.tokens += step_tokens
        state.seconds += elapsed
        state.losses.append([state.step, step_loss])
        timings.append((step_tokens, elapsed))
        if logger is not None:
            logger.step(state.step, step_loss, step_tokens / elapsed if elapsed else 0.0, scheduler.get_last_lr()[0])
        if state.step % hyper.save_every == 0 or state.step == hyper.max_steps:
            checkpoints.save(ckpt_dir, model, optimizer, scheduler, state)
        if on_step is not None:
            on_step(state.step, step_loss)
    model.eval()
    return FitResult(steps=state.step, losses=state.losses, tokens=state.tokens, seconds=state.seconds,
                     resumed_from=resumed_from, peak_memory_mb=peak_memory_mb(device),
                     extra={"mlflow_run_id": state.mlflow_run_id, "timings": timings})


@torch.no_grad()
def evaluate(model, batcher: Batcher, n_batches: int, device: str) -> float:
    """Mean loss over the first ``n_batches`` micro-batches of ``batcher`` (held-out data)."""
    model.eval()
    pixel_dtype = next((p.dtype for n, p in model.named_parameters() if "vision" in n), torch.float32)
    losses = [model(**_to(batcher.batch(i), device, pixel_dtype)).loss.item() for i in range(n_batches)]
    return sum(losses) / len(losses)


# --------------------------------------------------------------------------------------------------------------------
# MLflow


class RunLogger:
    """One MLflow run per training run (the same run again after a resume), through an explicit client."""

    def __init__(self, experiment_id: str, run_name: str, params: dict, tags: dict, every: int = 1):
        from mlflow import MlflowClient

        self.client = MlflowClient()
        self.experiment_id = experiment_id
        self.run_name = run_name
        self.params = params
        self.tags = tags
        self.every = every
        self.run_id: str | None = None

    def start(self, run_id: str | None) -> str:
        if run_id is not None:
            try:
                self.client.get_run(run_id)
                self.run_id = run_id
                self.client.update_run(run_id, status="RUNNING")
                return run_id
            except Exception:  # noqa: BLE001 - the store was reset: open a new run
                log.info("MLflow run %s of the checkpoint is gone; logging to a new run", run_id)
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=self.tags)
        self.run_id = run.info.run_id
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, str(v)[:6000]) for k, v in self.params.items()])
        return self.run_id

    def step(self, step: int, loss: float, tokens_per_s: float, lr: float) -> None:
        if step % self.every == 0:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[Metric("train_loss", loss, now, step),
                                                        Metric("tokens_per_s", tokens_per_s, now, step),
                                                        Metric("learning_rate", lr, now, step)])

    def dataset(self, name: str, digest: str, source: str, records: int) -> None:
        from tasks.tracking import DatasetRef

        self.client.log_inputs(self.run_id, [DatasetRef(name, digest, source, "training", records).entity()])

    def finish(self, metrics: dict[str, float], artifacts: dict[str, Path]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])
        for path_in_run, local in artifacts.items():
            if Path(local).is_dir():
                self.client.log_artifacts(self.run_id, str(local), path_in_run)
            else:
                self.client.log_artifact(self.run_id, str(local), path_in_run or None)
        self.client.set_terminated(self.run_id, "FINISHED")

    def fail(self) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, "FAILED")
