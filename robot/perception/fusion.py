"""3-D reconstruction (paper III-C2): the k RGB-D views fused into a TSDF volume with Open3D (a sparse voxel block
grid), then a point cloud (for instances, grasps, planes and the planning scene's occupancy) and, on request, a
triangle mesh (marching cubes; what a MoveIt planning scene takes).

Both are cropped to the robot's workspace and, with the self filter on, cleared of what lies on the robot itself
(its links' boxes at the current joint state, grown by a margin -- what MoveIt's self filter does for its octomap).
The support plane is found by RANSAC among near-horizontal planes; its points are marked so that instance
segmentation and matching need not carry the table along.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robot.contract.params import FusionParams
from robot.perception.cameras import CameraFrame

BLOCK_RESOLUTION = 8
"""Voxels per block edge of the sparse volume."""
BLOCK_COUNT = 10000
"""Blocks allocated up front (enough for a table scene at 4 mm; the hash map grows beyond, at a cost)."""
MIN_WEIGHT = 0.5
"""A voxel seen by one view is kept (Open3D's default of 3 would need three views of every surface)."""


@dataclass
class Reconstruction:
    points: np.ndarray
    """(N, 3) surface points in the world frame."""
    colors: np.ndarray
    """(N, 3) in [0, 1]."""
    normals: np.ndarray
    """(N, 3) unit surface normals."""
    support: np.ndarray
    """(N,) bool: the point lies on the support plane (the table top)."""
    support_z: float | None
    """Height of the support plane, None when no horizontal plane was found."""
    views: int
    """Views with depth that went into the volume."""
    volume: object = field(default=None, repr=False)
    """Open3D's voxel block grid (for the mesh)."""
    crop: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    robot_boxes: np.ndarray | None = field(default=None, repr=False)

    @property
    def empty(self) -> bool:
        return len(self.points) == 0

    def mesh(self, params: FusionParams) -> tuple[np.ndarray, np.ndarray]:
        """The surface as a triangle mesh (marching cubes), cropped, simplified by vertex clustering at
        ``mesh_voxel_m`` and, with the self filter, without triangles on the robot: (vertices, triangles)."""
        import open3d as o3d

        if self.volume is None:
            return np.zeros((0, 3)), np.zeros((0, 3), dtype=int)
        mesh = self.volume.extract_triangle_mesh(weight_threshold=MIN_WEIGHT).to_legacy()
        mesh = mesh.crop(o3d.geometry.AxisAlignedBoundingBox(*self.crop))
        mesh = mesh.simplify_vertex_clustering(voxel_size=params.mesh_voxel_m)
        vertices, triangles = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
        if params.self_filter and self.robot_boxes is not None and len(self.robot_boxes):
            on_robot = in_boxes(vertices, self.robot_boxes, params.self_filter_margin_m)
            triangles = triangles[~np.any(on_robot[triangles], axis=1)]
        return vertices, triangles


def in_boxes(points: np.ndarray, boxes: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """(N,) bool: the point lies in any of the boxes ((L, 6), or one (6,) box) grown by ``margin``."""
    boxes = np.atleast_2d(boxes)
    if len(points) == 0 or len(boxes) == 0:
        return np.zeros(len(points), dtype=bool)
    out = np.zeros(len(points), dtype=bool)
    for box in boxes:  # box by box: no (L, N, 3) temporaries
        lo, hi = box[:3] - margin, box[3:] + margin
        out |= ((points[:, 0] >= lo[0]) & (points[:, 0] <= hi[0]) & (points[:, 1] >= lo[1]) & (points[:, 1] <= hi[1])
                & (points[:, 2] >= lo[2]) & (points[:, 2] <= hi[2]))
    return out


def integrate(frames: list[CameraFrame], params: FusionParams):
    """Open3D's TSDF volume (a voxel block grid) of every frame with a depth reading, and how many there were."""
    import open3d as o3d
    import open3d.core as o3c

    f32 = o3c.float32
    grid = o3d.t.geometry.VoxelBlockGrid(attr_names=("tsdf", "weight", "color"), attr_dtypes=(f32, f32, f32),
                                         attr_channels=((1), (1), (3)), voxel_size=params.voxel_m,
                                         block_resolution=BLOCK_RESOLUTION, block_count=BLOCK_COUNT,
                                         device=o3c.Device("CPU:0"))
    trunc = params.trunc_m / params.voxel_m
    views = 0
    for frame in frames:
        if not frame.valid_depth:
            continue
        spec = frame.spec
        depth = np.where(np.isfinite(frame.depth) & (frame.depth > 0), frame.depth, 0.0).astype(np.float32)
        # Open3D puts pixel centres at integer coordinates; ours (and a CameraInfo's) at half-integers
        K = spec.K.copy()
        K[0, 2] -= 0.5
        K[1, 2] -= 0.5
        intrinsic = o3c.Tensor(K, o3c.float64)
        extrinsic = o3c.Tensor(np.linalg.inv(spec.T_world_camera), o3c.float64)
        depth_image = o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(depth)))
        color_image = o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(frame.rgb, dtype=np.float32) / 255.0))
        blocks = grid.compute_unique_block_coordinates(depth_image, intrinsic, extrinsic, 1.0, params.depth_max_m,
                                                       trunc_voxel_multiplier=trunc)
        grid.integrate(blocks, depth_image, color_image, intrinsic, extrinsic, 1.0, params.depth_max_m,
                       trunc_voxel_multiplier=trunc)
        views += 1
    return grid, views


def canonical_order(cloud):
    """The cloud's points sorted by position (x, then y, then z, at 0.1 mm; ties broken by the exact coordinates, then
    the colours). Open3D hands the fused points out in its hash map's order, which its threads decide; everything
    after (normals, RANSAC, clustering, matching) is seeded but order-dependent, so without this the same frames gave
    other instances, grasps and outcomes on a busy machine. The tie-breaks matter: two points within the same 0.1 mm
    cell were left in the hash map's order, and 1 fusion in 6 came out in another order from the same frames."""
    import open3d as o3d

    points = np.asarray(cloud.points)
    if len(points) == 0:
        return cloud
    key = np.round(points / 1e-4).astype(np.int64)
    colours = np.asarray(cloud.colors) if cloud.has_colors() else np.zeros((len(points), 0))
    # np.lexsort sorts by the last key first
    order = np.lexsort(tuple(colours[:, c] for c in range(colours.shape[1]))[::-1]
                       + (points[:, 2], points[:, 1], points[:, 0], key[:, 2], key[:, 1], key[:, 0]))
    out = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[order]))
    if cloud.has_colors():
        out.colors = o3d.utility.Vector3dVector(np.asarray(cloud.colors)[order])
    if cloud.has_normals():
        out.normals = o3d.utility.Vector3dVector(np.asarray(cloud.normals)[order])
    return out


def fuse(frames: list[CameraFrame], params: FusionParams, bounds: tuple[np.ndarray, np.ndarray],
         robot_boxes: np.ndarray | None) -> Reconstruction:
    """Fuse the views; keep what lies within ``bounds`` (lo, hi corners) and, with the self filter, off the
    robot's ``robot_boxes`` (L, 6)."""
    import open3d as o3d

    volume, views = integrate(frames, params)
    lo, hi = (np.asarray(b, dtype=float) for b in bounds)
    if views == 0:
        empty = np.zeros((0, 3))
        return Reconstruction(empty, empty, empty, np.zeros(0, bool), None, 0)
    cloud = volume.extract_point_cloud(weight_threshold=MIN_WEIGHT).to_legacy()
    cloud = canonical_order(cloud.crop(o3d.geometry.AxisAlignedBoundingBox(lo, hi)))
    points = np.asarray(cloud.points)
    colors = np.asarray(cloud.colors) if cloud.has_colors() else np.zeros_like(points)
    if not cloud.has_normals():
        cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=3 * params.voxel_m, max_nn=30))
    normals = np.asarray(cloud.normals)
    if params.self_filter and robot_boxes is not None and len(robot_boxes):
        keep = ~in_boxes(points, robot_boxes, params.self_filter_margin_m)
        points, colors, normals = points[keep], colors[keep], normals[keep]
    support_z = support_plane(points, normals, params.voxel_m)
    support = (np.abs(points[:, 2] - support_z) <= 1.5 * params.voxel_m if support_z is not None
               else np.zeros(len(points), bool))
    return Reconstruction(points, colors, normals, support, support_z, views, volume, (lo, hi), robot_boxes)


def fit_plane(points: np.ndarray, distance: float, iterations: int, min_inliers: int
              ) -> tuple[np.ndarray, float, np.ndarray] | None:
    """RANSAC plane through ``points`` (seeded: the same points give the same plane): unit normal n, offset d with
    n.x + d = 0, and the inlier indices; None with fewer than ``min_inliers``.

    Our own loop, not Open3D's ``segment_plane``: that one runs its iterations on several threads from one seed, so
    which sample wins depends on thread timing. Here the samples come from one seeded generator, the best count wins
    (the first on a tie), and the plane is refitted to its inliers by least squares."""
    if len(points) < max(3, min_inliers):
        return None
    rng = np.random.default_rng(0)
    best_count, best = -1, None
    for _ in range(iterations):
        p0, p1, p2 = points[rng.choice(len(points), 3, replace=False)]
        n = np.cross(p1 - p0, p2 - p0)
        length = float(np.linalg.norm(n))
        if length < 1e-12:
            continue
        n = n / length
        count = int(np.count_nonzero(np.abs(points @ n - n @ p0) <= distance))
        if count > best_count:
            best_count, best = count, (n, -float(n @ p0))
    if best is None:
        return None
    n, d = best
    inliers = np.flatnonzero(np.abs(points @ n + d) <= distance)
    if len(inliers) < min_inliers:
        return None
    centre = points[inliers].mean(axis=0)
    normal = np.linalg.svd(points[inliers] - centre, full_matrices=False)[2][-1]
    normal = normal if normal @ n >= 0 else -normal
    d = -float(normal @ centre)
    inliers = np.flatnonzero(np.abs(points @ normal + d) <= distance)
    if len(inliers) < min_inliers:
        return None
    return normal, d, inliers


def support_plane(points: np.ndarray, normals: np.ndarray, voxel: float, min_share: float = 0.05) -> float | None:
    """Height of the largest horizontal plane (RANSAC over the upward-facing points), or None."""
    up = np.abs(normals[:, 2]) > 0.9 if len(normals) == len(points) else np.ones(len(points), bool)
    candidates = points[up]
    if len(candidates) < max(50, min_share * len(points)):
        return None
    plane = fit_plane(candidates, 1.5 * voxel, 200, int(min_share * len(points)))
    if plane is None or abs(plane[0][2]) < 0.95:
        return None
    return float(np.median(candidates[plane[2], 2]))
