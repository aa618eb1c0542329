"""Perception modes: where the perception tools' boxes, poses, joints and grasps come from (a registry).

* ``ground_truth`` -- the simulator's state, live (paper V-A);
* ``noisy`` -- a snapshot of the ground truth with Gaussian noise (``robot/perception/modes.py``);
* ``perceived`` -- the perception pipeline of paper III-C: k RGB-D cameras, 2-D grounding, TSDF fusion, cross-view
  box matching, 3-D instances, grasps from points and the planning scene from the reconstruction
  (``robot/perception/perceived.py``, docs/perception.md).

The tools (``robot/tools_impl.py``) only talk to :class:`Perception`; a new mode is a new module with a subclass and
its line in ``core.plugins.PERCEPTION_MODES``. Importing this package loads neither Open3D nor transformers: the pipeline imports them when it runs.
"""

from __future__ import annotations

from core.plugins import PERCEPTION_MODES
from robot.backends.base import RobotBackend
from robot.contract.params import NoiseParams, PipelineParams
from robot.errors import ObjectNotFound
from robot.perception.base import Perception

__all__ = ["PERCEPTION_MODES", "ObjectNotFound", "Perception", "create_perception"]


def create_perception(mode: str, backend: RobotBackend, noise: NoiseParams, seed: int,
                      pipeline: PipelineParams | None = None, memo=None) -> Perception:
    """``memo``: a :class:`~robot.perception.shared.PerceptionMemo` the mode may take its pipeline's results from
    (the variants of one goal share one)."""
    perception = PERCEPTION_MODES.load(mode)(backend, noise, seed, pipeline)
    if memo is not None:
        perception.share(memo)
    return perception
