"""3-D instances (paper III-C4) and what the perception tools derive from them: boxes, poses, plane normals and the
joints of drawers and doors.

An instance is the fused points inside its matched boxes. "Inside" is judged view by view where the point is
*visible* (its depth agrees with that view's depth image): a point must fall inside the box of at least one view
that sees it and outside no box of a view that sees it; views that do not see a point (occluded, out of frame)
have no say, so a box cut short by an occluder does not cut the object. The support plane's points are left out,
the main DBSCAN clusters are kept (stray points of a neighbour go), and a box whose bottom lies close above the
support is extended down to it (the underside no camera sees).

Joints (a heuristic in place of GAMMA, which segments parts and regresses axes from points with a network,
category-free): the joint type comes from the part's label (drawers slide, doors swing); a drawer's axis is the
outward normal of its front face, its origin the handle's centre (RANSAC on the drawer's upright points away from the
handle); a door's axis is vertical through its box edge farthest from the handle, signed so that opening swings the
door towards the room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot.backends.base import JointState
from robot.contract.params import SegmentationParams
from robot.contract.tool_api import Pose
from robot.perception.cameras import CameraFrame, project
from robot.perception.fusion import Reconstruction, fit_plane, in_boxes
from robot.perception.grounding import Detection
from robot.perception.matching import Match, presence_in

VISIBLE_TOL_M = 0.006


@dataclass
class Instance:
    name: str
    points: np.ndarray
    normals: np.ndarray
    box: np.ndarray
    """[x0, y0, z0, x1, y1, z1]."""
    yaw: float
    """Heading of the footprint's long axis (rad), 0 for round footprints."""
    views: int
    votes: int
    indices: np.ndarray
    """Where the points are among the reconstruction's off-support points (``points[~support]``)."""

    @property
    def centre(self) -> np.ndarray:
        return (self.box[:3] + self.box[3:]) / 2

    def pose(self) -> Pose:
        half = self.yaw / 2
        return Pose(tuple(float(v) for v in self.centre), (0.0, 0.0, math.sin(half), math.cos(half)))


def visibility(points: np.ndarray, frame: CameraFrame,
               projection: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(N,) bool: the camera sees the point (in frame, in front, its depth matches the depth image). ``projection``:
    the points' ``project`` into this camera, when the caller has it."""
    spec = frame.spec
    uv, z = project(points, spec) if projection is None else projection
    with np.errstate(invalid="ignore"):
        inside = (z > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < spec.width) & (uv[:, 1] >= 0) & (uv[:, 1] < spec.height)
    out = np.zeros(len(points), dtype=bool)
    idx = np.nonzero(inside)[0]
    u = np.clip(uv[idx, 0].astype(int), 0, spec.width - 1)
    v = np.clip(uv[idx, 1].astype(int), 0, spec.height - 1)
    measured = frame.depth[v, u]
    out[idx] = (measured > 0) & (np.abs(measured - z[idx]) <= VISIBLE_TOL_M)
    return out


def _main_clusters(points: np.ndarray, eps: float, share: float = 0.2) -> np.ndarray:
    """Indices of the points in the main DBSCAN clusters: the largest, and any at least ``share`` of its size (a
    big object seen in pieces stays whole; a few stray points from a neighbour go)."""
    import open3d as o3d

    if len(points) < 10:
        return np.arange(len(points))
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    labels = np.asarray(cloud.cluster_dbscan(eps=eps, min_points=4))
    if labels.max(initial=-1) < 0:
        return np.arange(len(points))
    sizes = np.bincount(labels[labels >= 0])
    return np.nonzero(np.isin(labels, np.nonzero(sizes >= share * sizes.max())[0]))[0]


def footprint_yaw(points: np.ndarray) -> float:
    """Principal horizontal axis of the points (0 when the footprint is round or square)."""
    xy = points[:, :2] - points[:, :2].mean(axis=0)
    if len(xy) < 3:
        return 0.0
    values, vectors = np.linalg.eigh(np.cov(xy.T))
    if values[1] < 1.5 * max(values[0], 1e-12):
        return 0.0
    axis = vectors[:, 1]
    yaw = math.atan2(axis[1], axis[0])
    return (yaw + math.pi / 2) % math.pi - math.pi / 2  # a line's heading, in [-pi/2, pi/2)


def segment(recon: Reconstruction, frames: list[CameraFrame], detections: list[list[Detection]],
            matches: list[Match], params: SegmentationParams,
            vectors: list[list[np.ndarray]] | None = None) -> dict[str, Instance]:
    """One instance per label: the best-supported match (most views, then most points) of each label. ``vectors``:
    ``match_views``' presence vectors (``[view][box]``) of the same off-support points, reused instead of projecting
    every box again."""
    keep = ~recon.support
    points, normals = recon.points[keep], recon.normals[keep]
    if len(points) == 0:
        return {}
    projections = [project(points, f.spec) for f in frames]
    visible = [visibility(points, f, projection) for f, projection in zip(frames, projections, strict=True)]
    found: dict[str, Instance] = {}
    for match in matches:
        inside_some = np.zeros(len(points), dtype=bool)
        outside_any = np.zeros(len(points), dtype=bool)
        for view, box in enumerate(match.boxes):
            if box < 0:
                continue
            inside = (vectors[view][box] if vectors is not None
                      else presence_in(projections[view], detections[view][box].box))
            inside_some |= visible[view] & inside
            outside_any |= visible[view] & ~inside
        idx = np.nonzero(inside_some & ~outside_any)[0]
        idx = idx[_main_clusters(points[idx], params.cluster_eps_m)] if len(idx) else idx
        if len(idx) < params.min_points:
            continue
        pts = points[idx]
        box = np.concatenate([pts.min(axis=0), pts.max(axis=0)])
        if recon.support_z is not None and 0 <= box[2] - recon.support_z <= params.support_snap_m:
            box[2] = recon.support_z
        inst = Instance(match.label, pts, normals[idx], box, footprint_yaw(pts), match.views, match.votes, idx)
        best = found.get(match.label)
        if best is None or (inst.views, len(inst.points)) > (best.views, len(best.points)):
            found[match.label] = inst
    return without_nested(found, params.min_points)


def without_nested(found: dict[str, Instance], min_points: int, share: float = 0.8) -> dict[str, Instance]:
    """An instance that holds most of a smaller one's points (a plate and the apple on it, a bowl and what is in
    it, a drawer and its handle) keeps its points but not theirs: its box is its own."""
    out = dict(found)
    for name, outer in found.items():
        drop = np.zeros(len(outer.points), dtype=bool)
        for other, inner in found.items():
            if other == name or len(inner.points) >= len(outer.points):
                continue
            common = np.isin(outer.indices, inner.indices)
            if common.sum() >= share * len(inner.points):
                drop |= common
        if drop.any() and (~drop).sum() >= min_points:
            own = _subset(outer, ~drop)
            if outer.box[2] < outer.points[:, 2].min() - 1e-9:  # it was extended down to the support: still is
                own.box[2] = outer.box[2]
            out[name] = own
    return out


def plane_normal(inst: Instance, position: np.ndarray, radii=(0.03, 0.05, 0.08)) -> np.ndarray | None:
    """Unit normal of the plane through the instance's points nearest ``position`` (RANSAC), pointing from the
    instance towards the position's side; None with too few points there."""
    for radius in radii:
        near = inst.points[np.linalg.norm(inst.points - position, axis=1) <= radius]
        if len(near) >= 12:
            break
    else:
        return None
    plane = fit_plane(near, 0.004, 100, 6)
    if plane is None:
        return None
    normal = plane[0]
    outward = near.mean(axis=0) - inst.points.mean(axis=0)
    if np.linalg.norm(outward) < 1e-6:
        outward = position - inst.points.mean(axis=0)
    return normal if np.dot(normal, outward) >= 0 else -normal


def front_plane(part: Instance, handle: Instance, margin: float = 0.01) -> tuple[np.ndarray, float] | None:
    """Plane (unit normal n, offset d: n.x + d = 0) of a drawer's or door's front: RANSAC on the part's points
    with near-horizontal normals, away from the handle (whose bar and posts would tilt the fit)."""
    near_handle = in_boxes(part.points, handle.box, margin)
    upright = np.abs(part.normals[:, 2]) < 0.3
    face = part.points[~near_handle & upright]
    if len(face) < 30:
        return None
    plane = fit_plane(face, 0.004, 200, 20)
    return None if plane is None else (plane[0], plane[1])


def standing_off(handle: Instance, plane: tuple[np.ndarray, float], min_m: float = 0.004) -> Instance:
    """The handle without the patch of its part's front that its boxes also take in: what stands off the face."""
    normal, d = plane
    distance = handle.points @ normal + d
    if np.median(distance) < 0:
        distance = -distance
    keep = distance > min_m
    return _subset(handle, keep) if keep.sum() >= 8 else handle


def _subset(inst: Instance, keep: np.ndarray) -> Instance:
    pts = inst.points[keep]
    return Instance(inst.name, pts, inst.normals[keep], np.concatenate([pts.min(axis=0), pts.max(axis=0)]),
                    inst.yaw, inst.views, inst.votes, inst.indices[keep])


def separate(instances: list[Instance]) -> list[Instance]:
    """Side-by-side instances that cannot overlap (the drawers of one cabinet): a point two of them took in goes
    to the one whose own points' centroid is nearest. Boxes of slanted views reach over the edge of the next
    drawer; this gives its points back."""
    if len(instances) < 2:
        return instances
    counts: dict[int, int] = {}
    for inst in instances:
        for i in inst.indices.tolist():
            counts[i] = counts.get(i, 0) + 1
    shared = {i for i, c in counts.items() if c > 1}
    if not shared:
        return instances
    own = [~np.isin(inst.indices, list(shared)) for inst in instances]
    centroids = [inst.points[m].mean(axis=0) if m.any() else inst.centre for inst, m in zip(instances, own,
                                                                                             strict=True)]
    members = [set(inst.indices.tolist()) for inst in instances]
    out = []
    for k, inst in enumerate(instances):
        keep = own[k].copy()
        for j in np.nonzero(~own[k])[0]:
            p = inst.points[j]
            rivals = [r for r in range(len(instances)) if r != k and inst.indices[j] in members[r]]
            mine = np.linalg.norm(p - centroids[k])
            keep[j] = all(mine <= np.linalg.norm(p - centroids[r]) for r in rivals)
        out.append(_subset(inst, keep) if keep.sum() >= 8 else inst)
    return out


def without_parts(body: Instance, parts: list[Instance], margin: float = 0.005) -> Instance:
    """An articulated object's body without its parts (drawers, doors, handles): the points no part holds and that
    lie in no part's box grown by ``margin`` -- so that the cabinet's box is its carcass, not its handles or a
    pulled-out drawer."""
    keep = ~np.isin(body.indices, np.concatenate([p.indices for p in parts])) if parts else np.ones(len(body.points),
                                                                                                  bool)
    for part in parts:
        keep &= ~in_boxes(body.points, part.box, margin)
    return _subset(body, keep) if keep.sum() >= 8 else body


def _horizontal(v: np.ndarray) -> np.ndarray | None:
    h = np.array([v[0], v[1], 0.0])
    n = np.linalg.norm(h)
    return h / n if n > 1e-6 else None


def estimate_joint(kind: str, part: Instance, handle: Instance, toward: np.ndarray, part_name: str,
                   handle_name: str, plane: tuple[np.ndarray, float] | None = None) -> JointState | None:
    """A drawer's (prismatic) or door's (revolute) joint from its part and handle instances and the part's front
    ``plane`` (``front_plane``); ``toward`` is a point in front of the cabinet (the robot's base) that fixes the
    outward side when the face's normal is unclear."""
    outward = _horizontal(plane[0]) if plane is not None else None
    fallback = _horizontal(toward - part.centre)
    if outward is None or (fallback is not None and abs(float(np.dot(outward, fallback))) < 0.3):
        outward = fallback
    if outward is None:
        return None
    if fallback is not None and np.dot(outward, fallback) < 0:
        outward = -outward
    if kind == "prismatic":
        return JointState(part_name, handle_name, "prismatic", outward, handle.centre.copy(), 0.0, 0.0, math.inf)
    tangent = np.array([-outward[1], outward[0], 0.0])
    corners = [part.box[:3], part.box[3:]]
    offsets = [float(np.dot(c - handle.centre, tangent)) for c in corners]
    edge = corners[int(np.argmax(np.abs(offsets)))]
    hinge = np.array([edge[0], edge[1], part.centre[2]])
    if plane is not None and abs(float(plane[0] @ outward)) > 0.5:  # the hinge lies on the door's front plane
        hinge -= outward * (float(plane[0] @ hinge) + plane[1]) / float(plane[0] @ outward)
    else:  # on the front of its box (handle included: a few centimetres out)
        corners = np.array([[part.box[i], part.box[j], part.box[k]] for i in (0, 3) for j in (1, 4) for k in (2, 5)])
        hinge += outward * (float(np.max(corners @ outward)) - float(np.dot(hinge, outward)))
    axis = np.array([0.0, 0.0, 1.0])
    if np.dot(np.cross(axis, part.centre - hinge), outward) < 0:
        axis = -axis
    return JointState(part_name, handle_name, "revolute", axis, hinge, 0.0, 0.0, math.pi)
