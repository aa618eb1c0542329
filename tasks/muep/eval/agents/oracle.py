"""``oracle``: replays the planner's actions from episodes.parquet. It must win every episode with every action
valid (SR = LC = 1): a check of the whole harness -- game construction, action passing, goal counting, metrics."""

from __future__ import annotations

from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.records import EpisodeSpec, Observation


class OracleAgent(Agent):
    name = "oracle"
    privileged = True

    @classmethod
    def describe(cls, params) -> AgentInfo:
        return AgentInfo(name=cls.name, label=cls.name, model="ff-planner")

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self._plan = list(episode.expert_actions)

    def act(self, observation: Observation) -> str:
        # After the plan (which wins), nothing is left to say: an empty action, i.e. an invalid one.
        return self._plan.pop(0) if self._plan else ""
