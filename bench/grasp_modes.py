"""Grasping with contacts against the rigid grasp (issue #30, item 3): the Table I tasks with the template coder's
code and a slice of the object-shape study, run in-process on the sim under each ``grasp`` mode.

    python bench/grasp_modes.py --repeats 3 --shape-objects apple,red_mug,... [--studies pick_place,drawer] [--arm ur5]

Per Table I task: successes, statuses and the median wall time of one repeat; per shape-study object: its
category, shape (sphere / cylinder / box / container) and successes; per mode the totals by object class.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _run(runner, request: dict) -> dict:
    from robot.episode import parse_goal

    return runner.run(parse_goal(json.dumps(request)))


def table1(runner, tasks, codes: dict[str, str], repeats: int) -> dict:
    from dataclasses import asdict

    rows = {}
    for task in tasks:
        items = [{k: v for k, v in asdict(i).items() if v is not None} for i in task.evaluation]
        request = {"episode_id": task.id, "task_id": task.id, "world": task.world.to_json(), "code": codes[task.id],
                   "repeats": repeats, "evaluation": items, "pose_jitter_m": 0.005}
        result = _run(runner, request)
        reps = result["repeats"]
        rows[task.id] = {"success": sum(bool(r["success"]) for r in reps), "repeats": len(reps),
                         "statuses": sorted({r["status"] for r in reps}),
                         "failed_items": sorted({i["name"] if "name" in i else i.get("detail", "")[:60]
                                                 for r in reps for i in r["items"] if not i["ok"]}),
                         "median_s": round(statistics.median(r["wall_s"] for r in reps), 3)}
    return rows


def shape_slice(runner, objects: list[str], repeats: int, studies: list[str], mode: str) -> dict:
    from robot.backends.sim_scene import object_shape
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.eval import shapes
    from tasks.roboscript.params import RobotEvalParams, WorldsParams

    catalog = load_catalog()
    trials, _ = shapes.study_trials(catalog, WorldsParams(), objects, studies)
    ep = RobotEvalParams(repeats=repeats, grasp=mode)  # the goal names the mode: it overrides the runner's
    rows = {}
    for trial in trials:
        request = shapes.goal(trial, ep) | {"repeats": repeats}
        started = time.monotonic()
        result = _run(runner, request)
        model = trial.world.model(trial.asset)
        kind = "container" if model.kind == "container" else object_shape(model)
        rows[f"{trial.study}/{trial.asset}"] = {"category": model.category, "shape": kind,
                             "success": sum(bool(r["success"]) for r in result["repeats"]),
                             "repeats": len(result["repeats"]), "wall_s": round(time.monotonic() - started, 2)}
    return rows


def by_class(rows: dict) -> dict:
    out: dict[str, list[int]] = {}
    for key, row in rows.items():
        total = out.setdefault(f"{key.split('/')[0]}/{row['shape']}", [0, 0])
        total[0] += row["success"]
        total[1] += row["repeats"]
    return {k: f"{s}/{n}" for k, (s, n) in sorted(out.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="rigid,contact")
    parser.add_argument("--tasks", default="all", help="Table I task ids, comma-separated, or all; none skips")
    parser.add_argument("--shape-objects", default="", help="catalog assets of the shape-study slice")
    parser.add_argument("--studies", default="pick_place", help="shape-study studies: pick_place, drawer")
    parser.add_argument("--arm", default="panda")
    args = parser.parse_args()

    from bench.robot_runs import _benchmark_code
    from robot.backends.sim import SimBackend
    from robot.contract.catalog import load_catalog
    from robot.episode import EpisodeRunner
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    tasks = [t for t in load_benchmark(load_catalog(), WorldsParams()) if t.id[:1] in "SMH"]
    if args.tasks != "all":
        tasks = [t for t in tasks if t.id in args.tasks.split(",")]
    codes = _benchmark_code(tasks) if tasks else {}
    out = {}
    for mode in args.modes.split(","):
        runner = EpisodeRunner(SimBackend(arm=args.arm, grasp=mode), "bench")
        entry = {"table1": table1(runner, tasks, codes, args.repeats)}
        if args.shape_objects:
            entry["shapes"] = shape_slice(runner, args.shape_objects.split(","), args.repeats,
                                          args.studies.split(","), mode)
            entry["shapes_by_class"] = by_class(entry["shapes"])
        runner.backend.close()
        out[mode] = entry
        print(json.dumps({mode: entry}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
