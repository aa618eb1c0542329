"""The baselines' table (``core.plugins.BASELINES``, specs in ``tasks/train/baselines.py``) and the contract between
training and the evaluation agents: ``models/<baseline>/baseline.json`` and how a trained baseline is reloaded."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.errors import ConfigError
from core.plugins import BASELINES
from tasks.train.baselines import BaselineSpec, Defaults

__all__ = ["BASELINES", "BaselineSpec", "Defaults", "ModelCard", "TINY_DEFAULTS", "get_spec", "load_for_inference",
           "names"]


#: The tiny profile's defaults (random 64-wide models learn nothing at the real learning rates in a dozen steps).
TINY_DEFAULTS = {"learning_rate": 5e-3, "batch_size": 4, "grad_accum": 1, "warmup_steps": 0, "lora_r": 8,
                 "lora_alpha": 16, "lora_dropout": 0.0, "adapter_len": 4, "adapter_layers": 1}


def get_spec(name: str) -> BaselineSpec:
    """The entry, or a :class:`ConfigError` listing the valid names."""
    return BASELINES.load(name)


def names() -> list[str]:
    return BASELINES.names()


# --------------------------------------------------------------------------------------------------------------------
# The contract with the evaluation agents


@dataclass
class ModelCard:
    """``models/<baseline>/baseline.json``: everything needed to rebuild the trained model for inference."""

    baseline: str
    profile: str
    kind: str
    family: str
    method: str
    base: str                                # hub id, or the local path of the tiny base (relative to the root)
    base_parts: dict[str, str]               # what Family.load gets (paths relative to the root, or hub ids)
    adapter_dir: str                         # relative to the model directory
    prompt_template: str
    quantize_4bit: bool
    history_window: int
    max_seq_len: int
    hyperparameters: dict = field(default_factory=dict)
    dataset: dict = field(default_factory=dict)
    trained_steps: int = 0
    notes: list = field(default_factory=list)
    """What this run cannot reproduce of the paper's baseline (``tasks.train.baselines.reproduction_notes``)."""

    def write(self, model_dir: Path) -> None:
        from core.io import write_json

        write_json(Path(model_dir) / "baseline.json", asdict(self))

    @classmethod
    def read(cls, model_dir: Path) -> ModelCard:
        path = Path(model_dir) / "baseline.json"
        if not Path(model_dir).is_dir():
            raise ConfigError(f"model directory {model_dir} does not exist.",
                              hint="Train it first: python -m flows.muep_train --baseline NAME.")
        if not path.exists():
            raise ConfigError(f"{model_dir} has no baseline.json: it is not a finished training output.")
        raw = json.loads(path.read_text(encoding="utf-8"))
        get_spec(raw.get("baseline", "?"))
        return cls(**raw)


def load_for_inference(model_dir, device: str | None = None, dtype: str | None = None):
    """The trained baseline in ``model_dir`` as a :class:`tasks.train.policy.Policy` (``generate``, ``score``,
    ``kind``): as it trained, or (``dtype`` "bfloat16" / "float32") with its adapter merged into plain weights."""
    from tasks.train.policy import load_policy

    return load_policy(Path(model_dir), device=device, dtype=dtype)
