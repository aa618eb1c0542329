"""The two baselines with no ready transformers class, assembled from transformers and peft parts.

**LLaMA-Adapter-v2** (Gao et al., 2023; github.com/OpenGVLab/LLaMA-Adapter, ``llama_adapter_v2_multimodal7b``).
peft's adaption prompt is LLaMA-Adapter *v1*: learnable prompts whose keys/values the top ``L`` attention layers
attend to, through a zero-initialised gate. :class:`AdaptedAttentionV2` subclasses peft's ``AdaptedAttention`` and
adds what v2 changes:

* the gate is per head and squashed by ``tanh`` (v2's ``self.gate = zeros(1, n_heads, 1, 1)``);
* *early fusion of visual knowledge*: the projected image features are added to every adaption prompt
  (v2's ``dynamic_adapter = adapter + visual_proj``);
* *bias tuning*: the linear layers of the adapter layers get ``y = s * (W x + b)``, ``b`` zero-init, ``s`` one-init
  (:class:`BiasScaleLinear`).

What trains: MuEP fine-tuned v2 "only on the bias of adapter layers" (paper section 4.2), so the biases ``b`` of the
adapter layers train and nothing else -- prompts, gates, scales, norms and the visual projection stay as they start
(``tasks.train.baselines.V2_TRAINABLE``). The paper starts from v2's released weights, whose prompts, gates and visual
branch its pre-training trained; here they start from their initialisation (no such checkpoint loads into this
assembly), so the gates stay zero and **the image does not reach the language model**: what trains is bias tuning of
LLaMA on the task and previous actions (``tasks.train.baselines.reproduction_notes`` says so in every report).

Differences from the original, on purpose: the visual branch pools the frozen CLIP tokens to ``adapter_len`` vectors
and projects them (Linear + LayerNorm); the original passes CLIP tokens and 10 learned queries through 8 extra
transformer blocks, weights that only its image-text pre-training phase trains. The prompts go into the top
``adapter_layers`` layers (original: 31 of 32), not all.

**MiniGPT-4** (Zhu et al., 2023). The original is BLIP-2's frozen EVA ViT-g/14 + Q-Former with 32 queries, one
trainable linear layer (``llama_proj``) into frozen Vicuna, and the image spliced into the prompt at
``<ImageHere>``. :class:`MiniGPT4` is exactly that from ``Blip2VisionModel``, ``Blip2QFormerModel`` and any causal
LM; the image placeholder is a run of image-token ids replaced by the projected queries (the same splice).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from peft.tuners.adaption_prompt.layer import AdaptedAttention
from peft.tuners.adaption_prompt.utils import llama_compute_query_states
from torch import nn

# --------------------------------------------------------------------------------------------------------------------
# LLaMA-Adapter-v2


class BiasScaleLinear(nn.Module):
    """``y = scale * (base(x) + bias)`` around a frozen linear layer (plain or bitsandbytes 4-bit)."""

    def __init__(self, base: nn.Module):
        super().__init__()
        self.base = base
        self.in_features = base.in_features
        self.out_features = base.out_features
        device = next(base.parameters()).device
        self.v2_bias = nn.Parameter(torch.zeros(self.out_features, device=device))
        self.v2_scale = nn.Parameter(torch.ones(self.out_features, device=device))

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        return (self.v2_scale.to(y.dtype) * (y + self.v2_bias.to(y.dtype)))


class VisualSlot:
    """Where the wrapper leaves the current batch's visual prompt for the adapted layers (None: no image). The
    value stays until the next forward so that gradient checkpointing recomputes with the same tensor."""

    value: torch.Tensor | None = None


class AdaptedAttentionV2(AdaptedAttention):
    """peft's adapted LLaMA attention with v2's per-head tanh gate and visual prompt."""

    def __init__(self, adapter_len: int, attention: nn.Module, slot: VisualSlot):
        super().__init__("llama", adapter_len, attention)
        dtype = self.adaption_prompt.dtype
        self.adaption_gate = nn.Parameter(torch.zeros(1, self.num_heads, 1, 1, dtype=dtype,
                                                      device=self.adaption_prompt.device))
        self.__dict__["slot"] = slot          # a plain attribute, not a submodule or state

    def forward(self, **kwargs):
        output, *rest = self.model(**kwargs)
        bsz, q_len, _ = output.shape
        attn, head_dim = self.model, self.model.head_dim
        prompt = self.adaption_prompt
        visual = self.slot.value
        if visual is not None:
            prompt = prompt + visual.to(prompt.dtype)
        prompt = prompt.expand(bsz, -1, -1)
        key, value = attn.k_proj(prompt), attn.v_proj(prompt)
        n_kv = key.shape[-1] // head_dim
        repeat = self.num_heads // n_kv
        key = key.view(bsz, self.adapter_len, n_kv, head_dim).transpose(1, 2).repeat_interleave(repeat, dim=1)
        value = value.view(bsz, self.adapter_len, n_kv, head_dim).transpose(1, 2).repeat_interleave(repeat, dim=1)
        query = llama_compute_query_states(model=attn, **kwargs)
        dtype = query.dtype
        scores = torch.matmul(query, key.transpose(2, 3).to(dtype)) / math.sqrt(head_dim)
        scores = torch.tanh(self.adaption_gate).to(dtype) * F.softmax(scores, dim=-1, dtype=torch.float32).to(dtype)
        adapter_out = torch.matmul(scores, value.to(dtype)).transpose(1, 2).reshape(bsz, q_len, -1)
        return (output + attn.o_proj(adapter_out)).to(dtype), *rest


class LlamaAdapterV2(nn.Module):
    """Frozen CLIP vision tower + LLaMA with v2 adapters. ``forward``/``generate`` take ``pixel_values`` or None."""

    def __init__(self, language_model: nn.Module, vision_model: nn.Module, adapter_len: int, adapter_layers: int):
        super().__init__()
        self.language_model = language_model
        self.vision_model = vision_model
        self.adapter_len = adapter_len
        self.slot = VisualSlot()
        hidden = language_model.config.hidden_size
        device = language_model.get_input_embeddings().weight.device
        self.visual_proj = nn.Sequential(nn.Linear(vision_model.config.hidden_size, hidden),
                                         nn.LayerNorm(hidden)).to(device)
        layers = language_model.model.layers
        if not 1 <= adapter_layers <= len(layers):
            raise ValueError(f"adapter_layers must be in 1..{len(layers)}, got {adapter_layers}")
        for layer in layers[len(layers) - adapter_layers:]:      # the adapter layers: bias/scale and prompts
            for parent in (layer.self_attn, layer.mlp):
                for name, child in list(parent.named_children()):
                    if hasattr(child, "in_features") and hasattr(child, "out_features"):
                        setattr(parent, name, BiasScaleLinear(child))
            layer.self_attn = AdaptedAttentionV2(adapter_len, layer.self_attn, self.slot)
        self.config = language_model.config

    def visual_prompt(self, pixel_values: torch.Tensor | None) -> torch.Tensor | None:
        if pixel_values is None:
            return None
        dtype = next(self.vision_model.parameters()).dtype
        tokens = self.vision_model(pixel_values=pixel_values.to(dtype)).last_hidden_state      # (B, N, Dv)
        pooled = F.adaptive_avg_pool1d(tokens.transpose(1, 2).float(), self.adapter_len).transpose(1, 2)
        return self.visual_proj(pooled.to(self.visual_proj[0].weight.dtype))                     # (B, L, D)

    def forward(self, input_ids, attention_mask=None, labels=None, pixel_values=None, **kwargs):
        self.slot.value = self.visual_prompt(pixel_values)
        return self.language_model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kwargs)

    @torch.no_grad()
    def generate(self, input_ids, attention_mask=None, pixel_values=None, **kwargs):
        self.slot.value = self.visual_prompt(pixel_values)
        return self.language_model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    def activation_checkpointing_enable(self, **kwargs):
        self.language_model.activation_checkpointing_enable(**kwargs)


# --------------------------------------------------------------------------------------------------------------------
# MiniGPT-4


class MiniGPT4(nn.Module):
    """BLIP-2 vision tower + Q-Former (frozen) -> ``llama_proj`` (trainable) -> causal LM (frozen)."""

    def __init__(self, vision_model: nn.Module, qformer: nn.Module, query_tokens: torch.Tensor,
                 language_model: nn.Module, image_token_id: int, llama_proj: nn.Linear | None = None):
        super().__init__()
        self.vision_model = vision_model
        self.qformer = qformer
        self.query_tokens = nn.Parameter(query_tokens.detach().clone())
        self.language_model = language_model
        self.image_token_id = image_token_id
        self.config = language_model.config
        self.llama_proj = llama_proj if llama_proj is not None else nn.Linear(
            qformer.config.hidden_size, language_model.config.hidden_size)
        self.llama_proj.to(query_tokens.device)

    @property
    def num_query_tokens(self) -> int:
        return self.query_tokens.shape[1]

    def image_embeds(self, pixel_values: torch.Tensor) -> torch.Tensor:
        dtype = next(self.vision_model.parameters()).dtype
        image = self.vision_model(pixel_values=pixel_values.to(dtype)).last_hidden_state
        mask = torch.ones(image.shape[:-1], dtype=torch.long, device=image.device)
        queries = self.qformer(query_embeds=self.query_tokens.expand(image.shape[0], -1, -1).to(image.dtype),
                               encoder_hidden_states=image, encoder_attention_mask=mask).last_hidden_state
        return self.llama_proj(queries.to(self.llama_proj.weight.dtype))

    def _inputs_embeds(self, input_ids: torch.Tensor, pixel_values: torch.Tensor) -> torch.Tensor:
        placeholder = input_ids == self.image_token_id
        embed = self.language_model.get_input_embeddings()
        embeds = embed(input_ids.masked_fill(placeholder, 0))
        visual = self.image_embeds(pixel_values).to(embeds.dtype)
        expected = visual.shape[0] * visual.shape[1]
        if int(placeholder.sum()) != expected:
            raise ValueError(f"the prompt has {int(placeholder.sum())} image placeholders, the images give {expected}")
        return embeds.masked_scatter(placeholder.unsqueeze(-1), visual)

    def forward(self, input_ids, pixel_values, attention_mask=None, labels=None, **kwargs):
        embeds = self._inputs_embeds(input_ids, pixel_values)
        return self.language_model(inputs_embeds=embeds, attention_mask=attention_mask, labels=labels, **kwargs)

    @torch.no_grad()
    def generate(self, input_ids, pixel_values, attention_mask=None, **kwargs):
        embeds = self._inputs_embeds(input_ids, pixel_values)
        return self.language_model.generate(inputs_embeds=embeds, attention_mask=attention_mask, **kwargs)

    def activation_checkpointing_enable(self, **kwargs):
        self.language_model.activation_checkpointing_enable(**kwargs)

    # a base checkpoint of our own layout: vision/, qformer/, llm/ (transformers folders) + minigpt4.safetensors
    def save_base(self, path: Path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        self.vision_model.save_pretrained(path / "vision")
        self.qformer.save_pretrained(path / "qformer")
        self.language_model.save_pretrained(path / "llm")
        save_file({"query_tokens": self.query_tokens.detach().contiguous(),
                   "llama_proj.weight": self.llama_proj.weight.detach().contiguous(),
                   "llama_proj.bias": self.llama_proj.bias.detach().contiguous()}, str(path / "minigpt4.safetensors"))
