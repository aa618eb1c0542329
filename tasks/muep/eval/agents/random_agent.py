"""``random``: a uniformly random admissible command. Seeded per (seed, episode), so a result does not depend on
batching or worker order."""

from __future__ import annotations

import random

from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.records import EpisodeSpec, Observation


class RandomAgent(Agent):
    name = "random"

    @classmethod
    def describe(cls, params) -> AgentInfo:
        return AgentInfo(name=cls.name, label=cls.name, model="uniform-admissible")

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self._rng = random.Random(f"{self.context.seed}:{episode.episode_id}")

    def act(self, observation: Observation) -> str:
        return self._rng.choice(observation.admissible) if observation.admissible else ""
