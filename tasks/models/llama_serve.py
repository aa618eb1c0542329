"""``python -m tasks.models.llama_serve``: llama-cpp-python's OpenAI-compatible server (``llama_cpp.server``, same
arguments) with two changes that make an answer a function of its request alone:

* **a reused prefix never changes an answer.** The library keeps the previous request's tokens and decodes only the
  part of a new prompt after their common prefix -- in batches that then start at another position than a cold
  request's, which moved Qwen2.5-Coder-0.5B's log-probabilities by up to 0.077 (docs/ladder.md): an answer depended
  on which request came before it, and a resumed run (whose cached answers skip requests) on what was cached. Here a
  request reuses only whole batches of the common prefix (``n_batch`` tokens each, counted from position 0) and
  decodes the rest in the very batches an empty context would use, so it computes the same numbers as a cold
  request while the shared system prompt and examples are not decoded again.
* **a ``gemma-system`` chat format**: Gemma's published turn format with a system message folded into the first user
  turn, as Gemma's own chat template does (the library's ``gemma`` format drops system messages, which would take the
  task's instructions away from Gemma 3's base model alone). The format is picked per model architecture by
  :class:`tasks.models.llama_server.LlamaServer`, never per prompt.

It also exits when the process that started it is gone. Started by :class:`tasks.models.llama_server.LlamaServer`;
not imported by the pipeline.
"""

from __future__ import annotations

from typing import Any


def _generate_with_aligned_reuse(original):
    def generate(self, tokens, *args: Any, **kwargs: Any):
        tokens = list(tokens)
        if not kwargs.get("reset", True):
            return original(self, tokens, *args, **kwargs)
        keep = 0
        decoded_in_batches = getattr(self, "_embp_prompt_tokens", 0)
        if self.n_tokens > 0:
            common = 0
            for cached, new in zip(self._input_ids[:decoded_in_batches], tokens):
                if cached != new:
                    break
                common += 1
            # whole batches of the previous *prompt* only (its answer was decoded a token at a time, not in the
            # batches a cold request would use: an agent's next prompt repeats that answer), and at least one token
            # left to decode: the rest is decoded in exactly the batches a request from an empty context would use
            # (batch k covers positions [k * n_batch, (k + 1) * n_batch))
            keep = (min(common, len(tokens) - 1) // self.n_batch) * self.n_batch
        self._embp_prompt_tokens = len(tokens)
        if keep:
            self._ctx.kv_cache_seq_rm(-1, keep, -1)
            self.n_tokens = keep
            return original(self, tokens[keep:], *args, **(kwargs | {"reset": False}))
        self._ctx.kv_cache_clear()
        self.reset()
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


def _exit_with_parent() -> None:
    """Leave when the process that started the server is gone (killed with SIGKILL, say): a server is never
    orphaned, holding a port and gigabytes of memory."""
    import os
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="embp-parent-watch", daemon=True).start()


def main() -> None:
    import llama_cpp
    from llama_cpp.server.__main__ import main as serve

    _exit_with_parent()
    llama_cpp.Llama.generate = _generate_with_aligned_reuse(llama_cpp.Llama.generate)
    _register_gemma_system()
    serve()


if __name__ == "__main__":
    main()
