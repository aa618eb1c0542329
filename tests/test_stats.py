"""Intervals and paired tests of both leaderboards (tasks/stats.py): what they must say on outcomes whose answer is
known, and that the same outcomes always give the same bytes."""

from __future__ import annotations

import random

import pytest
from scipy.stats import binomtest

from tasks import stats


def test_a_certain_outcome_has_no_spread_and_empty_input_no_interval():
    assert stats.bootstrap([1.0] * 12) == stats.Interval(1.0, 1.0, 1.0, 12)
    assert stats.bootstrap([]) is None
    assert stats.bootstrap([1, 2], [0, 0]) is None          # no sub-goals at all: undefined, as the rate is


def test_half_of_a_hundred_covers_the_binomial_interval():
    interval = stats.bootstrap([1.0] * 50 + [0.0] * 50)
    assert interval.value == 0.5 and interval.n == 100
    # the normal approximation says 0.5 +- 0.098; a percentile bootstrap of 2000 resamples lands within a point
    assert 0.39 <= interval.low <= 0.42 and 0.58 <= interval.high <= 0.61


def test_same_outcomes_same_interval_and_the_seed_matters():
    rng = random.Random(3)
    values = [float(rng.random() < 0.3) for _ in range(77)]
    assert stats.bootstrap(values) == stats.bootstrap(list(values))
    assert stats.bootstrap(values, seed=1) != stats.bootstrap(values, seed=2)


def test_strata_keep_their_sizes():
    # every resample draws 10 of split A (all solved) and 10 of split B (none): the overall rate is always 0.5
    values = [1.0] * 10 + [0.0] * 10
    assert stats.bootstrap(values, strata=["a"] * 10 + ["b"] * 10) == stats.Interval(0.5, 0.5, 0.5, 20)
    unstratified = stats.bootstrap(values)
    assert unstratified.low < 0.5 < unstratified.high


def test_ratio_of_sums_is_the_point_estimate():
    # GCS: sub-goals met over sub-goals, summed over episodes (not the mean of per-episode fractions)
    interval = stats.bootstrap([1, 0, 3], [1, 2, 3])
    assert interval.value == pytest.approx(4 / 6)
    assert interval.low <= interval.value <= interval.high


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="same length"):
        stats.bootstrap([1, 0], [1])
    with pytest.raises(ValueError, match="one entry per unit"):
        stats.bootstrap([1, 0], strata=["a"])
    with pytest.raises(ValueError, match="same episodes"):
        stats.mcnemar([True], [True, False])


def test_mcnemar_matches_the_exact_binomial_test():
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(1, 60)
        a = [rng.random() < 0.5 for _ in range(n)]
        b = [rng.random() < 0.4 for _ in range(n)]
        result = stats.mcnemar(a, b)
        only_a = sum(x and not y for x, y in zip(a, b))
        only_b = sum(y and not x for x, y in zip(a, b))
        assert (result.only_a, result.only_b, result.episodes) == (only_a, only_b, n)
        expected = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
        assert result.p == pytest.approx(expected, rel=1e-9)


def test_mcnemar_separates_a_clear_difference_and_not_a_tie():
    clear = stats.mcnemar([True] * 12 + [False] * 8, [False] * 12 + [False] * 8)
    assert clear.only_a == 12 and clear.p == pytest.approx(2 / 2 ** 12) and clear.differ
    tie = stats.mcnemar([True, False] * 10, [False, True] * 10)
    assert tie.p == 1.0 and not tie.differ
    same = stats.mcnemar([True, False], [True, False])
    assert (same.only_a, same.only_b, same.p) == (0, 0, 1.0)


def test_formatting():
    assert stats.fmt_interval(stats.Interval(0.125, 0.05, 0.2, 40)) == "12.5 [5.0, 20.0]"
    assert stats.fmt_interval(stats.Interval(0.625, 0.4, 0.81, 8), percent=False) == "0.62 [0.40, 0.81]"
    assert stats.fmt_interval(None) == "-"
    assert stats.fmt_p(0.0001) == "<0.001" and stats.fmt_p(0.04) == "0.040"
