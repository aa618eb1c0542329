"""Playing episodes: one batch of episodes, each played by every agent of the batch, in one worker process, one game
at a time.

An episode is played by the protocol of ``muep.eval.protocol`` (:mod:`tasks.muep.eval.protocol`): in its grammar,
reset the game; then up to ``max_steps`` times show the agent an :class:`Observation` and send its answer to the game.
It ends when the game is won or after ``max_steps`` actions; under ``muep-released`` also at the first answer that
repeats the last one or completes A-B-A-B, which is then not executed (``end_reason: loop``, the answer kept as
``stopped_action``), as MuEP's released client stops. When enabled, it also ends at our RDI rule's first loop
(``loop_stop``: :func:`tasks.muep.eval.metrics.disoriented`) or after ``max_invalid_streak`` invalid actions in a
row (in no protocol; off by default). It
also ends when the agent may not make another model call (``call_budget``); an agent whose ``reset`` raises fails
the episode without an action (``agent_error``).

An agent never crashes the harness: an exception in ``act`` (time-out, bad answer, a model error) is recorded with
the step and counts as an invalid (empty) action; anything that is not a string counts as "". Failures of the
environment itself (a game that cannot be built) are not the agent's: they fail the batch with a readable error.

Games run on the worker's :class:`~tasks.muep.textworld_env.GameEngine`: a batch holds consecutive episodes of the
same scene instances and announces the goals of every selected episode of those instances, so each instance is
translated once per worker for all its games, by every agent. Where the time of an agent-episode goes (game load,
game steps, the agent, goal counting) is measured apart from the results (:class:`EpisodeTiming`), so results stay
byte-for-byte reproducible.
"""

from __future__ import annotations

import logging
import os
import resource
import sys
import time
from dataclasses import dataclass, field

from cachetools import LRUCache

from core.errors import DataError
from tasks.muep.eval.agents import AgentBudgetExhausted, AgentContext, build_agent
from tasks.muep.eval.agents.base import Agent
from tasks.muep.eval.env import EvalEnv, announce, engine, for_protocol, normalise_action
from tasks.muep.eval.metrics import disoriented
from tasks.muep.eval.protocol import PROTOCOLS, released_repeat
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
    """Everything a worker needs (picklable): where each dataset's scene metadata is, ``muep.eval`` and the agents'
    context."""

    metadata_dir: str
    """Scene metadata of the demonstrations' episodes (``data/muep/metadata``)."""
    params: EvalParams = field(default_factory=lambda: EvalParams())
    context: AgentContext = field(default_factory=AgentContext)
    alfworld_metadata_dir: str = ""
    """Scene metadata of ALFWorld's test games (``data/muep/alfworld/metadata``)."""
    images_dir: str = ""
    """Where the episode viewer's images go (``<work dir>/images``, content-addressed; tasks/viewer): every state of
    every episode drawn small by the schematic renderer, its name kept in the step record. Empty: none."""

    def metadata_of(self, source: str) -> str:
        """The scene metadata directory of a dataset (``demos`` or ``alfworld``)."""
        if source == "alfworld":
            if not self.alfworld_metadata_dir:
                raise DataError("an ALFWorld game is to be played but no ALFWorld scene metadata directory was given.")
            return self.alfworld_metadata_dir
        if source != "demos":
            raise DataError(f"unknown episode source {source!r}; known: demos, alfworld.")
        return self.metadata_dir

    def metadata_for(self, spec: EpisodeSpec) -> str:
        return self.metadata_of(spec.source)


@dataclass
class EvalBatch:
    batch_id: str
    agents: list[tuple[str, str]]          # (registry name, label) of every agent that plays the batch
    episodes: list[EpisodeSpec]
    scene_goals: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    """(source, scene, task type, object type, target type) of every selected episode of the batch's scene
    instances (in any batch): announced to the engine."""

    @property
    def agent_episodes(self) -> int:
        return len(self.agents) * len(self.episodes)


@dataclass(frozen=True)
class EpisodeTiming:
    """Where one agent-episode's time went (seconds). Kept apart from :class:`EpisodeResult`: timings differ from run
    to run, results must not."""

    agent: str
    episode_id: str
    steps: int
    load_s: float          # building and resetting the game
    game_s: float          # TextWorld executing the actions (and the admissible commands shown to the agent)
    agent_s: float         # the agent's reset and act calls
    metrics_s: float       # counting sub-goals and goal conditions after every state, the loop check
    total_s: float         # the whole episode (the rest: observations, records)
    cpu_s: float = 0.0     # CPU time of the worker process during the episode (less sensitive to a loaded machine)


@dataclass
class BatchOutput:
    results: list[EpisodeResult]
    timings: list[EpisodeTiming]
    announce_s: float      # announcing the batch's scene goals to the engine
    pid: int
    max_rss_mb: float      # the worker process's peak resident memory so far


_RENDERERS: dict[tuple[str, int], object] = {}


def _renderer(settings: EvalSettings):
    from tasks.muep.render import build_renderer

    key = (settings.params.renderer, settings.params.render_size)
    if key not in _RENDERERS:
        _RENDERERS[key] = build_renderer(key[0], size=key[1])
    return _RENDERERS[key]


def _viewer_renderer(settings: EvalSettings, env: EvalEnv):
    """The renderer of the episode viewer's images (schematic, small), begun on the episode's scene; None without
    ``images_dir``."""
    if not settings.images_dir:
        return None
    from tasks.muep.render import build_renderer
    from tasks.viewer.pages import IMAGE_SIZE

    key = ("schematic", IMAGE_SIZE)
    if key not in _RENDERERS:
        _RENDERERS[key] = build_renderer(key[0], size=key[1])
    _RENDERERS[key].begin_scene(env.layout)
    return _RENDERERS[key]


#: The viewer images this process saved, by (folder, layout, state): the image is a function of the two, and both
#: agents start an episode from the same state (a quarter of a paper-profile run's images were drawn before).
SAVED_IMAGES_KEPT = 4096
_SAVED_IMAGES: LRUCache[tuple, str] = LRUCache(SAVED_IMAGES_KEPT)


def forget_saved_images() -> None:
    """Drop the names of the viewer images this process saved (the next one of any state is drawn and saved):
    for measuring a drawing."""
    _SAVED_IMAGES.clear()


def _viewer_image(settings: EvalSettings, env: EvalEnv, renderer) -> str | None:
    """The viewer's image of the current state, saved once under ``images_dir``: its file name, or None."""
    if renderer is None:
        return None
    from tasks.muep.render.schematic import state_key
    from tasks.viewer.pages import save_image

    drawn = state_key(env.layout, env.state)
    key = (settings.images_dir, *drawn) if drawn is not None else None
    name = _SAVED_IMAGES.get(key) if key is not None else None
    if name is not None and os.path.exists(os.path.join(settings.images_dir, name)):
        return name
    name = save_image(settings.images_dir, env.picture(renderer))
    if key is not None:
        _SAVED_IMAGES[key] = name
    return name


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:RAW_CHARS]


def max_rss_mb() -> float:
    """Peak resident memory of this process (MiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def run_episode(spec: EpisodeSpec, agent: Agent, label: str, settings: EvalSettings,
                timings: list[EpisodeTiming] | None = None) -> EpisodeResult:
    """Play one episode; its timing is appended to ``timings`` when given."""
    params = settings.params
    protocol = PROTOCOLS[params.protocol]
    spec = for_protocol(spec, protocol)
    start, cpu_start = time.perf_counter(), time.process_time()
    env = EvalEnv.start(spec, settings.metadata_for(spec))
    load_s = time.perf_counter() - start
    counted_at_load = env.metrics_s
    game_s = agent_s = loop_s = 0.0
    first = env.observation
    initial_goals, initial_conditions = env.progress
    steps: list[StepRecord] = []
    history: list[Turn] = []
    observations, actions = [first], []
    current, streak, end, failure, stopped = first, 0, "max_steps", None, None
    clock = time.perf_counter()
    try:
        agent.reset(spec if agent.privileged else spec.without_expert())
    except Exception as exc:  # noqa: BLE001 - an agent that cannot start an episode fails it, nothing more
        end, failure = "agent_error", _error(exc)
    agent_s += time.perf_counter() - clock
    renderer = _renderer(settings) if agent.multimodal and failure is None else None
    if renderer is not None:
        renderer.begin_scene(env.layout)
    viewer = _viewer_renderer(settings, env)
    initial_image = _viewer_image(settings, env, viewer)
    for i in range(1, (params.max_steps if failure is None else 0) + 1):
        clock = time.perf_counter()
        admissible = env.admissible()
        game_s += time.perf_counter() - clock
        obs = Observation(instruction=spec.instruction, task_type=spec.task_type, step=i, text=current,
                          history=tuple(history), admissible=admissible, grammar=spec.grammar,
                          image=env.image(renderer) if renderer is not None else None)
        agent.last_raw, error = None, None
        clock = time.perf_counter()
        try:
            answer = agent.act(obs)
        except AgentBudgetExhausted:
            agent_s += time.perf_counter() - clock
            end = "call_budget"
            break
        except Exception as exc:  # noqa: BLE001 - an agent failure is an invalid action, never a crash
            answer, error = "", _error(exc)
        agent_s += time.perf_counter() - clock
        action = normalise_action(answer)
        raw = agent.last_raw if agent.last_raw is not None else (answer if isinstance(answer, str) else repr(answer))
        if protocol.released_stop and released_repeat(actions, action) is not None:
            end, stopped = "loop", action
            break
        clock = time.perf_counter()
        out = env.step(action)
        game_s += time.perf_counter() - clock
        steps.append(StepRecord(step=i, action=action, observation=out.observation, valid=out.valid, won=out.won,
                                goals_met=out.goals_met, raw=raw[:RAW_CHARS] if raw != action else None,
                                error=error, conditions_met=out.conditions_met, admissible=action in admissible,
                                image=_viewer_image(settings, env, viewer)))
        history.append(Turn(current, action))
        observations.append(out.observation)
        actions.append(action)
        current = out.observation
        streak = 0 if out.valid else streak + 1
        if out.won:
            end = "won"
            break
        if params.loop_stop:
            clock = time.perf_counter()
            looping = disoriented(observations, actions)
            loop_s += time.perf_counter() - clock
            if looping:
                end = "loop"
                break
        if params.max_invalid_streak is not None and streak >= params.max_invalid_streak:
            end = "invalid_streak"
            break
    if steps and failure is None and type(agent).finish is not Agent.finish:  # only agents that listen
        clock = time.perf_counter()
        try:
            agent.finish(Observation(instruction=spec.instruction, task_type=spec.task_type, step=len(steps) + 1,
                                     text=current, history=tuple(history), admissible=env.admissible(),
                                     grammar=spec.grammar), end == "won")
        except Exception as exc:  # noqa: BLE001 - the episode is over; an agent's goodbye cannot change it
            log.warning("agent %s: finish() failed after episode %s: %s", label, spec.episode_id, _error(exc))
        agent_s += time.perf_counter() - clock
    result = EpisodeResult(agent=label, episode_id=spec.episode_id, split=spec.split, scene=spec.scene,
                           task_type=spec.task_type, instruction=spec.instruction, initial_observation=first,
                           goals_total=env.goals_total, initial_goals_met=initial_goals, success=env.game.won(),
                           end_reason=end, agent_calls=agent.calls, steps=tuple(steps), error=failure,
                           conditions_total=env.conditions_total, initial_conditions_met=initial_conditions,
                           initial_image=initial_image, protocol=protocol.name, stopped_action=stopped)
    if timings is not None:
        timings.append(EpisodeTiming(agent=label, episode_id=spec.episode_id, steps=len(steps),
                                     load_s=round(load_s - counted_at_load, 6),
                                     game_s=round(game_s - (env.metrics_s - counted_at_load), 6),
                                     agent_s=round(agent_s, 6), metrics_s=round(env.metrics_s + loop_s, 6),
                                     total_s=round(time.perf_counter() - start, 6),
                                     cpu_s=round(time.process_time() - cpu_start, 6)))
    return result


def run_batch(batch: EvalBatch, settings: EvalSettings) -> BatchOutput:
    """Build the batch's agents (a model is loaded once per worker process) and play every episode with each of
    them, episode by episode, on this process's game engine."""
    start = time.perf_counter()
    games = engine()
    announce(games, [(settings.metadata_of(source), *goal) for source, *goal in batch.scene_goals])
    announce_s = time.perf_counter() - start
    agents: list[tuple[Agent, str]] = []
    try:
        for name, label in batch.agents:
            agents.append((build_agent(name, settings.params, settings.context), label))
        results: list[EpisodeResult] = []
        timings: list[EpisodeTiming] = []
        for spec in batch.episodes:
            for agent, label in agents:
                results.append(run_episode(spec, agent, label, settings, timings))
    finally:
        for agent, _ in agents:
            agent.close()
    return BatchOutput(results, timings, round(announce_s, 6), os.getpid(), round(max_rss_mb(), 1))
