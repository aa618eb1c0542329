"""The agents registry. Adding an agent is adding a module with a registered :class:`Agent` subclass.

* ``oracle`` -- replays the planner's actions (episodes.parquet): SR = LC = 1 on every episode, a harness check;
* ``random`` -- a random admissible command, seeded per episode;
* ``openai`` -- a chat model over any OpenAI-compatible endpoint (prompt with few-shot demonstrations);
* ``hf`` -- a local causal LM (transformers), optional PEFT adapter, or a baseline of ``tasks.train``;
* ``hf-vision`` -- a local image-text-to-text model fed the rendered image of the state.

Importing this module is cheap: the model libraries are imported when an agent is constructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.muep.eval.agents.base import Agent, AgentBudgetExhausted, AgentContext, AgentInfo
from tasks.registry import Registry

if TYPE_CHECKING:
    from tasks.params import EvalParams

AGENTS: Registry[type[Agent]] = Registry("agent")

# Importing the modules registers the agents.
from tasks.muep.eval.agents import hf as _hf  # noqa: E402,F401
from tasks.muep.eval.agents import oracle as _oracle  # noqa: E402,F401
from tasks.muep.eval.agents import openai_agent as _openai  # noqa: E402,F401
from tasks.muep.eval.agents import random_agent as _random  # noqa: E402,F401


def build_agent(name: str, params: EvalParams, context: AgentContext) -> Agent:
    return AGENTS.get(name)(params, context)


def describe(name: str, params: EvalParams) -> AgentInfo:
    return AGENTS.get(name).describe(params)


__all__ = ["AGENTS", "Agent", "AgentBudgetExhausted", "AgentContext", "AgentInfo", "build_agent", "describe"]
