"""``perceived``: the perception tools and, optionally, the motion planner's scene from the real pipeline.

``detect_objects(object_list)`` runs the pipeline (``robot/perception/pipeline.py``) for the listed names (every
object when None) and keeps what it found until the next detection: an object moved since is stale, as it is with
a real robot. An object asked about before any detection is detected then; one the pipeline does not find raises
:class:`~robot.errors.ObjectNotFound` (a robot failure, not a code error).

The two sources of paper V-C are separate switches (``pipeline.detection`` and ``pipeline.planning_scene``):

* detection ``perceived`` -- boxes, poses, plane normals, joints and adaptive grasps come from the 3-D instances;
  ``ground_truth`` -- from the simulator, as in the ``ground_truth`` mode;
* planning scene ``perceived`` -- every detection replaces the motion planner's collision scene with the
  reconstruction's occupancy (``robot/perception/scene.py``); ``ground_truth`` -- the planner avoids the true
  geometry.
"""

from __future__ import annotations

import numpy as np

from robot.backends.base import JointState, RobotBackend
from robot.contract.params import NoiseParams, PipelineParams
from robot.contract.tool_api import Pose
from robot.contract.world import CABINET
from robot.errors import ObjectNotFound
from robot.perception.base import Perception
from robot.perception.instances import (
    Instance,
    estimate_joint,
    front_plane,
    plane_normal,
    separate,
    standing_off,
    without_parts,
)
from robot.perception.modes import GroundTruth
from robot.perception.pipeline import STAGES, PerceptionResult, Pipeline
from robot.perception.scene import PlanningScene


class PerceivedPerception(Perception):
    def __init__(self, backend: RobotBackend, noise: NoiseParams, seed: int, pipeline: PipelineParams | None = None):
        super().__init__(backend, noise, seed, pipeline)
        self.truth = GroundTruth(backend, noise, seed)
        self.runner = Pipeline(backend, self.pipeline, seed)
        self.instances: dict[str, Instance] = {}
        self.last: PerceptionResult | None = None
        self.calls: list[dict] = []
        self._joints: dict[str, JointState] = {}
        self.scene_perceived = self.pipeline.planning_scene == "perceived"
        self.detection_perceived = self.pipeline.detection == "perceived"
        if self.scene_perceived:
            backend.set_planning_scene(PlanningScene([]))  # nothing is known before the first detection

    def share(self, memo) -> None:
        self.runner.memo = memo

    # ------------------------------------------------------------------------------------------------ detection

    def _queried(self, names: list[str] | None) -> list[str]:
        if names is None:
            return [n for n in self.names() if n != "table"]
        out = [n for n in names if n != "table"]
        parts = self._articulated()
        if self.detection_perceived and (CABINET in out or set(parts) & set(out)):
            # an articulated object is perceived whole: a joint needs its part and handle, the carcass is the body
            # without its parts, and drawers side by side are told apart
            out += [n for n in (CABINET, *parts) if n not in out]
        return out

    def _articulated(self) -> list[str]:
        """The parts and handles of the world's joints."""
        return [n for j in self.backend.world.joints for n in (j.part, j.handle)]

    def detect(self, names: list[str] | None) -> None:
        # what is already known is detected again too, so that the planning scene's pieces keep their names
        query = self._queried(names)
        query += [n for n in self.instances if n not in query]
        result = self.runner.run(query, with_scene=self.scene_perceived)
        self.last = result
        for name in query:
            if name in result.instances:
                self.instances[name] = result.instances[name]
            else:
                self.instances.pop(name, None)  # looked for now and not found: no longer known
        movable = [self.instances[j.part] for j in self.backend.world.joints if j.part in result.instances]
        for inst in separate(movable):  # drawers side by side give each other back what their boxes overlap
            self.instances[inst.name] = inst
        if CABINET in result.instances:
            parts = [i for n, i in self.instances.items() if n.startswith(CABINET + ".") and n in result.instances]
            self.instances[CABINET] = without_parts(result.instances[CABINET], parts)
        self._estimate_joints()
        if self.scene_perceived and result.scene is not None:
            self.backend.set_planning_scene(result.scene)
        self.calls.append({"names": query, "found": sorted(n for n in query if n in result.instances),
                           "views": result.reconstruction.views, "points": len(result.reconstruction.points),
                           "scene_boxes": result.scene.boxes if result.scene is not None else 0,
                           **{f"{k}_s": result.timings.get(k, 0.0) for k in STAGES}})

    def _estimate_joints(self) -> None:
        base = np.array(self.backend.workspace.base)
        for joint in self.backend.world.joints:
            part, handle = self.instances.get(joint.part), self.instances.get(joint.handle)
            estimate = None
            if part is not None and handle is not None:
                plane = front_plane(part, handle)
                if plane is not None:  # the handle is what stands off the front, not the patch behind it
                    handle = self.instances[joint.handle] = standing_off(handle, plane)
                estimate = estimate_joint(joint.type, part, handle, base, joint.part, joint.handle, plane)
            if estimate is None:
                self._joints.pop(joint.part, None)
            else:
                self._joints[joint.part] = estimate

    def _instance(self, name: str) -> Instance:
        if name not in self.instances:
            self.detect([name])
        if name not in self.instances:
            raise ObjectNotFound(f"detect_objects did not find {name!r} in any camera view")
        return self.instances[name]

    # ------------------------------------------------------------------------------------------------ tools' view

    def box(self, name: str) -> np.ndarray:
        if not self.detection_perceived or name == "table":  # the table the robot stands on is known
            return self.truth.box(name)
        return self._instance(name).box.copy()

    def pose(self, name: str) -> Pose:
        if not self.detection_perceived or name == "table":
            return self.truth.pose(name)
        return self._instance(name).pose()

    def joints(self) -> list[JointState]:
        if not self.detection_perceived:
            return self.truth.joints()
        if not self._joints and self.backend.world.joints:
            self.detect(self._articulated())
        return list(self._joints.values())

    def boxes(self) -> dict[str, np.ndarray]:
        if not self.detection_perceived:
            return self.truth.boxes()
        return {"table": self.truth.box("table"), **{n: i.box.copy() for n, i in self.instances.items()}}

    def missing_joint(self, name: str) -> bool:
        if not self.detection_perceived:
            return False
        wanted = [j for j in self.backend.world.joints if name in (j.part, j.handle) or name == CABINET]
        return bool(wanted) and not any(j.part in self._joints for j in wanted)

    def points(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.detection_perceived:
            return None
        inst = self._instance(name)
        return inst.points, inst.normals

    def scene_points(self) -> np.ndarray | None:
        return None if self.last is None else self.last.reconstruction.points

    def support_height(self) -> float | None:
        return None if self.last is None else self.last.reconstruction.support_z

    def plane_normal(self, name: str, position: np.ndarray) -> np.ndarray | None:
        if not self.detection_perceived or name == "table":
            return None
        return plane_normal(self._instance(name), np.asarray(position, dtype=float))

    def report(self) -> dict:
        if not self.calls:
            return {"calls": 0}
        return {"calls": len(self.calls), "wall_s": round(sum(sum(c[f"{k}_s"] for k in STAGES)
                                                              for c in self.calls), 4),
                "detections": self.calls}
