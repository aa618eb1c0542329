"""The perceived planning scene inside the simulator: what the motion planner avoids when it does not see the truth.

Each named piece of the perceived occupancy (``robot/perception/scene.py``) becomes one static compound body of boxes
that takes no part in the physics (its collision mask is empty) but answers the planner's distance queries, which
ignore collision masks. (Boxes, not triangle meshes: PyBullet 3.2.7 never frees a mesh shape, ~2.6 MB per
5,000-triangle mesh; a compound of boxes leaves ~0.15 kB per box.) A piece attached to the gripper
(``attach_object``) is left out of the checks while held, and on ``detach_object`` is moved by the hand's motion
since the attach -- MoveIt moves an attached collision object the same way.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from robot.backends.sim_scene import SimModel
from robot.perception.scene import PlanningScene


class GhostScene:
    def __init__(self, pb, client: int):
        self.pb, self.client = pb, client
        self._bodies: dict[str, int] = {}
        self._pieces: dict[str, np.ndarray] = {}  # name -> its (M, 6) boxes where they were perceived
        self._boxes: dict[str, np.ndarray] = {}  # name -> its bounding box now

    def clear(self) -> None:
        for body in self._bodies.values():
            self.pb.removeBody(body, physicsClientId=self.client)
        self._bodies, self._boxes, self._pieces = {}, {}, {}

    def replace(self, scene: PlanningScene) -> None:
        pb = self.pb
        self.clear()
        for piece in scene.pieces:
            boxes = piece.boxes
            centres = ((boxes[:, :3] + boxes[:, 3:]) / 2).tolist()
            halves = ((boxes[:, 3:] - boxes[:, :3]) / 2).tolist()
            shape = pb.createCollisionShapeArray(shapeTypes=[pb.GEOM_BOX] * len(boxes), halfExtents=halves,
                                                 collisionFramePositions=centres, physicsClientId=self.client)
            body = pb.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=shape, physicsClientId=self.client)
            pb.setCollisionFilterGroupMask(body, -1, 0, 0, physicsClientId=self.client)
            self._bodies[piece.name] = body
            self._pieces[piece.name] = boxes
            self._boxes[piece.name] = piece.box

    def models(self) -> dict[str, SimModel]:
        return {name: SimModel(name, body, -1, "ghost", (self._boxes[name][3:] - self._boxes[name][:3]) / 2, False)
                for name, body in self._bodies.items()}

    @contextmanager
    def hidden(self):
        """Out of the cameras' sight (far below the floor) while they render: a planning scene is not a thing
        in the world. Moved, not removed: PyBullet does not free removed shapes."""
        pb = self.pb
        poses = {name: pb.getBasePositionAndOrientation(body, physicsClientId=self.client)
                 for name, body in self._bodies.items()}
        for body in self._bodies.values():
            pb.resetBasePositionAndOrientation(body, (0.0, 0.0, -100.0), (0, 0, 0, 1), physicsClientId=self.client)
        try:
            yield
        finally:
            for name, (pos, orn) in poses.items():
                pb.resetBasePositionAndOrientation(self._bodies[name], pos, orn, physicsClientId=self.client)

    def box(self, name: str) -> np.ndarray:
        return self._boxes[name].copy()

    def __contains__(self, name: str) -> bool:
        return name in self._bodies

    def carry(self, name: str, tool_then, tool_now) -> None:
        """Move piece ``name`` by the rigid motion that took the tool from ``tool_then`` to ``tool_now``."""
        if name not in self._bodies:
            return
        pb = self.pb
        inv = pb.invertTransform(tool_then.position, tool_then.orientation)
        delta = pb.multiplyTransforms(tool_now.position, tool_now.orientation, *inv)
        body = self._bodies[name]
        pos, orn = pb.getBasePositionAndOrientation(body, physicsClientId=self.client)
        new_pos, new_orn = pb.multiplyTransforms(delta[0], delta[1], pos, orn)
        pb.resetBasePositionAndOrientation(body, new_pos, new_orn, physicsClientId=self.client)
        rotation = np.array(pb.getMatrixFromQuaternion(new_orn)).reshape(3, 3)
        boxes = self._pieces[name]
        corners = np.array([[b[i], b[j], b[k]] for b in boxes for i in (0, 3) for j in (1, 4) for k in (2, 5)])
        moved = corners @ rotation.T + np.array(new_pos)
        self._boxes[name] = np.concatenate([moved.min(axis=0), moved.max(axis=0)])
