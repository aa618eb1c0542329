"""The ``openai`` backend: the official ``openai`` client against any OpenAI-compatible endpoint.

Works with OpenAI itself, vLLM (``vllm serve ... --port 8000`` -> ``base_url: http://host:8000/v1``) and the
llama.cpp server. The API key is read from the environment variable named by ``llm.api_key_env``; local servers
that need no key get a placeholder. Retries with exponential backoff (and ``Retry-After`` when the server sends
one) on 429, 5xx, time-outs and dropped connections; any other error fails at once with the server's words.
"""

from __future__ import annotations

import logging
import os
import random
import time

import openai

from core.errors import ConfigError, LLMError
from tasks.llm.base import ChatRequest, Completion
from tasks.params import LLMParams

log = logging.getLogger("embp.llm")

_RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError, openai.APITimeoutError)


class OpenAIBackend:
    name = "openai"

    def __init__(self, params: LLMParams, sleep=time.sleep):
        self.params = params
        self.model = params.model
        self._sleep = sleep
        self._rng = random.Random(params.seed)
        key = os.environ.get(params.api_key_env)
        if not key:
            if params.base_url is None:
                raise ConfigError(
                    f"llm.backend is 'openai' with no llm.base_url, so the OpenAI API is used, but the environment "
                    f"variable {params.api_key_env} (llm.api_key_env) is not set.",
                    hint="Export the key, or set llm.base_url to a local OpenAI-compatible server, "
                    "or use llm.backend: offline.",
                )
            key = "no-key-needed"  # vLLM / llama.cpp accept any key unless started with one
        self.client = openai.OpenAI(api_key=key, base_url=params.base_url, timeout=params.timeout_s, max_retries=0)

    def _delay(self, attempt: int, exc: Exception) -> float:
        retry_after = None
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                retry_after = float(response.headers.get("retry-after", ""))
            except (TypeError, ValueError):
                retry_after = None
        if retry_after is not None and retry_after >= 0:
            return min(self.params.max_backoff_s, retry_after)  # the server said when: wait exactly that
        jitter = 1.0 + 0.25 * self._rng.random()
        return min(self.params.max_backoff_s, self.params.backoff_s * (2**attempt) * jitter)

    def complete(self, request: ChatRequest) -> Completion:
        attempts = self.params.max_retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                response = self.client.chat.completions.create(
                    model=self.model,
                    messages=request.message_dicts(),
                    temperature=request.temperature,
                    top_p=request.top_p,
                    max_tokens=request.max_tokens,
                    seed=request.seed,
                )
            except _RETRYABLE as exc:
                last = exc
                if attempt + 1 < attempts:
                    delay = self._delay(attempt, exc)
                    log.warning(
                        "LLM endpoint answered %s; retry %d/%d in %.1f s",
                        _describe(exc), attempt + 1, attempts - 1, delay,
                    )
                    self._sleep(delay)
                continue
            except openai.APIStatusError as exc:
                raise LLMError(
                    f"the LLM endpoint {self.params.base_url or 'OpenAI API'} refused the request for model "
                    f"{self.model!r}: {_describe(exc)}.",
                    hint="Check llm.model, llm.base_url and the API key; this error is not retried.",
                ) from None
            if not response.choices:
                return Completion(text="", finish_reason="empty", backend=self.name, model=self.model)
            choice = response.choices[0]
            usage = response.usage.model_dump() if response.usage is not None else {}
            usage = {k: v for k, v in usage.items() if isinstance(v, int)}
            return Completion(
                text=choice.message.content or "",
                finish_reason=choice.finish_reason or "stop",
                backend=self.name,
                model=self.model,
                usage=usage,
            )
        raise LLMError(
            f"the LLM endpoint {self.params.base_url or 'OpenAI API'} kept failing: gave up after {attempts} "
            f"attempts, last answer {_describe(last)}.",
            hint="Finished responses are cached, so rerunning the stage later resumes where it stopped; "
            "lower llm.concurrency or raise llm.max_retries if the server is rate-limiting.",
        )


def _describe(exc: Exception | None) -> str:
    if exc is None:
        return "nothing"
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or str(exc)
    return f"HTTP {status} ({message})" if status else f"{type(exc).__name__} ({message})"
