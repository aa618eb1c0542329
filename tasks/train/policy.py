"""A trained baseline ready to act: ``Policy.generate(prompt, image=None, max_new_tokens=24) -> str`` and
``Policy.score(prompt, candidates, image=None)``.

``prompt`` is a prompt *body* (no template): for a text baseline the text that :func:`tasks.train.data.text_body`
renders (task, history, current observation, "Next action:"), for a vision baseline that of
:func:`tasks.train.data.vision_body` (task, previous actions, "Next action:") with the current frame as ``image``.
:meth:`Policy.prompt_body` renders the right one from the parts. The policy wraps the body in the baseline's template
exactly as in training; ``generate`` decodes greedily (at least one token: an action is never empty) and returns the
first non-empty line of the continuation; ``score`` gives the log-likelihood of each candidate action encoded as the
training target was (:mod:`tasks.hf.scoring`), for agents that rank the admissible commands.

Two forms (``load_policy(..., dtype=...)``): ``None`` rebuilds the model exactly as it trained (a Q-LoRA baseline: the
4-bit base with the LoRA layers beside it); ``"bfloat16"`` / ``"float32"`` gives the same weights in plain tensors of
that dtype -- the 4-bit base dequantised *before* its first forward (bitsandbytes repacks CPU weights on the first
forward, after which its dequantisation is garbage) and the adapter merged into it. On a CPU the bfloat16 form
scores 5-7x faster; its logits differ from the 4-bit path by about as much as bitsandbytes' own bf16 arithmetic
does (docs/real-model.md has the measured differences).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch

from core.errors import ConfigError
from tasks import paths
from tasks.hf.hardware import effective_dtype
from tasks.train.build import (
    Assets,
    compute_dtype,
    family_of,
    load_base,
    make_encoder,
    pick_device,
    qformer_inputs,
    quiet_transformers,
)
from tasks.train.data import text_body, vision_body
from tasks.train.models import Hyper, load_final_adapter, prepare
from tasks.train.registry import ModelCard, get_spec

log = logging.getLogger("embp")


class Policy:
    def __init__(self, model, encoder, assets: Assets, card: ModelCard, device: str, form: str = "as trained"):
        self.model = model
        self.encoder = encoder
        self.assets = assets
        self.card = card
        self.kind = card.kind
        self.baseline = card.baseline
        self.device = device
        self.form = form
        """"as trained", or "merged <dtype>" (see the module doc)."""

    def prompt_body(self, instruction: str, history, observation: str, window: int | None = None) -> str:
        """``history``: (observation, action) pairs, oldest first; ``window`` defaults to the training window."""
        window = self.card.history_window if window is None else window
        if self.kind == "text":
            return text_body(instruction, history, observation, window)
        return vision_body(instruction, history, window)

    def inputs(self, prompt: str, image=None, max_new_tokens: int = 24) -> dict:
        if self.kind == "vision" and image is None and self.card.family != "llama_adapter_v2":
            raise ValueError(f"{self.baseline} is a vision baseline: generate() needs the current frame as image")
        budget = self.encoder.max_seq_len - max_new_tokens
        ids = self.encoder.prompt_ids([prompt], budget)
        out = {"input_ids": torch.tensor([ids], device=self.device),
               "attention_mask": torch.ones((1, len(ids)), dtype=torch.long, device=self.device)}
        if image is not None and self.assets.image_processor is not None:
            pixels = self.assets.image_processor([image.convert("RGB")], return_tensors="pt")["pixel_values"]
            dtype = next((p.dtype for n, p in self.model.named_parameters() if "vision" in n), torch.float32)
            out["pixel_values"] = pixels.to(self.device, dtype)
        if self.assets.qformer_tokenizer is not None:
            q = qformer_inputs(self.assets.qformer_tokenizer, prompt)["qformer_input_ids"]
            out["qformer_input_ids"] = torch.tensor([q], device=self.device)
            out["qformer_attention_mask"] = torch.ones_like(out["qformer_input_ids"])
        return out

    def _precision(self):
        """The autocast of training (bf16/fp16 on CUDA; bf16 on CPU when it trained so): 16-bit frozen weights,
        float32 trainable parts."""
        if self.form != "as trained" or (self.device != "cuda" and effective_dtype(self.card.hyperparameters.get(
                "precision", "auto"), self.device) != "bfloat16"):
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device, dtype=compute_dtype(self.device, self.card.hyperparameters.get(
            "precision", "auto")))

    @torch.no_grad()
    def score(self, prompt: str, candidates: list[str], image=None) -> tuple[list[float], list[int]]:
        """(summed log-probability, token count) of each candidate as the answer to ``prompt``, encoded as training
        encoded its target (the template's separator, the action, EOS). Llama-family text baselines score the prompt and
        all candidates in one packed forward; others one forward per candidate."""
        from tasks.hf.scoring import fused_scores, new_cache, per_candidate_scores

        cand = [self.encoder.target_ids(c) for c in candidates]
        longest = max((len(c) for c in cand), default=0)
        prompt_ids = self.encoder.prompt_ids([prompt], self.encoder.max_seq_len - longest)
        if image is None and self.kind == "text" and self.card.family == "llama":
            with self._precision():           # the prompt and every candidate in one forward
                return fused_scores(self.model, new_cache(self.model), prompt_ids, cand), [len(c) for c in cand]
        if self.assets.qformer_tokenizer is not None:
            image_inputs = self.inputs(prompt, image, 0)
        else:
            image_inputs = self.inputs("", image, 0) if image is not None else {}
        extra = {k: v for k, v in image_inputs.items() if k not in ("input_ids", "attention_mask")}

        def forward(ids):
            batch = {"input_ids": torch.tensor([ids], device=self.device),
                     "attention_mask": torch.ones((1, len(ids)), dtype=torch.long, device=self.device)} | extra
            with self._precision():
                return self.model(**batch).logits

        return per_candidate_scores(forward, prompt_ids, cand), [len(c) for c in cand]

    @torch.no_grad()
    def logits(self, prompt: str, image=None) -> torch.Tensor:
        with self._precision():
            return self.model(**self.inputs(prompt, image, 0)).logits

    @torch.no_grad()
    def generate(self, prompt: str, image=None, max_new_tokens: int = 24) -> str:
        inputs = self.inputs(prompt, image, max_new_tokens)
        tok = self.assets.tokenizer
        with self._precision():
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, min_new_tokens=1,
                                      do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        prompt_ids = inputs["input_ids"][0]
        seq = out[0]
        if len(seq) >= len(prompt_ids) and torch.equal(seq[: len(prompt_ids)], prompt_ids):
            seq = seq[len(prompt_ids):]       # decoder-only generate() returns the prompt too
        lines = [line.strip() for line in tok.decode(seq, skip_special_tokens=True).splitlines()]
        return next((line for line in lines if line), "")      # an action is one line


def _resolve(part: str, model_dir: Path) -> str:
    """A base part as stored in baseline.json: a path relative to the model directory (the tiny base), an absolute
    or repository-relative path, or a hub id."""
    for local in (Path(model_dir) / part, paths.ROOT / part):
        if local.exists():
            return str(local)
    if part.startswith(("/", ".")):
        raise ConfigError(f"base checkpoint {part} named in {model_dir}/baseline.json does not exist.")
    return part


def load_policy(model_dir: Path, device: str | None = None, dtype: str | None = None) -> Policy:
    """The trained baseline of ``model_dir``: as it trained (``dtype`` None), or its weights merged into plain
    ``dtype`` tensors (``"bfloat16"`` / ``"float32"``; see the module doc)."""
    quiet_transformers()
    card = ModelCard.read(model_dir)
    spec = get_spec(card.baseline)
    family = family_of(spec)
    device = pick_device(device or "auto")
    adapter_dir = Path(model_dir) / card.adapter_dir
    if not adapter_dir.is_dir():
        raise ConfigError(f"adapter directory {adapter_dir} named in {model_dir}/baseline.json does not exist.")
    if dtype not in (None, "bfloat16", "float32"):
        raise ConfigError(f"unknown inference dtype {dtype!r} (bfloat16, float32, or None for the trained form).")
    assets = Assets.load(Path(model_dir), family)
    parts = {k: _resolve(v, model_dir) for k, v in card.base_parts.items()}
    hyper = Hyper(**card.hyperparameters)
    base = load_base(family, parts, assets, quantize=card.quantize_4bit, device=device, precision=hyper.precision)
    dtype = None if dtype is None else effective_dtype(dtype, device)    # float32 without native bf16
    if dtype is not None and spec.method == "qlora":
        model = _merged_lora(base, adapter_dir, getattr(torch, dtype))
    else:
        model = prepare(spec, family, base, hyper)
        load_final_adapter(model, adapter_dir)
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
    model.eval()
    encoder = make_encoder(spec, family, model, assets, card.max_seq_len)
    return Policy(model, encoder, assets, card, device, "as trained" if dtype is None else f"merged {dtype}")


def _merged_lora(base, adapter_dir: Path, dtype: torch.dtype):
    """The 4-bit base dequantised (before any forward), cast to ``dtype``, with the PEFT adapter merged in."""
    from peft import PeftModel

    if getattr(base, "is_loaded_in_4bit", False):
        base = base.dequantize()
    base = base.to(dtype)
    return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
