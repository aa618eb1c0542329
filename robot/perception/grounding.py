"""2-D grounding (paper III-C1): labelled boxes on each view's RGB image for the queried object names.

A registry of backends, each ``backend.detect(frames, names) -> [[Detection, ...] per view]``:

* ``sim-seg`` (default, embedded): boxes from the simulator's segmentation image -- exact, unless the configured
  errors are switched on: missed detections, label confusion between the queried names, box-edge jitter, and a
  box around the robot arm carrying a queried label (the paper's Fig. 9 failure);
* ``hf-detector``: an open-vocabulary detector from transformers (OWL-ViT, OWLv2, Grounding DINO: anything
  ``AutoModelForZeroShotObjectDetection`` loads) from a local checkpoint directory, queried with each name's phrase.

Names are the scene's object names (``white_bowl``, ``cabinet.drawer_1``); a detector is asked for their phrases
(``white bowl``, ``drawer``). Several queried parts that share a phrase (the drawers of one cabinet) are told apart
by their order from the top of the image, the order the world lists them in.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from core.plugins import GROUNDING_BACKENDS
from robot.contract.params import GroundingParams
from robot.errors import BackendUnavailable
from robot.perception.cameras import CameraFrame


@dataclass(frozen=True)
class Detection:
    label: str
    score: float
    box: tuple[float, float, float, float]
    """x_min, y_min, x_max, y_max in pixels."""

    def clipped(self, width: int, height: int) -> Detection | None:
        x0, y0, x1, y1 = self.box
        box = (max(0.0, x0), max(0.0, y0), min(float(width), x1), min(float(height), y1))
        if box[2] - box[0] < 1.0 or box[3] - box[1] < 1.0:
            return None
        return Detection(self.label, self.score, box)


def phrase(name: str) -> str:
    """The words a detector is asked for: ``white_bowl`` -> "white bowl", ``cabinet.drawer_1`` -> "drawer"."""
    base = name.split(".")[-1]
    base = re.sub(r"_\d+$", "", base)
    return base.replace("_", " ")


class Grounder(ABC):
    def __init__(self, params: GroundingParams, seed: int = 0):
        self.params = params
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def detect(self, frames: list[CameraFrame], names: list[str]) -> list[list[Detection]]:
        """Per view, the boxes found for ``names``."""


class SimSegmentation(Grounder):
    """Boxes from the simulator's segmentation: every queried model with enough visible pixels, then the errors."""

    def detect(self, frames: list[CameraFrame], names: list[str]) -> list[list[Detection]]:
        p = self.params
        out = []
        for frame in frames:
            if frame.segmentation is None:
                raise BackendUnavailable(f"the sim-seg grounding needs the simulator's segmentation image; camera "
                                         f"{frame.spec.name} has none (a real camera): use grounding.backend: "
                                         "hf-detector.")
            found = []
            for name in names:
                if name not in frame.labels:
                    continue
                box = _mask_box(frame.segmentation == frame.labels.index(name), p.min_pixels)
                if box is None or self.rng.random() < p.miss_rate:
                    continue
                label = name
                if len(names) > 1 and self.rng.random() < p.confusion_rate:
                    label = str(self.rng.choice([n for n in names if n != name]))
                found.append(self._jitter(Detection(label, 1.0, box), frame))
            if "robot" in frame.labels and names and self.rng.random() < p.robot_false_positive_rate:
                box = _mask_box(frame.segmentation == frame.labels.index("robot"), p.min_pixels)
                if box is not None:
                    found.append(Detection(str(self.rng.choice(names)), 0.5, box))
            out.append([d for d in found if d is not None])
        return out

    def _jitter(self, det: Detection, frame: CameraFrame) -> Detection | None:
        sigma = self.params.box_jitter_px
        if sigma <= 0:
            return det
        box = tuple(float(v) for v in np.asarray(det.box) + self.rng.normal(0.0, sigma, 4))
        x0, y0, x1, y1 = box
        return Detection(det.label, det.score, (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))).clipped(
            frame.spec.width, frame.spec.height)


def _mask_box(mask: np.ndarray, min_pixels: int) -> tuple[float, float, float, float] | None:
    if int(mask.sum()) < min_pixels:
        return None
    rows, cols = np.nonzero(mask)
    return float(cols.min()), float(rows.min()), float(cols.max() + 1), float(rows.max() + 1)


class HFDetector(Grounder):
    """A zero-shot object detector from transformers, loaded once from ``model_path``."""

    def __init__(self, params: GroundingParams, seed: int = 0):
        super().__init__(params, seed)
        if not params.model_path:
            raise BackendUnavailable("the hf-detector grounding needs grounding.model_path: a local checkpoint "
                                     "directory of an OWL-ViT, OWLv2 or Grounding DINO model and its processor.")
        path = Path(params.model_path)
        if not (path / "config.json").is_file():
            raise BackendUnavailable(f"grounding.model_path {path} holds no config.json: not a transformers "
                                     "checkpoint directory.")
        import torch

        self.torch = torch
        self.processor, self.model = _load_detector(str(path.resolve()))

    def detect(self, frames: list[CameraFrame], names: list[str]) -> list[list[Detection]]:
        import inspect

        from PIL import Image

        if not names:
            return [[] for _ in frames]
        phrases = sorted({phrase(n) for n in names})
        post = self.processor.post_process_grounded_object_detection
        accepts = inspect.signature(post).parameters
        out = []
        for frame in frames:
            image = Image.fromarray(frame.rgb)
            inputs = self.processor(text=[phrases], images=image, return_tensors="pt", padding=True,
                                    truncation=True)
            with self.torch.no_grad():
                outputs = self.model(**inputs)
            kwargs = {"threshold": self.params.threshold, "target_sizes": [(frame.spec.height, frame.spec.width)],
                      "text_labels": [phrases]}
            if "input_ids" in accepts:  # Grounding DINO matches boxes to the words of the prompt
                kwargs["input_ids"] = inputs["input_ids"]
            kwargs = {k: v for k, v in kwargs.items() if k in accepts}
            result = post(outputs, **kwargs)[0]
            found = []
            for score, box, label in zip(result["scores"].tolist(), result["boxes"].tolist(),
                                         _labels(result, phrases), strict=True):
                det = Detection(label, float(score), tuple(float(v) for v in box)).clipped(frame.spec.width,
                                                                                         frame.spec.height)
                if det is not None:
                    found.append(det)
            out.append(assign_names(found, names))
        return out


@cache
def _load_detector(path: str):
    """Processor and model of a checkpoint, loaded once per process (every repeat builds a new grounder)."""
    from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

    return AutoProcessor.from_pretrained(path), AutoModelForZeroShotObjectDetection.from_pretrained(path).eval()


def _labels(result: dict, phrases: list[str]) -> list[str]:
    """The phrase of each box: post-processors given ``text_labels`` return them, older ones label indices."""
    texts = result.get("text_labels")
    if texts is not None:
        return [str(t) for t in texts]
    return [phrases[int(i)] for i in result["labels"].tolist()]


def assign_names(found: list[Detection], names: list[str]) -> list[Detection]:
    """Phrase-labelled detections -> name-labelled ones. A phrase queried for one name takes its best box; a
    phrase shared by several names (drawer_0, drawer_1, ...) gives them its best boxes from the top of the image
    down, in the order the names are listed."""
    out = []
    for words in {phrase(n) for n in names}:
        owners = [n for n in names if phrase(n) == words]
        boxes = sorted((d for d in found if d.label == words), key=lambda d: -d.score)[:len(owners)]
        if len(owners) > 1:
            boxes.sort(key=lambda d: d.box[1] + d.box[3])
        out += [Detection(name, d.score, d.box) for name, d in zip(owners, boxes, strict=False)]
    return out


def create_grounder(params: GroundingParams, seed: int = 0) -> Grounder:
    return GROUNDING_BACKENDS.load(params.backend)(params, seed)
