"""Sharing the perception pipeline's work between the variants of one goal (``robot/episode.py``, ``variants``).

The perception ablation runs the same repeats of a task under several pipeline settings (paper V-C). Until the
robot first moves they all see the same scene: the same world, cameras and seeded jitter give the same frames, and
the same frames and queries give the same fusion, matching and instances. :class:`PerceptionMemo` keeps each
pipeline stage's result under a key made of exactly what that stage reads, so that a variant asking again gets the
result a recomputation would give, without the work:

* ``capture`` -- the backend's render state (``render_state``: every body's pose, joint values and link frames;
  a backend without one never shares its captures), the camera rig and the pipeline generator's state;
* ``ground`` -- the frames' bytes, the query, the grounding settings and the grounder generator's state;
* ``fuse`` -- the frames' bytes, the fusion settings, the crop and the robot's link boxes (the self filter);
* ``match`` -- the keys of ``ground`` and ``fuse`` and the matching threshold;
* ``segment`` -- the key of ``match`` (and so of everything before it) and the segmentation settings;
* ``scene`` -- the keys of ``fuse`` and ``segment`` and the planning-scene voxel.

A stage that draws from a random generator is keyed on the generator's state before and hands back its state after,
so the draws that follow are the ones a recomputation would leave. Results are copied into the memo and out of it:
no variant sees another's later changes. A memo lives as long as one goal on one runner, so nothing it keeps can
outlive the code or the parameters that made it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np

def digest(*parts: Any) -> str:
    """A key of ``parts``: arrays by dtype, shape and bytes, everything else by its JSON (or, failing that, repr)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(f"{part.dtype.str}{part.shape}".encode())
            h.update(np.ascontiguousarray(part).tobytes())
        elif isinstance(part, bytes):
            h.update(part)
        else:
            h.update(json.dumps(part, sort_keys=True, default=repr).encode())
        h.update(b"\x00")
    return h.hexdigest()


def frames_digest(frames) -> str:
    """What the frames show, to the byte (not when: the stamp is left out)."""
    parts: list = []
    for frame in frames:
        parts += [frame.spec.name, frame.rgb, frame.depth, frame.labels,
                  frame.segmentation if frame.segmentation is not None else "none"]
    return digest(*parts)


class PerceptionMemo:
    """Pipeline stage results of one goal by content key; ``counts`` says per stage how many were computed and how
    many reused."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Any, list[dict]]] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def stage(self, name: str, parts: tuple, compute: Callable[[], Any],
              generators: tuple[np.random.Generator, ...] = ()) -> tuple[Any, str]:
        """``compute()``'s result for the key of ``parts`` and the states of ``generators`` (the random generators the
        stage draws from, left as ``compute`` leaves them), and that key (what the next stages' keys name this
        result by). ``name`` is the stage."""
        key = digest(name, *parts, *[g.bit_generator.state for g in generators])
        count = self.counts.setdefault(name, {"computed": 0, "reused": 0})
        if key in self._entries:
            value, states = self._entries[key]
            for g, state in zip(generators, states, strict=True):
                g.bit_generator.state = copy.deepcopy(state)
            count["reused"] += 1
            return _copy(value), key
        value = compute()
        self._entries[key] = (_copy(value), [copy.deepcopy(g.bit_generator.state) for g in generators])
        count["computed"] += 1
        return value, key


def _copy(value: Any) -> Any:
    """A deep copy; Open3D's volume (read only: the mesh is extracted from it) is shared, it cannot be copied."""
    keep: dict[int, Any] = {}
    for item in value if isinstance(value, tuple) else (value,):
        volume = getattr(item, "volume", None)
        if volume is not None:
            keep[id(volume)] = volume
    return copy.deepcopy(value, keep)
