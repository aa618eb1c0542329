"""Error bars and paired comparisons for both leaderboards: seeded percentile bootstrap intervals and McNemar's exact
test. One definition for every table, report and MLflow run that shows an interval.

* :func:`bootstrap` -- a 95 % percentile interval of a statistic over resampled units (MuEP: episodes; RoboScript:
  the repeats of each task). With ``strata`` the units are resampled within each stratum (MuEP: per split, so an
  "overall" interval keeps each split's size; RoboScript: per task, so each task keeps its N repeats). The
  statistic is a ratio of sums (``numerator`` / ``denominator``; a plain mean when there is no denominator), as the
  point estimate is: SR = successes / episodes, GCS = sub-goals met / sub-goals, PR = mean progress. Resampling is
  seeded (:data:`SEED`, :data:`RESAMPLES`), so the same outcomes give the same interval, bit for bit.
* :func:`mcnemar` -- whether two agents that played the *same* episodes differ in per-episode success: the exact
  two-sided binomial test on the discordant pairs (episodes one solved and the other did not).
* :data:`INDICATIVE_BELOW` -- rows with fewer episodes than this are marked indicative: their intervals are wide and
  the bootstrap's coverage is poor on so few units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SEED = 20261204
RESAMPLES = 2000
LEVEL = 0.95
INDICATIVE_BELOW = 30
ALPHA = 0.05


@dataclass(frozen=True)
class Interval:
    """A point estimate and its percentile bootstrap interval (``low`` <= ``high``), over ``n`` units."""

    value: float
    low: float
    high: float
    n: int

    def rounded(self, digits: int = 4) -> dict[str, float | int]:
        return {"value": round(self.value, digits), "low": round(self.low, digits), "high": round(self.high, digits),
                "n": self.n}


def bootstrap(numerator: Sequence[float], denominator: Sequence[float] | None = None,
              strata: Sequence[object] | None = None, *, resamples: int = RESAMPLES, level: float = LEVEL,
              seed: int = SEED) -> Interval | None:
    """The percentile bootstrap interval of ``sum(numerator) / sum(denominator)`` (of the mean of ``numerator``
    when ``denominator`` is None). None when there is nothing to estimate (no units, or a zero denominator)."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 1:
        raise ValueError(f"numerator and denominator need the same length, got {num.shape} and {den.shape}")
    if strata is not None and len(strata) != len(num):
        raise ValueError(f"strata need one entry per unit, got {len(strata)} for {len(num)}")
    if not len(num) or den.sum() == 0:
        return None
    rng = np.random.Generator(np.random.PCG64(seed))
    groups: list[np.ndarray]
    if strata is None:
        groups = [np.arange(len(num))]
    else:
        keys: dict[object, list[int]] = {}
        for i, key in enumerate(strata):
            keys.setdefault(key, []).append(i)
        groups = [np.asarray(keys[k]) for k in sorted(keys, key=str)]
    num_sums = np.zeros(resamples)
    den_sums = np.zeros(resamples)
    for members in groups:      # resample within each stratum; sums add across strata
        picks = members[rng.integers(0, len(members), size=(resamples, len(members)))]
        num_sums += num[picks].sum(axis=1)
        den_sums += den[picks].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = num_sums / den_sums
    stats = stats[np.isfinite(stats)]          # a resample whose denominator is 0 (no sub-goals drawn) has no value
    value = float(num.sum() / den.sum())
    if not len(stats):
        return Interval(value, value, value, len(num))
    tail = (1.0 - level) / 2
    low, high = np.quantile(stats, [tail, 1.0 - tail], method="linear")
    return Interval(value, float(min(low, value)), float(max(high, value)), len(num))


@dataclass(frozen=True)
class McNemar:
    """The paired comparison of two agents on the same episodes: ``only_a`` / ``only_b`` = episodes only that one
    solved; ``p`` = the exact two-sided p-value (1.0 without discordant pairs)."""

    episodes: int
    only_a: int
    only_b: int
    p: float

    @property
    def differ(self) -> bool:
        return self.p < ALPHA


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """McNemar's exact test on paired per-episode successes ``a`` and ``b`` (the same episodes, in the same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need the same episodes, got {len(a)} and {len(b)}")
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    n = only_a + only_b
    if n == 0:
        return McNemar(len(a), 0, 0, 1.0)
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return McNemar(len(a), only_a, only_b, min(1.0, 2 * tail))


def fmt_interval(interval: Interval | None, percent: bool = True, digits: int = 1) -> str:
    """``12.5 [5.0, 20.0]`` (percent) or ``0.62 [0.40, 0.81]``; ``-`` when undefined."""
    if interval is None:
        return "-"
    scale = 100.0 if percent else 1.0
    d = digits if percent else 2
    return f"{scale * interval.value:.{d}f} [{scale * interval.low:.{d}f}, {scale * interval.high:.{d}f}]"


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"
