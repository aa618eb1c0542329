"""Benchmark of the robot side: sim episode wall time per task, pool throughput with 1 and 2 runners, ROS overhead.

    python bench/robot_runs.py                    # all three parts
    python bench/robot_runs.py --repeats 5 --goals 8 --pings 30

1. **episode wall time per task** (no ROS): the eight Table I tasks' code from the offline code generator (noise 0)
   run by an in-process :class:`~robot.episode.EpisodeRunner` on the sim backend, ``--repeats`` repeats each; the
   median wall time of one repeat (reset, sandboxed code, every tool, final state and item checks).
2. **episodes per minute** with a pool of 1 and of 2 runners: ``--goals`` Simple_0 goals of 2 repeats each through
   :class:`~robot.client.RunnerPool` over a local master and runner processes (the same master for both pool sizes:
   rospy allows one master per process); episodes (= repeats) per minute of wall time.
3. **ROS round-trip overhead per goal**: ``--pings`` trivial goals (one repeat of ``x = 1``) to one runner; the
   client's round trip minus the runner's own ``wall_s`` for the goal (median and 90th percentile).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _benchmark_code(tasks) -> dict[str, str]:
    from tasks.llm import build_client
    from tasks.params import LLMParams
    from tasks.roboscript.code_prompts import task_query
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator
    from tasks.roboscript.params import CodegenParams

    llm = LLMParams(offline={"noise": 0.0})
    generator = HierarchicalGenerator(build_client(llm, None), llm, CodegenParams())
    jobs = [CodeJob(t.id, t.id, t.instruction, task_query(t.world.object_names(), t.instruction)) for t in tasks]
    return {s.job.query_id: s.assembled() for s in generator.generate(jobs)}


def _request(task, code: str, repeats: int) -> dict:
    items = [{k: v for k, v in asdict(i).items() if v is not None} for i in task.evaluation]
    return {"episode_id": task.id, "task_id": task.id, "world": task.world.to_json(), "code": code,
            "repeats": repeats, "evaluation": items, "pose_jitter_m": 0.005}


def episode_times(tasks, codes, repeats: int) -> list[dict]:
    from robot.backends import create_backend
    from robot.episode import EpisodeRunner, parse_goal

    runner = EpisodeRunner(create_backend("sim"), "bench")
    rows = []
    for task in tasks:
        result = runner.run(parse_goal(json.dumps(_request(task, codes[task.id], repeats))))
        walls = [r["wall_s"] for r in result["repeats"]]
        statuses = sorted({r["status"] for r in result["repeats"]})
        rows.append({"task": task.id, "median_s": round(statistics.median(walls), 3), "max_s": round(max(walls), 3),
                     "success": sum(bool(r["success"]) for r in result["repeats"]), "repeats": repeats,
                     "statuses": ",".join(statuses)})
    runner.backend.close()
    return rows


def pool_parts(task, code: str, goals: int, pings: int) -> tuple[list[dict], dict]:
    from robot.client import RunnerClient, RunnerPool, ensure_node, run_many
    from robot.pool import LocalPool

    throughput = []
    with LocalPool(2, log_dir=Path(tempfile.mkdtemp(prefix="embp-bench-"))) as local:
        ensure_node(local.master_uri)
        for size in (1, 2):
            pool = RunnerPool(local.namespaces[:size], alive=local.alive)
            run_many(pool, [_request(task, code, 1)] * size)  # warm-up: world loaded on each runner
            started = time.monotonic()
            results = run_many(pool, [_request(task, code, 2) | {"episode_id": f"g{i}"} for i in range(goals)])
            wall = time.monotonic() - started
            episodes = sum(len(r["repeats"]) for r in results)
            throughput.append({"runners": size, "goals": goals, "episodes": episodes, "wall_s": round(wall, 2),
                               "episodes_per_min": round(60 * episodes / wall, 1),
                               "ok": sum(r["ok"] for r in results)})
        client = RunnerClient(local.namespaces[0], alive=lambda: local.alive(local.namespaces[0]))
        client.wait_ready(30)
        ping = _request(task, "x = 1", 1) | {"evaluation": []}
        client.run(ping)
        overheads, round_trips = [], []
        for _ in range(pings):
            started = time.monotonic()
            result = client.run(ping)
            trip = time.monotonic() - started
            round_trips.append(trip)
            overheads.append(trip - result["wall_s"])
    overheads.sort()
    return throughput, {"pings": pings, "round_trip_median_ms": round(1000 * statistics.median(round_trips), 1),
                        "overhead_median_ms": round(1000 * statistics.median(overheads), 1),
                        "overhead_p90_ms": round(1000 * overheads[int(0.9 * (len(overheads) - 1))], 1)}


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "| " + " | ".join("---" for _ in keys) + " |"]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="repeats per task in part 1")
    parser.add_argument("--goals", type=int, default=8, help="goals (2 repeats each) per pool size in part 2")
    parser.add_argument("--pings", type=int, default=30, help="trivial goals in part 3")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    tasks = load_benchmark(load_catalog(), WorldsParams())
    codes = _benchmark_code(tasks)
    print(f"# robot benchmark -- {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}\n")
    rows = episode_times(tasks, codes, args.repeats)
    print(f"## 1. sim episode wall time per task ({args.repeats} repeats each, in-process, no ROS)\n")
    print(_table(rows) + "\n")
    simple_0 = next(t for t in tasks if t.id == "Simple_0")
    throughput, overhead = pool_parts(simple_0, codes["Simple_0"], args.goals, args.pings)
    print("## 2. pool throughput (Simple_0, 2 repeats per goal)\n")
    print(_table(throughput) + "\n")
    print("## 3. ROS round trip per goal (one repeat of `x = 1`)\n")
    print(_table([overhead]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
