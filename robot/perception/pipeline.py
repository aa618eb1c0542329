"""The perception pipeline of ``detect_objects`` (paper III-C), end to end, timed stage by stage:

capture (k RGB-D views) -> 2-D grounding -> TSDF fusion -> cross-view box matching -> 3-D instances -> planning
scene. It reads the robot only through the backend's ``capture`` (cameras), ``robot_link_boxes`` (self filter)
and ``workspace`` (the crop), so a real robot with calibrated cameras runs the same code.

With a :class:`~robot.perception.shared.PerceptionMemo` (``memo``: the variants of one goal share one) each stage's
result is taken from the memo when a variant computed it from the same inputs before (robot/perception/shared.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot.backends.base import RobotBackend
from robot.contract.params import PipelineParams
from robot.perception import cameras, fusion, scene
from robot.perception.cameras import CameraFrame, CameraSpec
from robot.perception.fusion import Reconstruction
from robot.perception.grounding import Detection, create_grounder
from robot.perception.instances import Instance, segment
from robot.perception.matching import Match, match_views
from robot.perception.shared import PerceptionMemo, digest, frames_digest

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
    def __init__(self, backend: RobotBackend, params: PipelineParams, seed: int = 0,
                 memo: PerceptionMemo | None = None):
        self.backend = backend
        self.params = params
        self.specs: list[CameraSpec] = cameras.rig(params.cameras, backend.world.table.height)
        self.grounder = create_grounder(params.grounding, seed)
        self.rng = np.random.default_rng(seed + 7919)
        self.memo = memo

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

        frames, seen = self._capture()
        lap("capture")
        grounder_rng = getattr(self.grounder, "rng", None)
        detections, grounded = self._stage(
            "ground", lambda: (seen, list(names), self.params.grounding.model_dump(mode="json")),
            lambda: self.grounder.detect(frames, names), () if grounder_rng is None else (grounder_rng,))
        lap("ground")
        robot_boxes = self.backend.robot_link_boxes() if self.params.fusion.self_filter else None
        bounds = self.bounds()
        recon, fused = self._stage(
            "fuse", lambda: (seen, self.params.fusion.model_dump(mode="json"), *bounds,
                             "no self filter" if robot_boxes is None else robot_boxes),
            lambda: fusion.fuse(frames, self.params.fusion, bounds, robot_boxes))
        lap("fuse")
        min_iou = self.params.segmentation.min_iou
        (matches, vectors), matched = self._stage(
            "match", lambda: (grounded, fused, min_iou),
            lambda: match_views(recon.points[~recon.support], self.specs, detections, min_iou))
        lap("match")
        instances, segmented = self._stage(
            "segment", lambda: (matched, self.params.segmentation.model_dump(mode="json")),
            lambda: segment(recon, frames, detections, matches, self.params.segmentation, vectors))
        lap("segment")
        voxel = self.params.fusion.scene_voxel_m
        planning = self._stage("scene", lambda: (fused, segmented, voxel),
                               lambda: scene.build(recon, instances, voxel))[0] if with_scene else None
        lap("scene")
        return PerceptionResult(frames, detections, recon, matches, instances, planning, timings)

    def _capture(self) -> tuple[list[CameraFrame], str]:
        """The frames and, with a memo, their digest. The capture itself is shared only where the backend can say
        exactly what its cameras would see (``render_state``)."""
        def shoot() -> list[CameraFrame]:
            return self.backend.capture(self.specs, self.rng, self.params.cameras.depth_noise_m)

        if self.memo is None:
            return shoot(), ""
        rendered = self.backend.render_state()
        if rendered is None:
            frames = shoot()
        else:
            frames, _ = self.memo.stage("capture", (rendered, self.params.cameras.model_dump(mode="json"),
                                                    self.backend.world.table.height), shoot, (self.rng,))
        return frames, frames_digest(frames)

    def _stage(self, name: str, parts: Callable[[], tuple], compute: Callable[[], Any],
               generators: tuple[np.random.Generator, ...] = ()) -> tuple[Any, str]:
        """``compute()`` (and its key), from the memo where there is one (``parts``: what the stage reads)."""
        if self.memo is None:
            return compute(), ""
        return self.memo.stage(name, parts(), compute, generators)
