"""Benchmark of the RoboScript data pipeline's work (no Prefect, offline LLM backend): worlds per second, task
queries and code snippets per second, and the time to check one snippet.

    python bench/roboscript.py                        # 100 worlds (paper scale), 10 queries per world
    python bench/roboscript.py --worlds 20 --per-world 5 --repeat 3

Rows:

* ``sample worlds`` -- ``sample_world`` only (catalog loaded before the clock starts);
* ``world files + pictures`` -- writing each world's JSON and rendering its top view (matplotlib, Agg);
* ``scene text`` -- ``describe`` per world;
* ``task queries (offline)`` -- one offline-backend request per world, parsed into queries (cold cache);
* ``code snippets (offline, cold)`` / ``(warm)`` -- hierarchical generation for every query, main agent plus
  sub-agents, with an empty response cache and again with every response cached;
* ``check per snippet`` -- ``check_snippet`` on each assembled snippet (mean, and the slowest one).

The cache lives in a temporary directory; the repository's data/ is never touched. With ``--repeat N`` each
timing is the median of N runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from robot.contract.catalog import load_catalog  # noqa: E402
from robot.contract.code_policy import check_snippet  # noqa: E402
from robot.contract.world import write_world  # noqa: E402
from tasks.llm import build_client  # noqa: E402
from tasks.params import LLMParams  # noqa: E402
from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator  # noqa: E402
from tasks.roboscript.params import CodegenParams, QueriesParams, WorldsParams  # noqa: E402
from tasks.roboscript.queries import generate_queries  # noqa: E402
from tasks.roboscript.render import render_world  # noqa: E402
from tasks.roboscript.scene_text import describe  # noqa: E402
from tasks.roboscript.worlds import sample_world  # noqa: E402


def _timed(fn, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=100)
    parser.add_argument("--per-world", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    catalog = load_catalog()
    params = WorldsParams(n_worlds=args.worlds)
    llm = LLMParams()  # offline, default noise
    rows: list[tuple[str, int, str, float]] = []

    t, worlds = _timed(lambda: [sample_world(i, catalog, params) for i in range(args.worlds)], args.repeat)
    rows.append(("sample worlds", len(worlds), "worlds", t))
    with tempfile.TemporaryDirectory(prefix="embp-bench-roboscript-") as tmp:
        root = Path(tmp)

        def files():
            for w in worlds:
                write_world(root / "worlds" / f"{w.world_id}.json", w)
                render_world(w, root / "pictures" / f"{w.world_id}.png", params.picture_px)
            return worlds

        t, _ = _timed(files, args.repeat)
        rows.append(("world files + pictures", len(worlds), "worlds", t))
        t, texts = _timed(lambda: [describe(w) for w in worlds], args.repeat)
        rows.append(("scene text", len(texts), "worlds", t))
        frame = pd.DataFrame([{"world_id": w.world_id, "object_names": w.object_names(), "scene_text": s}
                              for w, s in zip(worlds, texts, strict=True)])

        def queries():
            client = build_client(llm, None)
            return generate_queries(frame, QueriesParams(per_world=args.per_world), llm, client)[0]

        t, query_rows = _timed(queries, args.repeat)
        rows.append(("task queries (offline)", len(query_rows), "queries", t))
        jobs = [CodeJob(q.query_id, q.world_id, q.instruction, q.query) for q in query_rows]

        counter = iter(range(10**6))

        def cold():
            client = build_client(llm, root / f"cache-{next(counter)}")
            return HierarchicalGenerator(client, llm, CodegenParams()).generate(jobs)

        t, snippets = _timed(cold, args.repeat)
        rows.append(("code snippets (offline, cold)", len(snippets), "snippets", t))
        warm_cache = root / "cache-warm"
        HierarchicalGenerator(build_client(llm, warm_cache), llm, CodegenParams()).generate(jobs)
        t, _ = _timed(lambda: HierarchicalGenerator(build_client(llm, warm_cache), llm, CodegenParams()).generate(
            jobs), args.repeat)
        rows.append(("code snippets (offline, warm)", len(snippets), "snippets", t))

    codes = [s.assembled() for s in snippets]
    per = []
    for code in codes:
        start = time.perf_counter()
        check_snippet(code)
        per.append(time.perf_counter() - start)
    passing = sum(s.verdict.ok for s in snippets)
    mean_lines = statistics.mean(c.count("\n") + 1 for c in codes) if codes else 0.0

    print(f"RoboScript data pipeline, offline backend: {args.worlds} worlds x {args.per_world} queries asked, "
          f"median of {args.repeat}\n")
    print(f"{'step':32} {'items':>7} {'wall s':>8} {'items/s':>10}")
    for name, n, unit, t in rows:
        print(f"{name:32} {n:>7} {t:>8.3f} {n / t if t else float('inf'):>10.1f}  {unit}")
    if per:
        print(f"\ncheck per snippet: mean {statistics.mean(per) * 1e3:.2f} ms, median "
              f"{statistics.median(per) * 1e3:.2f} ms, max {max(per) * 1e3:.2f} ms over {len(per)} snippets "
              f"(mean {mean_lines:.0f} lines); {passing}/{len(snippets)} pass")


if __name__ == "__main__":
    main()
