"""``hf`` (a local causal LM) and ``hf-vision`` (a local image-text-to-text model fed the rendered state), each with
an optional PEFT adapter, or a fine-tuned baseline directory of the training pipeline (``baseline.json``): see
:mod:`tasks.muep.eval.agents.hf_models`.

The prompt: a baseline that offers ``prompt_body(instruction, history, observation)`` (the training pipeline's
policies do) renders its own, exactly as in its training (its history window, the text or vision body); an instruct
model with a chat template gets the ``openai`` agent's conversation (:func:`tasks.muep.eval.prompts.chat_messages`,
the game's rules and commands, then the whole history as turns, no demonstration: zero-shot); any other model gets the
SFT record format (:func:`tasks.muep.eval.prompts.text_prompt`) with ``muep.sft.history_window`` turns of history.

The answer becomes a command as ``action_selection`` says (:mod:`tasks.muep.eval.agents.selection`): ranking the
admissible commands by the model's log-likelihood (the default), or free generation, as written or mapped to the
closest admissible command. The label says which (``[rank]``), and whether the model is zero-shot or a fine-tuned
baseline (``(Q-LoRA, 30 steps)``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from core.errors import ConfigError
from tasks.muep.eval import prompts
from tasks.muep.eval.agents import selection
from tasks.muep.eval.agents.base import Agent, AgentInfo
from tasks.muep.eval.agents.hf_models import check_paths, load_generator
from tasks.muep.eval.records import Observation

METHOD_NAMES = {"qlora": "Q-LoRA", "projection": "projection", "llama_adapter_v2": "LLaMA-Adapter-v2"}


def _how_trained(model_path: str | None) -> str:
    """"zero-shot", or the fine-tuning of a trained baseline ("Q-LoRA, 30 steps") read from its baseline.json."""
    card = Path(model_path) / "baseline.json" if model_path else None
    if card is None or not card.is_file():
        return "zero-shot"
    try:
        data = json.loads(card.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "fine-tuned"
    method = METHOD_NAMES.get(data.get("method", ""), data.get("method", "fine-tuned"))
    tiny = ", tiny random base" if data.get("profile") == "tiny" else ""
    return f"{method}, {data.get('trained_steps', '?')} steps{tiny}"


def _label(prefix: str, model_path: str | None, adapter_path: str | None, how: str = "") -> str:
    model = Path(model_path).name if model_path else "?"
    label = f"{prefix}:{model}" + (f"+{Path(adapter_path).name}" if adapter_path else "")
    return f"{label} {how}" if how else label


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
        how = f"({_how_trained(sub.model_path)}) [{sub.action_selection}]"
        return AgentInfo(name=cls.name, label=_label(cls.name, sub.model_path, sub.adapter_path, how),
                         model=sub.model_path or "", adapter=sub.adapter_path or "", multimodal=cls.multimodal)

    @classmethod
    def preflight(cls, params) -> None:
        sub = cls._sub(params)
        check_paths(cls.key, sub.model_path, sub.adapter_path)

    def __init__(self, params, context):
        super().__init__(params, context)
        sub = self._sub(params)
        self.max_new_tokens = sub.max_new_tokens
        self.selection = sub.action_selection
        self.generator = load_generator(self.key, sub.model_path, sub.adapter_path, self.vision, sub.dtype,
                                        sub.threads)
        kind = getattr(self.generator, "kind", None)
        if kind in ("text", "vision") and (kind == "vision") != self.vision:
            other = "hf-vision" if kind == "vision" else "hf"
            raise ConfigError(f"muep.eval.{self.key}.model_path: {sub.model_path} is a {kind} baseline; evaluate it "
                              f"with the {other!r} agent.")
        if self.selection == "rank" and not callable(getattr(self.generator, "score", None)):
            raise ConfigError(f"muep.eval.{self.key}.action_selection is 'rank' but {sub.model_path} cannot score "
                              "candidates.", hint="Use action_selection: generate or generate-closest.")

    def reset(self, episode) -> None:
        super().reset(episode)
        reset = getattr(self.generator, "reset", None)
        if callable(reset):
            reset()

    def _prompt(self, observation: Observation):
        body = getattr(self.generator, "prompt_body", None)
        if callable(body):
            return body(observation.instruction, [(t.observation, t.action) for t in observation.history],
                        observation.text)
        if getattr(self.generator, "chat", False):
            return prompts.chat_messages(observation)
        return prompts.text_prompt(observation, self.context.history_window)

    def _image(self, observation: Observation):
        return None

    def act(self, observation: Observation) -> str:
        prompt = self._prompt(observation)
        image = self._image(observation)
        self.calls += 1
        if self.selection == "rank":
            candidates = list(observation.admissible)
            if not candidates:
                self.last_raw = "rank: no admissible command"
                return ""
            from tasks.hf.scoring import best

            sums, lengths = self.generator.score(prompt, candidates, image)
            self.last_raw = selection.ranked(candidates, sums, lengths)
            return candidates[best(sums, lengths)]
        self.last_raw = self.generator.generate(prompt, image, self.max_new_tokens)
        action = prompts.parse_action(self.last_raw)
        if self.selection == "generate-closest" and observation.admissible:
            return selection.closest(action, observation.admissible)
        return action


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
