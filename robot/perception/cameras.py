"""RGB-D cameras: the rig's intrinsics and extrinsics, one frame per camera, and the projection both use.

Conventions are those of a real RGB-D driver (and of ROS's ``sensor_msgs/CameraInfo``): the optical frame has x to
the right of the image, y down and z forward; ``K`` is the 3x3 pinhole matrix; ``depth`` is metric z-depth along
the optical axis in metres (0 where the sensor has no reading); ``rgb`` is 8-bit ``rgb8``. ``T_world_camera`` is
the camera's optical frame in the world frame (4x4). A real robot's calibrated cameras give exactly these; the
simulator renders them (``robot/backends/sim_cameras.py``); ``robot/perception/ros_cameras.py`` converts them
to and from ROS messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from robot.contract.params import CameraRigParams


@dataclass(frozen=True)
class CameraSpec:
    """One calibrated camera: name, image size, intrinsics and pose."""

    name: str
    width: int
    height: int
    K: np.ndarray
    T_world_camera: np.ndarray
    near: float = 0.05
    far: float = 3.0

    @property
    def fov_deg(self) -> float:
        """Vertical field of view."""
        return math.degrees(2 * math.atan(self.height / 2 / self.K[1, 1]))

    @property
    def eye(self) -> np.ndarray:
        return self.T_world_camera[:3, 3]

    @property
    def forward(self) -> np.ndarray:
        return self.T_world_camera[:3, 2]

    @property
    def up(self) -> np.ndarray:
        return -self.T_world_camera[:3, 1]


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """T_world_camera of an optical frame at ``eye`` looking at ``target`` (x right, y down, z forward)."""
    eye, target, up = (np.asarray(v, dtype=float) for v in (eye, target, up))
    forward = target - eye
    if np.linalg.norm(forward) < 1e-9:
        raise ValueError("a camera's eye and target must differ")
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-6:  # looking straight along `up`: any right angle will do
        right = np.cross(forward, [1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([right, down, forward])
    T[:3, 3] = eye
    return T


def intrinsics(width: int, height: int, fov_deg: float) -> np.ndarray:
    """Square pixels, principal point at the image centre, ``fov_deg`` the vertical field of view."""
    f = height / 2 / math.tan(math.radians(fov_deg) / 2)
    return np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def rig(params: CameraRigParams, table_height: float) -> list[CameraSpec]:
    """The configured cameras; their z coordinates are given above the table top."""
    K = intrinsics(params.width, params.height, params.fov_deg)
    out = []
    for cam in params.cameras:
        eye = (cam.eye[0], cam.eye[1], table_height + cam.eye[2])
        target = (cam.target[0], cam.target[1], table_height + cam.target[2])
        out.append(CameraSpec(cam.name, params.width, params.height, K.copy(), look_at(eye, target),
                              params.near_m, params.far_m))
    return out


@dataclass
class CameraFrame:
    """What one camera saw at one moment."""

    spec: CameraSpec
    rgb: np.ndarray
    """(H, W, 3) uint8."""
    depth: np.ndarray
    """(H, W) float32 metres, 0 = no reading."""
    stamp: float = 0.0
    segmentation: np.ndarray | None = field(default=None, repr=False)
    """(H, W) int32 index into ``labels`` (-1 = nothing): the simulator's ground truth; a real camera has none."""
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        h, w = self.spec.height, self.spec.width
        if self.rgb.shape != (h, w, 3) or self.depth.shape != (h, w):
            raise ValueError(f"camera {self.spec.name}: rgb {self.rgb.shape} / depth {self.depth.shape} do not match "
                             f"its {w}x{h} calibration")

    @property
    def valid_depth(self) -> bool:
        return bool(np.any(np.isfinite(self.depth) & (self.depth > 0)))


def project(points: np.ndarray, spec: CameraSpec) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates (N, 2) as (u, v) and z-depth (N,) of world points in a camera; z <= 0 is behind it."""
    T_camera_world = np.linalg.inv(spec.T_world_camera)
    cam = points @ T_camera_world[:3, :3].T + T_camera_world[:3, 3]
    z = cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = (cam[:, :2] / z[:, None]) * np.array([spec.K[0, 0], spec.K[1, 1]]) + spec.K[:2, 2]
    return uv, z


def backproject(frame: CameraFrame, stride: int = 1) -> np.ndarray:
    """World points (N, 3) of the frame's valid depth pixels (every ``stride``-th pixel in each direction)."""
    spec = frame.spec
    v, u = np.mgrid[0:spec.height:stride, 0:spec.width:stride]
    z = frame.depth[::stride, ::stride]
    ok = np.isfinite(z) & (z > 0)
    u, v, z = u[ok] + 0.5, v[ok] + 0.5, z[ok]
    x = (u - spec.K[0, 2]) / spec.K[0, 0] * z
    y = (v - spec.K[1, 2]) / spec.K[1, 1] * z
    cam = np.column_stack([x, y, z])
    return cam @ spec.T_world_camera[:3, :3].T + spec.T_world_camera[:3, 3]
