"""One evaluation game: the episode's TextWorld game (text observations), its goal tracker, and on request the
rendered image of the current state (visual observations for multimodal agents).

The game is built exactly as the demonstrations stage built it (same scene context, same ADL problem, same grammar),
on the same engine (:class:`~tasks.muep.textworld_env.GameEngine`): the games of one scene instance share one Fast
Downward translation and every game of a worker process one ``PddlEnv``, so a worker's memory stays flat over any
number of episodes. The expert's actions replay to a win -- the ``oracle`` agent checks that on every episode.

TextWorld keeps a game's state in Fast Downward's process-global library: one game per process at a time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from core.errors import DataError
from tasks.muep.demos import scene_context
from tasks.muep.eval.goals import GoalCounter, GoalTracker
from tasks.muep.eval.protocol import Protocol
from tasks.muep.eval.records import EpisodeSpec
from tasks.muep.pddl import Problem
from tasks.muep.textworld_env import Game, GameEngine, put_command
from tasks.muep.world_state import SceneLayout, WorldState

#: Longest action string sent to the game; longer answers are cut (and are invalid anyway).
MAX_ACTION_CHARS = 200

_ENGINE: list[GameEngine] = []


def engine() -> GameEngine:
    """This process's game engine (one per worker process, kept across batches)."""
    if not _ENGINE:
        _ENGINE.append(GameEngine())
    return _ENGINE[0]


def normalise_action(raw: object) -> str:
    """What the harness sends to the game: the agent's string with whitespace collapsed, cut to
    :data:`MAX_ACTION_CHARS`. Anything that is not a string (None, a number) becomes "" (an invalid action)."""
    if not isinstance(raw, str):
        return ""
    return " ".join(raw.split())[:MAX_ACTION_CHARS]


_PUT = (re.compile(r"^move (?P<o>.+?) to (?P<r>.+)$"), re.compile(r"^put (?P<o>.+?) in/on (?P<r>.+)$"))


def convert_command(command: str, grammar: str) -> str:
    """``command`` in ``grammar``: a put command ("move X to Y" / "put X in/on Y") is respelled, others are kept."""
    for pattern in _PUT:
        m = pattern.match(command)
        if m:
            return put_command(m["o"], m["r"], grammar)
    return command


def for_protocol(spec: EpisodeSpec, protocol: Protocol) -> EpisodeSpec:
    """The episode as ``protocol`` plays it: in its grammar, the expert's actions respelled."""
    if spec.grammar == protocol.grammar:
        return spec
    actions = tuple(convert_command(a, protocol.grammar) for a in spec.expert_actions)
    return EpisodeSpec(**(asdict(spec) | {"grammar": protocol.grammar, "expert_actions": actions}))


def pose(spec: EpisodeSpec, metadata_dir: str) -> tuple[Problem, SceneLayout]:
    """The episode's planning problem in its scene instance (``metadata_dir``), and the scene's layout."""
    ctx = scene_context(metadata_dir, spec.scene)
    problem = Problem(f"eval_{spec.episode_id}", ctx.receptacles, ctx.instances, spec.task_type, spec.object_type,
                      spec.target_type, location_names=ctx.released_locations)
    why = problem.check()
    if why:
        raise DataError(f"episode {spec.episode_id} ({spec.scene}) cannot be posed with the metadata in "
                        f"{metadata_dir}: {why}.", hint="The metadata changed since the episodes were made: rerun "
                        "`dvc repro`.")
    return problem, ctx.layout


SceneGoal = tuple[str, str, str, str, str]
"""(metadata directory, scene, task type, object type, target type): a game to come, as :func:`announce` takes it."""


def announce(games: GameEngine, goals: Iterable[SceneGoal]) -> None:
    """Tell the engine the goals of games to come, so that each scene instance is translated once for all of them.
    A goal that cannot be posed is left out (its episode fails with the reason when it is played)."""
    problems = []
    for metadata_dir, scene, task_type, object_type, target_type in goals:
        ctx = scene_context(metadata_dir, scene)
        problem = Problem("expected", ctx.receptacles, ctx.instances, task_type, object_type, target_type)
        if problem.check() is None:
            problems.append(problem)
    games.expect(problems)


@dataclass
class Outcome:
    observation: str
    valid: bool
    won: bool
    goals_met: int           # the paper's sub-goals done
    conditions_met: int      # ALFWorld's goal conditions met
    state: WorldState


@dataclass
class EvalEnv:
    spec: EpisodeSpec
    game: Game
    goals: GoalTracker
    layout: SceneLayout
    state: WorldState | None = None
    observation: str = ""
    progress: tuple[int, int] = (0, 0)   # (sub-goals, conditions) of the current state
    metrics_s: float = 0.0               # time spent counting goals (the rest of a step is the game's)
    _steps: int = field(default=0, repr=False)

    @classmethod
    def start(cls, spec: EpisodeSpec, metadata_dir: str, games: GameEngine | None = None) -> EvalEnv:
        """Build the episode's game on ``games`` (default: this process's engine) and reset it: ``observation``,
        ``state`` and ``progress`` hold the initial ones."""
        problem, layout = pose(spec, metadata_dir)
        game = (games or engine()).load(problem, spec.instruction, spec.grammar)
        env = cls(spec, game, GoalTracker(GoalCounter.for_problem(problem)), layout)
        env.observation, env.state = game.reset()
        env._track()
        return env

    def _track(self) -> None:
        start = time.perf_counter()
        self.progress = self.goals.update(self.state)
        self.metrics_s += time.perf_counter() - start

    @property
    def goals_total(self) -> int:
        return self.goals.counter.subgoals_total

    @property
    def conditions_total(self) -> int:
        return self.goals.counter.conditions_total

    def admissible(self) -> tuple[str, ...]:
        return tuple(sorted(self.game.admissible()))

    def step(self, action: str) -> Outcome:
        self._steps += 1
        step = self.game.step(action, self._steps)
        self.observation, self.state = step.observation, step.state
        self._track()
        return Outcome(step.observation, step.valid, step.won, *self.progress, step.state)

    def image(self, renderer) -> bytes:
        """PNG of the current state drawn by ``renderer`` (a :class:`~tasks.muep.render.Renderer` whose
        ``begin_scene(self.layout)`` was called once for this episode: for ``thor`` it resets the simulator)."""
        assert self.state is not None, "start() first"
        return renderer.render(self.layout, self.state)

    def picture(self, renderer):
        """The current state as ``renderer`` draws it, before encoding: a Pillow image where the renderer can give one
        (``picture``: the schematic renderer), else the PNG of :meth:`image`."""
        assert self.state is not None, "start() first"
        draw = getattr(renderer, "picture", None)
        return draw(self.layout, self.state) if draw is not None else renderer.render(self.layout, self.state)
