"""One training run of a planned baseline: build (tokenizer, base, adapters), train, save ``models/<baseline>/``,
log to MLflow. :class:`TrainSession` keeps the trained model in memory afterwards (tests compare it with the saved
one)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from core.io import write_json
from tasks import paths
from tasks.params import TrackingParams
from tasks.train import checkpoints
from tasks.train.data import Example, ImageStore, bodies
from tasks.train.pipeline import Plan, fingerprint
from tasks.train.registry import ModelCard

log = logging.getLogger("embp")


def _corpus(examples: list[Example], kind: str, window: int) -> list[str]:
    out = []
    for ex in examples:
        out += bodies(ex, kind, window)[:1] + [ex.action]
    return out


class TrainSession:
    def __init__(self, plan: Plan, tracking: TrackingParams):
        from tasks.train.build import load_base, make_encoder, quiet_transformers
        from tasks.train.models import check_trainable, count, prepare

        quiet_transformers()
        if plan.device == "cpu" and plan.cpu_threads:
            import torch

            torch.set_num_threads(plan.cpu_threads)
        self.plan, self.tracking = plan, tracking
        plan.model_dir.mkdir(parents=True, exist_ok=True)
        self.ckpt_dir = plan.model_dir / "checkpoints"
        self.key = fingerprint(plan)
        resuming = checkpoints.latest(self.ckpt_dir, self.key) is not None
        (plan.model_dir / "baseline.json").unlink(missing_ok=True)    # present only once the model is complete
        self.assets, parts, self.stored_parts = self._base_and_assets(resuming)
        if plan.projection_init:                     # MiniGPT-4 from its pre-trained alignment
            parts = parts | {"projection": plan.projection_init}
            self.stored_parts = self.stored_parts | {"projection": plan.projection_init}
        base = load_base(plan.family, parts, self.assets, quantize=plan.hyper.quantize_4bit, device=plan.device,
                         precision=plan.hyper.precision)
        self.model = prepare(plan.spec, plan.family, base, plan.hyper)
        check_trainable(plan.spec, self.model)
        self.n_trainable, self.n_total = count(self.model)
        self.encoder = make_encoder(plan.spec, plan.family, self.model, self.assets, plan.hyper.max_seq_len)
        self.store = ImageStore(plan.image_root) if plan.family.kind == "vision" else None

    def _base_and_assets(self, resuming: bool):
        """Tokenizer/processor and base parts; the tiny profile builds (or on resume reuses) its random base."""
        from tasks.train.build import (
            Assets,
            base_parts,
            build_tiny_base,
            hub_assets,
            tiny_assets,
        )

        plan = self.plan
        if plan.profile == "full":
            assets = hub_assets(plan.spec, plan.family)
            assets.save(plan.model_dir)
            return assets, plan.parts, plan.parts
        base_dir = plan.model_dir / "base"
        if resuming and base_dir.exists() and (plan.model_dir / "tokenizer").exists():
            assets = Assets.load(plan.model_dir, plan.family)
        else:
            assets = tiny_assets(plan.family, _corpus(plan.train, plan.family.kind, plan.hyper.history_window))
            shutil.rmtree(base_dir, ignore_errors=True)
            build_tiny_base(plan.family, assets, base_dir, plan.hyper.seed)
            assets.save(plan.model_dir)
        parts = base_parts(plan.family, base_dir)
        return assets, parts, {k: str(Path(v).relative_to(plan.model_dir)) for k, v in parts.items()}

    def batcher(self, examples: list[Example]):
        from tasks.train.build import features
        from tasks.train.trainer import Batcher

        hyper = self.plan.hyper
        feats = features(examples, self.plan.family.kind, hyper.history_window, self.encoder, self.assets)
        return Batcher(feats, hyper.batch_size, hyper.seed, self.assets.tokenizer.pad_token_id,
                       self.store.load if self.store else None, self.assets.image_processor)

    def _logger(self):
        from tasks.tracking import setup
        from tasks.train.trainer import RunLogger

        plan = self.plan
        params = {"baseline": plan.spec.name, "profile": plan.profile, "checkpoint": plan.spec.checkpoint,
                  "method": plan.spec.method, "template": plan.spec.template, "device": plan.device,
                  "trainable_params": self.n_trainable, "total_params": self.n_total,
                  "cannot_reproduce": " | ".join(self.notes()) or "-",
                  "projection_init": plan.projection_init or "-",
                  **{f"hp.{k}": v for k, v in plan.hyper.as_dict().items()},
                  **{f"dataset.{k}": v for k, v in plan.dataset.items()}}
        tags = {"baseline": plan.spec.name, "profile": plan.profile, "family": plan.family.name,
                "dataset.sha256": plan.dataset["sha256"]}
        return RunLogger(setup(self.tracking, "muep-train"), f"{plan.spec.name}-{plan.profile}", params, tags)

    def train(self, on_step=None) -> dict:
        from tasks.train.trainer import evaluate, fit

        plan, hyper = self.plan, self.plan.hyper
        logger = self._logger()
        try:
            result = fit(self.model, self.batcher(plan.train), hyper, device=plan.device, ckpt_dir=self.ckpt_dir,
                         fingerprint=self.key, logger=logger, on_step=on_step)
            eval_loss = None
            if plan.held_out and plan.eval_batches:
                n_batches = min(plan.eval_batches, -(-len(plan.held_out) // hyper.batch_size))
                eval_loss = evaluate(self.model, self.batcher(plan.held_out), n_batches, plan.device)
            report = self._save(result, eval_loss, logger.run_id)
            logger.dataset("muep-sft-train", plan.dataset["sha256"], plan.dataset["path"], plan.dataset["records"])
            metrics = {k: (report | report["run_facts"])[k] for k in ("final_loss", "tokens_per_s", "train_seconds",
                                                                     "peak_memory_mb", "trainable_params")}
            if eval_loss is not None:
                metrics["eval_loss"] = eval_loss
            logger.finish(metrics, self._artifacts())
        except BaseException:
            logger.fail()
            raise
        finally:
            if self.store is not None:
                self.store.close()
        checkpoints.clear(self.ckpt_dir)
        return report

    def _save(self, result, eval_loss, run_id) -> dict:
        from tasks.train.models import save_final_adapter, trainable_names

        plan = self.plan
        adapter_dir = plan.model_dir / "adapter"
        shutil.rmtree(adapter_dir, ignore_errors=True)          # no file of an earlier run's format stays
        files = save_final_adapter(self.model, adapter_dir, self._base_id())
        write_json(adapter_dir / "adapter.json", {"method": plan.spec.method, "hyperparameters": plan.hyper.as_dict(),
                                                  "trainable": sorted(trainable_names(self.model)), "files": files})
        ModelCard(baseline=plan.spec.name, profile=plan.profile, kind=plan.family.kind, family=plan.family.name,
                  method=plan.spec.method,
                  base=paths.rel(plan.model_dir / "base") if plan.profile == "tiny" else plan.spec.checkpoint,
                  base_parts=self.stored_parts, adapter_dir="adapter", prompt_template=plan.spec.template,
                  quantize_4bit=plan.hyper.quantize_4bit, history_window=plan.hyper.history_window,
                  max_seq_len=plan.hyper.max_seq_len, hyperparameters=plan.hyper.as_dict(), dataset=plan.dataset,
                  trained_steps=result.steps, notes=self.notes()).write(plan.model_dir)
        return {"baseline": plan.spec.name, "profile": plan.profile, "steps": result.steps,
                "resumed_from_step": result.resumed_from, "first_loss": result.losses[0][1],
                "final_loss": result.losses[-1][1], "losses": [loss for _, loss in result.losses],
                "eval_loss": eval_loss, "tokens": result.tokens, "trainable_params": self.n_trainable,
                "total_params": self.n_total, "model_dir": paths.rel(plan.model_dir),
                "cannot_reproduce": self.notes(),
                # What this run measured, not what it computed: the flow files these as run facts
                # (reports/timings/muep-train.json) and MLflow keeps them; the model and report stay the same bytes.
                "run_facts": {"tokens_per_s": round(result.tokens_per_s, 1), "train_seconds": round(result.seconds, 2),
                              "peak_memory_mb": round(result.peak_memory_mb, 1), "mlflow_run_id": run_id}}

    def notes(self) -> list[str]:
        from tasks.train.baselines import reproduction_notes

        return reproduction_notes(self.plan.spec, self.plan.profile, self.plan.projection_init)

    def _base_id(self) -> str:
        """What the adapter records as its base: the Hub id of the real checkpoint, or the tiny base's folder."""
        plan = self.plan
        if plan.profile == "tiny":
            return paths.rel(plan.model_dir / "base")
        model = plan.parts.get("model", plan.parts.get("llm", plan.spec.checkpoint))
        return plan.spec.hub_id if plan.spec.hub_id and model == plan.spec.checkpoints.get("model") else model

    def _artifacts(self) -> dict[str, Path]:
        d = self.plan.model_dir
        out = {"adapter": d / "adapter", "tokenizer": d / "tokenizer", "": d / "baseline.json"}
        for extra in ("image_processor", "qformer_tokenizer"):
            if (d / extra).exists():
                out[extra] = d / extra
        return out
