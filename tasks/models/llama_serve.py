"""``python -m tasks.models.llama_serve``: llama-cpp-python's OpenAI-compatible server (``llama_cpp.server``, same
arguments) with two changes that make an answer a function of its request alone:

* **every request starts from an empty context.** The library keeps the previous request's tokens and re-evaluates
  only the part of a new prompt after their common prefix; the prompt is then decoded in other batches than a cold
  request's, so an answer could depend on which request came before it (and a resumed run, whose cached answers skip
  requests, on what was cached). Here the key-value memory is cleared before each generation, so the prompt is
  always decoded from position 0 in the same batches. Cost: the shared prefix is recomputed (measured in
  docs/ladder.md).
* **a ``gemma-system`` chat format**: Gemma's published turn format with a system message folded into the first user
  turn, as Gemma's own chat template does (the library's ``gemma`` format drops system messages, which would take the
  task's instructions away from Gemma 3's base model alone). The format is picked per model architecture by
  :class:`tasks.models.llama_server.LlamaServer`, never per prompt.

Started by :class:`tasks.models.llama_server.LlamaServer`; not imported by the pipeline.
"""

from __future__ import annotations

from typing import Any


def _generate_from_empty_context(original):
    def generate(self, tokens, *args: Any, **kwargs: Any):
        self._ctx.kv_cache_clear()
        self.reset()          # n_tokens = 0: the library's prefix-reuse branch is skipped, the prompt decoded whole
        return original(self, tokens, *args, **kwargs)

    generate.__doc__ = original.__doc__
    return generate


def _register_gemma_system() -> None:
    from llama_cpp import llama_chat_format as chat

    @chat.register_chat_format("gemma-system")
    def format_gemma_system(messages, **kwargs: Any) -> chat.ChatFormatterResponse:
        system = "\n\n".join(str(m.get("content") or "") for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] in ("user", "assistant")]
        prompt = ""
        for i, message in enumerate(turns):
            role = "user" if message["role"] == "user" else "model"
            content = str(message.get("content") or "")
            if i == 0 and system and role == "user":
                content = f"{system}\n\n{content}"
            prompt += f"<start_of_turn>{role}\n{content}<end_of_turn>\n"
        return chat.ChatFormatterResponse(prompt=prompt + "<start_of_turn>model\n", stop="<end_of_turn>")


def main() -> None:
    import llama_cpp
    from llama_cpp.server.__main__ import main as serve

    llama_cpp.Llama.generate = _generate_from_empty_context(llama_cpp.Llama.generate)
    _register_gemma_system()
    serve()


if __name__ == "__main__":
    main()
