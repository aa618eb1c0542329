"""LLM backends: the ``core.plugins.LLM_BACKENDS`` table (``offline``, ``openai``) and :func:`build_client` that turns ``params.llm`` into a
cached, concurrency-bounded :class:`~tasks.llm.base.LLMClient`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.plugins import LLM_BACKENDS

if TYPE_CHECKING:
    from tasks.llm.base import LLMClient
    from tasks.params import LLMParams


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
