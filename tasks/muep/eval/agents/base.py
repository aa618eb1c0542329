"""What every evaluation agent is: constructed once per batch in the worker process, ``reset`` per episode, then
asked ``act(observation) -> action string`` until the episode ends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from tasks.muep.eval.records import EpisodeSpec, Observation

if TYPE_CHECKING:
    from tasks.params import EvalParams


class AgentBudgetExhausted(Exception):
    """The agent may not make another model call this episode (``max_calls_per_episode``): the episode ends."""


@dataclass(frozen=True)
class AgentInfo:
    """How a run is labelled and what goes into its MLflow params (known without loading any model)."""

    name: str
    label: str                     # e.g. "openai:gpt-4o-mini", "hf:llama2-qlora+adapter"
    model: str
    adapter: str = ""
    multimodal: bool = False


@dataclass(frozen=True)
class AgentContext:
    """What the flow prepares for the agents of a batch (plain values: it crosses process boundaries)."""

    seed: int = 0
    history_window: int = 5
    """(observation, action) pairs a local model sees (``muep.sft.history_window``, as in its training records)."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Few-shot transcripts from the train split, by task type (``tasks.muep.eval.episodes.few_shot_examples``)."""


class Agent(ABC):
    name: ClassVar[str]
    multimodal: ClassVar[bool] = False
    privileged: ClassVar[bool] = False
    """Sees the expert's actions (``EpisodeSpec.expert_actions``). Only the oracle."""

    def __init__(self, params: EvalParams, context: AgentContext):
        self.params = params
        self.context = context
        self.calls = 0
        self.last_raw: str | None = None
        """The model's full answer to the last ``act`` (None for agents without a model)."""

    @classmethod
    @abstractmethod
    def describe(cls, params: EvalParams) -> AgentInfo:
        """Name, label and model of this agent under ``params``."""

    @classmethod
    def preflight(cls, params: EvalParams) -> None:
        """Checks in the flow process before any episode runs (paths exist, endpoint answers). Raise a
        :class:`~core.errors.PipelineError` naming the params key."""

    def reset(self, episode: EpisodeSpec) -> None:
        """A new episode starts; ``calls`` counts model requests per episode."""
        self.episode = episode
        self.calls = 0

    @abstractmethod
    def act(self, observation: Observation) -> str:
        """The next action. May raise: the harness records an invalid action (or ends the episode on
        :class:`AgentBudgetExhausted`)."""

    def finish(self, observation: Observation, won: bool) -> None:
        """The episode ended after the action that led to ``observation`` (``won`` or not). Default: nothing."""

    def close(self) -> None:
        """Release what the agent holds."""
