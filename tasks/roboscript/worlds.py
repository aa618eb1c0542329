"""World sampler (RoboScript appendix VI-D, step 1): pick containers and objects, lay them out, record failures.

Each world is seeded on its own (``roboscript.worlds.seed`` and its index), so world k is the same whether 6 or 100
are made. A world may get a cabinet (placed first, its front facing the robot, with free room in front for the
drawers or doors to open); then containers, largest first, go on the table; then each object goes, with chance
``p_in_container``, into a container that is free (fewer than ``max_objects_per_container`` objects), holds its kind
and is wide enough, else on the table. Every footprint on the table lies inside the table (less ``edge_margin``),
has all corners within ``robot.reach`` of the base (a cabinet: the corners of its front face, and the handles' pull-out
paths stay out of the keep-out box -- see :func:`~robot.contract.world.reach_rect`), stays out of the robot's keep-out box and keeps ``min_gap`` from
every other footprint. An item without a place is retried (``max_tries_per_item`` positions; the whole world up to
``max_attempts`` times); the best attempt is kept and each item still without a place becomes a
:class:`~robot.contract.world.WorldFailure` -- the world is kept with the items that fit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from robot.contract.catalog import Asset, Catalog
from robot.contract.geometry import Rect
from robot.contract.world import (
    CABINET,
    HANDLE,
    Model,
    World,
    WorldFailure,
    cabinet_models,
    drawer_travel,
    handle_paths,
    model_of,
    reach_rect,
    rotated,
)
from tasks.roboscript.params import WorldsParams

IN_CONTAINER_GAP = 0.005
DOOR_SWING_ROOM = 0.05


def world_id(index: int) -> str:
    return f"world_{index:04d}"


@dataclass
class _Layout:
    params: WorldsParams
    rng: random.Random
    table_z: float
    footprints: list[Rect] = field(default_factory=list)
    models: list[Model] = field(default_factory=list)
    joints: list = field(default_factory=list)
    failures: list[WorldFailure] = field(default_factory=list)
    inside: dict[str, list[Rect]] = field(default_factory=dict)
    containers: list[tuple[Asset, Model]] = field(default_factory=list)

    # ---------------------------------------------------------------------------------------------- table

    def _range(self, lo: float, hi: float, half: float) -> tuple[float, float] | None:
        lo, hi = lo + half, hi - half
        return (lo, hi) if hi >= lo else None

    @property
    def keep_out(self) -> Rect:
        robot = self.params.robot
        kx0, ky0, kx1, ky1 = robot.keep_out
        return Rect(robot.base_x + kx0, robot.base_y + ky0, robot.base_x + kx1, robot.base_y + ky1)

    def _free(self, rect: Rect, extra: Rect | None = None, front_only: bool = False) -> bool:
        p = self.params
        robot = p.robot
        # A cabinet only needs its front face within reach (world.reach_rect); anything else all of its footprint.
        reach_part = Rect(rect.x0, rect.y0, rect.x0, rect.y1) if front_only else rect
        if reach_part.farthest_corner_distance(robot.base_x, robot.base_y) > robot.reach:
            return False
        if rect.overlaps(self.keep_out):
            return False
        # The room in front of a cabinet only has to stay clear of other models: an open drawer passes above the
        # robot's keep-out box on the table top.
        return not any(r.overlaps(f, p.min_gap) for r in (rect, extra) if r is not None for f in self.footprints)

    def on_table(self, footprint: tuple[float, float], front_room: float = 0.0,
                 cabinet: Asset | None = None) -> tuple[Rect, Rect | None] | str:
        """A free footprint on the table (and the room kept free in front of it), or the reason there is none.

        For a ``cabinet`` only its front face has to be within reach, so its back may stand further out; its front
        is kept far enough from the base that the pulled-out handles stay out of the keep-out box.
        """
        p = self.params
        tx0, ty0, tx1, ty1 = p.table.bounds()
        m = p.table.edge_margin
        reach = p.robot.reach
        x_lo, x_hi = max(tx0 + m + front_room, p.robot.base_x - reach), min(tx1 - m, p.robot.base_x + reach)
        if cabinet is not None:
            x_hi = min(tx1 - m, p.robot.base_x + reach + footprint[0])
            if cabinet.drawers:
                x_lo = max(x_lo, self.keep_out.x1 + HANDLE[0] + drawer_travel(cabinet))
        xs = self._range(x_lo, x_hi, footprint[0] / 2)
        ys = self._range(max(ty0 + m, p.robot.base_y - reach), min(ty1 - m, p.robot.base_y + reach), footprint[1] / 2)
        if xs is None or ys is None:
            return "too_large"
        for _ in range(p.max_tries_per_item):
            cx, cy = self.rng.uniform(*xs), self.rng.uniform(*ys)
            rect = Rect.centred(cx, cy, *footprint)
            room = Rect(rect.x0 - front_room, rect.y0, rect.x0, rect.y1) if front_room > 0 else None
            if not self._free(rect, room, front_only=cabinet is not None):
                continue
            if cabinet is not None and any(path.overlaps(self.keep_out)
                                           for _, path in handle_paths(*cabinet_models(cabinet, rect.center, 0.0))):
                continue
            return rect, room
        return "no_space"

    def place_cabinet(self, asset: Asset) -> None:
        room = drawer_travel(asset) if asset.drawers else 0.0
        if asset.doors:
            room = max(room, asset.size[1] / asset.doors + DOOR_SWING_ROOM)
        found = self.on_table(asset.size[:2], front_room=room, cabinet=asset)
        if isinstance(found, str):
            self.fail(asset, found)
            return
        rect, front = found
        models, joints = cabinet_models(asset, rect.center, self.table_z)
        self.models += models
        self.joints += joints
        self.footprints += [rect] + ([front] if front is not None else [])

    def place_container(self, asset: Asset) -> None:
        yaw = self.rng.choice((0.0, 90.0))
        found = self.on_table(rotated(asset.size, yaw)[:2])
        if isinstance(found, str):
            self.fail(asset, found)
            return
        rect, _ = found
        self.footprints.append(rect)
        model = model_of(asset, asset.name, rect.center, self.table_z, yaw, "table", "on")
        self.models.append(model)
        self.inside[model.name] = []
        self.containers.append((asset, model))

    # ---------------------------------------------------------------------------------------------- containers

    def _opening(self, asset: Asset, model: Model) -> Rect:
        assert asset.opening is not None
        w, d = asset.opening if model.yaw_deg % 180 == 0 else asset.opening[::-1]
        return Rect.centred(model.position[0], model.position[1], w, d)

    def in_container(self, obj: Asset) -> bool:
        p = self.params
        candidates = [(a, m) for a, m in self.containers
                      if len(self.inside[m.name]) < p.max_objects_per_container and a.can_hold(obj)
                      and a.fits_inside(obj)]
        self.rng.shuffle(candidates)
        for asset, model in candidates:
            opening = self._opening(asset, model)
            yaws = [y for y in (0.0, 90.0) if rotated(obj.size, y)[0] <= opening.width
                    and rotated(obj.size, y)[1] <= opening.depth]
            for _ in range(p.max_tries_per_item):
                yaw = self.rng.choice(yaws)
                sx, sy, _sz = rotated(obj.size, yaw)
                cx = self.rng.uniform(opening.x0 + sx / 2, opening.x1 - sx / 2)
                cy = self.rng.uniform(opening.y0 + sy / 2, opening.y1 - sy / 2)
                rect = Rect.centred(cx, cy, sx, sy)
                if any(rect.overlaps(r, IN_CONTAINER_GAP) for r in self.inside[model.name]):
                    continue
                floor = model.bbox.z0 + asset.floor
                self.models.append(model_of(obj, obj.name, (cx, cy), floor, yaw, model.name, "in"))
                self.inside[model.name].append(rect)
                return True
        return False

    def place_object(self, obj: Asset) -> None:
        if self.containers and self.rng.random() < self.params.p_in_container and self.in_container(obj):
            return
        yaw = self.rng.choice((0.0, 90.0))
        found = self.on_table(rotated(obj.size, yaw)[:2])
        if isinstance(found, str):
            self.fail(obj, found)
            return
        rect, _ = found
        self.footprints.append(rect)
        self.models.append(model_of(obj, obj.name, rect.center, self.table_z, yaw, "table", "on"))

    def fail(self, asset: Asset, reason: str) -> None:
        p = self.params
        detail = {
            "too_large": f"its footprint {asset.size[0]:.3f} x {asset.size[1]:.3f} m does not fit in the part of the "
                         "table within the robot's reach",
            "no_space": f"no free spot within reach after {p.max_tries_per_item} tries",
        }[reason]
        self.failures.append(WorldFailure(asset.name, asset.kind, reason, detail))


def sample_world(index: int, catalog: Catalog, params: WorldsParams) -> World:
    seed = f"{params.seed}:{index}"
    rng = random.Random(f"roboscript-world:{seed}")
    cabinet = rng.choice(catalog.cabinets) if catalog.cabinets and rng.random() < params.p_cabinet else None
    n_containers = rng.randint(params.min_containers, params.max_containers)
    n_objects = rng.randint(params.min_objects, params.max_objects)
    shortfall = []
    for kind, wanted, pool in (("container", n_containers, catalog.containers), ("object", n_objects,
                                                                                  catalog.objects)):
        if wanted > len(pool):
            shortfall.append(WorldFailure("*", kind, "catalog_too_small",
                                          f"asked for {wanted} {kind}s, the catalog has {len(pool)}"))
    containers = sorted(rng.sample(catalog.containers, min(n_containers, len(catalog.containers))),
                        key=lambda a: -a.size[0] * a.size[1])
    objects = rng.sample(catalog.objects, min(n_objects, len(catalog.objects)))

    best: _Layout | None = None
    attempts = 0
    for attempts in range(1, params.max_attempts + 1):  # noqa: B007 (kept after the loop)
        layout = _Layout(params, rng, params.table.height)
        if cabinet is not None:
            layout.place_cabinet(cabinet)
        for asset in containers:
            layout.place_container(asset)
        for asset in objects:
            layout.place_object(asset)
        if best is None or len(layout.failures) < len(best.failures):
            best = layout
        if not layout.failures:
            break
    assert best is not None
    failures = shortfall + [WorldFailure(f.asset, f.kind, f.reason, f"{f.detail} in each of {attempts} attempt(s)")
                            for f in best.failures]
    return World(world_id(index), seed, params.table, params.robot, best.models, best.joints, failures, attempts)


# ------------------------------------------------------------------------------------------------------------------
# Validation: what every world (sampled or declared in benchmark_tasks.yaml) must satisfy.


def world_problems(world: World) -> list[str]:
    """Everything wrong with a world's arrangement, one sentence each; [] for a valid world."""
    problems: list[str] = []
    names = [m.name for m in world.models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"duplicate model names {dupes}")
    by_name = {m.name: m for m in world.models}
    table, robot = world.table_rect, world.robot
    margin = world.table.edge_margin
    on_table = [m for m in world.models if m.parent == "table"]
    for m in world.models:
        if m.parent not in ("table", "floor") and m.parent not in by_name:
            problems.append(f"{m.name} is {m.relation} {m.parent!r}, which is not in the world")
        rel_ok = (m.relation == "part_of") == (m.kind == "part") and m.relation in ("on", "in", "part_of")
        if not rel_ok:
            problems.append(f"{m.name} ({m.kind}) has relation {m.relation!r}")
    for m in on_table:
        rect = m.bbox.rect
        if not rect.inside(table, margin):
            problems.append(f"{m.name} is not on the table (with {margin} m margin)")
        dist = reach_rect(m).farthest_corner_distance(robot.base_x, robot.base_y)
        if dist > robot.reach + 1e-6:
            where = "a corner of its front face" if m.kind == CABINET else "a corner"
            problems.append(f"{m.name} is out of reach: {where} is {dist:.3f} m from the base (reach {robot.reach})")
        if rect.overlaps(world.keep_out_rect):
            problems.append(f"{m.name} overlaps the robot's keep-out box")
        if abs(m.bbox.z0 - world.table.height) > 1e-6:
            problems.append(f"{m.name} does not rest on the table top")
    for m in (m for m in world.models if m.parent == "floor"):
        # Furniture beside the table (the public benchmark's cabinet behind the robot): clear of the table, on the
        # floor, and the arm must reach every handle (the only part it works at).
        if m.bbox.rect.overlaps(table):
            problems.append(f"{m.name} stands on the floor but overlaps the table")
        if abs(m.bbox.z0) > 1e-6:
            problems.append(f"{m.name} does not stand on the floor")
        for h in (h for h in world.models if h.parent == m.name and h.category == "handle"):
            dist = h.bbox.rect.farthest_corner_distance(robot.base_x, robot.base_y)
            if dist > robot.reach + 1e-6:
                problems.append(f"{h.name} is out of reach: a corner is {dist:.3f} m from the base "
                                f"(reach {robot.reach})")
    for i, a in enumerate(on_table):
        for b in on_table[i + 1:]:
            if a.bbox.rect.overlaps(b.bbox.rect):
                problems.append(f"{a.name} and {b.name} overlap")
    for m in world.models:
        if m.relation != "in" or m.parent not in by_name:
            continue
        parent = by_name[m.parent]
        if not m.bbox.rect.inside(parent.bbox.rect):
            problems.append(f"{m.name} sticks out of {parent.name}")
        if m.bbox.z0 < parent.bbox.z0 - 1e-6:
            problems.append(f"{m.name} is below the bottom of {parent.name}")
        siblings = [s for s in world.models if s.relation == "in" and s.parent == m.parent and s.name > m.name]
        problems += [f"{m.name} and {s.name} overlap in {parent.name}" for s in siblings
                     if m.bbox.rect.overlaps(s.bbox.rect)]
    for part, path in handle_paths(world.models, world.joints):
        if path.overlaps(world.keep_out_rect):
            problems.append(f"pulling {part} out takes its handle to x = {path.x0:.3f} m, into the robot's keep-out "
                            "box where the arm cannot work: move the cabinet away from the robot")
    if any(m.kind == "part" for m in world.models) and CABINET not in by_name:
        problems.append("cabinet parts without a cabinet")
    return problems

