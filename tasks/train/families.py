"""Architectures: how to build a tiny random one, load a real or saved one, save a base, count image tokens.

A *family* is one model architecture (``llama``, ``opt``, ``bloom``, ``blip2``, ``instructblip``, ``llava``,
``minigpt4``, ``llama_adapter_v2``); a *baseline* (``registry.py``) is a family plus a checkpoint, a prompt template,
a fine-tuning method and hyper-parameters. A base is always loaded through :meth:`Family.load` -- the tiny profile
first saves its random base to disk and loads it back the same way, so quantisation and reloading take the same code
path as for the real checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tasks.train import tiny


@dataclass(frozen=True)
class Family:
    name: str
    kind: str                      # "text" | "vision"
    model_class: str               # transformers class (or our assembly) that holds the whole model
    image_processor: str | None    # "blip" | "clip" | None
    projection: str | None         # attribute path of the projection the "projection" method trains
    add_bos: bool = True
    qformer_text: bool = False     # InstructBLIP: the Q-Former also reads the instruction

    # -- tiny -----------------------------------------------------------------------------------------------------
    def build_tiny(self, tok, qformer_tok=None):
        import transformers

        if self.name == "minigpt4":
            return _tiny_minigpt4(tok)
        if self.name == "llama_adapter_v2":
            return _TwoPart(transformers.LlamaForCausalLM(tiny.llama_config(tok)),
                            transformers.CLIPVisionModel(tiny.clip_vision_config()))
        cls = getattr(transformers, self.model_class)
        config = {"llama": tiny.llama_config, "opt": tiny.opt_config, "bloom": tiny.bloom_config,
                  "blip2": tiny.blip2_config, "llava": tiny.llava_config}.get(self.name)
        cfg = tiny.instructblip_config(tok, qformer_tok) if self.name == "instructblip" else config(tok)
        return cls(cfg)

    def save_base(self, model, path: Path) -> None:
        if self.name in ("minigpt4", "llama_adapter_v2"):
            model.save_base(path)
        else:
            model.save_pretrained(path)

    # -- loading --------------------------------------------------------------------------------------------------
    def load(self, source: dict[str, str], *, image_token_id: int | None = None, quantization=None,
             device: str = "cpu", dtype=torch.float32):
        """``source``: {"model": path-or-id} for one-piece models; MiniGPT-4 needs {"vision_qformer", "llm"},
        LLaMA-Adapter-v2 {"vision", "llm"} (each a saved folder or a hub id). ``image_token_id``: MiniGPT-4's
        placeholder id (the tokenizer's ``<image>``)."""
        import transformers

        common = {"dtype": dtype, "device_map": {"": device}}
        if self.name == "minigpt4":
            return _load_minigpt4(source, common, image_token_id)
        if self.name == "llama_adapter_v2":
            llm = transformers.AutoModelForCausalLM.from_pretrained(source["llm"], quantization_config=quantization,
                                                                    **common)
            return _TwoPart(llm, transformers.CLIPVisionModel.from_pretrained(source["vision"], **common))
        cls = getattr(transformers, self.model_class)
        return cls.from_pretrained(source["model"], quantization_config=quantization, **common)

    def n_image_tokens(self, model) -> int:
        if self.name in ("blip2", "instructblip"):
            return model.config.num_query_tokens
        if self.name == "minigpt4":
            return model.num_query_tokens
        if self.name == "llava":
            vision = model.config.vision_config
            return (vision.image_size // vision.patch_size) ** 2 + (
                1 if model.config.vision_feature_select_strategy == "full" else 0)
        return 0

    def image_token_id(self, model, tokenizer) -> int | None:
        if self.name in ("blip2", "instructblip", "llava"):
            return model.config.image_token_id
        if self.name == "minigpt4":
            return model.image_token_id
        return None


class _TwoPart(torch.nn.Module):
    """LLaMA-Adapter-v2's base before the adapters go in: the LLaMA and the CLIP vision tower."""

    def __init__(self, language_model, vision_model):
        super().__init__()
        self.language_model = language_model
        self.vision_model = vision_model

    def save_base(self, path: Path) -> None:
        self.language_model.save_pretrained(Path(path) / "llm")
        self.vision_model.save_pretrained(Path(path) / "vision")


def _tiny_minigpt4(tok):
    from transformers import (
        Blip2QFormerConfig,
        Blip2QFormerModel,
        Blip2VisionConfig,
        Blip2VisionModel,
        LlamaForCausalLM,
    )

    from tasks.train.adapters import MiniGPT4

    vision = Blip2VisionModel(Blip2VisionConfig(**tiny.blip_vision_config()))
    qformer = Blip2QFormerModel(Blip2QFormerConfig(**tiny.qformer_config()))
    queries = torch.randn(1, tiny.QUERY_TOKENS, tiny.VISION_WIDTH) * 0.02
    return MiniGPT4(vision, qformer, queries, LlamaForCausalLM(tiny.llama_config(tok)),
                    image_token_id=tok.convert_tokens_to_ids(tiny.IMAGE))


def _load_minigpt4(source: dict[str, str], common: dict, image_token_id: int | None):
    if image_token_id is None:
        raise ValueError("MiniGPT-4 needs the tokenizer's image placeholder id")
    model = _assemble_minigpt4(source, common, image_token_id)
    if source.get("projection"):                          # MiniGPT-4's pre-trained alignment (train.projection_init)
        model.llama_proj.load_state_dict(projection_weights(source["projection"], model.llama_proj))
    return model


def projection_weights(path: str, proj: torch.nn.Linear) -> dict[str, torch.Tensor]:
    """``llama_proj.weight`` / ``.bias`` of a MiniGPT-4 checkpoint (its released ``.pth``, whose tensors sit under
    ``model``, or a ``.safetensors`` file), checked against the projection they go into."""
    from core.errors import ConfigError

    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file

        state = load_file(str(path))
    else:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        state = state.get("model", state) if isinstance(state, dict) else {}
    out = {}
    for name, param in (("weight", proj.weight), ("bias", proj.bias)):
        tensor = state.get(f"llama_proj.{name}")
        if tensor is None or tuple(tensor.shape) != tuple(param.shape):
            raise ConfigError(f"train.projection_init: {path} has no llama_proj.{name} of shape {tuple(param.shape)} "
                              f"(found {None if tensor is None else tuple(tensor.shape)}).",
                              hint="Give the MiniGPT-4 checkpoint that matches this Q-Former and LLM width.")
        out[name] = tensor.to(param.dtype)
    return out


def _assemble_minigpt4(source: dict[str, str], common: dict, image_token_id: int):
    import transformers
    from safetensors.torch import load_file

    from tasks.train.adapters import MiniGPT4

    parts = Path(source["vision_qformer"])
    llm = transformers.AutoModelForCausalLM.from_pretrained(source["llm"], **common)
    if (parts / "minigpt4.safetensors").exists():          # our saved layout (tiny profile)
        vision = transformers.Blip2VisionModel.from_pretrained(parts / "vision", **common)
        qformer = transformers.Blip2QFormerModel.from_pretrained(parts / "qformer", **common)
        extra = load_file(str(parts / "minigpt4.safetensors"), device=common["device_map"][""])
        proj = torch.nn.Linear(qformer.config.hidden_size, llm.config.hidden_size)
        proj.load_state_dict({"weight": extra["llama_proj.weight"], "bias": extra["llama_proj.bias"]})
        return MiniGPT4(vision, qformer, extra["query_tokens"], llm, image_token_id, proj.to(extra["query_tokens"]))
    # a BLIP-2 hub checkpoint: take its ViT and Q-Former (with queries), drop its language model
    blip2 = transformers.Blip2ForConditionalGeneration.from_pretrained(source["vision_qformer"], **common)
    model = MiniGPT4(blip2.vision_model, blip2.qformer, blip2.query_tokens.data, llm,
                     image_token_id=image_token_id)
    del blip2
    return model


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("llama", "text", "LlamaForCausalLM", None, None),
    Family("opt", "text", "OPTForCausalLM", None, None),
    Family("bloom", "text", "BloomForCausalLM", None, None, add_bos=False),
    Family("blip2", "vision", "Blip2ForConditionalGeneration", "blip", "language_projection"),
    Family("instructblip", "vision", "InstructBlipForConditionalGeneration", "blip", "language_projection",
           qformer_text=True),
    Family("minigpt4", "vision", "MiniGPT4", "blip", "llama_proj"),
    Family("llava", "vision", "LlavaForConditionalGeneration", "clip", "model.multi_modal_projector"),
    Family("llama_adapter_v2", "vision", "LlamaAdapterV2", "clip", None),
]}
