"""One evaluation game: the episode's TextWorld game (text observations), its goal counter, and on request the
rendered image of the current state (visual observations for multimodal agents).

The game is built exactly as the demonstrations stage built it (same scene context, same ADL problem, same grammar),
so the expert's actions replay to a win -- the ``oracle`` agent checks that on every episode.

TextWorld keeps a game's state in Fast Downward's process-global library: one game per process at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.errors import DataError
from tasks.muep.demos import scene_context
from tasks.muep.eval.goals import GoalCounter
from tasks.muep.eval.records import EpisodeSpec
from tasks.muep.pddl import Problem
from tasks.muep.textworld_env import Game, load_game, single_translation
from tasks.muep.world_state import SceneLayout, WorldState

#: Longest action string sent to the game; longer answers are cut (and are invalid anyway).
MAX_ACTION_CHARS = 200


def normalise_action(raw: object) -> str:
    """What the harness sends to the game: the agent's string with whitespace collapsed, cut to
    :data:`MAX_ACTION_CHARS`. Anything that is not a string (None, a number) becomes "" (an invalid action)."""
    if not isinstance(raw, str):
        return ""
    return " ".join(raw.split())[:MAX_ACTION_CHARS]


@dataclass
class Outcome:
    observation: str
    valid: bool
    won: bool
    goals_met: int
    state: WorldState


@dataclass
class EvalEnv:
    spec: EpisodeSpec
    game: Game
    goals: GoalCounter
    layout: SceneLayout
    state: WorldState | None = None
    observation: str = ""
    _steps: int = field(default=0, repr=False)

    @classmethod
    def start(cls, spec: EpisodeSpec, metadata_dir: str) -> EvalEnv:
        """Build the episode's game and reset it: ``observation`` and ``state`` hold the initial ones."""
        ctx = scene_context(metadata_dir, spec.scene)
        problem = Problem(f"eval_{spec.episode_id}", ctx.receptacles, ctx.instances, spec.task_type,
                          spec.object_type, spec.target_type)
        why = problem.check()
        if why:
            raise DataError(f"episode {spec.episode_id} ({spec.scene}) cannot be posed with the metadata in "
                            f"{metadata_dir}: {why}.", hint="The metadata changed since the demonstrations: rerun "
                            "`dvc repro`.")
        # Loading and resetting each translate the problem to SAS; one shared memo halves the start-up cost.
        with single_translation():
            game = load_game(problem, spec.instruction, spec.grammar)
            env = cls(spec, game, GoalCounter.for_problem(problem), ctx.layout)
            env.observation, env.state = game.reset()
        return env

    def admissible(self) -> tuple[str, ...]:
        return tuple(sorted(self.game.admissible()))

    def goals_met(self) -> int:
        assert self.state is not None, "start() first"
        return self.goals.met(self.state)

    def step(self, action: str) -> Outcome:
        self._steps += 1
        step = self.game.step(action, self._steps)
        self.observation, self.state = step.observation, step.state
        return Outcome(step.observation, step.valid, step.won, self.goals.met(step.state), step.state)

    def image(self, renderer) -> bytes:
        """PNG of the current state drawn by ``renderer`` (a :class:`~tasks.muep.render.Renderer` whose
        ``begin_scene(self.layout)`` was called once for this episode: for ``thor`` it resets the simulator)."""
        assert self.state is not None, "start() first"
        return renderer.render(self.layout, self.state)

    def close(self) -> None:
        close = getattr(self.game.env, "close", None)
        if callable(close):
            close()
