"""The success checks and the four Table II metrics, as the public RoboScript evaluator defines them
(evaluator.py check_relation_on / check_relation_in / check_object_position; print_table.py's aggregation):
thresholds, strictness, what a raised repeat and a repeat that never ran count."""

from __future__ import annotations

import numpy as np
import pytest

from robot.contract.geometry import Box
from robot.contract.outcomes import GRAMMATICAL, STATUSES, is_grammatical
from robot.contract.items import EvalItem, TabletopState, check_item
from tasks.roboscript.eval.scoring import repeat_scores, summary, task_metrics

PLATE = Box(0.0, 0.0, 0.75, 0.20, 0.20, 0.77)
BASKET = Box(0.0, 0.0, 0.75, 0.30, 0.20, 0.90)


def _check(item: EvalItem, boxes: dict[str, Box], start: dict[str, Box] | None = None):
    return check_item(item, TabletopState(boxes), TabletopState(start or boxes))


def _cube(x: float, y: float, z: float, side: float = 0.1) -> Box:
    return Box(x, y, z, x + side, y + side, z + side)


# ------------------------------------------------------------------------------------------------ on


@pytest.mark.parametrize(("x0", "holds"), [
    (0.05, True),    # the whole footprint over the plate
    (0.11, True),    # 0.09 of 0.10 over the plate: 0.9 > 0.8
    (0.125, False),  # 0.75 over the plate
    (0.15, False),   # half over the plate: the project's old 0.5 rule would have passed this
])
def test_on_needs_more_than_80_percent_of_the_footprint_over_the_receptacle(x0, holds):
    result = _check(EvalItem("on_receptacle", "cup", "plate"), {"cup": _cube(x0, 0.05, 0.77), "plate": PLATE})
    assert result.ok is holds, result.detail
    assert "footprint overlap" in result.detail


def test_the_thresholds_are_strict():
    """Exactly 0.8 (dyadic numbers, so no rounding) is not more than 0.8; exactly the tolerance is not below it."""
    plate, cup = Box(0.0, 0.0, 0.0, 1.0, 1.0, 0.5), Box(0.5, 0.0, 0.5, 1.125, 0.625, 1.0)
    assert cup.xy_overlap_ratio(plate) == 0.8
    assert not _check(EvalItem("on_receptacle", "cup", "plate"), {"cup": cup, "plate": plate}).ok
    basket, box = Box(0.0, 0.0, 0.0, 1.0, 1.0, 1.0), Box(0.0, 0.0, 0.5, 0.5, 0.5, 1.125)
    assert box.volume_overlap_ratio(basket) == 0.8
    assert not _check(EvalItem("in_receptacle", "box", "basket"), {"box": box, "basket": basket}).ok
    start = {"a": Box(0.0, 0.0, 0.0, 0.25, 0.25, 0.25), "b": Box(0.5, 0.0, 0.0, 0.75, 0.25, 0.25)}
    moved = dict(start, a=Box(0.625, 0.0, 0.0, 0.875, 0.25, 0.25))
    assert not _check(EvalItem("near_start", "a", of="b", tolerance=0.125), moved, start).ok
    assert _check(EvalItem("near_start", "a", of="b", tolerance=0.126), moved, start).ok


def test_on_only_asks_that_the_top_is_above_the_receptacles_bottom():
    item = EvalItem("on_receptacle", "cup", "plate")
    assert _check(item, {"cup": _cube(0.05, 0.05, 0.95), "plate": PLATE}).ok  # held 18 cm above: still "on"
    assert not _check(item, {"cup": _cube(0.05, 0.05, 0.60), "plate": PLATE}).ok  # entirely below it


# ------------------------------------------------------------------------------------------------ in


@pytest.mark.parametrize(("z0", "holds"), [
    (0.76, True),    # entirely inside the basket's box
    (0.815, True),   # 0.085 of 0.10 inside: 0.85
    (0.83, False),   # 0.07 of 0.10 inside
    (0.85, False),   # half sticks out above the rim: no footprint-only rule
])
def test_in_needs_more_than_80_percent_of_the_volume_inside(z0, holds):
    result = _check(EvalItem("in_receptacle", "box", "basket"), {"box": _cube(0.1, 0.05, z0), "basket": BASKET})
    assert result.ok is holds, result.detail
    assert "volume inside" in result.detail


def test_in_fails_beside_the_receptacle_whatever_the_height():
    assert not _check(EvalItem("in_receptacle", "box", "basket"),
                      {"box": _cube(0.25, 0.05, 0.76), "basket": BASKET}).ok  # half of it beside the basket


# ------------------------------------------------------------------------------------------------ position


@pytest.mark.parametrize(("dx", "dz", "holds"), [
    (0.0, 0.0, True),
    (0.09, 0.0, True),
    (0.07, 0.08, False),  # 0.106 m in 3-D: the height counts, not only the horizontal distance
    (0.12, 0.0, False),
])
def test_position_is_the_3d_distance_to_where_the_other_object_started(dx, dz, holds):
    start = {"apple": _cube(0.5, 0.3, 0.75), "banana": _cube(0.5, -0.3, 0.75)}
    now = dict(start, apple=_cube(0.5 + dx, -0.3, 0.75 + dz))
    result = _check(EvalItem("near_start", "apple", of="banana"), now, start)
    assert result.ok is holds, result.detail


def test_position_is_measured_from_the_models_base_as_the_public_world_files_place_origins():
    """A tall apple (8 cm) put 9.6 cm from where a flat banana (2 cm) stood: 0.096 m between the bases, the public
    origins; the box centres would be 0.1006 m apart (3 cm of height difference) and fail."""
    start = {"apple": Box(0.5, 0.3, 0.75, 0.58, 0.38, 0.83), "banana": Box(0.5, -0.3, 0.75, 0.58, -0.22, 0.77)}
    now = dict(start, apple=Box(0.5, -0.204, 0.75, 0.58, -0.124, 0.83))
    result = _check(EvalItem("near_start", "apple", of="banana"), now, start)
    assert result.ok and "0.096 m" in result.detail, result.detail
    higher = dict(now, apple=Box(0.5, -0.204, 0.80, 0.58, -0.124, 0.88))  # the same, 5 cm up: 0.108 m
    assert not _check(EvalItem("near_start", "apple", of="banana"), higher, start).ok


# ------------------------------------------------------------------------------------------------ metrics


def _repeat(status: str, items: list[bool], wall: float = 1.0) -> dict:
    return {"status": status, "items": [{"ok": ok} for ok in items], "success": all(items), "wall_s": wall}


def _result(*repeats: dict) -> dict:
    return {"ok": True, "repeats": list(repeats)}


def test_a_repeat_that_raised_counts_zero_even_for_the_steps_it_finished():
    assert repeat_scores(_repeat("ok", [True, False]), 2) == (1, 0.5, 0)
    assert repeat_scores(_repeat("code_error", [True, True]), 2) == (0, 0.0, 0)
    # a failed motion raised (the ``motion_failure: raise`` option): an exception reached exec, as publicly
    assert repeat_scores(_repeat("robot_error", [True, False]), 2) == (0, 0.0, 0)


def test_grammar_is_any_clean_repeat_and_the_ratios_divide_by_the_repeats_asked_for():
    result = _result(_repeat("code_error", [True, False]), _repeat("ok", [True, False]),
                     _repeat("ok", [True, True]), _repeat("timeout", [False, False]))
    metrics = task_metrics(result, 2, repeats=5)  # one repeat never ran
    assert metrics["grammar_correct"] is True and metrics["semantic_correct"] is True
    assert metrics["finished_steps_ratio"] == pytest.approx((0.5 + 1.0) / 5)
    assert metrics["finished_whole_task"] == pytest.approx(1 / 5)
    assert metrics["statuses"] == {"code_error": 1, "not_run": 1, "ok": 2, "timeout": 1}
    assert metrics["repeats"] == 5 and metrics["repeats_run"] == 4
    assert metrics["failed_motions"] == 0
    moved = _repeat("ok", [True, True]) | {"failed_motions": [{"call": 2, "tool": "grasp"}, {"call": 5, "tool": "grasp"}]}
    assert task_metrics(_result(moved, _repeat("ok", [True, True])), 2)["failed_motions"] == 2


def test_no_clean_repeat_means_not_grammatical_and_a_task_nobody_ran_scores_zero():
    failing = task_metrics(_result(_repeat("robot_error", [True]), _repeat("refused", [False])), 1, repeats=2)
    assert failing["grammar_correct"] is False and failing["finished_steps_ratio"] == 0.0
    ran_clean = task_metrics(_result(_repeat("ok", [False]), _repeat("ok", [False])), 1)
    assert ran_clean["grammar_correct"] is True and ran_clean["semantic_correct"] is False
    missing = task_metrics({"ok": False, "error": "every runner died"}, 1, repeats=10)
    assert missing["grammar_correct"] is False and missing["finished_whole_task"] == 0.0
    assert missing["error"] == "every runner died" and missing["statuses"] == {"not_run": 10}
    table = summary({"a": ran_clean, "b": missing})
    assert table["grammar_correct"] == 0.5 and table["tasks"] == 2 and table["tasks_run"] == 1


def test_a_repeat_with_the_wrong_number_of_items_is_an_error():
    with pytest.raises(ValueError, match="1 item result"):
        repeat_scores(_repeat("ok", [True]), 2)


def test_outcomes_and_the_scoring_share_one_definition_of_a_grammatical_repeat():
    from robot.sandbox.host import Outcome

    assert GRAMMATICAL == ("ok",)
    for status in STATUSES:
        grammar, _, _ = repeat_scores(_repeat(status, [True]), 1)
        assert bool(grammar) == is_grammatical(status) == Outcome(status).grammatical, status
    with pytest.raises(ValueError, match="unknown repeat status 'fine'"):
        repeat_scores(_repeat("fine", [True]), 1)


def _public_table(per_repeat: list[tuple[int, list[int]] | None], repeat_times: int) -> dict:
    """print_table.py's ``fill_df_from_json_files`` restated for one query: each repeat the evaluator wrote is
    (grammer_correctness, eval_items_results); a repeat that raised is never written (None), nor one never run."""
    grammar, steps, whole = [], [], []
    for k in range(repeat_times):
        entry = per_repeat[k] if k < len(per_repeat) else None
        if entry is None:
            grammar.append(0), steps.append(0), whole.append(0)
        else:
            grammar.append(entry[0]), steps.append(np.mean(entry[1])), whole.append(np.all(entry[1]).astype(int))
    return {"grammar_correct": bool(np.any(grammar)), "semantic_correct": bool(np.any(whole)),
            "finished_steps_ratio": float(np.mean(steps)), "finished_whole_task": float(np.mean(whole))}


def test_the_four_metrics_are_the_public_print_table_arithmetic_on_random_repeats():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n_items, asked = int(rng.integers(1, 5)), int(rng.integers(1, 8))
        ran = int(rng.integers(0, asked + 1))
        repeats = [_repeat(str(rng.choice(STATUSES)) if rng.random() < 0.4 else "ok",
                           [bool(b) for b in rng.random(n_items) < 0.6]) for _ in range(ran)]
        # the public evaluator writes a repeat only when exec raised nothing, with grammer_correctness 1
        public = [(1, [int(i["ok"]) for i in r["items"]]) if r["status"] == "ok" else None for r in repeats]
        ours = task_metrics(_result(*repeats), n_items, repeats=asked)
        expected = _public_table(public, asked)
        assert ours["grammar_correct"] == expected["grammar_correct"]
        assert ours["semantic_correct"] == expected["semantic_correct"]
        assert ours["finished_steps_ratio"] == pytest.approx(expected["finished_steps_ratio"], abs=5e-5)
        assert ours["finished_whole_task"] == pytest.approx(expected["finished_whole_task"], abs=5e-5)


def _repeats_of(outcomes: list[tuple[str, list[bool]]]) -> dict:
    return {"ok": True, "repeats": [{"status": status, "items": [{"ok": ok} for ok in items]}
                                    for status, items in outcomes]}


def test_intervals_resample_repeats_within_each_task_and_count_unrun_repeats_as_zero():
    from tasks.roboscript.eval.scoring import intervals, repeat_units

    always = repeat_units(_repeats_of([("ok", [True, True])] * 10), 2, 10)
    never = repeat_units(_repeats_of([("code_error", [False, False])] * 10), 2, 10)
    assert always == [(1.0, 1)] * 10 and never == [(0.0, 0)] * 10
    # each task keeps its 10 repeats: the mean over tasks is 0.5 in every resample
    assert intervals({"Simple_0": always, "Hard_0": never})["finished_whole_task"] == [0.5, 0.5]
    half = repeat_units(_repeats_of([("ok", [True, False])] * 5 + [("ok", [True, True])] * 5), 2, 12)
    assert len(half) == 12 and half[-2:] == [(0.0, 0), (0.0, 0)]     # two repeats asked for never ran
    ci = intervals({"Simple_0": half, "Hard_0": half, "Hard_1": half})
    whole = task_metrics(_repeats_of([("ok", [True, False])] * 5 + [("ok", [True, True])] * 5), 2, 12)
    low, high = ci["finished_whole_task"]
    assert low < whole["finished_whole_task"] < high and ci["indicative"] is False      # 36 repeats
    assert intervals({"Simple_0": always[:3]})["indicative"] is True


def test_intervals_over_tasks_treat_each_task_as_one_unit():
    from tasks.roboscript.eval.scoring import intervals, repeat_units, task_intervals

    always = _repeats_of([("ok", [True, True])] * 10)
    never = _repeats_of([("code_error", [False, False])] * 10)
    results = {"Simple_0": always, "Hard_0": never, "Hard_1": never, "Moderate_0": never}
    per_task = {t: task_metrics(r, 2, 10) for t, r in results.items()}
    over_repeats = intervals({t: repeat_units(r, 2, 10) for t, r in results.items()})
    over_tasks = task_intervals(per_task)
    # deterministic repeats: no spread within a task, so the interval over repeats is a point ...
    assert over_repeats["finished_whole_task"] == [0.25, 0.25]
    # ... while one solved task of four could as well have been none or three: resampling tasks says so
    low, high = over_tasks["finished_whole_task"]
    assert low == 0.0 and 0.5 <= high <= 1.0
    assert over_tasks["grammar_correct"] == over_tasks["semantic_correct"] == [low, high]  # flags count 0/1
    assert over_tasks["units"] == "tasks" and over_tasks["indicative"] is True
    assert task_intervals(per_task) == over_tasks                                       # seeded: same bytes
    assert task_intervals({"Simple_0": {"grammar_correct": None}})["grammar_correct"] is None


def test_paired_comparisons_over_tasks_use_mcnemar_on_each_flag_and_skip_published_pairs():
    from tasks.roboscript.eval.scoring import Table2Block, paired_markdown

    tasks = [f"T{i}" for i in range(8)]
    strong = Table2Block("strong", "LLM", "this project", {t: {"grammar_correct": True, "semantic_correct": i < 7}
                                                          for i, t in enumerate(tasks)})
    weak = Table2Block("weak", "LLM", "this project", {t: {"grammar_correct": i < 3, "semantic_correct": False}
                                                      for i, t in enumerate(tasks)})
    gpt = Table2Block("gpt", "LLM", "published (10 repeats)", {t: {"grammar_correct": True, "semantic_correct": True}
                                                               for t in tasks[:4]})
    gem = Table2Block("gem", "LLM", "published (10 repeats)", {t: {"grammar_correct": False} for t in tasks})
    md = paired_markdown([strong, weak, gpt, gem], tasks)
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in md.splitlines()
            if line.startswith("| ") and not line.startswith(("| A ", "| ---"))}
    assert set(rows) == {("strong", "weak"), ("strong", "gpt"), ("strong", "gem"), ("weak", "gpt"), ("weak", "gem")}
    assert "5 / 0 of 8, p = 0.062: not shown to differ" in rows[("strong", "weak")]     # grammar: 5 discordant
    assert "7 / 0 of 8, p = 0.016: differ" in rows[("strong", "weak")]                  # semantic: 7 discordant
    assert "0 / 0 of 4, p = 1.000" in rows[("strong", "gpt")]            # only the tasks both have figures for
    assert rows[("weak", "gem")].rstrip(" |").endswith("n/a")            # gem gives no semantic figures
    assert paired_markdown([gpt, gem], tasks) == ""                      # published rows are not compared
