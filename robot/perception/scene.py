"""The planning scene from perception (the paper's "No GT" planning scene): the reconstruction as named occupancy.

The fused surface points (self-filtered, without the support plane) are voxelised -- an occupancy map like MoveIt's
octomap -- and each point is given to the instance that holds it or whose box (grown by a voxel) it lies in (the
smallest where two overlap: an apple in a bowl, a handle on a drawer), so that the planner can allow contact with a
named object (the one being grasped, the one held) the way MoveIt's allowed-collision matrix does. Voxels of no
instance form the ``octomap`` piece. Each piece's voxels are merged greedily into few boxes; a hollow object stays
hollow. The table the robot stands on is part of its static scene, as in a MoveIt configuration, and is not repeated
here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot.perception.fusion import Reconstruction, in_boxes
from robot.perception.instances import Instance

OCTOMAP = "octomap"


@dataclass
class ScenePiece:
    name: str
    boxes: np.ndarray
    """(M, 6) [x0, y0, z0, x1, y1, z1] boxes whose union is the piece's occupancy."""

    @property
    def box(self) -> np.ndarray:
        return np.concatenate([self.boxes[:, :3].min(axis=0), self.boxes[:, 3:].max(axis=0)])


@dataclass
class PlanningScene:
    pieces: list[ScenePiece]
    voxel_m: float = 0.01

    def names(self) -> list[str]:
        return [p.name for p in self.pieces]

    @property
    def boxes(self) -> int:
        return sum(len(p.boxes) for p in self.pieces)


def merge_voxels(cells: np.ndarray) -> np.ndarray:
    """Occupied voxel indices (K, 3) -> (M, 6) index boxes [i0, j0, k0, i1, j1, k1) covering exactly them, grown
    greedily along z, then y, then x."""
    if len(cells) == 0:
        return np.zeros((0, 6), dtype=int)
    origin = cells.min(axis=0)
    shape = cells.max(axis=0) - origin + 1
    free = np.zeros(shape, dtype=bool)
    free[tuple((cells - origin).T)] = True  # occupied and not yet in a box
    out = []
    for i, j, k in np.argwhere(free):
        if not free[i, j, k]:
            continue
        k1 = k + 1
        while k1 < shape[2] and free[i, j, k1]:
            k1 += 1
        j1 = j + 1
        while j1 < shape[1] and free[i, j1, k:k1].all():
            j1 += 1
        i1 = i + 1
        while i1 < shape[0] and free[i1, j:j1, k:k1].all():
            i1 += 1
        free[i:i1, j:j1, k:k1] = False
        out.append((i, j, k, i1, j1, k1))
    boxes = np.array(out, dtype=int)
    return boxes + np.concatenate([origin, origin])


def unique_cells(cells: np.ndarray) -> np.ndarray:
    """``np.unique(cells, axis=0)`` for (K, 3) integer voxel indices (the same rows, in the same lexicographic order),
    through one int64 key per row: numpy's row-wise unique sorts a structured view and costs several times more."""
    if len(cells) == 0:
        return cells.reshape(0, 3)
    origin = cells.min(axis=0)
    extent = cells.max(axis=0) - origin + 1
    shifted = cells - origin
    keys = np.unique((shifted[:, 0] * extent[1] + shifted[:, 1]) * extent[2] + shifted[:, 2])
    rows = np.column_stack([keys // (extent[1] * extent[2]), keys // extent[2] % extent[1], keys % extent[2]])
    return rows + origin


def owners(points: np.ndarray, instances: dict[str, Instance], margin: float) -> np.ndarray:
    """For each off-support point, the index (into sorted instance names) of the smallest instance holding it --
    among its own points, or inside its box grown by ``margin`` (the parts of an object no view could attribute:
    its rim, its shadowed side) -- and -1 for none."""
    owner = np.full(len(points), -1)
    names = sorted(instances)
    volume = [float(np.prod(np.maximum(instances[n].box[3:] - instances[n].box[:3], 1e-3))) for n in names]
    for i in sorted(range(len(names)), key=lambda i: -volume[i]):  # smaller instances overwrite larger ones
        owner[in_boxes(points, instances[names[i]].box, margin)] = i
        owner[instances[names[i]].indices] = i
    return owner


def build(recon: Reconstruction, instances: dict[str, Instance], voxel: float) -> PlanningScene:
    keep = ~recon.support
    points = recon.points[keep]
    owner = owners(points, instances, voxel)
    names = sorted(instances)
    pieces = []
    for i, name in [*enumerate(names), (-1, OCTOMAP)]:
        mine = points[owner == i]
        if len(mine) == 0:
            continue
        cells = unique_cells(np.floor(mine / voxel).astype(np.int64))
        pieces.append(ScenePiece(name, merge_voxels(cells) * voxel))
    return PlanningScene(pieces, voxel)
