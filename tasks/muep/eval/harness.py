"""Playing episodes: one agent, one batch of episodes, in one worker process, one game at a time.

An episode: reset the game; then up to ``max_steps`` times show the agent an :class:`Observation` and send its
answer to the game. It ends when the game is won, after ``max_steps`` actions, after ``max_invalid_streak``
invalid actions in a row, or when the agent may not make another model call (``call_budget``); an agent whose ``reset`` raises fails the
episode without an action (``agent_error``).

An agent never crashes the harness: an exception in ``act`` (time-out, bad answer, a model error) is recorded with
the step and counts as an invalid (empty) action; anything that is not a string counts as "". Failures of the
environment itself (a game that cannot be built) are not the agent's: they fail the batch with a readable error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tasks.muep.eval.agents import AgentBudgetExhausted, AgentContext, build_agent
from tasks.muep.eval.agents.base import Agent
from tasks.muep.eval.env import EvalEnv, normalise_action
from tasks.muep.eval.records import (
    EpisodeResult,
    EpisodeSpec,
    Observation,
    StepRecord,
    Turn,
)
from tasks.params import EvalParams

log = logging.getLogger("embp")

RAW_CHARS = 2000   # the agent's raw answer is kept in the trajectory up to this length


@dataclass(frozen=True)
class EvalSettings:
    """Everything a worker needs (picklable): where the metadata is, ``muep.eval`` and the agents' context."""

    metadata_dir: str
    params: EvalParams = field(default_factory=lambda: EvalParams())
    context: AgentContext = field(default_factory=AgentContext)


@dataclass
class EvalBatch:
    batch_id: str
    agent: str                     # registry name
    label: str                     # AgentInfo.label
    split: str
    episodes: list[EpisodeSpec]


_RENDERERS: dict[tuple[str, int], object] = {}


def _renderer(settings: EvalSettings):
    from tasks.muep.render import build_renderer

    key = (settings.params.renderer, settings.params.render_size)
    if key not in _RENDERERS:
        _RENDERERS[key] = build_renderer(key[0], size=key[1])
    return _RENDERERS[key]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:RAW_CHARS]


def run_episode(spec: EpisodeSpec, agent: Agent, label: str, settings: EvalSettings) -> EpisodeResult:
    start = time.perf_counter()
    env = EvalEnv.start(spec, settings.metadata_dir)
    try:
        first = env.observation
        initial_goals = env.goals_met()
        steps: list[StepRecord] = []
        history: list[Turn] = []
        current, streak, end, failure = first, 0, "max_steps", None
        try:
            agent.reset(spec if agent.privileged else spec.without_expert())
        except Exception as exc:  # noqa: BLE001 - an agent that cannot start an episode fails it, nothing more
            end, failure = "agent_error", _error(exc)
        renderer = _renderer(settings) if agent.multimodal and failure is None else None
        if renderer is not None:
            renderer.begin_scene(env.layout)
        for i in range(1, (settings.params.max_steps if failure is None else 0) + 1):
            obs = Observation(instruction=spec.instruction, task_type=spec.task_type, step=i, text=current,
                              history=tuple(history), admissible=env.admissible(), grammar=spec.grammar,
                              image=env.image(renderer) if renderer is not None else None)
            agent.last_raw, error = None, None
            try:
                answer = agent.act(obs)
            except AgentBudgetExhausted:
                end = "call_budget"
                break
            except Exception as exc:  # noqa: BLE001 - an agent failure is an invalid action, never a crash
                answer, error = "", _error(exc)
            action = normalise_action(answer)
            raw = agent.last_raw if agent.last_raw is not None else (answer if isinstance(answer, str) else repr(answer))
            out = env.step(action)
            steps.append(StepRecord(step=i, action=action, observation=out.observation, valid=out.valid, won=out.won,
                                    goals_met=out.goals_met, raw=raw[:RAW_CHARS] if raw != action else None,
                                    error=error))
            history.append(Turn(current, action))
            current = out.observation
            streak = 0 if out.valid else streak + 1
            if out.won:
                end = "won"
                break
            if streak >= settings.params.max_invalid_streak:
                end = "invalid_streak"
                break
        return EpisodeResult(agent=label, episode_id=spec.episode_id, split=spec.split, scene=spec.scene,
                             task_type=spec.task_type, instruction=spec.instruction, initial_observation=first,
                             goals_total=env.goals.total, initial_goals_met=initial_goals, success=env.game.won(),
                             end_reason=end, agent_calls=agent.calls, wall_s=round(time.perf_counter() - start, 4),
                             steps=tuple(steps), error=failure)
    finally:
        env.close()


def run_batch(batch: EvalBatch, settings: EvalSettings) -> list[EpisodeResult]:
    """Build the agent (a model is loaded once per worker process) and play the batch's episodes in order."""
    agent = build_agent(batch.agent, settings.params, settings.context)
    try:
        return [run_episode(spec, agent, batch.label, settings) for spec in batch.episodes]
    finally:
        agent.close()
