"""Benchmark of MuEP stage 4 (expert demonstrations): where an episode's time goes, and what orchestration costs.

    python bench/muep_demos.py                       # 48 episodes, 1 and 2 workers (process pool)
    python bench/muep_demos.py --episodes 96 --workers 1,2,4
    python bench/muep_demos.py --task-runner dask    # the same through Dask's local cluster

Each run is a fresh Python process with its own throw-away ``EMBP_ROOT``: the repository's ``params.yaml`` with
``muep.demos.{episodes, workers, task_runner}`` overridden (what ``dvc exp run -S`` would do), and copies of
``data/muep/metadata`` and ``data/muep/filter`` made once per invocation by running stages 1-3 through their flows
in a root of their own (so they always match the current code). The repository's data/ is neither read nor
written. Every run selects the same episodes (same seed).

What a row measures:

* ``flow wall``: the ``muep-demos`` flow call, timed in the child after a warm-up flow has started Prefect's
  temporary server -- so it includes reading the inputs, starting the worker processes (and their imports, planner
  and renderer), all batches, and writing the index, but not Python's start-up or the Prefect server's.
* ``costs``: the per-episode timings the stage records in ``episodes.parquet`` (plan, TextWorld load, TextWorld
  steps, render, and the batch's shard write divided over its episodes), summed over every attempted episode.
* ``overhead = flow wall x workers / sum of costs``. 1.00 means every worker spent the whole wall time on episode
  work; the rest is orchestration (worker start-up, Prefect task bookkeeping, result transfer) and load imbalance
  (workers idle while the last batch runs). Goal: <= 1.25.
* ``ideal s``: the wall time a perfect pool would need for these batches -- their recorded costs, assigned in
  submission order to whichever of the ``workers`` frees first. ``ideal x workers / costs`` is the share of overhead
  that batch granularity alone explains.
* ``startup s`` / ``teardown s``: from the flow call to the first batch's start, and from the last batch's end to
  the flow's return, by the task-run times Prefect's API recorded: worker start-up and the index writing. Without
  ``PREFECT_API_URL`` (Prefect's ephemeral mode, what ``dvc repro`` uses by default) every process-pool worker starts
  a temporary Prefect server of its own ("Starting temporary server" once per worker in the log), which is most of
  the start-up.
* ``process s``: the whole child process -- Python and Prefect start-up, the warm-up flow, the timed flow.
* ``paper h``: 15,000 episodes at the run's episodes / flow wall rate (hours); ``paper h steady``: at the rate
  between the first batch's start and the last batch's end, i.e. without the fixed start-up and teardown, which a
  paper-scale run pays once.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAPER_EPISODES = 15_000
COSTS = ("plan_s", "load_s", "steps_s", "render_s", "write_s")


# ----------------------------------------------------------------------------------------------------------------
# Child: one flow run in EMBP_ROOT (set by the parent), result as JSON on the last line of stdout.


def child() -> None:
    import pandas as pd
    from prefect import flow

    from flows.muep_demos import muep_demos
    from tasks import paths
    from tasks.muep.demos import SPLITS
    from tasks.params import load_params

    @flow(name="bench-warm-up")
    def warm_up() -> None:
        """Starts Prefect's temporary server, so the timed call below does not include it."""

    warm_up()
    demos = load_params().muep.demos
    start, clock = time.perf_counter(), time.time()
    report = muep_demos()
    wall = time.perf_counter() - start
    spans = _batch_spans()
    index = pd.read_parquet(paths.MUEP_DATA / "demos" / "episodes.parquet")
    per_batch = index.groupby("batch")[list(COSTS)].sum().sum(axis=1).to_dict()
    order = sorted(per_batch, key=lambda b: (SPLITS.index(b.rsplit("-", 1)[0]), b))  # submission order
    print(json.dumps({
        "wall": wall, "workers": demos.workers, "task_runner": demos.task_runner, "batch_size": demos.batch_size,
        "attempted": int(len(index)), "ok": int(report["episodes"]),
        "costs": {c: float(index[c].sum()) for c in COSTS},
        "batch_costs": [float(per_batch[b]) for b in order],
        "startup": min((a for a, _ in spans), default=clock) - clock if spans else None,
        "teardown": clock + wall - max(b for _, b in spans) if spans else None,
    }))


def _batch_spans() -> list[tuple[float, float]]:
    """(start, end) epoch seconds of every rollout-batch task run, as Prefect's API recorded them."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs()
    return [(r.start_time.timestamp(), r.end_time.timestamp()) for r in runs
            if r.name.startswith("rollout-batch") and r.start_time and r.end_time]


# ----------------------------------------------------------------------------------------------------------------
# Parent


def _params(episodes: int, workers: int, runner: str) -> str:
    import yaml

    from tasks.params import deep_merge, read_yaml, validate

    overlay = {"muep": {"demos": {"episodes": episodes, "workers": workers, "task_runner": runner}}}
    params = deep_merge(read_yaml(REPO / "params.yaml"), overlay)
    validate(params, source=f"params.yaml + {overlay}")
    return yaml.safe_dump(params, sort_keys=False)


def _env(root: Path, prefect_home: Path) -> dict[str, str]:
    return os.environ | {"EMBP_ROOT": str(root), "PREFECT_HOME": str(prefect_home),
                         "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
                         "EMBP_LOG_LEVEL": "WARNING"}


def _prepare_inputs(tmp: Path) -> Path:
    """Stages 1-3 through their flows, in one process (one Prefect server), in a root of their own."""
    base = tmp / "inputs"
    base.mkdir()
    (base / "params.yaml").write_text(_params(1, 1, "sequential"))
    code = ("from flows.muep_metadata import muep_metadata; from flows.muep_generate import muep_generate; "
            "from flows.muep_filter import muep_filter; muep_metadata(); muep_generate(); muep_filter()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(base, tmp / "prefect-inputs"),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"stages 1-3 failed in {base} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return base / "data" / "muep"


def _run(episodes: int, workers: int, runner: str, tmp: Path, inputs: Path) -> dict:
    root = tmp / f"w{workers}"
    for sub in ("metadata", "filter"):
        shutil.copytree(inputs / sub, root / "data" / "muep" / sub)
    (root / "params.yaml").write_text(_params(episodes, workers, runner))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child"], cwd=REPO, env=_env(root, tmp / f"prefect-w{workers}"),
                          capture_output=True, text=True)
    process_wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"run with {workers} worker(s) failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall"] = process_wall
    return result


def ideal_wall(batch_costs: list[float], workers: int) -> float:
    """Makespan of the batches assigned in order to the first free worker (what a zero-overhead pool achieves)."""
    free = [0.0] * workers
    for cost in batch_costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def _s(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _format(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i != 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _steady_hours(r: dict) -> str:
    """Paper-scale hours at the rate between the first batch's start and the last one's end (no fixed costs)."""
    if r["startup"] is None or r["teardown"] is None:
        return "?"
    busy = r["wall"] - r["startup"] - r["teardown"]
    return f"{PAPER_EPISODES * busy / r['attempted'] / 3600:.2f}" if busy > 0 else "?"


def table(results: list[dict]) -> str:
    headers = ["workers", "runner", "episodes", "ok", "flow wall s", "ep/s", "sum costs s", "overhead", "ideal s",
               "ideal ovh", "startup s", "teardown s", "process s", "paper h", "paper h steady"]
    rows = []
    for r in results:
        total = sum(r["costs"].values())
        ideal = ideal_wall(r["batch_costs"], r["workers"])
        rate = r["attempted"] / r["wall"]
        rows.append([str(r["workers"]), r["task_runner"], str(r["attempted"]), str(r["ok"]), f"{r['wall']:.1f}",
                     f"{rate:.2f}", f"{total:.1f}", f"{r['wall'] * r['workers'] / total:.2f}", f"{ideal:.1f}",
                     f"{ideal * r['workers'] / total:.2f}", _s(r["startup"]), _s(r["teardown"]),
                     f"{r['process_wall']:.1f}", f"{PAPER_EPISODES / rate / 3600:.2f}", _steady_hours(r)])
    return _format(headers, rows)


def cost_table(results: list[dict]) -> str:
    headers = ["workers", "runner", *(f"{c.removesuffix('_s')} s/ep" for c in COSTS), "total s/ep"]
    rows = []
    for r in results:
        n, total = r["attempted"], sum(r["costs"].values())
        rows.append([str(r["workers"]), r["task_runner"],
                     *(f"{r['costs'][c] / n:.3f} ({100 * r['costs'][c] / total:.0f}%)" for c in COSTS),
                     f"{total / n:.3f}"])
    return _format(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48, help="episodes per run (muep.demos.episodes)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts, one run each")
    parser.add_argument("--task-runner", default="processes", choices=("processes", "dask", "sequential"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary roots")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    sys.path.insert(0, str(REPO))
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="embp-bench-demos-"))
    try:
        print("running stages 1-3 (metadata, generate, filter) once ...", file=sys.stderr)
        inputs = _prepare_inputs(tmp)
        results = []
        for w in workers:
            print(f"running {args.episodes} episodes with {w} worker(s) ({args.task_runner}) ...", file=sys.stderr)
            results.append(_run(args.episodes, w, args.task_runner, tmp, inputs))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(table(results))
    print()
    print("per-episode cost (mean over attempted episodes, share of the total)")
    print(cost_table(results))
    print()
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load} at the end, {time.strftime('%Y-%m-%d')}; overhead = flow wall x workers / sum of per-episode "
          f"costs (goal <= 1.25); paper h = {PAPER_EPISODES:,} episodes at this run's rate")


if __name__ == "__main__":
    main()
