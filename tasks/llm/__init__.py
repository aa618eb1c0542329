"""LLM backends: a registry (``offline``, ``openai``) and :func:`build_client` that turns ``params.llm`` into a
cached, concurrency-bounded :class:`~tasks.llm.base.LLMClient`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.registry import Registry

if TYPE_CHECKING:
    from tasks.llm.base import LLMClient
    from tasks.params import LLMParams

LLM_BACKENDS: Registry[Any] = Registry("LLM backend")

# Importing the modules registers the backends.
from tasks.llm import offline as _offline  # noqa: E402,F401
from tasks.llm import openai_backend as _openai  # noqa: E402,F401


def build_client(params: LLMParams, cache_dir: Path | None) -> LLMClient:
    from tasks.llm.base import LLMClient, ResponseCache

    backend = LLM_BACKENDS.get(params.backend)(params)
    cache = ResponseCache(cache_dir) if cache_dir is not None else None
    return LLMClient(backend, cache, concurrency=params.concurrency)


def request_from_params(messages: list[dict[str, str]], params: LLMParams) -> Any:
    from tasks.llm.base import ChatRequest

    return ChatRequest.of(
        messages, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens, seed=params.seed
    )
