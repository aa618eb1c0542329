"""Build a renderer's :class:`~tasks.muep.world_state.SceneLayout` from the metadata stage's scene tables."""

from __future__ import annotations

import numpy as np

from tasks.muep.world_state import ReceptacleLayout, SceneLayout

START_ROTATION = 0.0
START_HORIZON = 30.0


def start_pose(grid) -> tuple[float, float, float, float]:
    """The agent's start pose: the navigable point nearest the grid's centroid (the first such point in the file on
    a tie), facing north (+z), looking down 30 degrees. Depends on the grid points only.

    (The same rule, and the same arithmetic, as ``tasks.muep.demos.start_pose``.)
    """
    points = np.asarray(grid, dtype=float).reshape(-1, 2)
    if not len(points):
        raise ValueError("the scene has no navigable grid point to start from")
    centre = points.mean(axis=0)
    x, z = points[int(np.argmin(((points - centre) ** 2).sum(axis=1)))]
    return (float(x), float(z), START_ROTATION, START_HORIZON)


def layout_from_metadata(scene_meta, grid) -> SceneLayout:
    """``scene_meta``: a :class:`~tasks.muep.metadata.SceneMetadata` (its ``scene`` record and ``receptacles``);
    ``grid``: the navigable points, ``alfworld_data.read_scene(n).grid`` (an (n, 2) array or a sequence of pairs).

    Receptacles keep the metadata's order (sorted by type, then THOR id, as numbered); grid points keep the file's.
    """
    points = tuple((float(x), float(z)) for x, z in np.asarray(grid, dtype=float).reshape(-1, 2))
    receptacles = tuple(
        ReceptacleLayout(
            name=r.name, receptacle_type=r.receptacle_type, x=float(r.x), z=float(r.z), rotation=float(r.rotation),
            horizon=float(r.horizon), openable=bool(r.openable), pose_synthesized=bool(r.pose_synthesized),
        )
        for r in scene_meta.receptacles
    )
    return SceneLayout(scene=scene_meta.scene.scene, room_type=scene_meta.scene.room_type, grid=points,
                       receptacles=receptacles, start=start_pose(grid))
