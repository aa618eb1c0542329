"""``openai``: a chat model over any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp), through the project's LLM
layer (:mod:`tasks.llm`, backend ``openai``: retries with backoff on 429 / 5xx / time-outs, readable errors).

The bill is bounded: at most ``max_calls_per_episode`` requests per episode (then the episode ends with
``call_budget``), each retried at most ``max_retries`` times -- so never more than
``max_calls_per_episode * (1 + max_retries)`` HTTP requests an episode. No response cache: every step asks anew.
A failing request (after its retries) is an invalid action; an endpoint that cannot be reached at all fails the
stage before the first episode (:meth:`OpenAIAgent.preflight`).
"""

from __future__ import annotations

from core.errors import LLMError
from tasks.muep.eval import prompts
from tasks.muep.eval.agents.base import Agent, AgentBudgetExhausted, AgentInfo
from tasks.muep.eval.records import EpisodeSpec, Observation


def _llm_params(params):
    from tasks.params import LLMParams

    o = params.openai
    return LLMParams(backend="openai", model=o.model, base_url=o.base_url, api_key_env=o.api_key_env,
                     temperature=o.temperature, max_tokens=max(16, o.max_tokens), seed=params.seed,
                     timeout_s=o.timeout_s, max_retries=o.max_retries, backoff_s=1.0, max_backoff_s=10.0,
                     concurrency=1)


class OpenAIAgent(Agent):
    name = "openai"

    @classmethod
    def describe(cls, params) -> AgentInfo:
        return AgentInfo(name=cls.name, label=f"openai:{params.openai.model}", model=params.openai.model)

    @classmethod
    def preflight(cls, params) -> None:
        """One tiny request: a wrong key, model or URL stops the stage here, not after hundreds of invalid steps."""
        from tasks.llm import build_client
        from tasks.llm.base import ChatRequest

        client = build_client(_llm_params(params), cache_dir=None)  # ConfigError when the key is missing
        try:
            client.complete(ChatRequest.of([{"role": "user", "content": "Reply with OK."}], temperature=0.0,
                                           max_tokens=16, seed=params.seed))
        except LLMError as exc:
            raise LLMError(f"muep.eval.openai: the endpoint does not answer a test request: {exc}",
                           hint="Check muep.eval.openai.base_url, .model and the key in $"
                           f"{params.openai.api_key_env}.") from None

    def __init__(self, params, context):
        super().__init__(params, context)
        from tasks.llm import build_client

        self.client = build_client(_llm_params(params), cache_dir=None)
        self.cap = params.openai.max_calls_per_episode

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        wanted = self.params.openai.few_shot
        pool = self.context.examples
        chosen = [(episode.task_type, t) for t in pool.get(episode.task_type, [])][:wanted]
        for kind in sorted(pool):  # fewer of this type than asked: fill with other types, in a fixed order
            if len(chosen) >= wanted:
                break
            if kind != episode.task_type:
                chosen += [(kind, t) for t in pool[kind]][: wanted - len(chosen)]
        self.examples = chosen

    def act(self, observation: Observation) -> str:
        from tasks.llm.base import ChatRequest

        if self.calls >= self.cap:
            raise AgentBudgetExhausted(f"{self.calls} calls made, max_calls_per_episode is {self.cap}")
        self.calls += 1
        o = self.params.openai
        request = ChatRequest.of(prompts.chat_messages(observation, self.examples), temperature=o.temperature,
                                 max_tokens=o.max_tokens, seed=self.params.seed)
        self.last_raw = self.client.complete(request).text
        return prompts.parse_action(self.last_raw)
