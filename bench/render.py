"""Benchmark of the ``schematic`` renderer: milliseconds per step with and without the per-scene background cache.

    python bench/render.py                                  # FloorPlan 1, 30, 201, 301, 401 at 320x320
    python bench/render.py --size 640 --floorplans 1 30 --steps 100

For each floorplan a synthetic episode is replayed (deterministic, built from the scene's own metadata): go to each
receptacle in turn, open it if it opens, take the first object there, close it, ... -- the kinds of state change a
demonstration has. Each step is one ``render(layout, state)`` call, PNG encoding included; the clock does not include
building the states.

* ``cached``: ``begin_scene`` once (its time is the ``begin ms`` column), then every step copies the background and
  draws the dynamic parts.
* ``uncached``: ``cache_background=False``; every step recomputes the geometry and redraws the background.

``ms/step`` is the median over the episode's steps (``p95`` its 95th percentile); ``PNG bytes`` the mean size.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.muep.alfworld_data import read_scene  # noqa: E402
from tasks.muep.metadata import collect_scene  # noqa: E402
from tasks.muep.render import build_renderer  # noqa: E402
from tasks.muep.render.layout import layout_from_metadata  # noqa: E402
from tasks.muep.world_state import WorldState  # noqa: E402
from tasks.params import MetadataParams, SceneParams  # noqa: E402


def episode(meta, layout, steps: int) -> list[WorldState]:
    state = WorldState(agent_at=None, holding=None, placements={i.name: i.parent for i in meta.instances},
                       step=0, last_action=None)
    out = [state]
    marks = ("hot", "cool", "clean", "sliced")
    for k, r in enumerate(layout.receptacles):
        def step(action: str, **changes) -> None:
            nonlocal state
            state = replace(state, step=state.step + 1, last_action=action, **changes)
            out.append(state)

        step(f"go to {r.name}", agent_at=r.name)
        if r.openable:
            step(f"open {r.name}", opened=state.opened | {r.name})
        here = sorted(o for o, p in state.placements.items() if p == r.name)
        if state.holding is None and here:
            placements = dict(state.placements)
            placements.pop(here[0])
            step(f"take {here[0]} from {r.name}", holding=here[0], placements=placements)
        elif state.holding is not None:
            mark = marks[k % len(marks)]
            held = state.holding
            step(f"put {held} in/on {r.name}", holding=None, placements={**state.placements, held: r.name},
                 **{mark: getattr(state, mark) | {held}})
        if r.openable:
            step(f"close {r.name}", opened=state.opened - {r.name})
        if len(out) >= steps:
            break
    return out[:steps]


def measure(renderer, layout, states) -> tuple[float, list[float], list[int]]:
    t0 = time.perf_counter()
    renderer.begin_scene(layout)
    begin_ms = (time.perf_counter() - t0) * 1000
    times, sizes = [], []
    for state in states:
        t = time.perf_counter()
        png = renderer.render(layout, state)
        times.append((time.perf_counter() - t) * 1000)
        sizes.append(len(png))
    return begin_ms, times, sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--floorplans", type=int, nargs="+", default=[1, 30, 201, 301, 401])
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--steps", type=int, default=60, help="steps per episode (default 60)")
    args = ap.parse_args()

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"schematic renderer, {args.size}x{args.size}, {args.steps} steps per scene; "
          f"{platform.python_implementation()} {platform.python_version()}, {cores} cores")
    header = f"{'scene':<13}{'receptacles':>12}{'mode':>10}{'begin ms':>10}{'ms/step':>9}{'p95':>7}{'PNG bytes':>11}"
    print(header)
    print("-" * len(header))
    totals: dict[str, list[float]] = {"cached": [], "uncached": []}
    for n in args.floorplans:
        meta = collect_scene(n, SceneParams(floorplans=[n]), MetadataParams())
        layout = layout_from_metadata(meta, read_scene(n).grid)
        states = episode(meta, layout, args.steps)
        for mode in ("cached", "uncached"):
            r = build_renderer("schematic", size=args.size, cache_background=mode == "cached")
            begin_ms, times, sizes = measure(r, layout, states)
            r.close()
            totals[mode] += times
            p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
            begin = f"{begin_ms:.1f}" if mode == "cached" else "-"
            print(f"{layout.scene:<13}{len(layout.receptacles):>12}{mode:>10}{begin:>10}"
                  f"{statistics.median(times):>9.2f}{p95:>7.1f}{round(statistics.mean(sizes)):>11}")
    print("-" * len(header))
    for mode, times in totals.items():
        print(f"{'all':<13}{'':>12}{mode:>10}{'':>10}{statistics.median(times):>9.2f}")


if __name__ == "__main__":
    main()
