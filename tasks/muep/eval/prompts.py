"""Prompts of the language-model agents and the parsing of their answers into one action.

* :func:`chat_messages` -- the ``openai`` agent's chat (templates in ``prompts.yaml``, next to this module);
* :func:`text_prompt` -- the ``hf`` agents' prompt: the SFT record format of :func:`tasks.muep.sft.render_prompt`
  with the last ``history_window`` turns, exactly what a fine-tuned baseline was trained on;
* :func:`parse_action` -- the one command in a free-text answer.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml

from core.errors import DataError
from tasks.muep.eval.records import Observation
from tasks.muep.vocab import TASK_TYPES

PROMPTS_FILE = Path(__file__).with_name("prompts.yaml")
_KEYS = {"version": int, "system": str, "commands": list, "put": dict, "examples_intro": str, "example": str,
         "observation": str, "action": str}


@cache
def templates(path: Path = PROMPTS_FILE) -> dict:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"{path}: cannot read the agent prompts ({exc}).") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: the top level must be a mapping.")
    for key, kind in _KEYS.items():
        if not isinstance(data.get(key), kind):
            raise DataError(f"{path}: key {key!r} must be a {kind.__name__}, got {type(data.get(key)).__name__}.")
    return data


def system_message(grammar: str, examples: list[tuple[str, str]] = ()) -> str:
    """The system message: instructions, the grammar's commands, then ``examples`` as (task type, transcript)."""
    t = templates()
    if grammar not in t["put"]:
        raise DataError(f"{PROMPTS_FILE}: no 'put' command for grammar {grammar!r} (has {', '.join(t['put'])}).")
    commands = "\n".join("  " + c.replace("{put}", t["put"][grammar]) for c in t["commands"])
    text = t["system"].format(grammar=grammar, commands=commands)
    if examples:
        shown = [t["example"].format(n=n, task=TASK_TYPES[kind].label if kind in TASK_TYPES else kind,
                                     transcript=transcript) for n, (kind, transcript) in enumerate(examples, 1)]
        text += "\n\n" + t["examples_intro"] + "\n\n" + "\n\n".join(shown)
    return text


def transcript(observations: list[str], actions: list[str]) -> str:
    """A demonstration as text: o_0, > a_1, o_1, ... (the format of the examples in the system message)."""
    t = templates()
    lines = [t["observation"].format(text=observations[0].strip())]
    for action, text in zip(actions, observations[1:], strict=True):
        lines += ["> " + t["action"].format(action=action), t["observation"].format(text=text.strip())]
    return "\n".join(lines)


_MOVE = (re.compile(r"^(> (?:Action: )?)move (.+?) to (.+)$", re.MULTILINE),
         re.compile(r"You move the (.+?) to the (.+?)\."))


def respelled(transcript_text: str, grammar: str) -> str:
    """A demonstration of the ``alfworld-0.4`` grammar in a grammar that puts with "put X in/on Y": its put commands
    and their feedback ("You put the X in/on the Y.") respelled; unchanged for ``alfworld-0.4``. Other texts stay
    (a "You arrive at" line names the receptacle, where the released grammar names the location)."""
    if grammar == "alfworld-0.4":
        return transcript_text
    command, feedback = _MOVE
    text = command.sub(lambda m: f"{m[1]}put {m[2]} in/on {m[3]}", transcript_text)
    return feedback.sub(lambda m: f"You put the {m[1]} in/on the {m[2]}.", text)


def chat_messages(observation: Observation, examples: list[tuple[str, str]] = ()) -> list[dict[str, str]]:
    t = templates()
    examples = [(kind, respelled(text, observation.grammar)) for kind, text in examples]
    messages = [{"role": "system", "content": system_message(observation.grammar, examples)}]
    for turn in observation.history:
        messages.append({"role": "user", "content": t["observation"].format(text=turn.observation.strip())})
        messages.append({"role": "assistant", "content": t["action"].format(action=turn.action)})
    messages.append({"role": "user", "content": t["observation"].format(text=observation.text.strip())})
    return messages


def text_prompt(observation: Observation, history_window: int) -> str:
    """The SFT record prompt (:func:`tasks.muep.sft.render_prompt`) for this observation."""
    from tasks.muep.sft import HistoryTurn, ImageRef, SFTRecord, render_prompt

    turns = observation.history[-history_window:] if history_window > 0 else ()
    record = SFTRecord(id="", episode_id="", step=observation.step, split="", scene="",
                       task_type=observation.task_type, instruction=observation.instruction,
                       history=[HistoryTurn(t.observation, t.action) for t in turns], observation=observation.text,
                       image=ImageRef("", ""), target_action="", grammar=observation.grammar, renderer="")
    return render_prompt(record)


_LABELLED = re.compile(r"^\s*(?:[*_#>\s-]*)(?:next\s+)?(?:action|command)\s*[:：]\s*(.+)$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*```")


def parse_action(text: str | None) -> str:
    """The one command in a model's answer: the last line labelled "Action:" (or "Command:"), else the first
    non-empty line; without leading "> ", "- ", quotes or backticks, without a final period, lower-cased, with
    whitespace collapsed. Nothing is matched against the admissible commands: a wrong command stays wrong (LC)."""
    if not text:
        return ""
    lines = [line for line in text.splitlines() if line.strip() and not _FENCE.match(line)]
    labelled = [m.group(1) for line in lines if (m := _LABELLED.match(line))]
    chosen = labelled[-1] if labelled else (lines[0] if lines else "")
    chosen = chosen.strip().lstrip(">-*• \t").strip().strip("`'\"").strip()
    chosen = chosen.rstrip(".").strip().strip("`'\"")
    return " ".join(chosen.lower().split())
