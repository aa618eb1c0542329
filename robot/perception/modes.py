"""The two perception modes without a pipeline:

* ``ground_truth`` -- the backend's own state, live (paper V-A: "ground truth 3D perception from the simulation").
* ``noisy`` -- what ``detect_objects`` saw: a snapshot of the ground truth with Gaussian noise on box centres and
  extents, orientations and joint axes (``robot.contract.params.NoiseParams``). The snapshot goes stale when the scene
  changes until the code calls ``detect_objects`` again, as with a real pipeline; an object asked about before any
  detection is detected then.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from robot.backends.base import JointState, RobotBackend
from robot.contract.params import NoiseParams, PipelineParams
from robot.contract.tool_api import Pose
from robot.perception.base import Perception


class GroundTruth(Perception):
    def detect(self, names: list[str] | None) -> None:
        return None

    def box(self, name: str) -> np.ndarray:
        return self.backend.model_box(name)

    def pose(self, name: str) -> Pose:
        return self.backend.model_pose(name)

    def joints(self) -> list[JointState]:
        return self.backend.joint_states()


def _yaw_quat(angle: float) -> np.ndarray:
    return np.array([0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2)])


def _quat_mul(a, b) -> tuple[float, float, float, float]:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)


class NoisyPerception(Perception):
    def __init__(self, backend: RobotBackend, noise: NoiseParams, seed: int, pipeline: PipelineParams | None = None):
        super().__init__(backend, noise, seed, pipeline)
        self._boxes: dict[str, np.ndarray] = {}
        self._poses: dict[str, Pose] = {}
        self._joints: dict[str, JointState] = {}

    def detect(self, names: list[str] | None) -> None:
        for name in names if names is not None else self.names():
            self._observe(name)
        parts = set(names) if names is not None else None
        for joint in self.backend.joint_states():
            if parts is None or joint.part in parts or joint.handle in parts or "cabinet" in parts:
                self._joints[joint.part] = self._noisy_joint(joint)

    def _observe(self, name: str) -> None:
        box = self.backend.model_box(name)
        pose = self.backend.model_pose(name)
        if name == "table":  # the support plane is known exactly
            self._boxes[name], self._poses[name] = box, pose
            return
        n = self.noise
        centre = (box[:3] + box[3:]) / 2 + self.rng.normal(0.0, n.position_m, 3)
        half = np.maximum((box[3:] - box[:3]) / 2 + self.rng.normal(0.0, n.size_m / 2, 3), 0.002)
        self._boxes[name] = np.concatenate([centre - half, centre + half])
        turn = _yaw_quat(math.radians(self.rng.normal(0.0, n.yaw_deg)))
        self._poses[name] = Pose(tuple(float(v) for v in centre), _quat_mul(turn, pose.orientation))

    def _noisy_joint(self, joint: JointState) -> JointState:
        n = self.noise
        axis = joint.axis + self.rng.normal(0.0, math.radians(n.axis_deg), 3)
        return replace(joint, axis=axis / np.linalg.norm(axis),
                       origin=joint.origin + self.rng.normal(0.0, n.position_m, 3))

    def box(self, name: str) -> np.ndarray:
        if name not in self._boxes:
            self._observe(name)
        return self._boxes[name].copy()

    def pose(self, name: str) -> Pose:
        if name not in self._poses:
            self._observe(name)
        return self._poses[name]

    def joints(self) -> list[JointState]:
        if not self._joints:  # nothing detected yet: observe the joints now
            self._joints = {j.part: self._noisy_joint(j) for j in self.backend.joint_states()}
        return list(self._joints.values())
