"""Cross-view bounding-box matching (paper III-C3), as the paper defines it.

1. *Frustum filter*: a 2-D box of view i selects the fused points whose projection into view i falls inside it (and
   lies in front of the camera); the box becomes a binary point-presence vector over the N points.
2. *Score*: two boxes of different views score the 1-D IoU of their presence vectors.
3. *Greedy assignment*: pairs are taken in order of falling IoU (above a minimum); a pair joins the two groups its
   boxes belong to unless that would put two boxes of one view into one group -- so each box is used at most
   once. A group is a tuple with one box index per view, -1 where that view has no box of it.
4. *Label*: the group's label is the majority vote of its boxes' labels (ties: the larger summed score, then the
   name).

Everything here is plain numpy over (points, cameras, boxes): no simulator, no Open3D.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from robot.perception.cameras import CameraSpec, project
from robot.perception.grounding import Detection


def presence(points: np.ndarray, spec: CameraSpec, box: tuple[float, float, float, float]) -> np.ndarray:
    """(N,) bool: the points whose projection into the camera lies inside the box."""
    return presence_in(project(points, spec), box)


def presence_in(projection: tuple[np.ndarray, np.ndarray], box: tuple[float, float, float, float]) -> np.ndarray:
    """``presence`` from the points' projection into the camera (``project``'s (uv, z)), computed once per view and
    shared by all of the view's boxes."""
    uv, z = projection
    x0, y0, x1, y1 = box
    with np.errstate(invalid="ignore"):
        return (z > 0) & (uv[:, 0] >= x0) & (uv[:, 0] < x1) & (uv[:, 1] >= y0) & (uv[:, 1] < y1)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.count_nonzero(a | b))
    return int(np.count_nonzero(a & b)) / union if union else 0.0


@dataclass(frozen=True)
class Match:
    """One object across views: a box index per view (-1: none), the voted label, and its support."""

    boxes: tuple[int, ...]
    label: str
    votes: int
    """Boxes in the group that carry the winning label."""

    @property
    def views(self) -> int:
        return sum(1 for b in self.boxes if b >= 0)


def match_boxes(vectors: list[list[np.ndarray]], min_iou: float = 0.0) -> list[tuple[int, ...]]:
    """Greedy matching of per-view presence vectors: ``vectors[view][box]`` -> groups of one box index per view."""
    n_views = len(vectors)
    group_of: dict[tuple[int, int], int] = {}
    groups: list[dict[int, int]] = []  # view -> box
    for view, boxes in enumerate(vectors):
        for box in range(len(boxes)):
            group_of[(view, box)] = len(groups)
            groups.append({view: box})
    pairs = []
    for v1 in range(n_views):
        for v2 in range(v1 + 1, n_views):
            for b1, a in enumerate(vectors[v1]):
                for b2, b in enumerate(vectors[v2]):
                    score = iou(a, b)
                    if score > min_iou:
                        pairs.append((score, v1, b1, v2, b2))
    pairs.sort(key=lambda p: (-p[0], p[1:]))
    for _, v1, b1, v2, b2 in pairs:
        g1, g2 = group_of[(v1, b1)], group_of[(v2, b2)]
        if g1 == g2 or set(groups[g1]) & set(groups[g2]):
            continue  # already together, or a view would give two boxes to one object
        groups[g1].update(groups[g2])
        for view, box in groups[g2].items():
            group_of[(view, box)] = g1
        groups[g2] = {}
    return sorted(tuple(g.get(view, -1) for view in range(n_views)) for g in groups if g)


def vote(group: tuple[int, ...], detections: list[list[Detection]]) -> tuple[str, int]:
    """The majority label of a group's boxes (ties: larger summed score, then the name) and its vote count."""
    members = [detections[view][box] for view, box in enumerate(group) if box >= 0]
    counts = Counter(d.label for d in members)
    scores = Counter()
    for d in members:
        scores[d.label] += d.score
    label = min(counts, key=lambda name: (-counts[name], -scores[name], name))
    return label, counts[label]


def match_views(points: np.ndarray, specs: list[CameraSpec], detections: list[list[Detection]],
                min_iou: float = 0.0) -> tuple[list[Match], list[list[np.ndarray]]]:
    """Matched objects across the views, and every box's presence vector (``[view][box]``)."""
    projections = [project(points, spec) for spec in specs]
    vectors = [[presence_in(projection, d.box) for d in dets]
               for projection, dets in zip(projections, detections, strict=True)]
    matches = []
    for group in match_boxes(vectors, min_iou):
        label, votes = vote(group, detections)
        matches.append(Match(group, label, votes))
    return matches, vectors
