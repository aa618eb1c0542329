"""The agents (``core.plugins.AGENTS``). Adding an agent is adding a module with an :class:`Agent` subclass and its line in
that table.

* ``oracle`` -- replays the planner's actions (episodes.parquet): SR = LC = 1 on every episode, a harness check;
* ``random`` -- a random admissible command, seeded per episode;
* ``openai`` -- a chat model over any OpenAI-compatible endpoint (prompt with few-shot demonstrations);
* ``muep-http`` -- a model server of MuEP's released test client protocol (its request and reply format);
* ``hf`` -- a local causal LM (transformers), optional PEFT adapter, or a baseline of ``tasks.train``;
* ``hf-vision`` -- a local image-text-to-text model fed the rendered image of the state.

Importing this module is cheap: the model libraries are imported when an agent is constructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.plugins import AGENTS
from tasks.muep.eval.agents.base import (
    Agent,
    AgentBudgetExhausted,
    AgentContext,
    AgentInfo,
)

if TYPE_CHECKING:
    from tasks.params import EvalParams


def build_agent(name: str, params: EvalParams, context: AgentContext) -> Agent:
    return AGENTS.load(name)(params, context)


def describe(name: str, params: EvalParams) -> AgentInfo:
    return AGENTS.load(name).describe(params)


__all__ = ["AGENTS", "Agent", "AgentBudgetExhausted", "AgentContext", "AgentInfo", "build_agent", "describe"]
