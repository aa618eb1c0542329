"""What the perception tools read: one interface, implemented by each perception mode."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from robot.backends.base import JointState, RobotBackend
from robot.contract.params import NoiseParams, PipelineParams
from robot.contract.tool_api import Pose


class Perception(ABC):
    def __init__(self, backend: RobotBackend, noise: NoiseParams, seed: int, pipeline: PipelineParams | None = None):
        self.backend = backend
        self.noise = noise
        self.pipeline = pipeline or PipelineParams()
        self.rng = np.random.default_rng(seed)
        self.seed = seed

    def names(self) -> list[str]:
        return self.backend.model_names()

    @abstractmethod
    def detect(self, names: list[str] | None) -> None:
        """Refresh what is known about ``names`` (every object when None)."""

    @abstractmethod
    def box(self, name: str) -> np.ndarray: ...

    @abstractmethod
    def pose(self, name: str) -> Pose: ...

    @abstractmethod
    def joints(self) -> list[JointState]: ...

    def boxes(self) -> dict[str, np.ndarray]:
        """The box of every object this mode knows of now (for scans of the whole scene: free spots, supports,
        what a grasp may touch); by default every object's."""
        return {name: self.box(name) for name in self.names()}

    def missing_joint(self, name: str) -> bool:
        """The world has a joint for ``name`` that this mode did not find (a robot failure, not a code error)."""
        return False

    def points(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The object's segmented points and normals, where this mode has them (None: boxes only)."""
        return None

    def scene_points(self) -> np.ndarray | None:
        """Every reconstructed point (for checking a grasp against the object's surroundings), or None."""
        return None

    def support_height(self) -> float | None:
        """Height of the perceived support plane, or None."""
        return None

    def plane_normal(self, name: str, position: np.ndarray) -> np.ndarray | None:
        """The normal of the object's surface plane nearest ``position`` where this mode fits planes; None means
        the tool takes the nearest face of the box."""
        return None

    def share(self, memo) -> None:
        """Take the pipeline's results from ``memo`` where it holds them (robot/perception/shared.py); a mode
        without a pipeline has nothing to share."""

    def report(self) -> dict:
        """What this mode did during a repeat (for the episode's record); empty by default."""
        return {}
