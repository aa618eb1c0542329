"""Benchmark of the perception pipeline: the time of ``detect_objects`` per call, stage by stage, and its error against
the simulator's ground truth.

    python bench/perception.py                    # every Table I world + the drawer-study world, 3 calls each
    python bench/perception.py --calls 5 --voxel 0.006 --width 640 --height 480

1. **time per call** (median over ``--calls`` calls after one warm-up, in-process, no ROS): capture (rendering the k
   views), 2-D grounding, TSDF fusion (integration, point-cloud extraction, self filter, support plane), cross-view
   matching, 3-D instance segmentation, planning-scene occupancy, and the perceived mode's refinements (handles,
   drawers, cabinet carcass, joints) -- for all of the world's objects at once, as ``detect_objects()`` does.
2. **error against ground truth** per world: objects found of those asked, mean and minimum 3-D box IoU, median and
   largest box-corner error, and the same for cabinet handles (what a drawer grasp closes on); drawers and doors
   are left out: a closed drawer shows only its front, whatever the pipeline.
3. **episode cost**: the verified Simple_0 snippet, ``--repeats`` repeats on the ground-truth mode and on the pipeline
   (no GT), median repeat wall time and success.

Reads nothing from the repository's data/ and writes nothing; prints tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STAGES = ("capture", "ground", "fuse", "match", "segment", "scene")


def _iou(a, b) -> float:
    lo, hi = np.maximum(a[:3], b[:3]), np.minimum(a[3:], b[3:])
    inter = float(np.prod(np.clip(hi - lo, 0.0, None)))
    return inter / (float(np.prod(a[3:] - a[:3])) + float(np.prod(b[3:] - b[:3])) - inter)


def worlds():
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.eval import shapes
    from tasks.roboscript.params import WorldsParams

    catalog = load_catalog()
    out = {t.id: t.world for t in load_benchmark(catalog, WorldsParams())}
    out["drawer_study"] = shapes.drawer_trial(catalog["gelatin_box"], catalog[shapes.CABINET_ASSET],
                                              WorldsParams()).world
    return out


def pipeline_rows(params, calls: int) -> list[dict]:
    """``detect_objects()`` of the perceived mode (pipeline + its refinements: handles off their fronts, drawers
    apart, the cabinet without its parts, joints) on every world."""
    from robot.backends import create_backend
    from robot.contract.params import NoiseParams
    from robot.perception import create_perception

    sim = create_backend("sim")
    rows = []
    for world_id, world in worlds().items():
        sim.load_world(world)
        sim.reset(0)
        perception = create_perception("perceived", sim, NoiseParams(), 0, params)
        perception.detect(None)  # warm-up: imports, first allocations
        timings, walls = [], []
        for _ in range(calls):
            started = time.perf_counter()
            perception.detect(None)
            walls.append(time.perf_counter() - started)
            timings.append(perception.last.timings)
        row = {"world": world_id, **{s: statistics.median(t[s] for t in timings) for s in STAGES}}
        row["refine"] = max(0.0, statistics.median(walls) - sum(row[s] for s in STAGES))
        row["total"] = statistics.median(walls)
        row |= {"points": len(perception.last.reconstruction.points),
                "scene_boxes": perception.last.scene.boxes if perception.last.scene else 0}
        names = [n for n in sim.model_names() if n != "table"]
        judged = [n for n in names if not n.startswith("cabinet")]
        handles = [n for n in names if ".handle_" in n]
        for group, members in (("obj", judged), ("handle", handles)):
            found = [n for n in members if n in perception.instances]
            ious = [_iou(sim.model_box(n), perception.box(n)) for n in found]
            errs = [float(np.abs(perception.box(n) - sim.model_box(n)).max()) for n in found]
            row |= {f"{group}_found": f"{len(found)}/{len(members)}",
                    f"{group}_iou": statistics.mean(ious) if ious else None,
                    f"{group}_iou_min": min(ious, default=None),
                    f"{group}_err_med": statistics.median(errs) if errs else None,
                    f"{group}_err_max": max(errs, default=None)}
        rows.append(row)
    sim.close()
    return rows


def episode_rows(repeats: int) -> list[dict]:
    from robot.backends import create_backend
    from robot.contract.catalog import load_catalog
    from robot.episode import EpisodeRunner, parse_goal
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from robot_goals import SIMPLE_0, request

    task = {t.id: t for t in load_benchmark(load_catalog(), WorldsParams())}["Simple_0"]
    runner = EpisodeRunner(create_backend("sim"), "bench")
    rows = []
    for mode in ("ground_truth", "perceived"):
        goal = parse_goal(json.dumps(request(task, SIMPLE_0, repeats, perception=mode)))
        result = runner.run(goal)
        walls = [r["wall_s"] for r in result["repeats"]]
        perception = [(r.get("perception") or {}).get("wall_s", 0.0) for r in result["repeats"]]
        rows.append({"mode": mode, "repeats": repeats, "success": sum(bool(r["success"]) for r in result["repeats"]),
                     "repeat_s": statistics.median(walls), "perception_s": statistics.median(perception)})
    runner.backend.close()
    return rows


def _fmt(value, digits=3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(rows: list[dict], columns: list[tuple[str, str, int]]) -> str:
    head = [title for title, _, _ in columns]
    body = [[_fmt(r[key], d) for _, key, d in columns] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--voxel", type=float, default=None, help="fusion.voxel_m (trunc_m follows at 4 voxels)")
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--height", type=int, default=None)
    parser.add_argument("--no-episodes", action="store_true")
    args = parser.parse_args(argv)
    from robot.contract.params import PipelineParams

    update: dict = {}
    if args.voxel:
        update["fusion"] = {"voxel_m": args.voxel, "trunc_m": 4 * args.voxel}
    if args.width or args.height:
        update["cameras"] = {k: v for k, v in (("width", args.width), ("height", args.height)) if v}
    params = PipelineParams.model_validate(update)
    rig = params.cameras
    print(f"# perception pipeline: {len(rig.cameras)} cameras {rig.width}x{rig.height}, voxel "
          f"{params.fusion.voxel_m * 1000:.0f} mm, grounding {params.grounding.backend}; {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d')}\n")
    rows = pipeline_rows(params, args.calls)
    print("time per detect_objects call (s, median of", args.calls, "calls)")
    print(table(rows, [("world", "world", 0), *((s, s, 3) for s in STAGES), ("refine", "refine", 3),
                       ("total", "total", 3),
                       ("points", "points", 0), ("scene boxes", "scene_boxes", 0)]))
    print("\nerror against ground truth (box IoU; corner error in m)")
    print(table(rows, [("world", "world", 0), ("objects", "obj_found", 0), ("IoU", "obj_iou", 2),
                       ("IoU min", "obj_iou_min", 2), ("err med", "obj_err_med", 3), ("err max", "obj_err_max", 3),
                       ("handles", "handle_found", 0), ("h IoU", "handle_iou", 2), ("h err med", "handle_err_med", 3),
                       ("h err max", "handle_err_max", 3)]))
    if not args.no_episodes:
        print("\nSimple_0 episode (verified snippet), ground truth vs the pipeline (no GT)")
        print(table(episode_rows(args.repeats), [("mode", "mode", 0), ("repeats", "repeats", 0),
                                                 ("success", "success", 0), ("repeat s", "repeat_s", 2),
                                                 ("perception s", "perception_s", 2)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
