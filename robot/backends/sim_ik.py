"""Inverse kinematics of the simulated arm: damped least squares on PyBullet's Jacobian within the joint limits,
PyBullet's own null-space solver as a second opinion, random restarts for poses far from the seed.

Small steps (a Cartesian path at 1 cm spacing) converge from the previous configuration in a few DLS iterations,
which keeps the arm on one continuous branch; large jumps use the restarts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from robot.contract.tool_api import Pose

if TYPE_CHECKING:
    from robot.backends.sim import SimBackend

POS_TOL = 0.003
ORN_TOL = 0.02
DAMPING = 0.04
DLS_ITERATIONS = 60
MAX_STEP = 0.25


def matrix(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def rotation_error(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Axis * angle of the rotation taking ``current`` to ``target`` (both 3x3), in the world frame."""
    r = target @ current.T
    angle = math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2)))
    if angle < 1e-7:
        return np.zeros(3)
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    norm = np.linalg.norm(axis)
    if norm < 1e-9:  # 180 degrees: take the axis from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(r) + 1) / 2, 0.0))
        norm = np.linalg.norm(axis)
    return axis / norm * angle


class IKSolver:
    def __init__(self, sim: SimBackend):
        self.sim = sim
        pb, arm = sim.pb, sim.robot
        joints = range(pb.getNumJoints(arm.body, physicsClientId=sim.client))
        self.movable = [j for j in joints if pb.getJointInfo(arm.body, j, physicsClientId=sim.client)[2]
                        in (pb.JOINT_REVOLUTE, pb.JOINT_PRISMATIC)]
        info = [pb.getJointInfo(arm.body, j, physicsClientId=sim.client) for j in self.movable]
        self.lower = [i[8] for i in info]
        self.upper = [i[9] for i in info]
        self.ranges = [max(u - lo, 1e-3) for lo, u in zip(self.lower, self.upper, strict=True)]
        self.columns = [self.movable.index(j) for j in arm.joints]

    def _error(self, pose: Pose) -> np.ndarray:
        state = self.sim.pb.getLinkState(self.sim.robot.body, self.sim.robot.tool_link, computeForwardKinematics=True,
                                         physicsClientId=self.sim.client)
        return np.concatenate([np.subtract(pose.position, state[4]),
                               rotation_error(matrix(state[5]), matrix(pose.orientation))])

    @staticmethod
    def _ok(error: np.ndarray) -> bool:
        return float(np.linalg.norm(error[:3])) < POS_TOL and float(np.linalg.norm(error[3:])) < ORN_TOL

    def _dls(self, pose: Pose, q: np.ndarray) -> np.ndarray | None:
        sim, pb, arm = self.sim, self.sim.pb, self.sim.robot
        zeros = [0.0] * len(self.movable)
        for _ in range(DLS_ITERATIONS):
            sim._set_q(q)
            error = self._error(pose)
            if self._ok(error):
                return q
            full = [state[0] for state in pb.getJointStates(arm.body, self.movable, physicsClientId=sim.client)]
            lin, ang = pb.calculateJacobian(arm.body, arm.tool_link, [0.0, 0.0, 0.0], full, zeros, zeros,
                                            physicsClientId=sim.client)
            jac = np.vstack([np.asarray(lin)[:, self.columns], np.asarray(ang)[:, self.columns]])
            step = jac.T @ np.linalg.solve(jac @ jac.T + DAMPING**2 * np.eye(6), error)
            q = np.clip(q + np.clip(step, -MAX_STEP, MAX_STEP), arm.lower, arm.upper)
        return None

    def _pybullet(self, pose: Pose, q: np.ndarray) -> np.ndarray | None:
        sim, pb, arm = self.sim, self.sim.pb, self.sim.robot
        for _ in range(4):
            sim._set_q(q)
            rest = list(q) + [arm.finger_open] * (len(self.movable) - len(arm.joints))
            solution = pb.calculateInverseKinematics(
                arm.body, arm.tool_link, pose.position, pose.orientation, lowerLimits=self.lower,
                upperLimits=self.upper, jointRanges=self.ranges, restPoses=rest, maxNumIterations=200,
                residualThreshold=1e-6, physicsClientId=sim.client)
            q = np.clip(np.array(solution[: len(arm.joints)]), arm.lower, arm.upper)
            sim._set_q(q)
            if self._ok(self._error(pose)):
                return q
        return None

    def solve(self, pose: Pose, seed: np.ndarray, restarts: int,
              accept: Callable[[np.ndarray], bool] | None = None) -> np.ndarray | None:
        """Joints putting the tool frame at ``pose`` (and passing ``accept``, e.g. collision-free), or None; the arm
        and fingers are left as they were."""
        sim, arm = self.sim, self.sim.robot
        saved, fingers = sim.q(), list(sim._finger_values)
        sim._set_fingers([min(max(v, 0.0), arm.finger_open) for v in fingers])  # a solver fails off the limits
        seeds = [np.clip(np.asarray(seed, dtype=float), arm.lower, arm.upper)]
        if restarts:
            rng = np.random.default_rng(int(1e4 * abs(sum(pose.position))) % (2**32))  # deterministic per pose
            seeds += [arm.home] + [rng.uniform(arm.lower, arm.upper) for _ in range(restarts)]
        found = None
        try:
            for start in seeds:
                found = self._dls(pose, start.copy())
                if found is None and restarts:
                    found = self._pybullet(pose, start.copy())
                if found is not None and accept is not None and not accept(found):
                    found = None
                if found is not None:
                    break
        finally:
            sim._set_q(saved)
            sim._set_fingers(fingers)
        return found
