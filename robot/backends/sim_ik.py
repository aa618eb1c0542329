"""Inverse kinematics of the simulated arm: damped least squares on PyBullet's Jacobian within the joint limits,
PyBullet's own null-space solver as a second opinion, random restarts for poses far from the seed.

Small steps (a Cartesian path at 1 cm spacing) converge from the previous configuration in a few DLS iterations,
which keeps the arm on one continuous branch; large jumps use the restarts.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from cachetools import LRUCache

from robot.contract.tool_api import Pose

if TYPE_CHECKING:
    from robot.backends.sim import SimBackend

POS_TOL = 0.003
ORN_TOL = 0.02
DAMPING = 0.04
DLS_ITERATIONS = 60
MAX_STEP = 0.25

KINEMATICS_KEPT = 50_000
"""How many seed attempts (:meth:`IKSolver._attempt`) a process keeps: the joints found and the joints visited
(a failing DLS attempt visits 60 configurations, 3.4 kB; most attempts succeed in a few)."""
_ATTEMPTS: LRUCache[tuple, tuple[np.ndarray | None, np.ndarray]] = LRUCache(KINEMATICS_KEPT)  # (found, visited)
_ATTEMPTS_LOCK = threading.Lock()


def forget_attempts() -> None:
    """Drop every kept seed attempt (the next solve of any pose computes them again): for measuring a solve."""
    with _ATTEMPTS_LOCK:
        _ATTEMPTS.clear()


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
        self._visited: list[np.ndarray] | None = None

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
            self._set(q)
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
            self._set(q)
            rest = list(q) + [arm.finger_open] * (len(self.movable) - len(arm.joints))
            solution = pb.calculateInverseKinematics(
                arm.body, arm.tool_link, pose.position, pose.orientation, lowerLimits=self.lower,
                upperLimits=self.upper, jointRanges=self.ranges, restPoses=rest, maxNumIterations=200,
                residualThreshold=1e-6, physicsClientId=sim.client)
            q = np.clip(np.array(solution[: len(arm.joints)]), arm.lower, arm.upper)
            self._set(q)
            if self._ok(self._error(pose)):
                return q
        return None

    def solve(self, pose: Pose, seed: np.ndarray, restarts: int,
              accept: Callable[[np.ndarray], bool] | None = None) -> np.ndarray | None:
        """Joints putting the tool frame at ``pose`` (and passing ``accept``, e.g. collision-free), or None; the arm
        and fingers are left as they were."""
        sim, arm = self.sim, self.sim.robot
        saved, fingers = sim.q(), list(sim._finger_values)
        solving = [min(max(v, 0.0), arm.finger_open) for v in fingers]   # a solver fails off the limits
        sim._set_fingers(solving)
        seeds = [np.clip(np.asarray(seed, dtype=float), arm.lower, arm.upper)]
        if restarts:
            rng = np.random.default_rng(int(1e4 * abs(sum(pose.position))) % (2**32))  # deterministic per pose
            seeds += [arm.home] + [rng.uniform(arm.lower, arm.upper) for _ in range(restarts)]
        found = None
        context = self._context(pose, solving, bool(restarts))
        try:
            for start in seeds:
                found = self._attempt(context, pose, start, bool(restarts))
                if found is not None and accept is not None and not accept(found):
                    found = None
                if found is not None:
                    break
        finally:
            sim._set_q(saved)
            sim._set_fingers(fingers)
        return found

    def _context(self, pose: Pose, fingers: list[float], fallback: bool) -> tuple:
        """What a seed attempt's result depends on besides its start: the arm, where its base stands, the finger
        joints' values while solving, the target pose and whether PyBullet's solver backs up DLS."""
        sim = self.sim
        base = sim.pb.getBasePositionAndOrientation(sim.robot.body, physicsClientId=sim.client)
        return (sim.robot.name, np.asarray([*base[0], *base[1]], dtype=float).tobytes(),
                np.asarray(fingers, dtype=float).tobytes(), np.asarray(pose.position, dtype=float).tobytes(),
                np.asarray(pose.orientation, dtype=float).tobytes(), fallback)

    def _attempt(self, context: tuple, pose: Pose, start: np.ndarray, fallback: bool) -> np.ndarray | None:
        """DLS from ``start``, then (``fallback``) PyBullet's solver: the joints reaching ``pose``, or None.

        Pure kinematics: the joints it visits are set and read back on the arm alone, so the result is a function of
        the start and of ``context`` (the obstacles play no part; ``accept`` judges the result afterwards). A process
        keeps the results (:data:`KINEMATICS_KEPT`), shared by every simulator of the same arm: the shape study's
        repeats and trials solve the same poses from the same joints again and again -- the handle of the same
        cabinet from the home pose, the place poses of an object that did not move -- and an unreachable pose costs
        14 seeds of 60 DLS rounds and 4 PyBullet solves. The same bytes in, the same joints out: the tests compare
        the kept results with fresh ones."""
        key = (*context, np.asarray(start, dtype=float).tobytes())
        with _ATTEMPTS_LOCK:
            kept = _ATTEMPTS.get(key)
        if kept is not None:
            found, visited = kept
            for q in visited:             # the arm goes where the attempt took it (below), the math is skipped
                self.sim._set_q(q)
            return None if found is None else found.copy()
        self._visited = []
        try:
            found = self._dls(pose, start.copy())
            if found is None and fallback:
                found = self._pybullet(pose, start.copy())
            visited = np.array(self._visited)
        finally:
            self._visited = None
        with _ATTEMPTS_LOCK:
            _ATTEMPTS[key] = (None if found is None else found.copy(), visited)
        return found

    def _set(self, q: np.ndarray) -> None:
        """The arm to ``q``, recorded while an attempt is computed. A kept attempt is replayed with the same joint
        settings in the same order: PyBullet keeps a link's contact pairs (and their cached impulses) by where the
        link has been, and an arm set away and back during a solve drops the pairs it left; a look-up that left the
        arm still changed what a held handle did next (a drawer 0.8 mm further out, the shape study's repeats)."""
        if self._visited is not None:
            self._visited.append(q.copy())
        self.sim._set_q(q)
