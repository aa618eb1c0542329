"""Perception modes: where the perception tools' boxes, poses, joints and grasps come from (a registry).

* ``ground_truth`` -- the simulator's state, live (paper V-A);
* ``noisy`` -- a snapshot of the ground truth with Gaussian noise (``robot/perception/modes.py``);
* ``perceived`` -- the perception pipeline of paper III-C: k RGB-D cameras, 2-D grounding, TSDF fusion, cross-view
  box matching, 3-D instances, grasps from points and the planning scene from the reconstruction
  (``robot/perception/perceived.py``, docs/perception.md).

The tools (``robot/tools_impl.py``) only talk to :class:`Perception`; a new mode is a new module registering a
subclass. Importing this package loads neither Open3D nor transformers: the pipeline imports them when it runs.
"""

from __future__ import annotations

from robot.backends.base import RobotBackend
from robot.params import NoiseParams, PipelineParams
from robot.perception import modes, perceived  # noqa: F401 - they register the modes
from robot.errors import ObjectNotFound
from robot.perception.base import Perception
from robot.perception.registry import PERCEPTION_MODES

__all__ = ["PERCEPTION_MODES", "ObjectNotFound", "Perception", "create_perception"]


def create_perception(mode: str, backend: RobotBackend, noise: NoiseParams, seed: int,
                      pipeline: PipelineParams | None = None) -> Perception:
    return PERCEPTION_MODES.get(mode)(backend, noise, seed, pipeline)
