"""Grasp poses sampled and scored on a perceived object's points: the ``point-sampler`` grasp backend.

Candidates: approach directions (top-down; tilted 35 degrees and level, both from the robot's side), twelve
closing directions about each approach, centres at the object's middle and, for long objects, along its long axis,
and a few depths between the deepest the fingertips may go (above the support) and the object's middle. A
candidate is kept only if, in the gripper's frame,

* the object points between the fingers fit the opening (with a margin) and are enough to hold;
* no point -- of the object, its neighbours or the support -- lies where the open fingers or the palm will be;

and scored by antipodal quality (the surface normals at the two contact sides lie along the closing direction),
by how much of the object lies between the fingers, by nearness to the object's centre, by the wrist's rest angle
(fingers closing across the arm's reach, as the central-lift heuristic does -- the hand keeps that angle when it
places the object), and by the caller's preferences (position, approach, finger plane). The best reachable one wins.

Gripper frame (``robot/backends/base.py``): z = approach, y = closing direction, origin between the fingertips,
which reach ``finger_reach`` beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot.contract.tool_api import Pose
from robot.grasps import DOWN, TIP_MARGIN, Hand, gripper_pose, matrix_from_quat

FINGER_LENGTH = 0.045
"""Length of a finger along the approach direction (Panda: ~45 mm; the UR5's Robotiq: ~40 mm)."""
FINGER_WIDTH = 0.02
FINGER_THICKNESS = 0.012
PALM = (0.06, 0.20, 0.05)
"""Palm box behind the fingers: depth across the fingers (x), width along the closing axis (y), height (z)."""
WIDTH_MARGIN = 0.004
MIN_POINTS = 8
ANGLES = 12
TILT_DEG = (0.0, 35.0, 90.0)
REACH_CHECKS = 8


@dataclass(frozen=True)
class Candidate:
    pose: Pose
    score: float
    width: float
    points: int


def _approaches(centre: np.ndarray, base: np.ndarray) -> list[np.ndarray]:
    radial = np.array([centre[0] - base[0], centre[1] - base[1], 0.0])
    radial = radial / np.linalg.norm(radial) if np.linalg.norm(radial) > 1e-6 else np.array([1.0, 0.0, 0.0])
    out = []
    for tilt in TILT_DEG:
        t = math.radians(tilt)
        out.append(DOWN * math.cos(t) + radial * math.sin(t))
    return out


def _closings(approach: np.ndarray) -> list[np.ndarray]:
    ref = np.array([1.0, 0.0, 0.0]) if abs(approach[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(approach, ref)
    u /= np.linalg.norm(u)
    v = np.cross(approach, u)
    return [math.cos(a) * u + math.sin(a) * v for a in np.linspace(0.0, math.pi, ANGLES, endpoint=False)]


def _centres(points: np.ndarray, opening: float) -> list[np.ndarray]:
    centre = (points.min(axis=0) + points.max(axis=0)) / 2
    xy = points[:, :2] - points[:, :2].mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(xy.T)) if len(points) > 3 else (np.zeros(2), np.eye(2))
    axis = np.array([*vectors[:, 1], 0.0])
    span = float(np.ptp(points[:, :2] @ vectors[:, 1])) if len(points) > 3 else 0.0
    out = [centre]
    if span > 1.5 * opening:
        out += [centre + axis * span * f for f in (-0.25, 0.25)]
    return out


def sample(points: np.ndarray, normals: np.ndarray, scene: np.ndarray, hand: Hand, support_z: float | None,
           preferred_position=None, preferred_approach=None, preferred_normal=None) -> list[Candidate]:
    """Every valid candidate, best first."""
    if len(points) < MIN_POINTS:
        return []
    base = np.asarray(hand.base, dtype=float)
    top, bottom = float(points[:, 2].max()), float(points[:, 2].min())
    floor = (support_z if support_z is not None else bottom) + hand.finger_reach + TIP_MARGIN
    reach = hand.finger_reach
    half_open = hand.max_opening / 2
    near = scene[np.linalg.norm(scene[:, :2] - points[:, :2].mean(axis=0), axis=1) < 0.3]
    size = float(np.linalg.norm(np.ptp(points, axis=0)))
    out = []
    for centre in _centres(points, hand.max_opening):
        for approach in _approaches(centre, base):
            vertical = abs(approach[2]) > 0.5
            if vertical:
                heights = np.linspace(max(floor, top - (FINGER_LENGTH - reach) + 0.004), max(floor, centre[2]), 3)
            else:
                heights = [max(floor + 0.008, centre[2])]
            for z in heights:
                for closing in _closings(approach):
                    pose = gripper_pose((centre[0], centre[1], z), approach, closing, base)
                    cand = _evaluate(pose, points, normals, near, half_open, reach, size, centre, base)
                    if cand is not None:
                        out.append(_prefer(cand, preferred_position, preferred_approach, preferred_normal))
    return sorted(out, key=lambda c: -c.score)


def _evaluate(pose: Pose, points, normals, scene, half_open: float, reach: float, size: float,
              centre: np.ndarray, base: np.ndarray) -> Candidate | None:
    R = matrix_from_quat(pose.orientation)
    origin = np.asarray(pose.position)
    local = (points - origin) @ R
    fingers_z = (local[:, 2] >= reach - FINGER_LENGTH) & (local[:, 2] <= reach)
    between = fingers_z & (np.abs(local[:, 0]) <= FINGER_WIDTH / 2) & (np.abs(local[:, 1]) < half_open)
    if int(between.sum()) < MIN_POINTS:
        return None
    ys = local[between, 1]
    width = float(ys.max() - ys.min())
    if width > 2 * half_open - WIDTH_MARGIN:
        return None
    other = (scene - origin) @ R
    in_finger = ((other[:, 2] >= reach - FINGER_LENGTH) & (other[:, 2] <= reach + 0.002)
                 & (np.abs(other[:, 0]) <= FINGER_WIDTH / 2)
                 & (np.abs(other[:, 1]) >= half_open) & (np.abs(other[:, 1]) <= half_open + FINGER_THICKNESS))
    palm_z = reach - FINGER_LENGTH
    in_palm = ((other[:, 2] < palm_z) & (other[:, 2] >= palm_z - PALM[2]) & (np.abs(other[:, 0]) <= PALM[0] / 2)
               & (np.abs(other[:, 1]) <= PALM[1] / 2))
    if in_finger.any() or in_palm.any():
        return None
    n_local = normals[between] @ R
    contact = 0.004
    sides = [ys >= ys.max() - contact, ys <= ys.min() + contact]
    quality = float(np.mean([np.mean(np.abs(n_local[s, 1])) for s in sides]))
    coverage = min(1.0, int(between.sum()) / max(len(points) * 0.3, 1.0))
    offset = float(np.linalg.norm(origin[:2] - centre[:2])) / max(size, 0.02)
    across = np.array([-(centre[1] - base[1]), centre[0] - base[0], 0.0])
    across /= max(float(np.linalg.norm(across)), 1e-9)
    natural = abs(float(np.dot(R[:, 1], across)))  # fingers closing across the arm's reach: the wrist's rest angle
    score = 0.5 * quality + 0.3 * coverage - 0.2 * offset + 0.05 * natural
    return Candidate(pose, score, width, int(between.sum()))


def _prefer(cand: Candidate, position, approach, normal) -> Candidate:
    R = matrix_from_quat(cand.pose.orientation)
    score = cand.score
    if position is not None:
        score -= float(np.linalg.norm(np.asarray(cand.pose.position) - position)) / 0.05
    if approach is not None:
        score += float(np.dot(R[:, 2], approach / np.linalg.norm(approach)))
    if normal is not None:
        score += abs(float(np.dot(R[:, 1], normal / np.linalg.norm(normal))))
    return Candidate(cand.pose, score, cand.width, cand.points)


def best_grasp(candidates: list[Candidate], reachable: Callable[[Pose], bool] | None = None) -> Pose | None:
    """The best candidate the arm reaches (among the first few), or None."""
    for cand in candidates[:REACH_CHECKS]:
        if reachable is None or reachable(cand.pose):
            return cand.pose
    return None
