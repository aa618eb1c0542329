"""Grasp and place poses from bounding boxes: the geometry behind the parse_*_pose tools, backend-independent.

A gripper pose is the tool frame between the fingertips: z = approach direction, y = the direction the fingers
close along, x = y x z. Fingertips reach ``finger_reach`` beyond the frame, so a grasp never puts the frame lower
than that (plus a margin) above the surface the object stands on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot.contract.tool_api import Pose

DOWN = np.array([0.0, 0.0, -1.0])
TIP_MARGIN = 0.003
PLACE_DROP = 0.015
"""Height above the support at which a held object's bottom is released."""
MAX_DROP = 0.08
"""A deep receptacle's objects are released this far above its floor at most (never below the floor + drop)."""
FREE_GAP = 0.005
FINGER_PAD = 0.025
"""How far the fingers stand out beside a held object along the closing direction."""
FINGER_WIDTH = 0.034
"""Width of a finger across the closing direction (plus a margin)."""


def quat_from_matrix(r: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w) of a rotation matrix whose columns are the frame's axes."""
    m = r
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s)
    arr = np.array(q)
    arr /= np.linalg.norm(arr)
    return tuple(float(v) for v in arr)  # type: ignore[return-value]


def matrix_from_quat(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def gripper_pose(position, approach, closing, away_from=None) -> Pose:
    """Pose with z = approach and y = closing (made orthogonal); the sign of y keeps x pointing away from
    ``away_from`` (the robot's base), so the wrist does not turn over."""
    z = np.asarray(approach, dtype=float)
    z = z / np.linalg.norm(z)
    y = np.asarray(closing, dtype=float)
    y = y - np.dot(y, z) * z
    y = y / np.linalg.norm(y)
    x = np.cross(y, z)
    if away_from is not None:
        radial = np.asarray(position, dtype=float) - np.asarray(away_from, dtype=float)
        radial[2] = 0.0
        reference = radial if np.linalg.norm(radial) > 1e-6 else np.array([1.0, 0.0, 0.0])
        if np.dot(x, reference) < 0:
            y, x = -y, -x
    return Pose(tuple(float(v) for v in position), quat_from_matrix(np.column_stack([x, y, z])))


def approach_of(pose: Pose) -> np.ndarray:
    return matrix_from_quat(pose.orientation)[:, 2]


@dataclass(frozen=True)
class Hand:
    """What grasp geometry needs to know about the gripper and the robot."""

    max_opening: float
    finger_reach: float
    base: tuple[float, float, float]


def _centre(box: np.ndarray) -> np.ndarray:
    return (box[:3] + box[3:]) / 2


def central_lift(box: np.ndarray, hand: Hand, description: str = "center") -> Pose:
    """Top-down, closing across the narrower horizontal side, at the centre height (or near the top)."""
    c = _centre(box)
    size = box[3:] - box[:3]
    z = c[2] if description != "top" else box[5] - min(0.02, size[2] / 2)
    z = max(z, box[2] + hand.finger_reach + TIP_MARGIN)
    if abs(size[0] - size[1]) <= 0.1 * max(size[0], size[1]):
        # a square or round footprint: close along the table axis closest to across the arm's reach (the wrist's
        # natural angle); the hand, much wider than the fingers' opening, then lies along a table axis too
        radial = np.abs(c[:2] - np.asarray(hand.base[:2]))
        closing = np.array([0.0, 1.0, 0.0]) if radial[0] >= radial[1] else np.array([1.0, 0.0, 0.0])
    else:
        closing = np.array([1.0, 0.0, 0.0]) if size[0] < size[1] else np.array([0.0, 1.0, 0.0])
    return gripper_pose((c[0], c[1], z), DOWN, closing, hand.base)


def horizontal(box: np.ndarray, hand: Hand, approach: np.ndarray | None = None) -> Pose:
    """Approaching horizontally (from the robot's side unless told), fingers closing horizontally."""
    c = _centre(box)
    if approach is None:
        approach = c - np.asarray(hand.base)
    a = np.array([approach[0], approach[1], 0.0])
    if np.linalg.norm(a) < 1e-6:
        a = np.array([1.0, 0.0, 0.0])
    a /= np.linalg.norm(a)
    closing = np.array([-a[1], a[0], 0.0])
    z = max(c[2], box[2] + 0.012 + TIP_MARGIN)  # the finger's width must clear the support
    return gripper_pose((c[0], c[1], z), a, closing, hand.base)


HANDLE_PITCHES_DEG = (0.0, 35.0, 50.0, 65.0)


def handle_grasps(handle: np.ndarray, outward: np.ndarray, hand: Hand) -> list[Pose]:
    """Candidate grasps of a handle bar on a face with outward normal ``outward``: approaching against the normal,
    level or pitched downwards (an arm reaches a high handle close to its base only from above), fingers closing
    across the bar, each in both finger orders. The caller keeps the first reachable one."""
    n = np.array([outward[0], outward[1], 0.0])
    n /= np.linalg.norm(n)
    size = handle[3:] - handle[:3]
    side = np.array([-n[1], n[0], 0.0])
    across = abs(side @ size)  # the bar's horizontal extent along the face
    bar = side if across >= size[2] else np.array([0.0, 0.0, 1.0])
    out = []
    for pitch in HANDLE_PITCHES_DEG:
        p = math.radians(pitch)
        approach = -n * math.cos(p) + np.array([0.0, 0.0, -math.sin(p)]) if bar[2] == 0 else -n
        closing = np.cross(approach, bar)
        for sign in (1.0, -1.0):
            out.append(gripper_pose(_centre(handle), approach, sign * closing))
        if bar[2] != 0:
            break  # a vertical bar is grasped level
    return out


def rim_grasp(box: np.ndarray, opening: tuple[float, float], hand: Hand) -> Pose:
    """A hollow container (mug, bowl, basket): top-down on its thinnest wall, closing across the wall."""
    c = _centre(box)
    size = box[3:] - box[:3]
    walls = [((size[0] - opening[0]) / 2, 0), ((size[1] - opening[1]) / 2, 1)]
    thickness, axis = min(walls, key=lambda w: (w[0] < 0.003, w[0]))
    offset = np.zeros(3)
    offset[axis] = size[axis] / 2 - max(thickness, 0.003) / 2
    base = np.asarray(hand.base)
    sign = -1.0 if np.dot(offset, c - base) > 0 else 1.0  # the wall nearer to the robot
    point = c + sign * offset
    point[2] = max(box[5] - 0.015, box[2] + hand.finger_reach + TIP_MARGIN)
    closing = np.zeros(3)
    closing[axis] = 1.0
    return gripper_pose(point, DOWN, closing, hand.base)


def adaptive(box: np.ndarray, hand: Hand, kind: str, opening: tuple[float, float] | None = None,
             outward: np.ndarray | None = None, preferred_position=None, preferred_approach=None,
             preferred_normal=None) -> Pose:
    """A grasp chosen from the object's shape: handles by their bar, hollow containers by a wall, compact things
    top-down, and tall narrow things from the side; preferences steer position, approach and finger plane."""
    size = box[3:] - box[:3]
    if preferred_approach is not None:
        a = np.asarray(preferred_approach, dtype=float)
        a /= np.linalg.norm(a)
        if abs(a[2]) < 0.5:
            return horizontal(box, hand, a)
    fits_between_fingers = min(size[:2]) <= hand.max_opening - 0.005
    if kind == "container" and opening is not None and not fits_between_fingers:
        pose = rim_grasp(box, opening, hand)
    else:  # too wide for the fingers either way: the top-down attempt is as good as any
        pose = central_lift(box, hand)
    position = np.array(pose.position)
    if preferred_position is not None:  # slide along the object's long axis towards the preferred point
        p = np.asarray(preferred_position, dtype=float)
        long_axis = 0 if size[0] >= size[1] else 1
        lo = box[long_axis] + min(0.02, size[long_axis] / 2)
        hi = box[3 + long_axis] - min(0.02, size[long_axis] / 2)
        position[long_axis] = min(max(p[long_axis], lo), hi)
    closing = matrix_from_quat(pose.orientation)[:, 1]
    if preferred_normal is not None:
        closing = np.asarray(preferred_normal, dtype=float)
    return gripper_pose(position, approach_of(pose), closing, hand.base)


# ------------------------------------------------------------------------------------------------------- placing


def release_height(floor: float, rim: float) -> float:
    """Height of a held object's bottom when it is let go: just above the rim (so the hand stays clear of the
    walls), but no more than MAX_DROP above the floor."""
    return max(floor + PLACE_DROP, min(rim + 0.01, floor + MAX_DROP))


def free_spot(region: tuple[float, float, float, float], footprint: tuple[float, float],
              occupied: list[np.ndarray], anchor: tuple[float, float], pad: tuple[float, float] = (0.0, 0.0),
              fingers_inside: bool = False, step: float = 0.01) -> tuple[float, float]:
    """Where in ``region`` (x0, y0, x1, y1) to put a footprint: inside the region (with the fingers, grown by
    ``pad`` on each side, when they go below the rim), clear of what is already there by at least FREE_GAP
    fingers included, and as near ``anchor`` (a corner) as possible, so later objects keep the most room. With no
    clear spot, the spot of largest clearance; a region smaller than the footprint gives its centre."""
    return free_spots(region, footprint, occupied, anchor, pad, fingers_inside, step)[0]


def free_spots(region: tuple[float, float, float, float], footprint: tuple[float, float],
               occupied: list[np.ndarray], anchor: tuple[float, float], pad: tuple[float, float] = (0.0, 0.0),
               fingers_inside: bool = False, step: float = 0.01) -> list[tuple[float, float]]:
    """Every candidate spot of :func:`free_spot`, best first (its first is :func:`free_spot`'s answer): for a
    caller that checks each against the arm's reach and collisions and takes the first that passes."""
    x0, y0, x1, y1 = region
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx, hy = footprint[0] / 2, footprint[1] / 2
    gx, gy = hx + pad[0], hy + pad[1]
    fits = fingers_inside and x1 - x0 > 2 * gx and y1 - y0 > 2 * gy
    fx, fy = (gx, gy) if fits else (hx, hy)
    xs = np.arange(x0 + fx, x1 - fx + 1e-9, step) if x1 - x0 > 2 * fx else np.array([cx])
    ys = np.arange(y0 + fy, y1 - fy + 1e-9, step) if y1 - y0 > 2 * fy else np.array([cy])
    scored = []
    for x in xs:
        for y in ys:
            clearance = min((_rect_gap((x - gx, y - gy, x + gx, y + gy), b) for b in occupied), default=1.0)
            key = (clearance >= FREE_GAP, min(clearance, FREE_GAP), -math.hypot(x - anchor[0], y - anchor[1]))
            scored.append((key, (float(x), float(y))))
    if not scored:
        return [(cx, cy)]
    # stable: among equal keys the first in grid order wins, as in a strict ">" scan
    return [spot for _, spot in sorted(scored, key=lambda item: item[0], reverse=True)]


def _rect_gap(rect, box: np.ndarray) -> float:
    dx = max(box[0] - rect[2], rect[0] - box[3], 0.0)
    dy = max(box[1] - rect[3], rect[1] - box[4], 0.0)
    if dx == 0.0 and dy == 0.0:
        overlap = min(rect[2], box[3]) - max(rect[0], box[0]), min(rect[3], box[4]) - max(rect[1], box[1])
        return -min(overlap)
    return math.hypot(dx, dy)
