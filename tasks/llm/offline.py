"""The ``offline`` backend: a deterministic, seeded proposer that needs no network and no weights.

It reads the same prompt a real model would get and answers in the same free-text format, so the same parser,
cache and filter handle both. What it can answer is a registry of *skills*: each skill recognises the prompts of
one pipeline stage (MuEP task generation, RoboScript task queries, ...) and writes an answer from what the prompt
says -- never from files the real model could not see. With ``llm.offline.noise`` > 0 it makes the mistakes real
models make (items that are not in the scene, impossible receptacles, tasks the room cannot host, sloppy lines),
so the filter's criteria are exercised on every run.

The answer is a pure function of (messages, seed, noise): the same prompt gives the same text on every machine.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Protocol

from core.errors import LLMError
from core.plugins import OFFLINE_SKILLS
from tasks.llm.base import ChatRequest, Completion
from tasks.params import LLMParams


class OfflineSkill(Protocol):
    def matches(self, messages: Sequence[tuple[str, str]]) -> bool: ...

    def respond(self, messages: Sequence[tuple[str, str]], rng: random.Random, noise: float) -> str: ...




class OfflineBackend:
    name = "offline"

    def __init__(self, params: LLMParams):
        self.params = params
        self.model = params.model
        self.skills = [(name, OFFLINE_SKILLS.load(name)()) for name in OFFLINE_SKILLS]

    def complete(self, request: ChatRequest) -> Completion:
        for _, skill in self.skills:
            if skill.matches(request.messages):
                digest = hashlib.sha256(repr((request.messages, request.seed)).encode("utf-8")).digest()
                rng = random.Random(int.from_bytes(digest[:8], "big"))
                text = skill.respond(request.messages, rng, self.params.offline.noise)
                return Completion(text=text, finish_reason="stop", backend=self.name, model=self.model)
        raise LLMError(
            "the offline proposer has no skill for this prompt (known: "
            f"{', '.join(OFFLINE_SKILLS.names())}).",
            hint="Configure a real model with llm.backend: openai and llm.base_url.",
        )
