"""Robot backends behind one interface (``robot/backends/base.py``), chosen by name from a registry:

* ``sim`` (default, embedded): PyBullet in DIRECT mode -- Franka Panda or UR5, table, containers, objects and a
  generated cabinet URDF (``robot/backends/sim.py``);
* ``moveit``: the same primitives over ``moveit_commander`` for real robots and Gazebo (``robot/backends/moveit.py``),
  import-guarded: where MoveIt is absent, creating it raises :class:`~robot.errors.BackendUnavailable`.

Modules are imported when a backend is created, so importing this package needs neither PyBullet nor MoveIt.
"""

from __future__ import annotations

import importlib
from typing import Any

from tasks.registry import Registry

ROBOT_BACKENDS: Registry[str] = Registry("robot backend")
ROBOT_BACKENDS.register("sim")("robot.backends.sim:SimBackend")
ROBOT_BACKENDS.register("moveit")("robot.backends.moveit:MoveItBackend")

ARMS = ("panda", "ur5")


def create_backend(name: str, **options: Any):
    """A new backend instance; ``options`` go to its constructor (``arm=`` for the sim)."""
    module_name, _, cls_name = ROBOT_BACKENDS.get(name).partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, cls_name)(**options)
