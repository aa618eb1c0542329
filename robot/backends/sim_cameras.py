"""The simulator's RGB-D cameras: PyBullet's software renderer (no display, no GPU) as a calibrated camera.

Each model is painted in its catalog colour once per world; a frame carries RGB, metric z-depth (0 where the ray
hits nothing within the far plane, like a sensor's missing reading), optional Gaussian depth noise, and the
segmentation image (which model each pixel shows; the robot is a label of its own) that only a simulator has.
"""

from __future__ import annotations

import numpy as np

from robot.perception.cameras import CameraFrame, CameraSpec

ROBOT_LABEL = "robot"
_TABLE_RGBA = (0.85, 0.78, 0.64, 1.0)
_CABINET_RGBA = (0.62, 0.47, 0.33, 1.0)
_ROBOT_RGBA = (0.92, 0.92, 0.95, 1.0)


def paint(pb, client: int, models: dict, world, robot_body: int) -> None:
    """Give every body its colour: catalog colours for objects and containers, wood for table and cabinet."""
    from robot.contract.catalog import colour_rgba

    for name, sim in models.items():
        if name == "table":
            rgba = _TABLE_RGBA
        elif sim.shape in ("cabinet", "part"):
            rgba = _CABINET_RGBA if world.model(name).category != "handle" else (0.2, 0.2, 0.2, 1.0)
        else:
            rgba = colour_rgba(world.model(name).colour)
        pb.changeVisualShape(sim.body, sim.link, rgbaColor=list(rgba), physicsClientId=client)
    for link in range(-1, pb.getNumJoints(robot_body, physicsClientId=client)):
        pb.changeVisualShape(robot_body, link, rgbaColor=list(_ROBOT_RGBA), physicsClientId=client)


def render(pb, client: int, spec: CameraSpec, segment_label: dict[tuple[int, int], int], labels: tuple[str, ...],
           rng: np.random.Generator | None = None, depth_noise_m: float = 0.0, stamp: float = 0.0) -> CameraFrame:
    """One frame of ``spec``; ``segment_label`` maps (body, link) to an index into ``labels``."""
    target = spec.eye + spec.forward
    view = pb.computeViewMatrix(spec.eye.tolist(), target.tolist(), spec.up.tolist(), physicsClientId=client)
    proj = pb.computeProjectionMatrixFOV(spec.fov_deg, spec.width / spec.height, spec.near, spec.far,
                                         physicsClientId=client)
    _, _, rgba, buffer, seg = pb.getCameraImage(
        spec.width, spec.height, view, proj, renderer=pb.ER_TINY_RENDERER,
        flags=pb.ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX, physicsClientId=client)
    rgb = np.asarray(rgba, dtype=np.uint8).reshape(spec.height, spec.width, 4)[:, :, :3].copy()
    buffer = np.asarray(buffer, dtype=np.float64).reshape(spec.height, spec.width)
    near, far = spec.near, spec.far
    depth = far * near / (far - (far - near) * buffer)
    depth[buffer >= 1.0 - 1e-7] = 0.0
    if depth_noise_m > 0 and rng is not None:
        hit = depth > 0
        depth[hit] += rng.normal(0.0, depth_noise_m, int(hit.sum()))
    # PyBullet codes a pixel as body + ((link + 1) << 24), -1 for nothing
    codes, inverse = np.unique(np.asarray(seg, dtype=np.int64), return_inverse=True)
    lut = np.array([segment_label.get((int(c) & ((1 << 24) - 1), (int(c) >> 24) - 1), -1) if c >= 0 else -1
                    for c in codes], dtype=np.int32)
    ids = lut[inverse].reshape(spec.height, spec.width)
    return CameraFrame(spec, rgb, depth.astype(np.float32), stamp, ids, labels)
