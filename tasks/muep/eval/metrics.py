"""The metrics: per episode, then summed into a :class:`Tally` per (agent, split, task type) and turned into rates.

Per episode (from its :class:`~tasks.muep.eval.records.EpisodeResult`); the paper's definitions are in its section
3.2 ("Evaluation Metrics"), quoted in docs/muep-eval.md:

* **success** -- the game's goal holds at the end: the target state *and* the target place (SR = successes / plays).
* **steps** -- actions taken (valid or not). **IS** averages them over successful episodes (``is_success``, the
  paper's "steps ... to complete a task") and over all episodes (``is_all``).
* **GCS** -- the paper's sub-goals done at the end / sub-goals (finding the object counts, as in the paper's heated
  potato example: :mod:`tasks.muep.eval.goals`). ``gcs_alfworld`` -- ALFWorld's goal conditions met at the end /
  goal conditions. Both aggregated as ALFRED does: the sum of what was met over the sum of what there was (not the
  mean of per-episode fractions).
* **LC** -- valid actions / actions (the paper's â / a*), summed over episodes. An action is valid when the game can
  execute it (it is one of its valid commands); an invalid one gets "Nothing happens." and changes nothing. An agent
  exception or an empty answer is an invalid action.
* **PR** (progress rate, AgentBoard; not in the paper) -- the largest fraction of ALFWorld's goal conditions met
  after any action of the episode (0 for an episode without actions); averaged over episodes.
* **RDI** -- failed episodes that show reasoning disorientation / failed episodes (the paper's p_rdi / p_fail):
  under protocol ``muep-released`` an episode the released client's repeat stop ended (``end_reason: loop`` with its
  ``stopped_action``: that stop comes first, since any loop of :func:`disoriented` repeats the actions too); under
  ``alfworld`` by the rule of :func:`disoriented` on the whole trajectory.

Rates with an empty denominator (IS over no success, RDI over no failure, LC without actions) are ``None``: shown
as "-" in tables, left out of MLflow, ``null`` in the JSON reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from tasks import stats
from tasks.muep.eval.records import EpisodeResult

RATES = ("sr", "is_success", "is_all", "gcs", "gcs_alfworld", "lc", "rdi", "pr")
INTERVAL_RATES = ("sr", "gcs", "pr", "lc")
"""The rates that get a 95 % bootstrap interval over episodes (:mod:`tasks.stats`) in every report, run and table."""

# ----------------------------------------------------------------------------------------------------------------
# Reasoning disorientation


def disoriented(observations: Sequence[str], actions: Sequence[str]) -> bool:
    """The RDI rule (and the optional loop stop): does the agent repeat itself under the same feedback?

    The paper (section 3.2, "Reasoning Disorientation Index") defines RDI by whether an agent "persistently takes
    repetitive actions in response to the same environmental feedback", found by "checking for repetitive or
    cyclical patterns" in its actions; RDI is the share of failed tasks where that happened. MuEP's released test
    client stops an episode on the two patterns it checks, an action said twice in a row (A-A) and two actions
    alternating (A-B-A-B). Here a pattern counts only when the feedback repeats with the actions:

    ``observations`` are o_0 .. o_n (o_0 the initial observation, o_t the game's feedback to action a_t) and
    ``actions`` a_1 .. a_n. Step t is the pair s_t = (a_t, o_t): what the agent did and what it got back. The episode
    shows disorientation when, at some step t,

    * **A A** -- s_t == s_{t-1}: the same action again, producing the same feedback. "go to fridge 1" three times,
      answered "You arrive at fridge 1. ...", "Nothing happens.", "Nothing happens.": the third repeats the second.
      The second alone is not a repeat: its feedback differs from the first's.
    * **A B A B** -- s_t == s_{t-2} and s_{t-1} == s_{t-3}: two steps, actions and feedback, said twice. "open
      fridge 1" / "close fridge 1" / "open fridge 1" / "close fridge 1", each open answered with the same contents
      and each close with "You close the fridge 1.": disoriented at the fourth action. Going back and forth between
      two places whose descriptions change (an object moved) is not.

    Actions are compared after the harness's normalisation, observations as exact strings. This function is the one
    place the rule lives: the metrics call it on a whole trajectory, the harness's loop stop after every step.
    """
    if len(observations) != len(actions) + 1:
        raise ValueError(f"need one more observation than actions, got {len(observations)} and {len(actions)}")
    steps = list(zip(actions, observations[1:], strict=True))
    for t in range(1, len(steps)):
        if steps[t] == steps[t - 1]:
            return True
        if t >= 3 and steps[t] == steps[t - 2] and steps[t - 1] == steps[t - 3]:
            return True
    return False


# ----------------------------------------------------------------------------------------------------------------
# One episode


@dataclass(frozen=True)
class EpisodeMetrics:
    success: bool
    steps: int
    valid: int
    goals_met: int                 # the paper's sub-goals done at the end
    goals_total: int
    conditions_met: int            # ALFWorld's goal conditions met at the end
    conditions_total: int
    progress: float
    disoriented: bool


def episode_metrics(result: EpisodeResult) -> EpisodeMetrics:
    steps = result.steps
    observations = [result.initial_observation] + [s.observation for s in steps]
    total = result.conditions_total
    progress = max((s.conditions_met / total for s in steps), default=0.0) if total else 0.0
    return EpisodeMetrics(
        success=result.success, steps=len(steps), valid=sum(s.valid for s in steps), goals_met=result.goals_met,
        goals_total=result.goals_total, conditions_met=result.conditions_met, conditions_total=total,
        progress=progress, disoriented=episode_disoriented(result, observations),
    )


def episode_disoriented(result: EpisodeResult, observations: Sequence[str]) -> bool:
    """Does the episode count for RDI? See the module docstring."""
    if result.protocol == "muep-released":
        return result.end_reason == "loop" and result.stopped_action is not None
    return disoriented(observations, [s.action for s in result.steps])


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
    conditions_met: int = 0
    conditions_total: int = 0
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
        self.conditions_met += m.conditions_met
        self.conditions_total += m.conditions_total
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
                "gcs_alfworld": ratio(self.conditions_met, self.conditions_total),
                "lc": ratio(self.valid, self.steps), "rdi": ratio(self.disoriented_failed, self.failed),
                "pr": ratio(self.progress_sum, self.episodes)}


def intervals(ms: Sequence[EpisodeMetrics], strata: Sequence[object] | None = None
              ) -> dict[str, stats.Interval | None]:
    """The bootstrap intervals of SR, GCS, PR and LC over these episodes (``strata``: resampled within each, e.g. the
    split of each episode for an overall figure), each the same ratio of sums as its rate in :meth:`Tally.rates`.
    LC (admissible actions / actions) is the one that still tells weak agents apart when none succeeds."""
    return {"sr": stats.bootstrap([float(m.success) for m in ms], strata=strata),
            "gcs": stats.bootstrap([m.goals_met for m in ms], [m.goals_total for m in ms], strata=strata),
            "pr": stats.bootstrap([m.progress for m in ms], strata=strata),
            "lc": stats.bootstrap([m.valid for m in ms], [m.steps for m in ms], strata=strata)}


def interval_block(ms: Sequence[EpisodeMetrics], strata: Sequence[object] | None = None, digits: int = 4) -> dict:
    """``{"sr": [low, high], ...}`` for a JSON report (``null`` where undefined), plus ``indicative`` when there are
    fewer episodes than :data:`tasks.stats.INDICATIVE_BELOW`."""
    out: dict = {name: (None if i is None else [round(i.low, digits), round(i.high, digits)])
                 for name, i in intervals(ms, strata).items()}
    return out | {"level": stats.LEVEL, "indicative": len(ms) < stats.INDICATIVE_BELOW}


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
    """The ``reports/muep/eval_<agent>.json`` body: overall, per split, per task type, and per split and task type
    (the paper's Tables 2 and 4); overall and per split with the 95 % intervals of SR, GCS, PR and LC (``ci95``;
overall resampled within each split)."""
    by_split: dict[str, Tally] = {}
    by_type: dict[str, Tally] = {}
    by_both: dict[str, dict[str, Tally]] = {}
    per_split: dict[str, list[EpisodeMetrics]] = {}
    for r in sorted(results, key=lambda r: (r.split, r.episode_id)):
        m = episode_metrics(r)
        per_split.setdefault(r.split, []).append(m)
        by_split.setdefault(r.split, Tally()).add(m)
        by_type.setdefault(r.task_type, Tally()).add(m)
        by_both.setdefault(r.split, {}).setdefault(r.task_type, Tally()).add(m)
    overall = sum(by_split.values(), Tally())
    every = [m for s in sorted(per_split) for m in per_split[s]]
    strata = [s for s in sorted(per_split) for _ in per_split[s]]
    return {"overall": summary(overall) | {"ci95": interval_block(every, strata)},
            "by_split": {s: summary(t) | {"ci95": interval_block(per_split[s])} for s, t in sorted(by_split.items())},
            "by_task_type": {k: summary(t) for k, t in sorted(by_type.items())},
            "by_split_task_type": {s: {k: summary(t) for k, t in sorted(kinds.items())}
                                   for s, kinds in sorted(by_both.items())}}
