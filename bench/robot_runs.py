"""Benchmark of the robot side: sandbox cost per repeat, sim episode wall time per task, pool throughput with 1 and 2
runners, ROS overhead.

    python bench/robot_runs.py                    # all four parts
    python bench/robot_runs.py --repeats 5 --goals 8 --pings 30 --sandbox-runs 30
    python bench/robot_runs.py --only sandbox,episodes

0. **sandbox cost per repeat** (no robot): ``robot.sandbox.run_code`` against a stand-in for the tools -- the
   sandbox's start (once per runner), then ``--sandbox-runs`` repeats each of a trivial snippet, 20 tool calls and
   the few-shot example with the most tool calls; median and 90th percentile of the whole repeat (check, compile,
   child, every call's round trip, the verdict). The same function runs against any version of robot/sandbox
   (its public API is ``prepare`` and ``run_code``), so checking out an older commit measures the old sandbox.

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


TRIVIAL = "x = 1"
CALLS = "for i in range(20):\n    p = get_object_center_position('apple')\n"


class _Tools:
    """Every tool answers at once with a plausible value: what is left is the sandbox's own cost."""

    def __init__(self):
        import numpy as np

        from robot.contract.tool_api import TOOL_SPECS, Pose

        self.notes: list[str] = []
        pose = Pose((0.4, 0.0, 0.9), (1.0, 0.0, 0.0, 0.0))
        answers = {"get_object_name_list": ["apple", "white_plate"], "get_3d_bbox": np.zeros(6),
                   "get_object_joint_info": {"joint_position": np.zeros(3), "joint_axis": np.array([-1.0, 0, 0]),
                                             "type": "prismatic"},
                   "generate_arc_path_around_joint": [pose] * 10}
        for name, spec in TOOL_SPECS.items():
            value = answers.get(name, pose if spec.returns == "Pose" else np.array([0.4, 0.0, 0.8])
                                if "ndarray" in spec.returns else None)
            setattr(self, name, lambda *a, _v=value, **k: _v)


def sandbox_costs(runs: int) -> list[dict]:
    from robot import sandbox
    from tasks.roboscript.code_prompts import load_examples

    started = time.perf_counter()
    sandbox.prepare()
    host_for = getattr(sandbox, "host_for", None)  # absent in the sandbox before issue #14
    mode = host_for().mode if host_for else "none (multiprocessing fork server)"
    rows = [{"what": "start (once per runner)", "median_ms": round(1000 * (time.perf_counter() - started), 1),
             "p90_ms": "", "isolation": mode}]
    longest = max((e.assembled() for e in load_examples()), key=lambda c: c.count("("))
    for name, code in (("x = 1", TRIVIAL), ("20 tool calls", CALLS), ("the largest few-shot example", longest)):
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            outcome = sandbox.run_code(code, _Tools(), sandbox.Limits(timeout_s=30))
            times.append(1000 * (time.perf_counter() - t))
            assert outcome.status == "ok", outcome
        times.sort()
        rows.append({"what": f"{name} ({outcome.steps} calls)", "median_ms": round(statistics.median(times), 1),
                     "p90_ms": round(times[int(0.9 * (runs - 1))], 1), "isolation": mode})
    return rows


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
    parser.add_argument("--sandbox-runs", type=int, default=30, help="repeats per snippet in part 0")
    parser.add_argument("--only", default="sandbox,episodes,pool",
                        help="comma-separated parts: sandbox (0), episodes (1), pool (2 and 3)")
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    tasks = load_benchmark(load_catalog(), WorldsParams())
    codes = _benchmark_code(tasks)
    print(f"# robot benchmark -- {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}\n")
    if "sandbox" in parts:
        print(f"## 0. sandbox cost per repeat ({args.sandbox_runs} repeats each, tools answer at once)\n")
        print(_table(sandbox_costs(args.sandbox_runs)) + "\n")
    if "episodes" in parts:
        rows = episode_times(tasks, codes, args.repeats)
        print(f"## 1. sim episode wall time per task ({args.repeats} repeats each, in-process, no ROS)\n")
        print(_table(rows) + "\n")
    if "pool" not in parts:
        return 0
    simple_0 = next(t for t in tasks if t.id == "Simple_0")
    throughput, overhead = pool_parts(simple_0, codes["Simple_0"], args.goals, args.pings)
    print("## 2. pool throughput (Simple_0, 2 repeats per goal)\n")
    print(_table(throughput) + "\n")
    print("## 3. ROS round trip per goal (one repeat of `x = 1`)\n")
    print(_table([overhead]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
