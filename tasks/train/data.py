"""Training data from the SFT export: reading, prompt bodies, prompt templates, tokenisation with label masking.

* :func:`read_split` reads ``data/muep/sft/<split>.jsonl`` (one record per expert action; ``tasks/muep/sft.py``).
* Text baselines see ``Task`` + the last ``window`` (observation, action) pairs + the current textual observation
  (:func:`text_body`, the same rendering as ``tasks.muep.sft.render_prompt``); vision baselines see the rendered
  image + ``Task`` + the last ``window`` actions (:func:`vision_body`): the picture replaces the text state, as in the
  paper's Figure 5.
* A :class:`Template` wraps a body in a baseline's original prompt format; ``{image}`` marks where the visual tokens
  go, ``{bos}`` where the model's BOS token goes.
* :class:`Encoder` tokenises prompt + target; only the target (the action and EOS) carries labels, everything else is
  ``-100``. Sequences longer than ``max_seq_len`` drop their oldest history turns first.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import DataError

IGNORE = -100


@dataclass(frozen=True)
class Example:
    id: str
    episode_id: str
    step: int
    split: str
    task_type: str
    instruction: str
    history: tuple[tuple[str, str], ...]     # (observation, action), oldest first
    observation: str
    image_shard: str                          # relative to the repository root
    image_key: str
    action: str


_REQUIRED = ("instruction", "history", "observation", "image", "episode_id", "step")


def _example(raw: dict, where: str) -> Example:
    missing = [k for k in _REQUIRED if k not in raw]
    action = raw.get("target_action", raw.get("action"))
    if action is None:
        missing.append("target_action")
    if missing:
        raise DataError(f"{where}: record lacks {', '.join(missing)}.",
                        hint="The file does not follow the SFT export's format (tasks/muep/sft.py): rerun muep-sft.")
    image = raw["image"]
    if not isinstance(image, dict) or not {"shard", "key"} <= set(image):
        raise DataError(f"{where}: 'image' must be an object with 'shard' and 'key', got {image!r}.")
    try:
        history = tuple((str(t["observation"]), str(t["action"])) for t in raw["history"])
    except (TypeError, KeyError):
        raise DataError(f"{where}: 'history' must be a list of {{observation, action}} objects.") from None
    if not str(action).strip():
        raise DataError(f"{where}: the target action is empty.")
    return Example(id=str(raw.get("id", f"{raw['episode_id']}_{raw['step']}")), episode_id=str(raw["episode_id"]),
                   step=int(raw["step"]), split=str(raw.get("split", "")), task_type=str(raw.get("task_type", "")),
                   instruction=str(raw["instruction"]), history=history, observation=str(raw["observation"]),
                   image_shard=str(image["shard"]), image_key=str(image["key"]), action=str(action).strip())


def read_split(path: Path) -> list[Example]:
    """Every record of one JSON-lines split; a missing, empty or malformed file is a :class:`DataError`."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"SFT file {path} does not exist.", hint="Run the muep-sft stage first (`dvc repro muep-sft`).")
    out = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}, line {number}: not valid JSON ({exc}).") from None
            out.append(_example(raw, f"{path}, line {number}"))
    if not out:
        raise DataError(f"SFT file {path} has no records.",
                        hint="The demonstrations produced no episode of this split.")
    return out


def check_window(examples: list[Example], window: int, source: str) -> None:
    """The export keeps at most its own window of history; asking for more than it kept is an error, not a silent
    shorter history."""
    for ex in examples:
        if len(ex.history) < min(window, ex.step - 1):
            raise DataError(f"{source}: record {ex.id} (step {ex.step}) carries {len(ex.history)} history turns but "
                            f"train.history_window is {window}.",
                            hint="Raise muep.sft.history_window and rerun muep-sft, or lower train.history_window.")


def file_digest(paths: list[Path]) -> str:
    """sha256 over the files' bytes: the dataset version logged with every training run."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).name.encode())
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------------------------------
# Prompt bodies


def text_body(instruction: str, history, observation: str, window: int) -> str:
    """Task, the last ``window`` (observation, action) pairs, the current observation, the cue."""
    turns = list(history)[-window:] if window > 0 else []
    lines = [f"Task: {instruction}"]
    for obs, act in turns:
        lines += [f"Observation: {obs}", f"Action: {act}"]
    lines += [f"Observation: {observation}", "Next action:"]
    return "\n".join(lines)


def vision_body(instruction: str, history, window: int) -> str:
    """Task and the last ``window`` actions; the image stands for the current state."""
    turns = list(history)[-window:] if window > 0 else []
    lines = [f"Task: {instruction}"] + [f"Action: {act}" for _, act in turns] + ["Next action:"]
    return "\n".join(lines)


def body(example: Example, kind: str, window: int) -> str:
    if kind == "text":
        return text_body(example.instruction, example.history, example.observation, window)
    return vision_body(example.instruction, example.history, window)


# --------------------------------------------------------------------------------------------------------------------
# Templates


@dataclass(frozen=True)
class Template:
    name: str
    text: str          # with {body}, optionally {bos} and {image}
    source: str        # where the format comes from
    target_prefix: str = " "
    """What goes between the prompt and the action: a space where the answer continues the prompt's line, nothing
    where the prompt ends a chat turn."""

    def segments(self) -> list[str]:
        """The template split into literal text and the markers ``{bos}``, ``{image}``, ``{body}``."""
        return [s for s in re.split(r"(\{bos\}|\{image\}|\{body\})", self.text) if s]


TEMPLATES: dict[str, Template] = {t.name: t for t in [
    Template("llama2-inst", "{bos}[INST] {body} [/INST]", "Llama 2's instruction format ([INST] ... [/INST])"),
    Template("plain-bos", "{bos}{body}", "OPT has no chat format: BOS + the prompt, the answer continues it"),
    Template("plain", "{body}", "Bloomz (xP3): the prompt, the answer continues it; Bloom adds no BOS"),
    Template("blip2-qa", "{image}{bos}Question: {body} Answer:", "BLIP-2's VQA prompt 'Question: {} Answer:'"),
    Template("instructblip", "{image}{bos}{body}", "InstructBLIP (Vicuna): the instruction, also fed to the Q-Former"),
    Template("minigpt4", "{bos}Give the following image: <Img>ImageContent</Img>. You will be able to see the image "
             "once I provide it to you. Please answer my questions.###Human: <Img>{image}</Img> {body}###Assistant:",
             "MiniGPT-4's conversation template (Vicuna v0 style, <ImageHere> replaced by the visual tokens)"),
    Template("llava-1.5", "{bos}USER: {image}\n{body} ASSISTANT:", "LLaVA-1.5's 'USER: <image>\\n... ASSISTANT:'"),
    Template("alpaca", "{bos}Below is an instruction that describes a task. Write a response that appropriately "
             "completes the request.\n\n### Instruction:\n{body}\n\n### Response:",
             "LLaMA-Adapter's Alpaca format (no input field; the image enters through the adapter prompts)"),
    Template("chatml", "<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n",
             "ChatML, SmolLM2-Instruct's chat template (a user turn, the action as the assistant's turn, which ends "
             "with <|im_end|>, its EOS); no system turn", target_prefix=""),
]}


class Encoder:
    """Prompt + target -> ``input_ids`` / ``labels`` for one baseline (its tokenizer, template and image tokens)."""

    def __init__(self, tokenizer, template: Template, *, n_image_tokens: int, image_token_id: int | None,
                 add_bos: bool, max_seq_len: int):
        if "{image}" in template.text and (n_image_tokens < 1 or image_token_id is None):
            raise ValueError(f"template {template.name} places an image but the model has no image tokens")
        self.tok = tokenizer
        self.template = template
        self.n_image = n_image_tokens
        self.image_id = image_token_id
        self.add_bos = add_bos
        self.max_seq_len = max_seq_len

    def _text(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"] if text else []

    def _parts(self, body_ids: list[int]) -> list[int]:
        ids: list[int] = []
        for seg in self.template.segments():
            if seg == "{bos}":
                ids += [self.tok.bos_token_id] if self.add_bos and self.tok.bos_token_id is not None else []
            elif seg == "{image}":
                ids += [self.image_id] * self.n_image
            elif seg == "{body}":
                ids += body_ids
            else:
                ids += self._text(seg)
        return ids

    def target_ids(self, action: str) -> list[int]:
        return self._text(self.template.target_prefix + action.strip()) + [self.tok.eos_token_id]

    def prompt_ids(self, bodies: list[str], budget: int) -> list[int]:
        """The first body (longest history) that fits ``budget`` tokens; if none does, the shortest body cut in the
        middle: its first line (the task) and its tail (the latest state and the cue) are kept."""
        for text in bodies:
            ids = self._parts(self._text(text))
            if len(ids) <= budget:
                return ids
        shortest = bodies[-1]
        head, _, rest = shortest.partition("\n")
        head_ids, rest_ids = self._text(head + "\n"), self._text(rest)
        fixed = len(self._parts([]))
        keep = budget - fixed - len(head_ids)
        if keep < 8:
            raise DataError(f"max_seq_len {self.max_seq_len} leaves no room for the prompt of template "
                            f"{self.template.name} ({fixed} template tokens + the task line).",
                            hint="Raise train.max_seq_len.")
        return self._parts(head_ids + rest_ids[-keep:])

    def encode(self, bodies: list[str], action: str | None) -> dict:
        """``bodies`` from the longest history to the shortest; ``action`` None for a generation prompt."""
        target = self.target_ids(action) if action is not None else []
        target = target[: max(1, self.max_seq_len // 2)]
        prompt = self.prompt_ids(bodies, self.max_seq_len - len(target))
        return {"input_ids": prompt + target, "labels": [IGNORE] * len(prompt) + target}


def bodies(example: Example, kind: str, window: int) -> list[str]:
    """Candidate bodies of ``example`` from ``window`` history turns down to none."""
    top = min(window, len(example.history))
    return [body(example, kind, w) for w in range(top, -1, -1)]


# --------------------------------------------------------------------------------------------------------------------
# Images


class ImageStore:
    """PNG states from the demonstration shards (``<key>.png`` members of a tar); one member index per shard."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._index: dict[str, dict[str, tarfile.TarInfo]] = {}
        self._open: dict[str, tarfile.TarFile] = {}

    def _members(self, shard: str) -> dict[str, tarfile.TarInfo]:
        if shard not in self._index:
            path = self.root / shard
            if not path.exists():
                self._index[shard] = {}
                return self._index[shard]
            tar = tarfile.open(path)
            self._open[shard] = tar
            self._index[shard] = {m.name: m for m in tar.getmembers() if m.isfile()}
        return self._index[shard]

    def missing(self, examples: list[Example]) -> list[str]:
        """``shard:key`` of every example whose image is not there (absent shard or absent member)."""
        return [f"{ex.image_shard}:{ex.image_key}.png" for ex in examples
                if f"{ex.image_key}.png" not in self._members(ex.image_shard)]

    def load(self, shard: str, key: str):
        from PIL import Image

        member = self._members(shard).get(f"{key}.png")
        if member is None:
            raise DataError(f"image {key}.png is not in {self.root / shard}.")
        data = self._open[shard].extractfile(member).read()
        return Image.open(io.BytesIO(data)).convert("RGB")

    def close(self) -> None:
        for tar in self._open.values():
            tar.close()
        self._open.clear()
        self._index.clear()


def collate(features: list[dict], pad_id: int) -> dict:
    """Right-pad ``input_ids`` / ``labels`` (and ``qformer_input_ids`` when present) into tensors."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), pad_id, dtype=torch.long)
    labels = torch.full((len(features), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        ids[row, :n] = torch.tensor(f["input_ids"])
        labels[row, :n] = torch.tensor(f["labels"])
        mask[row, :n] = 1
    out = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if "qformer_input_ids" in features[0]:
        qwidth = max(len(f["qformer_input_ids"]) for f in features)
        qids = torch.full((len(features), qwidth), features[0]["qformer_pad_id"], dtype=torch.long)
        qmask = torch.zeros((len(features), qwidth), dtype=torch.long)
        for row, f in enumerate(features):
            qids[row, :len(f["qformer_input_ids"])] = torch.tensor(f["qformer_input_ids"])
            qmask[row, :len(f["qformer_input_ids"])] = 1
        out |= {"qformer_input_ids": qids, "qformer_attention_mask": qmask}
    return out
