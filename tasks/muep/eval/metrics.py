"""The metrics: per episode, then summed into a :class:`Tally` per (agent, split, task type) and turned into rates.

Per episode (from its :class:`~tasks.muep.eval.records.EpisodeResult`):

* **success** -- the game's goal holds at the end, i.e. every goal condition (:mod:`tasks.muep.eval.goals`).
* **steps** -- actions taken (valid or not). **IS** averages them over successful episodes (``is_success``, the
  paper's IS) and over all episodes (``is_all``).
* **GCS** -- goal conditions met at the end / goal conditions. Aggregated as ALFRED does: the sum of the met
  conditions over the sum of the conditions (not the mean of per-episode fractions).
* **LC** -- valid actions / actions, summed over episodes. An action is valid when the game can execute it (it is
  one of its valid commands); an invalid one gets "Nothing happens." and changes nothing. An agent exception or an
  empty answer is an invalid action.
* **PR** (progress rate, AgentBoard) -- the largest fraction of goal conditions met after any action of the episode
  (0 for an episode without actions); averaged over episodes.
* **RDI** -- failed episodes that show reasoning disorientation / failed episodes (:func:`disoriented`).

Rates with an empty denominator (IS over no success, RDI over no failure, LC without actions) are ``None``: shown
as "-" in tables, left out of MLflow, ``null`` in the JSON reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from tasks.muep.eval.records import EpisodeResult

RATES = ("sr", "is_success", "is_all", "gcs", "lc", "rdi", "pr")

# ----------------------------------------------------------------------------------------------------------------
# Reasoning disorientation


def disoriented(observations: Sequence[str], actions: Sequence[str], max_period: int = 2) -> bool:
    """The documented RDI rule: does the agent repeat itself under the same feedback?

    ``observations`` are o_0 .. o_n (o_0 the initial observation, o_t the feedback to action a_t) and ``actions``
    a_1 .. a_n. The agent's *response* at step t is the pair r_t = (o_{t-1}, a_t): the observation it acted on and
    what it did. The episode shows disorientation when, for some t and a period p in 1..``max_period`` (2), the last
    2p responses are one block of p responses said twice: r_{t-i} == r_{t-i-p} for i = 0..p-1. That is:

    * p = 1, a repeat: the same action again after the same observation (r_t == r_{t-1}). Example: "take apple 1"
      -> "Nothing happens." -> "take apple 1" -> "Nothing happens." -> "take apple 1" (the 3rd take answers the
      same feedback as the 2nd). Issuing an action twice only after *different* observations is not a repeat.
    * p = 2, an A-B-A-B cycle with unchanged observations: (F, A), (G, B), (F, A), (G, B). Example: going back and
      forth between two places that look the same each time -- from the intro o_0, "go to sofa 1" (-> F),
      "go to armchair 1" (-> G), "go to sofa 1" (-> F), "go to armchair 1" (-> G), "go to sofa 1": the responses
      (o_0, sofa) (F, armchair) (G, sofa) (F, armchair) (G, sofa) end with the block (F, armchair) (G, sofa) said
      twice, at the 5th action (the 1st answered o_0, not G, so four actions are not yet a cycle).

    Observations and actions are compared as exact strings (actions after the harness's normalisation).
    """
    if len(observations) != len(actions) + 1:
        raise ValueError(f"need one more observation than actions, got {len(observations)} and {len(actions)}")
    responses = list(zip(observations[:-1], actions, strict=True))
    for p in range(1, max_period + 1):
        for t in range(2 * p - 1, len(responses)):
            if all(responses[t - i] == responses[t - i - p] for i in range(p)):
                return True
    return False


# ----------------------------------------------------------------------------------------------------------------
# One episode


@dataclass(frozen=True)
class EpisodeMetrics:
    success: bool
    steps: int
    valid: int
    goals_met: int
    goals_total: int
    progress: float
    disoriented: bool


def episode_metrics(result: EpisodeResult) -> EpisodeMetrics:
    steps = result.steps
    observations = [result.initial_observation] + [s.observation for s in steps]
    total = result.goals_total
    progress = max((s.goals_met / total for s in steps), default=0.0) if total else 0.0
    return EpisodeMetrics(
        success=result.success, steps=len(steps), valid=sum(s.valid for s in steps), goals_met=result.goals_met,
        goals_total=total, progress=progress, disoriented=disoriented(observations, [s.action for s in steps]),
    )


# ----------------------------------------------------------------------------------------------------------------
# Aggregation


@dataclass
class Tally:
    """Sums over episodes; every rate is a ratio of two of them, so tallies add exactly (splits -> overall)."""

    episodes: int = 0
    successes: int = 0
    steps: int = 0
    steps_success: int = 0
    valid: int = 0
    goals_met: int = 0
    goals_total: int = 0
    failed: int = 0
    disoriented_failed: int = 0
    progress_sum: float = 0.0

    def add(self, m: EpisodeMetrics) -> Tally:
        self.episodes += 1
        self.successes += m.success
        self.steps += m.steps
        self.steps_success += m.steps if m.success else 0
        self.valid += m.valid
        self.goals_met += m.goals_met
        self.goals_total += m.goals_total
        self.failed += not m.success
        self.disoriented_failed += (not m.success) and m.disoriented
        self.progress_sum += m.progress
        return self

    def __add__(self, other: Tally) -> Tally:
        return Tally(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(Tally)})

    def counts(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_counts(cls, counts: dict[str, float]) -> Tally:
        known = {f.name: f.type for f in fields(cls)}
        return cls(**{k: (float(v) if k == "progress_sum" else int(round(v))) for k, v in counts.items() if k in known})

    def rates(self) -> dict[str, float | None]:
        def ratio(a: float, b: float) -> float | None:
            return a / b if b else None

        return {"sr": ratio(self.successes, self.episodes), "is_success": ratio(self.steps_success, self.successes),
                "is_all": ratio(self.steps, self.episodes), "gcs": ratio(self.goals_met, self.goals_total),
                "lc": ratio(self.valid, self.steps), "rdi": ratio(self.disoriented_failed, self.failed),
                "pr": ratio(self.progress_sum, self.episodes)}


def tally(results: Sequence[EpisodeResult]) -> Tally:
    out = Tally()
    for r in results:
        out.add(episode_metrics(r))
    return out


def summary(t: Tally, digits: int = 4) -> dict[str, float | int | None]:
    """Rates (rounded) and the episode counts: one block of a JSON report."""
    rates = {k: (round(v, digits) if v is not None else None) for k, v in t.rates().items()}
    return rates | {"episodes": t.episodes, "failed": t.failed}


def report(results: Sequence[EpisodeResult]) -> dict:
    """The ``reports/muep/eval_<agent>.json`` body: overall, per split, per task type."""
    by_split: dict[str, Tally] = {}
    by_type: dict[str, Tally] = {}
    for r in results:
        m = episode_metrics(r)
        by_split.setdefault(r.split, Tally()).add(m)
        by_type.setdefault(r.task_type, Tally()).add(m)
    overall = sum(by_split.values(), Tally())
    return {"overall": summary(overall), "by_split": {s: summary(t) for s, t in sorted(by_split.items())},
            "by_task_type": {k: summary(t) for k, t in sorted(by_type.items())}}
