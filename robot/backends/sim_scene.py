"""The bodies of a world in PyBullet: the table, loose objects, containers and the cabinet.

Shapes come from the catalog sizes (world file ``size`` = the bounding box at ``yaw_deg``):

* objects are primitives chosen by what they are -- a sphere for round fruit and balls (all three sizes within
  12 %), an upright cylinder for round-footprint cans, cups and fruit, a box for everything else;
* containers are hollow: a floor slab of the catalog's ``floor`` height and four walls around the ``opening``
  (plates get a low rim of the same outline, mugs thin walls), so things can be put *in* them;
* the cabinet is the URDF of ``robot/backends/urdf.py``.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot.backends.urdf import cabinet_urdf
from robot.contract.catalog import Catalog
from robot.contract.world import CABINET, Model, World

FRICTION = 0.9


@dataclass
class SimModel:
    name: str
    body: int
    link: int
    """-1 for a body's base; a link index for cabinet parts."""
    shape: str
    """sphere | cylinder | box | container | table | cabinet | part"""
    half: np.ndarray
    """Half extents in the body's own frame (yaw 0)."""
    dynamic: bool


def _yaw_quat(yaw_deg: float) -> list[float]:
    half = math.radians(yaw_deg) / 2
    return [0.0, 0.0, math.sin(half), math.cos(half)]


def _own_size(model: Model) -> tuple[float, float, float]:
    """The size in the model's own frame (the world file's size is after the yaw)."""
    sx, sy, sz = model.size
    return (sy, sx, sz) if round(model.yaw_deg) % 180 == 90 else (sx, sy, sz)


def object_shape(model: Model) -> str:
    sx, sy, sz = model.size
    round_footprint = abs(sx - sy) <= 0.12 * max(sx, sy)
    if model.category in ("fruit", "ball") and max(sx, sy, sz) <= 1.12 * min(sx, sy, sz):
        return "sphere"
    if round_footprint and model.category in ("can", "cup", "fruit"):
        return "cylinder"
    return "box"


class SceneBuilder:
    def __init__(self, pb, client: int, catalog: Catalog):
        self.pb, self.client, self.catalog = pb, client, catalog
        self._tmp = tempfile.TemporaryDirectory(prefix="embp-sim-")

    def close(self) -> None:
        self._tmp.cleanup()

    def build(self, world: World) -> dict[str, SimModel]:
        models: dict[str, SimModel] = {"table": self._table(world)}
        for model in world.models:
            if model.kind == "object":
                models[model.name] = self._object(model)
            elif model.kind == "container":
                models[model.name] = self._container(model)
        if any(m.name == CABINET for m in world.models):
            models.update(self._cabinet(world))
        return models

    # -------------------------------------------------------------------------------------------- pieces

    def _create(self, shape: int, mass: float, position, yaw_deg: float = 0.0) -> int:
        pb = self.pb
        body = pb.createMultiBody(baseMass=mass, baseCollisionShapeIndex=shape, basePosition=list(position),
                                  baseOrientation=_yaw_quat(yaw_deg), physicsClientId=self.client)
        pb.changeDynamics(body, -1, lateralFriction=FRICTION, spinningFriction=0.002, rollingFriction=0.0005,
                          restitution=0.0, linearDamping=0.1, angularDamping=0.3, physicsClientId=self.client)
        return body

    def _table(self, world: World) -> SimModel:
        t = world.table
        half = np.array([t.size_x / 2, t.size_y / 2, t.height / 2])
        shape = self.pb.createCollisionShape(self.pb.GEOM_BOX, halfExtents=half.tolist(), physicsClientId=self.client)
        body = self._create(shape, 0.0, (t.center_x, t.center_y, t.height / 2))
        return SimModel("table", body, -1, "table", half, False)

    def _object(self, model: Model) -> SimModel:
        pb = self.pb
        own = np.array(_own_size(model)) / 2
        kind = object_shape(model)
        if kind == "sphere":
            radius = float(np.mean(own))
            shape = pb.createCollisionShape(pb.GEOM_SPHERE, radius=radius, physicsClientId=self.client)
            own = np.array([radius] * 3)
        elif kind == "cylinder":
            shape = pb.createCollisionShape(pb.GEOM_CYLINDER, radius=float(min(own[:2])), height=float(2 * own[2]),
                                            physicsClientId=self.client)
        else:
            shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=own.tolist(), physicsClientId=self.client)
        position = np.array(model.position)
        position[2] = model.position[2] - model.size[2] / 2 + own[2]  # rest exactly on its support
        body = self._create(shape, model.mass, position, model.yaw_deg)
        return SimModel(model.name, body, -1, kind, own, True)

    def _container(self, model: Model) -> SimModel:
        pb = self.pb
        asset = self.catalog[model.asset]
        sx, sy, sz = _own_size(model)
        ox, oy = asset.opening or (sx * 0.8, sy * 0.8)
        if round(model.yaw_deg) % 180 == 90 and asset.opening:
            ox, oy = oy, ox
        floor = max(asset.floor, 0.004)
        wx, wy = max((sx - ox) / 2, 0.004), max((sy - oy) / 2, 0.004)
        wall_h = sz - floor
        pieces = [((0, 0, -sz / 2 + floor / 2), (sx / 2, sy / 2, floor / 2)),
                  ((-sx / 2 + wx / 2, 0, floor / 2), (wx / 2, sy / 2, wall_h / 2)),
                  ((sx / 2 - wx / 2, 0, floor / 2), (wx / 2, sy / 2, wall_h / 2)),
                  ((0, -sy / 2 + wy / 2, floor / 2), (sx / 2, wy / 2, wall_h / 2)),
                  ((0, sy / 2 - wy / 2, floor / 2), (sx / 2, wy / 2, wall_h / 2))]
        shape = pb.createCollisionShapeArray(
            shapeTypes=[pb.GEOM_BOX] * len(pieces), halfExtents=[list(h) for _, h in pieces],
            collisionFramePositions=[list(p) for p, _ in pieces], physicsClientId=self.client)
        body = self._create(shape, model.mass, model.position, model.yaw_deg)
        return SimModel(model.name, body, -1, "container", np.array([sx, sy, sz]) / 2, True)

    def _cabinet(self, world: World) -> dict[str, SimModel]:
        pb = self.pb
        text, link_of = cabinet_urdf(world)
        path = Path(self._tmp.name) / f"cabinet_{world.world_id}.urdf"
        path.write_text(text)
        body_model = world.model(CABINET)
        body = pb.loadURDF(str(path), basePosition=list(body_model.position),
                           baseOrientation=_yaw_quat(body_model.yaw_deg), useFixedBase=True,
                           physicsClientId=self.client)
        names = {pb.getJointInfo(body, i, physicsClientId=self.client)[12].decode(): i
                 for i in range(pb.getNumJoints(body, physicsClientId=self.client))}
        out = {CABINET: SimModel(CABINET, body, -1, "cabinet", np.array(body_model.size) / 2, False)}
        for part, link_name in link_of.items():
            if part == CABINET:
                continue
            model = world.model(part)
            out[part] = SimModel(part, body, names[link_name], "part", np.array(model.size) / 2, False)
        for i in range(pb.getNumJoints(body, physicsClientId=self.client)):
            if pb.getJointInfo(body, i, physicsClientId=self.client)[2] in (pb.JOINT_PRISMATIC, pb.JOINT_REVOLUTE):
                # A little friction holds a drawer or door where it was left, as real runners do.
                pb.setJointMotorControl2(body, i, pb.VELOCITY_CONTROL, targetVelocity=0.0, force=3.0,
                                         physicsClientId=self.client)
            pb.changeDynamics(body, i, lateralFriction=FRICTION, physicsClientId=self.client)
        return out
