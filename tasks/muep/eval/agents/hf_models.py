"""Loading local models for the ``hf`` / ``hf-vision`` agents; each gives a :class:`Generator`.

Order of choice for a model directory ``model_path``:

1. ``model_path/baseline.json`` exists -> a fine-tuned baseline of the training pipeline: loading is delegated to
   ``tasks.train.registry.load_for_inference(model_dir)``, which knows how the baseline was trained (quantisation,
   adapter, processor). Its object's ``generate(prompt, image, max_new_tokens) -> str`` is used as is.
2. otherwise generic transformers: ``AutoTokenizer`` + ``AutoModelForCausalLM`` (``hf``), or ``AutoProcessor`` +
   ``AutoModelForImageTextToText`` -- or the class the config's ``architectures`` names -- (``hf-vision``); with
   ``adapter_path``, ``peft.PeftModel.from_pretrained`` on top.

Decoding is greedy (deterministic). Models are loaded once per worker process and kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from core.errors import ConfigError

_LOADED: dict[tuple[str, str, bool], Any] = {}


class Generator(Protocol):
    def generate(self, prompt: str, image: Any | None, max_new_tokens: int) -> str: ...


def check_paths(key: str, model_path: str | None, adapter_path: str | None) -> None:
    """Raise a :class:`ConfigError` naming ``muep.eval.<key>.*`` when a path is missing."""
    if not model_path:
        raise ConfigError(f"muep.eval.{key}.model_path is null; set it to a local model directory.")
    if not Path(model_path).is_dir():
        raise ConfigError(f"muep.eval.{key}.model_path: {model_path} is not a directory.",
                          hint="Give a local model directory (a Hugging Face checkpoint or models/<baseline>/).")
    if adapter_path and not Path(adapter_path).is_dir():
        raise ConfigError(f"muep.eval.{key}.adapter_path: {adapter_path} is not a directory.",
                          hint="Give the directory PEFT saved the adapter to (adapter_config.json inside), or null.")
    if adapter_path and not (Path(adapter_path) / "adapter_config.json").exists():
        raise ConfigError(f"muep.eval.{key}.adapter_path: {adapter_path} has no adapter_config.json; it is not a "
                          "PEFT adapter directory.")


def load_generator(key: str, model_path: str, adapter_path: str | None, vision: bool) -> Generator:
    check_paths(key, model_path, adapter_path)
    cache_key = (str(Path(model_path).resolve()), str(adapter_path or ""), vision)
    if cache_key not in _LOADED:
        _LOADED[cache_key] = _load(key, Path(model_path), adapter_path, vision)
    return _LOADED[cache_key]


def _load(key: str, model_dir: Path, adapter_path: str | None, vision: bool) -> Generator:
    if (model_dir / "baseline.json").exists():
        try:
            from tasks.train.registry import load_for_inference
        except ImportError as exc:
            raise ConfigError(f"muep.eval.{key}.model_path: {model_dir} holds a baseline.json (a fine-tuned baseline) "
                              f"but tasks.train.registry.load_for_inference cannot be imported ({exc}).",
                              hint="Install/update the training package (tasks/train), or point model_path at a "
                              "plain transformers checkpoint.") from None
        generator = load_for_inference(model_dir)
        if not callable(getattr(generator, "generate", None)):
            raise ConfigError(f"tasks.train.registry.load_for_inference({model_dir}) returned "
                              f"{type(generator).__name__}, which has no generate(prompt, image, max_new_tokens).")
        return generator
    return _VisionGenerator.load(model_dir, adapter_path) if vision else _TextGenerator.load(model_dir, adapter_path)


def _device_and_dtype():
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

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
    def load(cls, model_dir: Path, adapter_path: str | None) -> _TextGenerator:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device, dtype = _device_and_dtype()
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


class _VisionGenerator:
    def __init__(self, model, processor, device: str):
        self.model, self.processor, self.device = model, processor, device

    @classmethod
    def load(cls, model_dir: Path, adapter_path: str | None) -> _VisionGenerator:
        import transformers
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device, dtype = _device_and_dtype()
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
