"""Grasp backends for ``parse_adaptive_shape_grasp_pose`` on perceived objects (``pipeline.grasp`` in params).

* ``point-sampler`` (default, embedded): antipodal candidates scored on the instance's points
  (``robot/perception/point_grasps.py``);
* ``box-heuristic``: the box-based rules of ``robot/grasps.py`` on the perceived box (what ground-truth mode uses);
* ``anygrasp`` / ``giga``: the paper's learned grasp detectors. Neither can be installed here (AnyGrasp's SDK is
  licence-bound and ships with its own weights; GIGA needs its trained network and a TSDF grid of its own
  resolution), so selecting them is a clear error naming what is missing.

A backend gets a :class:`GraspRequest` and returns a pose, or None when it finds no grasp (the tool then falls back
to the box heuristic and says so in the step's notes).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.plugins import GRASP_BACKENDS
from robot import grasps
from robot.contract.tool_api import Pose
from robot.errors import BackendUnavailable
from robot.perception import point_grasps


@dataclass
class GraspRequest:
    points: np.ndarray
    normals: np.ndarray
    box: np.ndarray
    scene: np.ndarray
    """The reconstruction's points around the object (for collision checks)."""
    support_z: float | None
    hand: grasps.Hand
    kind: str
    """object | container"""
    opening: tuple[float, float] | None
    preferred_position: np.ndarray | None = None
    preferred_approach: np.ndarray | None = None
    preferred_normal: np.ndarray | None = None
    reachable: Callable[[Pose], bool] | None = None


class GraspBackend(ABC):
    @abstractmethod
    def grasp(self, request: GraspRequest) -> Pose | None: ...


class PointSampler(GraspBackend):
    def grasp(self, request: GraspRequest) -> Pose | None:
        candidates = point_grasps.sample(request.points, request.normals, request.scene, request.hand,
                                         request.support_z, request.preferred_position, request.preferred_approach,
                                         request.preferred_normal)
        return point_grasps.best_grasp(candidates, request.reachable)


class BoxHeuristic(GraspBackend):
    def grasp(self, request: GraspRequest) -> Pose | None:
        return grasps.adaptive(request.box, request.hand, request.kind, request.opening,
                               preferred_position=request.preferred_position,
                               preferred_approach=request.preferred_approach,
                               preferred_normal=request.preferred_normal)


class _Unavailable(GraspBackend):
    """A learned grasp detector this machine cannot have: constructing it says what is missing."""

    module = ""
    what = ""
    hint = ""

    def __init__(self) -> None:
        try:
            importlib.import_module(self.module)
        except ImportError:
            raise BackendUnavailable(f"the {self.what} grasp backend needs the Python module {self.module!r}, which "
                                     "is not installed here.", hint=self.hint) from None
        raise BackendUnavailable(f"the {self.what} grasp backend is a slot: {self.module!r} is installed, but no "
                                 "adapter to its output is written yet.", hint=self.hint)

    def grasp(self, request: GraspRequest) -> Pose | None:
        raise BackendUnavailable(f"the {self.what} grasp backend cannot run here.", hint=self.hint)


class AnyGrasp(_Unavailable):
    module = "gsnet"
    what = "AnyGrasp"
    hint = ("AnyGrasp's SDK (graspnet/anygrasp_sdk) needs a licence key and its checkpoint; use grasp: "
            "point-sampler.")


class Giga(_Unavailable):
    module = "vgn"
    what = "GIGA"
    hint = "GIGA (UT-Austin-RPL/GIGA) needs its package and trained weights; use grasp: point-sampler."


def create_grasp_backend(name: str) -> GraspBackend:
    return GRASP_BACKENDS.load(name)()
