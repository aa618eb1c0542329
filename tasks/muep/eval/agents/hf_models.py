"""Loading local models for the ``hf`` / ``hf-vision`` agents; each gives a :class:`Generator`.

Order of choice for ``model_path`` (a folder, or a local model of ``core.plugins.LOCAL_MODELS``):

1. ``model_path/baseline.json`` exists -> a fine-tuned baseline of the training pipeline: loading is delegated to
   ``tasks.train.registry.load_for_inference(model_dir, dtype=...)``, which knows how the baseline was trained
   (quantisation, adapter, processor). Its object's ``generate(prompt, image, max_new_tokens) -> str`` and
   ``score(prompt, candidates, image)`` are used as they are; its ``prompt_body`` renders the training prompt.
2. a text model whose tokenizer has a chat template (an instruct model such as SmolLM2-135M-Instruct) ->
   :class:`_ChatGenerator` over :class:`tasks.hf.runtime.LocalLM`: the prompt is a conversation
   (:func:`tasks.muep.eval.prompts.chat_messages`, the ``openai`` agent's), candidates are scored as the assistant's
   reply, and the keys/values of the conversation so far are reused from step to step;
3. otherwise generic transformers: ``AutoTokenizer`` + ``AutoModelForCausalLM`` (``hf``, the SFT record prompt), or
   ``AutoProcessor`` + ``AutoModelForImageTextToText`` -- or the class the config's ``architectures`` names --
   (``hf-vision``); with ``adapter_path``, ``peft.PeftModel.from_pretrained`` on top.

Decoding is greedy (deterministic). Models are loaded once per worker process and kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from core.errors import ConfigError
from tasks.hf.hardware import effective_dtype

_LOADED: dict[tuple[str, str, bool], Any] = {}


class Generator(Protocol):
    def generate(self, prompt: Any, image: Any | None, max_new_tokens: int) -> str: ...

    def score(self, prompt: Any, candidates: list[str], image: Any | None) -> tuple[list[float], list[int]]: ...


def _local_model(model_path: str | None) -> bool:
    from tasks.hf.local_models import is_local_model

    return is_local_model(model_path)


def check_paths(key: str, model_path: str | None, adapter_path: str | None) -> None:
    """Raise a :class:`ConfigError` naming ``muep.eval.<key>.*`` when a path is missing (a local model's package
    missing included)."""
    if not model_path:
        raise ConfigError(f"muep.eval.{key}.model_path is null; set it to a local model directory.")
    if _local_model(model_path):
        from tasks.hf import local_models

        local_models.gguf_path(local_models.get(model_path), f"muep.eval.{key}.model_path")
    elif not Path(model_path).is_dir():
        raise ConfigError(f"muep.eval.{key}.model_path: {model_path} is not a directory.",
                          hint="Give a local model directory (a Hugging Face checkpoint or models/<baseline>/).")
    if adapter_path and not Path(adapter_path).is_dir():
        raise ConfigError(f"muep.eval.{key}.adapter_path: {adapter_path} is not a directory.",
                          hint="Give the directory PEFT saved the adapter to (adapter_config.json inside), or null.")
    if adapter_path and not (Path(adapter_path) / "adapter_config.json").exists():
        raise ConfigError(f"muep.eval.{key}.adapter_path: {adapter_path} has no adapter_config.json; it is not a "
                          "PEFT adapter directory.")


def load_generator(key: str, model_path: str, adapter_path: str | None, vision: bool, dtype: str = "auto",
                   threads: int | None = None) -> Generator:
    check_paths(key, model_path, adapter_path)
    if threads:
        import torch

        torch.set_num_threads(threads)
    ident = model_path if _local_model(model_path) else str(Path(model_path).resolve())
    cache_key = (ident, str(adapter_path or ""), vision, dtype)
    if cache_key not in _LOADED:
        _LOADED[cache_key] = _load(key, model_path, adapter_path, vision, dtype)
    return _LOADED[cache_key]


def release(model_path: str | None) -> None:
    """Forget every loaded model of ``model_path`` (its memory goes; a later load reads the folder again, e.g. after
    a retraining into the same folder)."""
    if not model_path:
        return
    ident = model_path if _local_model(model_path) else str(Path(model_path).resolve())
    for key in [k for k in _LOADED if k[0] == ident]:
        del _LOADED[key]


def _load(key: str, model_path: str, adapter_path: str | None, vision: bool, dtype: str = "auto") -> Generator:
    if _local_model(model_path) and not vision:
        return _ChatGenerator.load(key, model_path, adapter_path, dtype)
    model_dir = Path(model_path)
    if (model_dir / "baseline.json").exists():
        try:
            from tasks.train.registry import load_for_inference
        except ImportError as exc:
            raise ConfigError(f"muep.eval.{key}.model_path: {model_dir} holds a baseline.json (a fine-tuned baseline) "
                              f"but tasks.train.registry.load_for_inference cannot be imported ({exc}).",
                              hint="Install/update the training package (tasks/train), or point model_path at a "
                              "plain transformers checkpoint.") from None
        generator = load_for_inference(model_dir) if dtype == "auto" else load_for_inference(model_dir, dtype=dtype)
        if not callable(getattr(generator, "generate", None)):
            raise ConfigError(f"tasks.train.registry.load_for_inference({model_dir}) returned "
                              f"{type(generator).__name__}, which has no generate(prompt, image, max_new_tokens).")
        return generator
    if vision:
        return _VisionGenerator.load(model_dir, adapter_path, dtype)
    from tasks.hf.runtime import has_chat_template

    if has_chat_template(model_dir):
        return _ChatGenerator.load(key, str(model_dir), adapter_path, dtype)
    return _TextGenerator.load(model_dir, adapter_path, dtype)


def _device_and_dtype(dtype: str = "auto"):
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    if dtype != "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return device, getattr(torch, effective_dtype(dtype, device))
    if torch.cuda.is_available():
        return "cuda", (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return "cpu", torch.float32


def _with_adapter(model, adapter_path: str | None):
    if not adapter_path:
        return model
    from peft import PeftModel

    return PeftModel.from_pretrained(model, adapter_path)


def _context_limit(model) -> int | None:
    config = getattr(model, "config", None)
    text_config = getattr(config, "text_config", None) or config
    return getattr(text_config, "max_position_embeddings", None)


class _TextGenerator:
    def __init__(self, model, tokenizer, device: str):
        self.model, self.tokenizer, self.device = model, tokenizer, device

    @classmethod
    def load(cls, model_dir: Path, adapter_path: str | None, dtype: str = "auto") -> _TextGenerator:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device, dtype = _device_and_dtype(dtype)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        tokenizer.truncation_side = "left"  # keep the end of a long prompt: the current observation and the cue
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        model = _with_adapter(model, adapter_path).to(device).eval()
        return cls(model, tokenizer, device)

    def generate(self, prompt: str, image: Any | None, max_new_tokens: int) -> str:
        import torch

        limit = _context_limit(self.model)
        room = max(8, limit - max_new_tokens) if limit else None
        inputs = self.tokenizer(prompt, return_tensors="pt", truncation=room is not None, max_length=room)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
        new = out[0, inputs["input_ids"].shape[1]:]
        return self.tokenizer.decode(new, skip_special_tokens=True)

    def score(self, prompt: str, candidates: list[str], image: Any | None) -> tuple[list[float], list[int]]:
        """Each candidate after the prompt (and a space), ending with EOS; one forward per candidate."""
        import torch

        from tasks.hf.scoring import per_candidate_scores

        cand = [list(self.tokenizer(" " + c, add_special_tokens=False)["input_ids"]) + [self.tokenizer.eos_token_id]
                for c in candidates]
        limit = _context_limit(self.model)
        room = max(8, limit - max(map(len, cand))) if limit else None
        ids = self.tokenizer(prompt, truncation=room is not None, max_length=room)["input_ids"]

        def forward(seq):
            return self.model(input_ids=torch.tensor([seq], device=self.device)).logits

        return per_candidate_scores(forward, ids, cand), [len(c) for c in cand]


class _ChatGenerator:
    """An instruct model through :class:`tasks.hf.runtime.LocalLM`: chat prompts, packed candidate scoring,
    the conversation's keys/values reused from step to step."""

    chat = True
    kind = "text"

    def __init__(self, lm):
        self.lm = lm
        self.model = lm.model

    @classmethod
    def load(cls, key: str, model_path: str, adapter_path: str | None, dtype: str = "auto") -> _ChatGenerator:
        from tasks.hf.runtime import load

        device, torch_dtype = _device_and_dtype(dtype)
        name = str(torch_dtype).removeprefix("torch.")
        return cls(load(model_path, name, threads=None, key=f"muep.eval.{key}.model_path", adapter=adapter_path,
                        device=device))

    def generate(self, prompt: list[dict[str, str]], image: Any | None, max_new_tokens: int) -> str:
        return self.lm.chat(prompt, max_new_tokens).text

    def score(self, prompt: list[dict[str, str]], candidates: list[str], image: Any | None
              ) -> tuple[list[float], list[int]]:
        return self.lm.score(prompt, candidates, fused=True)

    def reset(self) -> None:
        """A new episode: its scores must not depend on the previous episode's cache (fused scoring)."""
        self.lm.forget()


class _VisionGenerator:
    def __init__(self, model, processor, device: str):
        self.model, self.processor, self.device = model, processor, device

    @classmethod
    def load(cls, model_dir: Path, adapter_path: str | None, dtype: str = "auto") -> _VisionGenerator:
        import transformers
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device, dtype = _device_and_dtype(dtype)
        processor = AutoProcessor.from_pretrained(model_dir)
        try:
            model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=dtype)
        except ValueError:
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            names = config.get("architectures") or []
            model_cls = getattr(transformers, names[0], None) if names else None
            if model_cls is None:
                raise ConfigError(f"{model_dir}: AutoModelForImageTextToText does not know this model and its "
                                  f"config.json names no transformers class in 'architectures' ({names}).") from None
            model = model_cls.from_pretrained(model_dir, dtype=dtype)
        model = _with_adapter(model, adapter_path).to(device).eval()
        return cls(model, processor, device)

    def _text(self, prompt: str) -> str:
        processor = self.processor
        if getattr(processor, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
            return processor.apply_chat_template(messages, add_generation_prompt=True)
        token = getattr(processor, "image_token", None) or "<image>"
        return f"{token}\n{prompt}"

    def generate(self, prompt: str, image: Any | None, max_new_tokens: int) -> str:
        import torch

        if image is None:
            raise ValueError("hf-vision needs the rendered image of the state")
        inputs = self.processor(text=self._text(prompt), images=image, return_tensors="pt")
        dtype = next(self.model.parameters()).dtype
        inputs = {k: v.to(self.device, dtype) if v.is_floating_point() else v.to(self.device) for k, v in inputs.items()}
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
        new = out[0, inputs["input_ids"].shape[1]:]
        return tokenizer.decode(new, skip_special_tokens=True)

    def score(self, prompt: str, candidates: list[str], image: Any | None) -> tuple[list[float], list[int]]:
        """Each candidate after the prompt (its image included), ending with EOS; one forward per candidate."""
        import torch

        from tasks.hf.scoring import per_candidate_scores

        if image is None:
            raise ValueError("hf-vision needs the rendered image of the state")
        inputs = self.processor(text=self._text(prompt), images=image, return_tensors="pt")
        dtype = next(self.model.parameters()).dtype
        extra = {k: v.to(self.device, dtype) if v.is_floating_point() else v.to(self.device)
                 for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        cand = [list(tokenizer(" " + c, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
                for c in candidates]

        def forward(seq):
            return self.model(input_ids=torch.tensor([seq], device=self.device), **extra).logits

        return per_candidate_scores(forward, inputs["input_ids"][0].tolist(), cand), [len(c) for c in cand]
