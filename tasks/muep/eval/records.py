"""Typed records of an evaluation: the episode to play, each step, the played episode.

Every record is a frozen dataclass of plain values: it crosses process boundaries (a batch runs in a worker process)
and is written as one JSON line per episode (the trajectories artifact).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Why an episode ended: won; the paper's 30-step cap (``max_steps``); a loop (``loop``: the released client's repeat
#: stop of protocol ``muep-released``, or our RDI rule with ``muep.eval.loop_stop``); the optional invalid-action
#: streak; the agent's call budget; an agent that cannot start.
END_REASONS = ("won", "max_steps", "loop", "invalid_streak", "call_budget", "agent_error")


@dataclass(frozen=True)
class EpisodeSpec:
    """One test episode, from a row of an episodes table (the demonstrations' or ALFWorld's test games)."""

    episode_id: str
    split: str
    scene: str
    task_type: str
    instruction: str
    object_type: str
    target_type: str
    grammar: str
    expert_actions: tuple[str, ...] = ()
    """The planner's actions. Only a privileged agent (``oracle``) receives them; others get ``()``."""
    source: str = "demos"
    """Which dataset the episode comes from (``demos`` or ``alfworld``): its scene metadata is that dataset's."""

    def without_expert(self) -> EpisodeSpec:
        return EpisodeSpec(**(asdict(self) | {"expert_actions": ()}))


@dataclass(frozen=True)
class Turn:
    """One past step as an agent sees it: the observation it acted on, then its action."""

    observation: str
    action: str


@dataclass(frozen=True)
class Observation:
    """What an agent gets before each action."""

    instruction: str
    task_type: str
    step: int                      # 1-based index of the action asked for
    text: str                      # the current text observation (the game's last feedback; the intro at step 1)
    history: tuple[Turn, ...]      # every earlier (observation, action) pair, oldest first
    admissible: tuple[str, ...]    # the commands the game accepts now (sorted)
    grammar: str                   # alfworld-0.4 | muep | muep-released
    image: bytes | None = None     # PNG of the current state, for multimodal agents only


@dataclass(frozen=True)
class StepRecord:
    step: int
    action: str                    # what was sent to the game (normalised, at most MAX_ACTION_CHARS)
    observation: str               # the game's answer ("Nothing happens." for an invalid action)
    valid: bool                    # the game could execute the action
    won: bool
    goals_met: int                 # the paper's sub-goals done after this step (tasks.muep.eval.goals)
    raw: str | None = None         # the agent's answer when it differs from ``action`` (truncated)
    error: str | None = None       # the agent's exception, when it raised (the action is then "")
    conditions_met: int = 0        # ALFWorld's goal conditions met after this step
    admissible: bool | None = None  # the action was among the commands the game offered (None: not recorded)
    image: str | None = None       # the episode viewer's image of the state after this step (EvalSettings.images_dir)


@dataclass(frozen=True)
class EpisodeResult:
    agent: str                     # the agent's label, e.g. "random" or "openai:gpt-4o-mini"
    episode_id: str
    split: str
    scene: str
    task_type: str
    instruction: str
    initial_observation: str
    goals_total: int               # the paper's sub-goals of the task
    initial_goals_met: int
    success: bool                  # the game's goal holds (every goal condition) at the end
    end_reason: str                # one of END_REASONS
    agent_calls: int               # model requests the agent made (0 for oracle / random)
    steps: tuple[StepRecord, ...] = field(default_factory=tuple)
    error: str | None = None       # why the agent could not start the episode (end_reason "agent_error")
    conditions_total: int = 0      # ALFWorld's goal conditions of the task
    initial_conditions_met: int = 0
    initial_image: str | None = None  # the viewer's image of the initial state
    protocol: str = "alfworld"     # the protocol played (tasks.muep.eval.protocol); older records: alfworld's rules
    stopped_action: str | None = None
    """Under ``muep-released``: the proposed action that repeated (A-A / A-B-A-B) and ended the episode unexecuted."""

    @property
    def goals_met(self) -> int:
        return self.steps[-1].goals_met if self.steps else self.initial_goals_met

    @property
    def conditions_met(self) -> int:
        return self.steps[-1].conditions_met if self.steps else self.initial_conditions_met

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeResult:
        steps = tuple(StepRecord(**s) for s in data["steps"])
        return cls(**(data | {"steps": steps}))
