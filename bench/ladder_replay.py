"""Replay a ladder stage's cached requests against llama.cpp's server at several batch sizes: what ``n_batch`` costs
and what it changes.

    python bench/ladder_replay.py --cache /tmp/run/data/cache/llm-ladder-muep/qwen2.5-coder-0.5b-instruct \
        --model qwen2.5-coder-0.5b-instruct --n-batch 512 128 --games 4

``--cache`` is one model's answer cache (``data/cache/llm-ladder-muep/<model>/``, kept from a run). Its requests are
put back in the order a game asks them (grouped by the game's first observation, then by how many messages each
carries), the first ``--games`` games taken, and every request sent to a fresh server per batch size, nothing
cached. Rows, one per batch size:

* ``requests``, ``prompt tok`` -- what was asked;
* ``s/request`` -- wall seconds per request (the prompt decoded, the answer generated);
* ``same as cache`` -- answers equal to the cached ones, which were made at the run's ``n_batch``: at that size every
  one must be equal (an answer is a function of its request alone); at another size the floats differ, and so may
  some answers.

Run it on idle cores: the server's speed is the machine's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai  # noqa: E402

from tasks.models.llama_server import LlamaServer  # noqa: E402
from tasks.params import ServeParams  # noqa: E402


def games(cache: Path) -> list[list[dict]]:
    """The cached entries of ``cache`` as games: grouped by the first user message (a game's first observation), each
    game's requests in the order it asked them (fewer messages first), the games in a fixed order."""
    grouped: dict[str, list[dict]] = {}
    for path in sorted(cache.rglob("*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        messages = entry["request"]["messages"]
        first = next((m["content"] for m in messages if m["role"] == "user"), "")
        grouped.setdefault(first, []).append(entry)
    if not grouped:
        raise SystemExit(f"{cache}: no cached answers (*.json) here; --cache is one model's folder of a kept run's "
                         "data/cache/llm-ladder-muep/")
    return [sorted(g, key=lambda e: len(e["request"]["messages"])) for _, g in sorted(grouped.items())]


def replay(model: str, entries: list[dict], n_batch: int, threads: int, log: Path) -> dict:
    settings = ServeParams(threads=threads, n_batch=n_batch, n_ctx=8192, startup_timeout_s=600)
    same = prompt_tokens = 0
    with LlamaServer(model, settings, log) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none", timeout=900, max_retries=0)
        start = time.perf_counter()
        for entry in entries:
            request = entry["request"]
            out = client.chat.completions.create(model=model, messages=request["messages"],
                                                 temperature=request.get("temperature", 0.0), top_p=request.get("top_p", 1.0),
                                                 max_tokens=request.get("max_tokens"), seed=request.get("seed", 0))
            same += (out.choices[0].message.content or "") == entry["text"]
            prompt_tokens += out.usage.prompt_tokens
        wall = time.perf_counter() - start
    return {"n_batch": n_batch, "requests": len(entries), "prompt_tokens": prompt_tokens,
            "s_per_request": wall / len(entries), "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="one model's cached answers (a folder of *.json)")
    parser.add_argument("--model", required=True, help="its catalogue name (`embp models list`)")
    parser.add_argument("--n-batch", type=int, nargs="+", default=[512, 128])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--requests", type=int, default=None, help="at most this many requests of those games")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    entries = [e for game in games(args.cache)[:args.games] for e in game][:args.requests]
    with tempfile.TemporaryDirectory(prefix="embp-bench-replay-") as tmp:
        rows = [replay(args.model, entries, nb, args.threads, Path(tmp) / f"{nb}.log") for nb in args.n_batch]
    print(f"{args.model}: {args.games} game(s) of {args.cache}, {args.threads} thread(s)")
    print(f"{'n_batch':>7} {'requests':>8} {'prompt tok':>10} {'s/request':>9} {'same as cache':>13}")
    for r in rows:
        print(f"{r['n_batch']:7d} {r['requests']:8d} {r['prompt_tokens']:10d} "
              f"{r['s_per_request']:9.2f} {r['same']:>8d} of {r['requests']}")


if __name__ == "__main__":
    main()
