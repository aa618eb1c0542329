"""LLM backends: the ``core.plugins.LLM_BACKENDS`` table (``offline``, ``openai``) and :func:`build_client` that turns ``params.llm`` into a
cached, concurrency-bounded :class:`~tasks.llm.base.LLMClient`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.plugins import LLM_BACKENDS

if TYPE_CHECKING:
    from tasks.llm.base import LLMClient
    from tasks.params import LLMParams


#: What each LLM backend is, for every table that shows its results: a program is never presented as a model.
BACKEND_KINDS = {"offline": "rule-based program (not an LLM)", "openai": "LLM"}


def backend_kind(params: LLMParams) -> str:
    return BACKEND_KINDS.get(params.backend, "LLM")


def build_client(params: LLMParams, cache_dir: Path | None) -> LLMClient:
    from tasks.llm.base import LLMClient, ResponseCache

    backend = LLM_BACKENDS.load(params.backend)(params)
    cache = ResponseCache(cache_dir) if cache_dir is not None else None
    return LLMClient(backend, cache, concurrency=params.concurrency)


def request_from_params(messages: list[dict[str, str]], params: LLMParams) -> Any:
    from tasks.llm.base import ChatRequest

    return ChatRequest.of(
        messages, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens, seed=params.seed
    )
