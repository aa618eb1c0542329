"""``hf`` (a local causal LM) and ``hf-vision`` (a local image-text-to-text model fed the rendered state), each with
an optional PEFT adapter, or a fine-tuned baseline directory of the training pipeline (``baseline.json``): see
:mod:`tasks.muep.eval.agents.hf_models`.

The prompt: a baseline that offers ``prompt_body(instruction, history, observation)`` (the training pipeline's
policies do) renders its own, exactly as in its training (its history window, the text or vision body); any other
model gets the SFT record format (:func:`tasks.muep.eval.prompts.text_prompt`) with ``muep.sft.history_window``
turns of history."""

from __future__ import annotations

import io
from pathlib import Path

from core.errors import ConfigError
from tasks.muep.eval import prompts
from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.agents.hf_models import check_paths, load_generator
from tasks.muep.eval.records import Observation


def _label(prefix: str, model_path: str | None, adapter_path: str | None) -> str:
    model = Path(model_path).name if model_path else "?"
    return f"{prefix}:{model}" + (f"+{Path(adapter_path).name}" if adapter_path else "")


class HFAgent(Agent):
    name = "hf"
    key = "hf"
    vision = False

    @classmethod
    def _sub(cls, params):
        return getattr(params, cls.key)

    @classmethod
    def describe(cls, params) -> AgentInfo:
        sub = cls._sub(params)
        return AgentInfo(name=cls.name, label=_label(cls.name, sub.model_path, sub.adapter_path),
                         model=sub.model_path or "", adapter=sub.adapter_path or "", multimodal=cls.multimodal)

    @classmethod
    def preflight(cls, params) -> None:
        sub = cls._sub(params)
        check_paths(cls.key, sub.model_path, sub.adapter_path)

    def __init__(self, params, context):
        super().__init__(params, context)
        sub = self._sub(params)
        self.max_new_tokens = sub.max_new_tokens
        self.generator = load_generator(self.key, sub.model_path, sub.adapter_path, self.vision)
        kind = getattr(self.generator, "kind", None)
        if kind in ("text", "vision") and (kind == "vision") != self.vision:
            other = "hf-vision" if kind == "vision" else "hf"
            raise ConfigError(f"muep.eval.{self.key}.model_path: {sub.model_path} is a {kind} baseline; evaluate it "
                              f"with the {other!r} agent.")

    def _prompt(self, observation: Observation) -> str:
        body = getattr(self.generator, "prompt_body", None)
        if callable(body):
            return body(observation.instruction, [(t.observation, t.action) for t in observation.history],
                        observation.text)
        return prompts.text_prompt(observation, self.context.history_window)

    def _image(self, observation: Observation):
        return None

    def act(self, observation: Observation) -> str:
        prompt = self._prompt(observation)
        self.calls += 1
        self.last_raw = self.generator.generate(prompt, self._image(observation), self.max_new_tokens)
        return prompts.parse_action(self.last_raw)


class HFVisionAgent(HFAgent):
    name = "hf-vision"
    key = "hf_vision"
    vision = True
    multimodal = True

    def _image(self, observation: Observation):
        from PIL import Image

        if observation.image is None:
            raise ValueError("no image in the observation")
        return Image.open(io.BytesIO(observation.image)).convert("RGB")
