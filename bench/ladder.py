"""Benchmark of the model ladder's inference engine: each local GGUF model through llama.cpp's OpenAI-compatible
server (tasks/models/llama_server.py), as the ladder stages ask it.

    python bench/ladder.py                                   # every installed catalogue model, 2 threads
    python bench/ladder.py --models qwen2.5-coder-0.5b-instruct --threads 1 --repeat 3

Rows, one per model (each the median of ``--repeat`` runs):

* ``load_s`` -- from starting the server until it answers (the GGUF mapped, the context allocated);
* ``prompt tok/s`` -- a cold prompt of about 2,000 tokens (RoboScript's tool docs and examples, the prefix the
  ladder's code prompts share) with one generated token;
* ``reuse prompt tok/s`` -- the same prompt with another last user turn right after it: whole batches of the shared
  prefix are reused (tasks/models/llama_serve.py), the rest decoded as a cold request would;
* ``gen tok/s`` -- tokens generated after a short prompt (greedy, at most ``--gen`` tokens; a model that stops early
  generates fewer);
* ``same bytes`` -- the cold prompt's answer asked again after the other request is the same text.

Nothing is cached: every request goes to the server. The numbers depend on the machine's load: run it on idle cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai  # noqa: E402

from core.plugins import LOCAL_MODELS  # noqa: E402
from tasks.models import files  # noqa: E402
from tasks.models.llama_server import LlamaServer  # noqa: E402
from tasks.params import ServeParams  # noqa: E402


def _prefix() -> list[dict]:
    """The ladder's own code prompt (system prompt with the tool docs, then ten worked examples), without its query."""
    from tasks.roboscript.code_prompts import main_messages, task_query

    return main_messages(task_query(["apple", "bowl", "table"], "put the apple in the bowl"), 10)[:-1]


def _ask(client, model: str, messages: list[dict], max_tokens: int) -> tuple[float, str, dict]:
    start = time.perf_counter()
    out = client.chat.completions.create(model=model, messages=messages, temperature=0.0, max_tokens=max_tokens,
                                         seed=0)
    return time.perf_counter() - start, out.choices[0].message.content or "", out.usage.model_dump()


def measure(name: str, threads: int, gen: int, log_dir: Path) -> dict:
    settings = ServeParams(threads=threads, n_ctx=8192, startup_timeout_s=600)
    server = LlamaServer(name, settings, log_dir / f"{name}.log")
    start = time.perf_counter()
    with server:
        load_s = time.perf_counter() - start
        client = openai.OpenAI(base_url=server.base_url, api_key="none", timeout=900, max_retries=0)
        prefix = _prefix()
        first = prefix + [{"role": "user", "content": "objects = ['apple', 'bowl', 'table']\n# put the apple in the bowl"}]
        second = prefix + [{"role": "user", "content": "objects = ['drawer', 'cabinet']\n# open the top drawer"}]
        cold_s, cold_text, cold_usage = _ask(client, name, first, 1)
        reuse_s, _, reuse_usage = _ask(client, name, second, 1)
        again_s, again_text, _ = _ask(client, name, first, 1)
        gen_s, _, gen_usage = _ask(client, name, [{"role": "user", "content": "Count from 1 to 200, comma-separated."}],
                                   gen)
    return {"model": name, "load_s": load_s, "prompt_tokens": cold_usage["prompt_tokens"],
            "prompt_tok_s": cold_usage["prompt_tokens"] / cold_s,
            "reuse_tok_s": reuse_usage["prompt_tokens"] / reuse_s,
            "gen_tokens": gen_usage["completion_tokens"], "gen_tok_s": gen_usage["completion_tokens"] / gen_s,
            "same": cold_text == again_text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help="catalogue names (default: every installed one)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gen", type=int, default=128, help="tokens to generate at most")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    names = args.models or [n for n in LOCAL_MODELS.names() if files.is_installed(files.get(n))]
    rows = []
    with tempfile.TemporaryDirectory(prefix="embp-bench-ladder-") as tmp:
        for name in names:
            runs = [measure(name, args.threads, args.gen, Path(tmp)) for _ in range(args.repeat)]
            row = {k: (statistics.median(r[k] for r in runs) if isinstance(runs[0][k], float) else runs[0][k])
                   for k in runs[0]}
            row["same"] = all(r["same"] for r in runs)
            rows.append(row)
            print(f"{name}: done", file=sys.stderr)
    print(f"llama.cpp server, {args.threads} thread(s), median of {args.repeat}")
    print(f"{'model':30} {'load s':>7} {'prompt':>7} {'prompt tok/s':>12} {'reuse tok/s':>11} {'gen tok':>7} "
          f"{'gen tok/s':>9} {'same bytes':>10}")
    for r in rows:
        print(f"{r['model']:30} {r['load_s']:7.1f} {r['prompt_tokens']:7d} {r['prompt_tok_s']:12.0f} "
              f"{r['reuse_tok_s']:11.0f} {r['gen_tokens']:7d} {r['gen_tok_s']:9.1f} {str(r['same']):>10}")


if __name__ == "__main__":
    main()
