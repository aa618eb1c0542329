"""bench/muep_demos.py's paper-scale sample (issue #19 item 3): which scene instances it runs, and how its
per-episode cost is compared with a kept full run's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_muep_demos", REPO / "bench" / "muep_demos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _episodes() -> tuple[pd.DataFrame, dict[str, float]]:
    """Two room types; 12 kitchen floorplans x 3 instances (cost grows with the receptacles), 6 bathroom floorplans
    x 2; each instance holds 10 episodes (kitchens) or 5 (bathrooms)."""
    rows, size = [], {}
    for room, floorplans, instances, per in (("kitchen", range(1, 13), 3, 10), ("bathroom", range(401, 407), 2, 5)):
        for fp in floorplans:
            for k in range(instances):
                scene = f"FloorPlan{fp}" + (f"-{k}" if k else "")
                size[scene] = float(fp % 100)
                rows += [{"scene": scene, "room_type": room, "episode_id": f"{scene}/{i}",
                          "cost": 0.01 * (fp % 100)} for i in range(per)]
    return pd.DataFrame(rows), size


def test_floorplan_order_sorts_by_number_then_instance(bench):
    names = ["FloorPlan10", "FloorPlan2-1", "FloorPlan1-2", "FloorPlan2", "FloorPlan1"]
    assert sorted(names, key=bench.floorplan_order) == ["FloorPlan1", "FloorPlan1-2", "FloorPlan2", "FloorPlan2-1",
                                                        "FloorPlan10"]


def test_sample_keeps_room_shares_and_spreads_over_distinct_floorplans(bench):
    episodes, size = _episodes()
    picked = bench.stratified_instances(episodes, 8, ["room_type"], size)
    sample = episodes[episodes.scene.isin(picked)]
    kitchens = sample[sample.room_type == "kitchen"]
    # every room type is in, in about its share of the episodes (kitchens: 360 of 420)
    assert set(sample.room_type) == {"kitchen", "bathroom"}
    assert abs((sample.room_type == "kitchen").mean() - 360 / 420) < 0.1
    # no floorplan twice while there are more floorplans than picks: repeating one would weigh it twice
    floorplans = [bench.floorplan_order(s)[0] for s in kitchens.scene.unique()]
    assert len(floorplans) == len(set(floorplans)) >= 2
    # systematic sampling over the size proxy: the picks span the cheap and the dear floorplans
    assert min(floorplans) <= 3 and max(floorplans) >= 10
    assert abs(sample.cost.mean() / episodes.cost.mean() - 1) < 0.15


def test_sample_without_size_falls_back_to_floorplan_order(bench):
    episodes, _ = _episodes()
    picked = bench.stratified_instances(episodes, 8, ["room_type"])
    kitchens = [bench.floorplan_order(s)[0] for s in picked if bench.floorplan_order(s)[0] < 100]
    assert len(kitchens) == len(set(kitchens))  # name order alone used to pick FloorPlan1 and FloorPlan1-2 both


def _kept_run(root: Path, episodes: pd.DataFrame, scale: float = 1.0) -> Path:
    facts = {"batches": {"b0": {e: {c: (cost * scale if c == "load_s" else 0.0) for c in
                                    ("plan_s", "load_s", "steps_s", "render_s", "write_s")}
                                for e, cost in zip(episodes.episode_id, episodes.cost, strict=True)}}}
    (root / "reports" / "timings").mkdir(parents=True)
    (root / "reports" / "timings" / "muep-demos.json").write_text(json.dumps(facts))
    (root / "data" / "muep" / "demos").mkdir(parents=True)
    episodes[["episode_id", "room_type"]].to_parquet(root / "data" / "muep" / "demos" / "episodes.parquet")
    return root


def test_against_a_full_run_splits_the_error_into_selection_and_machine(bench, tmp_path):
    episodes, _ = _episodes()
    run = _kept_run(tmp_path, episodes)
    sample = episodes[episodes.scene.isin(["FloorPlan12", "FloorPlan406"])]  # dear kitchen: the selection is off
    result = {"workers": 2, "episode_costs": {e: 0.8 * c for e, c in zip(sample.episode_id, sample.cost,
                                                                            strict=True)}}  # a 20 % faster machine
    text = bench.against_table([result], run)
    full_mean, same_mean = episodes.cost.mean(), sample.cost.mean()
    assert f"{full_mean:.3f}" in text and f"{same_mean:.3f}" in text and f"{0.8 * same_mean:.3f}" in text
    assert f"{100 * (same_mean / full_mean - 1):+.1f}% from which episodes it holds" in text
    assert "-20.0% from this machine" in text
    within = "within" if abs(0.8 * same_mean / full_mean - 1) <= 0.2 else "outside"
    assert f"({within} the 20% asked)" in text


def test_against_names_a_missing_run_file(bench, tmp_path):
    with pytest.raises(SystemExit, match="muep-demos.json does not exist"):
        bench.full_run_costs(tmp_path)
