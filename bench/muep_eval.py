"""Benchmark of the MuEP evaluation: episodes per second of the harness for ``oracle`` and ``random`` with 1 and 2
worker processes, and the MLflow logging cost of one run (one agent x split).

    python bench/muep_eval.py                       # 4 episodes per test split, the repository's data
    python bench/muep_eval.py --episodes 0          # every test episode (the default evaluation)
    EMBP_ROOT=/some/root python bench/muep_eval.py  # the data of another repository root

What one row measures:

* ``harness``: the batches of one agent played by a ``ProcessPoolExecutor`` of N workers (one game per process,
  as the flow's ``processes`` task runner does), without Prefect. The pool is started and warmed up (imports,
  TextWorld, the scene tables) before the clock starts, so the row is game loading + stepping + the agent.
  ``episodes/s`` = episodes / wall; ``steps/s`` = actions sent to the game / wall.
* ``mlflow``: :func:`tasks.muep.eval.runs.log_run` into a fresh sqlite store in a temporary directory -- create the
  run, one ``log_batch`` (params, tags, every metric), the trajectories artifact, terminate. The first run (which
  also creates the database and the experiment) is reported apart; then the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks import paths  # noqa: E402
from tasks.muep import layout


def _warm(metadata_dir: str) -> int:
    from tasks.muep.demos import _tables
    from tasks.muep.eval import harness  # noqa: F401

    _tables(metadata_dir)
    return os.getpid()


def _play(batch, settings):
    from tasks.muep.eval.harness import run_batch

    return run_batch(batch, settings)


def bench_harness(agent: str, workers: int, specs, batch_size: int):
    from tasks.muep.eval.agents import describe
    from tasks.muep.eval.episodes import make_batches
    from tasks.muep.eval.harness import EvalSettings
    from tasks.params import EvalParams

    params = EvalParams()
    settings = EvalSettings(metadata_dir=str(layout.METADATA), params=params)
    batches = make_batches(specs, [(agent, describe(agent, params).label)], batch_size)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_warm, [settings.metadata_dir] * workers * 2))
        start = time.perf_counter()
        results = [r for rs in pool.map(_play, batches, [settings] * len(batches)) for r in rs]
        wall = time.perf_counter() - start
    return wall, results


def bench_mlflow(results, repeat: int) -> tuple[float, float, int]:
    import json

    from tasks.muep.eval.runs import log_run, metric_values, split_tallies
    from tasks.params import TrackingParams

    with tempfile.TemporaryDirectory(prefix="embp-bench-mlflow-") as tmp:
        tmp = Path(tmp)
        trajectories = tmp / "trajectories.jsonl"
        trajectories.write_text("".join(json.dumps(r.to_json()) + "\n" for r in results))
        start = time.perf_counter()
        tracking = TrackingParams(uri=f"sqlite:///{tmp / 'mlflow.db'}", experiment_prefix="bench")
        params = {"agent": "bench", "split": "seen_test", "dataset_version": "x"}
        tags = {"stage": "muep-eval", "agent": "bench", "split": "seen_test"}
        _, took = log_run(tracking, "bench", "seen_test", params, tags, results, trajectories)
        first = time.perf_counter() - start
        times = [log_run(tracking, "bench", "seen_test", params, tags, results, trajectories)[1]
                 for _ in range(repeat)]
    return first, statistics.median(times), len(metric_values(*split_tallies(results)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per test split; 0 = all (default 4)")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="MLflow runs logged for the median (default 5)")
    args = parser.parse_args()

    from tasks.muep.demo_reader import read_index
    from tasks.muep.eval.episodes import select

    specs = select(read_index(layout.DEMOS), ["seen_test", "unseen_test"], args.episodes or None, 0)
    print(f"# muep-eval benchmark: {len(specs)} episodes ({paths.rel(layout.DATA / 'demos')}), "
          f"{os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| what | agent | workers | episodes | steps | wall s | episodes/s | steps/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    kept = {}
    for agent in ("oracle", "random"):
        for workers in (1, 2):
            wall, results = bench_harness(agent, workers, specs, args.batch_size)
            steps = sum(len(r.steps) for r in results)
            kept[agent] = results
            print(f"| harness | {agent} | {workers} | {len(results)} | {steps} | {wall:.1f} | "
                  f"{len(results) / wall:.2f} | {steps / wall:.1f} |", flush=True)
    print("\n| what | results logged | metrics per run | first run s (creates the store) | median run s |")
    print("| --- | --- | --- | --- | --- |")
    for agent, results in kept.items():
        first, median, n_metrics = bench_mlflow(results, args.repeat)
        print(f"| mlflow log_run ({agent}) | {len(results)} episodes | {n_metrics} | {first:.2f} | {median:.3f} |")


if __name__ == "__main__":
    main()
