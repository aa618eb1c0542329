"""Robot backends behind one interface (``robot/backends/base.py``), chosen by name (``core.plugins.ROBOT_BACKENDS``):

* ``sim`` (default, embedded): PyBullet in DIRECT mode -- Franka Panda or UR5, table, containers, objects and a
  generated cabinet URDF (``robot/backends/sim.py``);
* ``moveit``: the same primitives over ``moveit_commander`` for real robots and Gazebo (``robot/backends/moveit.py``),
  import-guarded: where MoveIt is absent, creating it raises :class:`~robot.errors.BackendUnavailable`.

Modules are imported when a backend is created, so importing this package needs neither PyBullet nor MoveIt.
"""

from __future__ import annotations

from typing import Any

from core.plugins import ROBOT_BACKENDS

ARMS = ("panda", "ur5")


def create_backend(name: str, **options: Any):
    """A new backend instance; ``options`` go to its constructor (``arm=`` for the sim)."""
    return ROBOT_BACKENDS.load(name)(**options)
