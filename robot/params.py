"""Typed schema of the robot evaluation's ``params.yaml`` keys (mounted on the params model as ``eval``).

Defined here, with its own strict base, so that ``tasks.params`` can import it without a cycle and the runner can
validate a goal's perception settings with the same models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoiseParams(_Strict):
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


class CameraParams(_Strict):
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


class CameraRigParams(_Strict):
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


class GroundingParams(_Strict):
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
        from robot.perception.grounding import GROUNDING_BACKENDS

        return GROUNDING_BACKENDS.require(value)


class FusionParams(_Strict):
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


class SegmentationParams(_Strict):
    """Cross-view box matching (III-C3) and 3-D instance segmentation (III-C4)."""

    min_iou: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    """Two boxes of different views match only above this IoU of their point-presence vectors."""
    cluster_eps_m: Annotated[float, Field(gt=0.0, le=0.1)] = 0.012
    """Instance points are clustered (DBSCAN) with this radius; the largest cluster is the object."""
    min_points: Annotated[int, Field(ge=1, le=10000)] = 15
    """An instance with fewer points is not found."""
    support_snap_m: Annotated[float, Field(ge=0.0, le=0.1)] = 0.02
    """A box whose lowest point is this close to the table top is extended down to it (the hidden underside)."""


class PipelineParams(_Strict):
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
        from robot.perception.grasp_backends import GRASP_BACKENDS

        return GRASP_BACKENDS.require(value)


#: The ablation settings of paper V-C (Figs. 7-8): where the perception tools' results and the planning scene come
#: from. ``gt`` runs the ground_truth mode; the others run the pipeline with these sources.
ABLATION_SETTINGS: dict[str, dict[str, str]] = {
    "gt": {"detection": "ground_truth", "planning_scene": "ground_truth"},
    "gt_planning_scene": {"detection": "perceived", "planning_scene": "ground_truth"},
    "gt_detection": {"detection": "ground_truth", "planning_scene": "perceived"},
    "no_gt": {"detection": "perceived", "planning_scene": "perceived"},
}


class AblationParams(_Strict):
    """The perception ablation (paper V-C): pick-and-place and open-drawer-and-place over the best-grasped objects."""

    objects: list[str] = ["apple", "blue_block", "gelatin_box", "tomato_soup_can"]
    """Catalog assets (the paper: the 10 objects with the highest grasp success in the shape study)."""
    studies: list[Literal["pick_place", "drawer"]] = ["pick_place", "drawer"]
    settings: list[Literal["gt", "gt_planning_scene", "gt_detection", "no_gt"]] = list(ABLATION_SETTINGS)
    repeats: Annotated[int, Field(ge=1, le=100)] = 2

    @field_validator("objects", "studies", "settings")
    @classmethod
    def _non_empty(cls, value: list) -> list:
        if not value:
            raise ValueError("must name at least one")
        if len(set(value)) != len(value):
            raise ValueError(f"names repeat: {value}")
        return value


class ShapesParams(_Strict):
    """The object-shape study (paper V-B): pick-and-place and open-drawer-and-place over catalog objects."""

    objects: Literal["all"] | list[str] = "all"
    """"all" = every catalog object and container (cabinets excluded), or a list of asset names."""
    studies: list[Literal["pick_place", "drawer"]] = ["pick_place", "drawer"]
    repeats: Annotated[int, Field(ge=1, le=100)] = 2


class RobotEvalParams(_Strict):
    runners: Annotated[int, Field(ge=1, le=64)] = 2
    """Local sim runners the flow starts (with their own ROS master) when ``master_uri`` is null."""
    master_uri: str | None = None
    """An existing ROS master whose runners the flow uses (robots or runners on other hosts), e.g.
    http://lab-pc:11311; null = start a local master and ``runners`` sim runners."""
    runner_namespaces: list[str] = []
    """Runners on ``master_uri`` to use, e.g. [/franka, /ur5]; [] = every runner found on that master."""
    backend: str = "sim"
    """Backend of the local runners: sim | moveit."""
    arm: Literal["panda", "ur5"] = "panda"
    repeats: Annotated[int, Field(ge=1, le=100)] = 2
    """Repeats per task: 2 keeps the default run within a minute; the paper reports the mean over 10
    (``dvc exp run -S roboscript.eval.repeats=10``)."""
    perception: str = "ground_truth"
    """ground_truth (the simulator's boxes and poses) | noisy (ground truth + the noise below) | perceived (the
    perception pipeline below)."""
    noise: NoiseParams = NoiseParams()
    pipeline: PipelineParams = PipelineParams()
    pose_jitter_m: Annotated[float, Field(ge=0.0, le=0.05)] = 0.005
    """Each repeat displaces the loose objects by up to this much (the sim is otherwise deterministic)."""
    code: Literal["generate", "snippets"] = "generate"
    """generate: the code generator with ``llm`` params (offline by default) writes the code of each task;
    snippets: read it from ``snippets_file``."""
    snippets_file: str | None = None
    """JSON or YAML mapping task id -> code, or a parquet/JSON table with task_id (or query_id) and code columns."""
    tasks: Literal["all"] | list[str] = "all"
    episode_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    """Wall-clock limit of one repeat's code (tool time included)."""
    memory_mb: Annotated[int, Field(ge=64, le=65536)] = 512
    """Address-space budget of the sandboxed code beyond what the interpreter already uses."""
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    """Times an episode is retried on another runner when its runner dies mid-episode."""
    seed: int = 0
    shapes: ShapesParams = ShapesParams()
    ablation: AblationParams = AblationParams()

    def episode_settings(self) -> dict:
        """The runner-goal fields (``robot/episode.py``) every episode of this evaluation shares: how perception
        works, the jitter, seed and limits."""
        return {"perception": self.perception, "noise": self.noise.model_dump(),
                "pipeline": self.pipeline.model_dump(mode="json"), "pose_jitter_m": self.pose_jitter_m,
                "seed": self.seed, "timeout_s": self.episode_timeout_s, "memory_mb": self.memory_mb}

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from robot.backends import ROBOT_BACKENDS

        return ROBOT_BACKENDS.require(value)

    @field_validator("perception")
    @classmethod
    def _known_perception(cls, value: str) -> str:
        from robot.perception import PERCEPTION_MODES

        return PERCEPTION_MODES.require(value)

    @field_validator("master_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("http://"):
            raise ValueError(f"a ROS master URI looks like http://host:11311, got {value!r}")
        return value

    @field_validator("runner_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for ns in value:
            if not ns.startswith("/") or ns.endswith("/") or " " in ns:
                raise ValueError(f"a runner namespace looks like /runner1, got {ns!r}")
        return value

    @model_validator(mode="after")
    def _snippets(self) -> RobotEvalParams:
        if self.code == "snippets" and not self.snippets_file:
            raise ValueError("code: snippets needs snippets_file")
        return self
