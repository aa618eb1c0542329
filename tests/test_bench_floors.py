"""bench/floors.py (issue #32 item 1): the floor of a stage's unit composed from its primitives, a kept run's cost per
unit read from its run facts and outputs, and the table, on a synthetic run folder; and the script's own functions
on a tiny real sample (no timing is judged)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def floors():
    spec = importlib.util.spec_from_file_location("bench_floors", REPO / "bench" / "floors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _prim(floors, name: str, low: float):
    p = floors.Primitive(name)
    p.add([low, low * 3, low * 2])          # min low, median 2 x low
    return p


DEMO_PRIMS = {"FF plan": 0.01, "translation (scene instance)": 0.2, "game load (translated)": 0.02,
              "TextWorld step": 0.004, "render": 0.003}


def _demos_floor(floors):
    sf = floors.StageFloor("muep-demos", units=2, cost_s=0.6)
    sf.prims = {n: _prim(floors, n, v) for n, v in DEMO_PRIMS.items()}
    # the sample's counts: the run's must replace them where the run tells them
    sf.counts = {"FF plan": 1.0, "translation (scene instance)": 1.0, "game load (translated)": 1.0,
                 "TextWorld step": 10.0, "render": 11.0}
    sf.parts = {"plan": 0.01, "load": 0.2, "steps": 0.05, "render": 0.04}
    sf.part_prims = {"plan": ["FF plan"], "load": ["translation (scene instance)", "game load (translated)"],
                     "steps": ["TextWorld step"], "render": ["render"]}
    return sf


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    timings = run / "reports" / "timings"
    timings.mkdir(parents=True)
    shutil.copy(REPO / "params.yaml", run / "params.yaml")   # muep.demos.workers: 2
    cost = {"plan_s": 0.01, "load_s": 0.1, "steps_s": 0.02, "render_s": 0.02, "write_s": 0.001}
    batches = {"b0": {"e1": cost, "e2": cost}, "b1": {"e3": cost}, "b2": {"e4": cost}}
    (timings / "muep-demos.json").write_text(json.dumps({
        "stage": "muep-demos", "wall_s": 10.0, "batches": batches,
        "totals": {k: 4 * v for k, v in cost.items()}}))
    demos = run / "data" / "muep" / "demos"
    demos.mkdir(parents=True)
    pd.DataFrame({"scene": ["A", "A", "B", "B"], "status": ["ok", "ok", "ok", "not_posable"],
                  "plan_length": [3, 5, 4, 0]}).to_parquet(demos / "episodes.parquet")
    goals = run / "data" / "cache" / "roboscript-goals" / "roboscript-shapes"
    goals.mkdir(parents=True)
    repeat = {"calls": [{"tool": "grasp"}, {"tool": "open_gripper"}, {"tool": "move_to_pose"}], "perception": {}}
    for key in ("pick_place/apple", "drawer/apple"):
        (goals / f"{key.replace('/', '_')}.json").write_text(json.dumps(
            {"key": key, "result": {"ok": True, "repeats": [repeat, repeat]}}))
    (timings / "roboscript-shapes.json").write_text(json.dumps(
        {"stage": "roboscript-shapes", "wall_s": 8.0, "pool": {"runners": ["/r1", "/r2"]}}))
    return run


def test_a_floor_is_counts_times_primitive_minima(floors):
    sf = _demos_floor(floors)
    shares = floors.compose(sf.counts, sf.prims)
    assert shares["TextWorld step"] == pytest.approx(10 * 0.004)
    assert sum(shares.values()) == pytest.approx(0.01 + 0.2 + 0.02 + 0.04 + 0.033)
    assert sum(floors.compose(sf.counts, sf.prims, "median_s").values()) == pytest.approx(2 * 0.303)


def test_a_count_without_its_primitive_is_refused(floors):
    sf = _demos_floor(floors)
    del sf.prims["render"]
    with pytest.raises(ValueError, match="render"):
        floors.compose(sf.counts, sf.prims)


def test_an_unknown_part_is_named_before_any_work(floors, capsys):
    with pytest.raises(SystemExit):
        floors.main(["--only", "muep-demos"])
    assert "--only muep-demos: muep-demos is not one of" in capsys.readouterr().err


def test_the_run_cost_per_unit_and_its_counts(floors, tmp_path):
    run = _run_folder(tmp_path)
    params = floors.load_bench_params(tmp_path, None, run)
    sf = _demos_floor(floors)
    got = floors.run_stage(run, "muep-demos", params, sf)
    assert (got["units"], got["workers"]) == (4, 2)
    assert got["cost"] == pytest.approx(10.0 * 2 / 4)
    assert got["parts"]["load"] == pytest.approx(0.1)
    assert got["counts"] == pytest.approx({"translation (scene instance)": 0.5, "game load (translated)": 0.75,
                                           "TextWorld step": 3.0, "render": 3.75, "FF plan": 0.75})
    robot = floors.StageFloor("roboscript-shapes")
    shapes = floors.run_stage(run, "roboscript-shapes", params, robot)
    assert (shapes["units"], shapes["workers"], shapes["cost"]) == (4, 2, pytest.approx(8.0 * 2 / 4))
    assert shapes["counts"]["tool call"] == pytest.approx(3.0)
    assert floors.run_stage(run, "muep-eval", params, floors.StageFloor("muep-eval")) is None   # not in the run


def test_a_perception_goal_s_variants_are_its_settings_repeats(floors, tmp_path):
    """The perception ablation runs a (study, object)'s perceived settings as one goal with a variant per setting:
    every variant's repeats are units, each counted against its own setting's perception seconds."""
    run = _run_folder(tmp_path)
    params = floors.load_bench_params(tmp_path, None, run)
    goals = run / "data" / "cache" / "roboscript-goals" / "roboscript-perception"
    goals.mkdir(parents=True)
    plain = {"calls": [{"tool": "grasp"}], "perception": {}}
    seen = {"calls": [{"tool": "detect_objects"}, {"tool": "grasp"}, {"tool": "open_gripper"}],
            "perception": {"calls": 1}}
    (goals / "gt_drawer_apple.json").write_text(json.dumps(
        {"key": "gt/drawer/apple", "result": {"ok": True, "repeats": [plain, plain]}}))
    (goals / "perceived_drawer_apple.json").write_text(json.dumps(
        {"key": "perceived/drawer/apple", "result": {"ok": True, "repeats": [], "variants": [
            {"episode_id": "no_gt/drawer/apple", "repeats": [seen, seen]},
            {"episode_id": "gt_detection/drawer/apple", "repeats": [seen, seen]}]}}))
    (run / "reports" / "timings" / "roboscript-perception.json").write_text(json.dumps(
        {"stage": "roboscript-perception", "wall_s": 6.0, "pool": {"runners": ["/r1", "/r2"]},
         "perception_s": {"gt": 0.0, "no_gt": 0.5, "gt_detection": 0.25}}))
    got = floors.run_stage(run, "roboscript-perception", params, floors.StageFloor("roboscript-perception"))
    assert (got["units"], got["cost"]) == (6, pytest.approx(6.0 * 2 / 6))
    assert got["counts"]["tool call"] == pytest.approx((2 * 1 + 4 * 3) / 6)
    assert got["counts"]["capture k views"] == pytest.approx(4 / 6)
    assert got["parts"]["perception"] == pytest.approx((2 * 0.5 + 2 * 0.25) / 6)


def test_the_table_sets_the_run_against_the_floor(floors, tmp_path):
    run = _run_folder(tmp_path)
    params = floors.load_bench_params(tmp_path, None, run)
    sf = _demos_floor(floors)
    runs = {"muep-demos": floors.run_stage(run, "muep-demos", params, sf)}
    rows, lines = floors.stage_rows([sf], runs)
    (row,) = rows
    floor = 0.75 * 0.01 + 0.5 * 0.2 + 0.75 * 0.02 + 3.0 * 0.004 + 3.75 * 0.003   # the run's counts
    assert row[:4] == ["muep-demos", "episode", "run", "4"]
    assert float(row[4]) == pytest.approx(0.3, abs=1e-4)      # the sample's 0.6 s over its 2 units
    assert float(row[5]) == pytest.approx(5.0, abs=1e-4)
    assert float(row[6]) == pytest.approx(floor, abs=1e-4)
    assert float(row[7]) == pytest.approx(2 * floor, abs=1e-4)
    assert float(row[8]) == pytest.approx(5.0 / floor, abs=0.01)
    parts = {"plan": 0.01, "load": 0.1, "steps": 0.02, "render": 0.02}
    assert row[9] == f"outside {5.0 - sum(parts.values()):.3f}"
    assert lines[0].startswith("muep-demos gaps per episode")
    assert f"load {0.1 - (0.5 * 0.2 + 0.75 * 0.02):+.4f}" in lines[0]
    table = floors.floors_table([sf], runs)
    assert table.splitlines()[0].split() == ["stage", "unit", "cost", "of", "units", "sample", "s/unit",
                                             "cost/unit", "s", "floor/unit", "s", "floor", "med", "s", "ratio",
                                             "largest", "gap", "s"]


def test_a_tiny_real_sample(floors, tmp_path):
    """The script's own functions on one scene instance and one robot trial, one timed call each: the floors are
    composed of every counted primitive and the table has a row per stage."""
    params = floors.load_bench_params(tmp_path, None, None)
    data, accepted, scenes = floors.muep_inputs(params, tmp_path, None)
    selected, picked, test_picked = floors.muep_sample(params, data, accepted, scenes, 1)
    demos, records, warm = floors.demos_floor(params, data, selected, picked, test_picked, 1, 1, tmp_path)
    assert demos.units == len(selected[selected.scene.isin(set(picked) | set(test_picked))]) >= 1
    assert set(demos.counts) == set(DEMO_PRIMS) and warm is not None
    evaluation = floors.eval_floor(params, data, records, test_picked, 1, 1, tmp_path, warm)
    assert evaluation.units == 2 * len([r for r in records if r.scene in test_picked and r.status == "ok"])
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["roboscript"]["eval"]["shapes"]["studies"] = ["pick_place"]
    (tmp_path / "robot").mkdir()
    (tmp_path / "robot" / "params.yaml").write_text(yaml.safe_dump(raw))
    robot = floors.robot_floor("roboscript-shapes", floors.load_bench_params(tmp_path, None, tmp_path / "robot"),
                               1, 1, 1, 1)
    assert robot.units == 1 and set(robot.counts) == set(floors.ROBOT_PRIMS)
    assert robot.counts["capture k views"] == 0 and robot.counts["motion plan"] > 0
    rows, _ = floors.stage_rows([demos, evaluation, robot], {})
    assert [r[0] for r in rows] == ["muep-demos", "muep-eval", "roboscript-shapes"]
    assert all(float(r[6]) > 0 and r[2] == "sample" for r in rows)
