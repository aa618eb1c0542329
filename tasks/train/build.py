"""Assembling a baseline for training or inference: device, tokenizer/processor, base model, encoder, features.

The model directory (``models/<baseline>/``) is self-contained: ``tokenizer/`` (plus ``qformer_tokenizer/`` for
InstructBLIP), ``image_processor/`` for vision baselines, ``base/`` for the tiny profile (its random base), the
``adapter/`` and ``baseline.json``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from core.errors import ConfigError
from tasks.hf.hardware import effective_dtype, pin_4bit_kernels
from tasks.train import tiny
from tasks.train.baselines import BaselineSpec
from tasks.train.data import TEMPLATES, Encoder, Example, bodies
from tasks.train.families import FAMILIES, Family

log = logging.getLogger("embp")


def quiet_transformers() -> None:
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def pick_device(requested: str = "auto") -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is cuda but no CUDA device is visible here.",
                          hint="Run on a GPU worker (see docs/training.md) or set train.device: auto.")
    return requested


def compute_dtype(device: str, precision: str = "auto") -> torch.dtype:
    """The dtype of the frozen weights and of 4-bit layers' arithmetic (``train.precision``)."""
    if precision == "float32":
        return torch.float32
    if device == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if effective_dtype(precision, device) == "bfloat16" else torch.float32


@dataclass
class Assets:
    tokenizer: object
    image_processor: object | None = None
    qformer_tokenizer: object | None = None

    def save(self, model_dir: Path) -> None:
        self.tokenizer.save_pretrained(model_dir / "tokenizer")
        if self.image_processor is not None:
            self.image_processor.save_pretrained(model_dir / "image_processor")
        if self.qformer_tokenizer is not None:
            self.qformer_tokenizer.save_pretrained(model_dir / "qformer_tokenizer")

    @classmethod
    def load(cls, model_dir: Path, family: Family) -> Assets:
        from transformers import AutoImageProcessor, AutoTokenizer

        image = AutoImageProcessor.from_pretrained(model_dir / "image_processor") if family.image_processor else None
        qtok = AutoTokenizer.from_pretrained(model_dir / "qformer_tokenizer") if family.qformer_text else None
        return cls(AutoTokenizer.from_pretrained(model_dir / "tokenizer"), image, qtok)


def tiny_assets(family: Family, corpus: list[str]) -> Assets:
    image = {"blip": tiny.blip_image_processor, "clip": tiny.clip_image_processor}.get(family.image_processor)
    return Assets(tiny.build_tokenizer(corpus), image() if image else None,
                  tiny.build_qformer_tokenizer(corpus) if family.qformer_text else None)


def resolve_part(part: str) -> str:
    """A base part as the registry or baseline.json names it: a ``LOCAL_MODELS`` name becomes its exported folder
    (exported on first use); a hub id or a path stays as it is."""
    from tasks.hf import local_models

    if local_models.is_local_model(part):
        return str(local_models.ensure_export(local_models.get(part), "the baseline's checkpoint"))
    return part


def hub_assets(spec: BaselineSpec, family: Family) -> Assets:
    """Tokenizer and processor of the real checkpoints (downloaded, from the local Hugging Face cache, or a local
    model's export)."""
    from transformers import AutoImageProcessor, AutoTokenizer

    text_source = resolve_part(spec.checkpoints.get("model", spec.checkpoints.get("llm")))
    tok = AutoTokenizer.from_pretrained(text_source)
    if tok.pad_token is None:
        tok.pad_token = tok.unk_token or tok.eos_token
    if family.name == "minigpt4" and tiny.IMAGE not in tok.get_vocab():
        tok.add_special_tokens({"additional_special_tokens": [tiny.IMAGE]})   # never embedded: spliced over
    image_source = spec.checkpoints.get("model", spec.checkpoints.get("vision_qformer", spec.checkpoints.get("vision")))
    image = AutoImageProcessor.from_pretrained(image_source) if family.image_processor else None
    qtok = AutoTokenizer.from_pretrained(text_source, subfolder="qformer_tokenizer") if family.qformer_text else None
    return Assets(tok, image, qtok)


def base_parts(family: Family, base_dir: Path) -> dict[str, str]:
    """What :meth:`Family.load` gets for a base saved by :meth:`Family.save_base` in ``base_dir``."""
    if family.name == "minigpt4":
        return {"vision_qformer": str(base_dir), "llm": str(base_dir / "llm")}
    if family.name == "llama_adapter_v2":
        return {"vision": str(base_dir / "vision"), "llm": str(base_dir / "llm")}
    return {"model": str(base_dir)}


def build_tiny_base(family: Family, assets: Assets, base_dir: Path, seed: int) -> None:
    """A random base of the family's architecture, written to ``base_dir`` (deterministic for a seed)."""
    torch.manual_seed(seed)
    model = family.build_tiny(assets.tokenizer, assets.qformer_tokenizer)
    family.save_base(model, base_dir)


def llm_config(family: Family, parts: dict[str, str]):
    """The causal LM's transformers config (for the 4-bit width check), without loading weights."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(resolve_part(parts.get("model", parts.get("llm"))))


def load_base(family: Family, parts: dict[str, str], assets: Assets, *, quantize: bool, device: str,
              precision: str = "auto"):
    """The base model: on CPU float32 weights (bfloat16 arithmetic of 4-bit layers with ``precision`` bfloat16),
    on CUDA 16-bit ones."""
    dtype = compute_dtype(device, precision)
    quant = None
    if quantize:
        from tasks.train.models import quantization_config

        quant = quantization_config(dtype)
    if device == "cpu":
        dtype = torch.float32     # CPU autocast computes in bf16 where asked; stored weights stay float32
    image_id = assets.tokenizer.convert_tokens_to_ids(tiny.IMAGE) if family.name == "minigpt4" else None
    parts = {k: resolve_part(v) for k, v in parts.items()}
    model = family.load(parts, image_token_id=image_id, quantization=quant, device=device, dtype=dtype)
    if quantize:
        pin_4bit_kernels(model)       # the same inference kernels on every machine (tasks/hf/hardware.py)
    return model


def make_encoder(spec: BaselineSpec, family: Family, model, assets: Assets, max_seq_len: int) -> Encoder:
    return Encoder(assets.tokenizer, TEMPLATES[spec.template], n_image_tokens=family.n_image_tokens(model),
                   image_token_id=family.image_token_id(model, assets.tokenizer), add_bos=family.add_bos,
                   max_seq_len=max_seq_len)


def features(examples: list[Example], kind: str, window: int, encoder: Encoder, assets: Assets) -> list[dict]:
    """Tokenised examples (prompt masked), with the image reference for vision baselines."""
    out = []
    for ex in examples:
        variants = bodies(ex, kind, window)
        feat = encoder.encode(variants, ex.action)
        if kind == "vision":
            feat |= {"image": (ex.image_shard, ex.image_key)}
        if assets.qformer_tokenizer is not None:
            feat |= qformer_inputs(assets.qformer_tokenizer, variants[-1])
        out.append(feat)
    return out


def qformer_inputs(qtok, text: str, max_len: int = 128) -> dict:
    ids = qtok(text, truncation=True, max_length=max_len)["input_ids"]
    return {"qformer_input_ids": ids, "qformer_pad_id": qtok.pad_token_id}


def family_of(spec: BaselineSpec) -> Family:
    return FAMILIES[spec.family]
