"""The perception pipeline of ``detect_objects`` (paper III-C), end to end, timed stage by stage:

capture (k RGB-D views) -> 2-D grounding -> TSDF fusion -> cross-view box matching -> 3-D instances -> planning
scene. It reads the robot only through the backend's ``capture`` (cameras), ``robot_link_boxes`` (self filter)
and ``workspace`` (the crop), so a real robot with calibrated cameras runs the same code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from robot.backends.base import RobotBackend
from robot.contract.params import PipelineParams
from robot.perception import cameras, fusion, scene
from robot.perception.cameras import CameraFrame, CameraSpec
from robot.perception.fusion import Reconstruction
from robot.perception.grounding import Detection, create_grounder
from robot.perception.instances import Instance, segment
from robot.perception.matching import Match, match_views

STAGES = ("capture", "ground", "fuse", "match", "segment", "scene")
CROP_BELOW_M = 0.01
CROP_ABOVE_M = 0.75


@dataclass
class PerceptionResult:
    frames: list[CameraFrame]
    detections: list[list[Detection]]
    reconstruction: Reconstruction
    matches: list[Match]
    instances: dict[str, Instance]
    scene: scene.PlanningScene | None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        return sum(self.timings.values())


class Pipeline:
    def __init__(self, backend: RobotBackend, params: PipelineParams, seed: int = 0):
        self.backend = backend
        self.params = params
        self.specs: list[CameraSpec] = cameras.rig(params.cameras, backend.world.table.height)
        self.grounder = create_grounder(params.grounding, seed)
        self.rng = np.random.default_rng(seed + 7919)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        # The table, not the whole workspace: with furniture behind the robot (the public worlds) the workspace
        # reaches 1.4 m back, and a volume that large loses the arm from the reconstruction.
        x0, y0, x1, y1 = self.backend.world.table.bounds()
        top = self.backend.world.table.height
        return (np.array([x0, y0, top - CROP_BELOW_M]), np.array([x1, y1, top + CROP_ABOVE_M]))

    def run(self, names: list[str], with_scene: bool = True) -> PerceptionResult:
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[stage] = round(now - clock, 5)
            clock = now

        frames = self.backend.capture(self.specs, self.rng, self.params.cameras.depth_noise_m)
        lap("capture")
        detections = self.grounder.detect(frames, names)
        lap("ground")
        robot_boxes = self.backend.robot_link_boxes() if self.params.fusion.self_filter else None
        recon = fusion.fuse(frames, self.params.fusion, self.bounds(), robot_boxes)
        lap("fuse")
        objects = recon.points[~recon.support]
        matches, vectors = match_views(objects, self.specs, detections, self.params.segmentation.min_iou)
        lap("match")
        instances = segment(recon, frames, detections, matches, self.params.segmentation, vectors)
        lap("segment")
        planning = scene.build(recon, instances, self.params.fusion.scene_voxel_m) if with_scene else None
        lap("scene")
        return PerceptionResult(frames, detections, recon, matches, instances, planning, timings)
