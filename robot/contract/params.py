"""The settings a runner goal carries, as typed schemas: the table and robot that define the world frame, and how
perception works (noise, cameras, grounding, fusion, grasps).

They are part of the contract: the ``roboscript`` params (``tasks.roboscript.params``) mount them, and a runner
validates a goal's settings with the same models. World frame (metres): x points away from the robot across the
table, y to the robot's left, z up from the floor; the robot base stands on the table top at
(``robot.base_x``, ``robot.base_y``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from core.plugins import GRASP_BACKENDS, GROUNDING_BACKENDS
from core.schema import Strict

Metres = Annotated[float, Field(ge=-5.0, le=5.0)]


class NoiseParams(Strict):
    """The ``noisy`` perception mode: Gaussian noise (standard deviations) on what ``detect_objects`` reports."""

    position_m: Annotated[float, Field(ge=0.0, le=0.2)] = 0.005
    """On box centres, object poses and joint origins."""
    size_m: Annotated[float, Field(ge=0.0, le=0.2)] = 0.005
    """On each box extent."""
    yaw_deg: Annotated[float, Field(ge=0.0, le=45.0)] = 2.0
    """On object orientations about the vertical."""
    axis_deg: Annotated[float, Field(ge=0.0, le=45.0)] = 2.0
    """On joint axes."""


Vec3 = tuple[float, float, float]
SOURCES = ("perceived", "ground_truth")


class CameraParams(Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]
    eye: Vec3
    """Optical centre: x, y in the world frame, z above the table top (metres)."""
    target: Vec3
    """The point it looks at, in the same coordinates."""


def _default_cameras() -> list[CameraParams]:
    # Three views around the table (robot base at x = y = 0, table x in [-0.1, 0.9]): one above and behind the robot
    # looking over it (sees into pulled-out drawers and the front of cabinets), one on each side.
    return [CameraParams(name="over_robot", eye=(-0.35, 0.0, 0.95), target=(0.55, 0.0, 0.0)),
            CameraParams(name="left", eye=(0.45, 0.95, 0.65), target=(0.45, 0.0, 0.0)),
            CameraParams(name="right", eye=(0.45, -0.95, 0.65), target=(0.45, 0.0, 0.0))]


class CameraRigParams(Strict):
    """The RGB-D cameras around the table (paper III-C: k >= 1 views; multi-view fusion needs a few)."""

    cameras: list[CameraParams] = _default_cameras()
    width: Annotated[int, Field(ge=32, le=1920)] = 424
    height: Annotated[int, Field(ge=32, le=1080)] = 320
    fov_deg: Annotated[float, Field(gt=10.0, lt=150.0)] = 60.0
    """Vertical field of view."""
    near_m: Annotated[float, Field(gt=0.0, le=1.0)] = 0.05
    far_m: Annotated[float, Field(gt=0.1, le=20.0)] = 3.0
    depth_noise_m: Annotated[float, Field(ge=0.0, le=0.05)] = 0.0
    """Gaussian noise on the simulated depth (standard deviation; a structured-light sensor has ~1-3 mm)."""

    @field_validator("cameras")
    @classmethod
    def _distinct(cls, value: list[CameraParams]) -> list[CameraParams]:
        if len(value) < 3:
            raise ValueError(f"the perception pipeline fuses k >= 3 views; {len(value)} camera(s) given")
        names = [c.name for c in value]
        if len(set(names)) != len(names):
            raise ValueError(f"camera names repeat: {names}")
        for cam in value:
            if max(abs(a - b) for a, b in zip(cam.eye, cam.target, strict=True)) < 1e-6:
                raise ValueError(f"camera {cam.name}: eye and target are the same point")
        return value


class GroundingParams(Strict):
    """2-D grounding: labelled boxes on each RGB image (paper III-C1)."""

    backend: str = "sim-seg"
    """sim-seg (boxes from the simulator's segmentation image, with the errors below) | hf-detector (an
    open-vocabulary detector from transformers, OWL-ViT / OWLv2 / Grounding DINO, loaded from model_path)."""
    miss_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    """sim-seg: chance that a visible object is not detected in a view."""
    confusion_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    """sim-seg: chance that a detection carries another queried label."""
    box_jitter_px: Annotated[float, Field(ge=0.0, le=100.0)] = 0.0
    """sim-seg: Gaussian noise on each box edge (pixels)."""
    robot_false_positive_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    """sim-seg: chance per view of a box around the robot arm labelled as a queried object (paper Fig. 9)."""
    min_pixels: Annotated[int, Field(ge=1, le=100000)] = 12
    """sim-seg: fewer visible pixels than this is no detection."""
    model_path: str | None = None
    """hf-detector: a local checkpoint directory (config, weights, processor)."""
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1
    """hf-detector: score threshold."""

    @field_validator("backend")
    @classmethod
    def _known(cls, value: str) -> str:
        return GROUNDING_BACKENDS.require(value)


class FusionParams(Strict):
    """TSDF fusion of the views (paper III-C2) and what is kept of the reconstruction."""

    voxel_m: Annotated[float, Field(ge=0.001, le=0.05)] = 0.004
    trunc_m: Annotated[float, Field(ge=0.003, le=0.2)] = 0.016
    """Truncation distance of the signed distance function (3-5 voxels)."""
    depth_max_m: Annotated[float, Field(gt=0.1, le=20.0)] = 2.5
    self_filter: bool = True
    """Drop what lies on the robot itself (its links' boxes, from the arm's joint state, grown by the margin) --
    MoveIt's self filter. Off, the arm enters the planning scene and every motion is refused (paper Fig. 9)."""
    self_filter_margin_m: Annotated[float, Field(ge=0.0, le=0.1)] = 0.015
    scene_voxel_m: Annotated[float, Field(ge=0.004, le=0.1)] = 0.006
    """Voxel size of the perceived planning scene's occupancy (MoveIt's octomap resolution)."""
    mesh_voxel_m: Annotated[float, Field(ge=0.002, le=0.1)] = 0.01
    """The extracted surface mesh is simplified by vertex clustering at this size."""

    @model_validator(mode="after")
    def _trunc(self) -> FusionParams:
        if self.trunc_m < 2 * self.voxel_m:
            raise ValueError(f"trunc_m ({self.trunc_m}) must be at least two voxels ({2 * self.voxel_m})")
        return self


class SegmentationParams(Strict):
    """Cross-view box matching (III-C3) and 3-D instance segmentation (III-C4)."""

    min_iou: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    """Two boxes of different views match only above this IoU of their point-presence vectors."""
    cluster_eps_m: Annotated[float, Field(gt=0.0, le=0.1)] = 0.012
    """Instance points are clustered (DBSCAN) with this radius; the largest cluster is the object."""
    min_points: Annotated[int, Field(ge=1, le=10000)] = 15
    """An instance with fewer points is not found."""
    support_snap_m: Annotated[float, Field(ge=0.0, le=0.1)] = 0.02
    """A box whose lowest point is this close to the table top is extended down to it (the hidden underside)."""


class PipelineParams(Strict):
    """The ``perceived`` perception mode: multi-view RGB-D -> 2-D grounding -> TSDF fusion -> cross-view matching ->
    3-D instances, grasps from points, and the planning scene from the reconstruction (docs/perception.md)."""

    detection: Literal["perceived", "ground_truth"] = "perceived"
    """Where the perception tools' boxes, poses, joints and grasps come from."""
    planning_scene: Literal["perceived", "ground_truth"] = "perceived"
    """What the motion planner avoids: the reconstructed mesh, or the simulator's true geometry."""
    cameras: CameraRigParams = CameraRigParams()
    grounding: GroundingParams = GroundingParams()
    fusion: FusionParams = FusionParams()
    segmentation: SegmentationParams = SegmentationParams()
    grasp: str = "point-sampler"
    """Grasp poses of parse_adaptive_shape_grasp_pose on perceived objects: point-sampler (antipodal sampling
    on the instance's points) | box-heuristic | anygrasp | giga (need their packages and weights)."""

    @field_validator("grasp")
    @classmethod
    def _known_grasp(cls, value: str) -> str:
        return GRASP_BACKENDS.require(value)


class TableParams(Strict):
    center_x: Metres = 0.4
    center_y: Metres = 0.0
    size_x: Annotated[float, Field(gt=0.2, le=4.0)] = 1.0
    size_y: Annotated[float, Field(gt=0.2, le=4.0)] = 1.6
    height: Annotated[float, Field(gt=0.2, le=2.0)] = 0.75
    edge_margin: Annotated[float, Field(ge=0.0, le=0.3)] = 0.03
    """Clearance kept between every model and the table's edges."""

    def bounds(self) -> tuple[float, float, float, float]:
        """(x_min, y_min, x_max, y_max) of the table top."""
        return (self.center_x - self.size_x / 2, self.center_y - self.size_y / 2,
                self.center_x + self.size_x / 2, self.center_y + self.size_y / 2)


class RobotParams(Strict):
    name: str = "panda"
    base_x: Metres = 0.0
    base_y: Metres = 0.0
    reach: Annotated[float, Field(gt=0.2, le=2.0)] = 0.85
    """Horizontal distance from the base within which every corner of a model's footprint must lie."""
    keep_out: tuple[Metres, Metres, Metres, Metres] = (-0.25, -0.25, 0.3, 0.25)
    """Box around the base, (x_min, y_min, x_max, y_max) relative to it, that no model may overlap."""

    @model_validator(mode="after")
    def _box_order(self) -> RobotParams:
        x0, y0, x1, y1 = self.keep_out
        if x1 <= x0 or y1 <= y0:
            raise ValueError("keep_out must be (x_min, y_min, x_max, y_max) with x_min < x_max and y_min < y_max")
        return self
