"""A tabletop world: table, robot, every model with its pose and bounding box, who is in / on what, and the joints
of articulated furniture. Serialised as the world definition JSON that the ROS simulator loads.

Conventions (metres, degrees): world frame x away from the robot across the table, y to its left, z up from the
floor. A model's ``position`` is the centre of its bounding box; ``yaw_deg`` is 0 or 90 (axis-aligned footprints);
``size`` is the box in world axes (after the yaw). A cabinet on the table faces the robot (-x): drawers slide out
along -x, doors swing about vertical hinges on the front face. A cabinet standing on the floor (parent ``floor``,
the public benchmark's cabinet_1076 behind the robot) may be turned round (``yaw_deg`` 180): front and drawers +x.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import DataError
from robot.contract.catalog import Asset
from robot.contract.geometry import Box, Rect
from robot.contract.params import RobotParams, TableParams

SCHEMA = "roboscript-world/1"
RELATIONS = ("on", "in", "part_of")
CABINET = "cabinet"


@dataclass(frozen=True)
class Model:
    name: str
    asset: str
    kind: str
    """object | container | cabinet | part (a drawer, door or handle of a cabinet)."""
    category: str
    colour: str
    mass: float
    pickable: bool
    container: bool
    position: tuple[float, float, float]
    yaw_deg: float
    size: tuple[float, float, float]
    parent: str
    relation: str

    @property
    def bbox(self) -> Box:
        return Box.from_center(self.position, self.size)

    @property
    def phrase(self) -> str:
        return self.name.replace("_", " ")

    def orientation(self) -> tuple[float, float, float, float]:
        half = math.radians(self.yaw_deg) / 2
        return (0.0, 0.0, round(math.sin(half), 9), round(math.cos(half), 9))


@dataclass(frozen=True)
class Joint:
    name: str
    part: str
    handle: str
    type: str
    """prismatic (drawer: ``value`` metres pulled out along ``axis``) or revolute (door: radians about ``axis``)."""
    axis: tuple[float, float, float]
    origin: tuple[float, float, float]
    """Prismatic: the closed handle's centre. Revolute: a point on the hinge axis (a positive value swings the
    door out towards the robot)."""
    lower: float
    upper: float
    value: float = 0.0


@dataclass(frozen=True)
class WorldFailure:
    asset: str
    kind: str
    reason: str
    detail: str


@dataclass
class World:
    world_id: str
    seed: str
    table: TableParams
    robot: RobotParams
    models: list[Model]
    joints: list[Joint] = field(default_factory=list)
    failures: list[WorldFailure] = field(default_factory=list)
    attempts: int = 1

    def model(self, name: str) -> Model:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def table_rect(self) -> Rect:
        return Rect(*self.table.bounds())

    @property
    def keep_out_rect(self) -> Rect:
        x0, y0, x1, y1 = self.robot.keep_out
        bx, by = self.robot.base_x, self.robot.base_y
        return Rect(bx + x0, by + y0, bx + x1, by + y1)

    def object_names(self) -> list[str]:
        """Every name a task may refer to: the table, then the models in order."""
        return ["table", *(m.name for m in self.models)]

    # -------------------------------------------------------------------------------------------------- JSON

    def to_json(self) -> dict[str, Any]:
        t, r = self.table, self.robot
        tr = self.table_rect
        table_box = Box(tr.x0, tr.y0, 0.0, tr.x1, tr.y1, t.height)
        return {
            "schema": SCHEMA,
            "world_id": self.world_id,
            "seed": self.seed,
            "units": {"length": "m", "mass": "kg", "angle": "deg (yaw), rad (revolute joint values)"},
            "frame": "x away from the robot, y to its left, z up from the floor; position = bbox centre",
            "table": {"name": "table", "size": [t.size_x, t.size_y, t.height],
                      "position": [t.center_x, t.center_y, t.height / 2], "top_z": t.height,
                      "bbox": table_box.as_list(), "edge_margin": t.edge_margin},
            "robot": {"name": r.name, "base": [r.base_x, r.base_y, t.height], "reach": r.reach,
                      "keep_out": [self.keep_out_rect.x0, self.keep_out_rect.y0, self.keep_out_rect.x1,
                                   self.keep_out_rect.y1]},
            "models": [{"name": m.name, "asset": m.asset, "kind": m.kind, "category": m.category,
                        "colour": m.colour, "mass": m.mass, "pickable": m.pickable, "container": m.container,
                        "pose": {"position": list(m.position), "orientation": list(m.orientation()),
                                 "yaw_deg": m.yaw_deg},
                        "size": list(m.size), "bbox": [round(v, 6) for v in m.bbox.as_list()],
                        "parent": m.parent, "relation": m.relation} for m in self.models],
            "joints": [asdict(j) | {"axis": list(j.axis), "origin": list(j.origin)} for j in self.joints],
            "placement_failures": [asdict(f) for f in self.failures],
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "<world>") -> World:
        try:
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema is {data.get('schema')!r}, expected {SCHEMA!r}")
            t, r = data["table"], data["robot"]
            table = TableParams(center_x=t["position"][0], center_y=t["position"][1], size_x=t["size"][0],
                                size_y=t["size"][1], height=t["size"][2],
                                edge_margin=t.get("edge_margin", TableParams().edge_margin))
            base = r["base"]
            keep = r["keep_out"]
            robot = RobotParams(name=r["name"], base_x=base[0], base_y=base[1], reach=r["reach"],
                                keep_out=(keep[0] - base[0], keep[1] - base[1], keep[2] - base[0], keep[3] - base[1]))
            models = [Model(name=m["name"], asset=m["asset"], kind=m["kind"], category=m["category"],
                            colour=m["colour"], mass=m["mass"], pickable=m["pickable"], container=m["container"],
                            position=tuple(m["pose"]["position"]), yaw_deg=m["pose"]["yaw_deg"],
                            size=tuple(m["size"]), parent=m["parent"], relation=m["relation"])
                      for m in data["models"]]
            joints = [Joint(**(j | {"axis": tuple(j["axis"]), "origin": tuple(j["origin"])})) for j in data["joints"]]
            failures = [WorldFailure(**f) for f in data.get("placement_failures", [])]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise DataError(f"{source} is not a RoboScript world definition: {exc}.") from None
        return cls(data["world_id"], data["seed"], table, robot, models, joints, failures, data.get("attempts", 1))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) + 0.0  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


_NUMBER_LIST = re.compile(r"\[\s+([-0-9.eE,\s]+?)\s+\]")


def world_json_text(world: World) -> str:
    """The world file's text: 2-space indented JSON with numbers rounded to micrometres, number lists on one line."""
    text = json.dumps(_rounded(world.to_json()), indent=2, sort_keys=False)
    return _NUMBER_LIST.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def write_world(path: Path, world: World) -> None:
    from core.io import write_text

    write_text(path, world_json_text(world))


def read_world(path: Path) -> World:
    path = Path(path)
    if not path.exists():
        raise DataError(f"world file {path} does not exist.", hint="Run the roboscript-worlds stage first.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}.") from None
    return World.from_json(data, source=str(path))


# ------------------------------------------------------------------------------------------------------------------
# Models from assets


def rotated(size: tuple[float, float, float], yaw_deg: float) -> tuple[float, float, float]:
    return (size[1], size[0], size[2]) if round(yaw_deg) % 180 == 90 else size


def model_of(asset: Asset, name: str, center_xy: tuple[float, float], base_z: float, yaw_deg: float, parent: str,
             relation: str) -> Model:
    size = rotated(asset.size, yaw_deg)
    position = (round(center_xy[0], 6), round(center_xy[1], 6), round(base_z + size[2] / 2, 6))
    kind = asset.kind
    return Model(name=name, asset=asset.name, kind=kind, category=asset.category, colour=asset.colour,
                 mass=asset.mass, pickable=asset.pickable, container=asset.is_container, position=position,
                 yaw_deg=yaw_deg, size=size, parent=parent, relation=relation)


PLINTH = 0.02
HANDLE = (0.03, 0.10, 0.02)  # depth (x), width (y), height (z) of a handle bar


def drawer_travel(asset: Asset) -> float:
    if asset.travel is not None:
        return asset.travel
    return round(0.6 * (asset.size[0] - 0.03), 4)


# ------------------------------------------------------------------------------------------------------------------
# What the robot must reach


def reach_rect(model: Model) -> Rect:
    """The part of a table model's footprint that must lie within the robot's reach.

    Every corner of a footprint, except for a cabinet: the robot never goes behind or over a cabinet, it only works
    at its front -- grasps the handles on the front face and pulls the drawers / swings the doors towards itself.
    So a cabinet only needs its front face (the edge facing the robot, -x) within reach; its back corners may lie
    beyond it. Handles and the pulled-out drawers are between the front face and the robot, hence nearer; that the
    hand can still work where a drawer's handle ends up is checked by :func:`handle_paths`.
    """
    rect = model.bbox.rect
    if model.kind == "cabinet":
        front = rect.x1 if round(model.yaw_deg) % 360 == 180 else rect.x0
        return Rect(front, rect.y0, front, rect.y1)
    return rect


def handle_paths(models: list[Model], joints: list[Joint]) -> list[tuple[str, Rect]]:
    """(drawer, footprint) of the path each drawer's handle sweeps from closed to fully pulled out.

    The hand holds the handle all along that path, so it must stay out of the robot's keep-out box: close to the
    base neither arm has an inverse-kinematics solution for a grasp facing the cabinet (a cabinet at x = 0.55 takes
    the hand to x ~ 0.17-0.27 and its drawers cannot be opened).
    """
    by_name = {m.name: m for m in models}
    paths = []
    for joint in joints:
        if joint.type != "prismatic" or joint.handle not in by_name:
            continue
        h = by_name[joint.handle].bbox.rect
        dx, dy = joint.axis[0] * joint.upper, joint.axis[1] * joint.upper
        paths.append((joint.part, Rect(min(h.x0, h.x0 + dx), min(h.y0, h.y0 + dy), max(h.x1, h.x1 + dx),
                                       max(h.y1, h.y1 + dy))))
    return paths


def cabinet_models(asset: Asset, center_xy: tuple[float, float], base_z: float,
                   yaw_deg: float = 0.0) -> tuple[list[Model], list[Joint]]:
    """The cabinet body, its drawers (top first), doors and handles, and one joint per drawer or door.

    ``base_z`` is what the cabinet stands on (the table top, or 0 for the floor). At ``yaw_deg`` 0 its front faces
    the robot (-x) and drawers pull out along -x; at 180 it is turned round about its centre, as the public
    benchmark's cabinet behind the robot is: front to +x, drawers pulled along +x.
    """
    if round(yaw_deg) % 360 not in (0, 180):
        raise ValueError(f"a cabinet's yaw must be 0 or 180 degrees, got {yaw_deg}")
    turned = round(yaw_deg) % 360 == 180
    sx, sy, sz = asset.size
    cx, cy = center_xy
    x0, y0, y1 = cx - sx / 2, cy - sy / 2, cy + sy / 2
    body = model_of(asset, CABINET, center_xy, base_z, 180.0 if turned else 0.0, asset.stands, "on")
    models, joints = [body], []
    inner = sz - 2 * PLINTH
    drawer_band = inner if asset.doors == 0 else (inner * 0.4 if asset.drawers else 0.0)
    top = base_z + PLINTH + inner
    hx, hy, hz = asset.handle or HANDLE
    depth = asset.drawer_depth if asset.drawer_depth is not None else sx - 0.03

    def turn(box: Box) -> Box:  # 180 degrees about the cabinet's centre
        if not turned:
            return box
        return Box(2 * cx - box.x1, 2 * cy - box.y1, box.z0, 2 * cx - box.x0, 2 * cy - box.y0, box.z1)

    def turn_point(p: tuple[float, float, float]) -> tuple[float, ...]:
        return tuple(round(v, 6) for v in ((2 * cx - p[0], 2 * cy - p[1], p[2]) if turned else p))

    def part(name: str, category: str, box: Box) -> Model:
        box = turn(box)
        return Model(name=name, asset=asset.name, kind="part", category=category, colour=asset.colour, mass=0.0,
                     pickable=False, container=category == "drawer",
                     position=tuple(round(v, 6) for v in box.center),  # type: ignore[arg-type]
                     yaw_deg=0.0, size=(round(box.x1 - box.x0, 6), round(box.y1 - box.y0, 6),
                                        round(box.z1 - box.z0, 6)), parent=CABINET, relation="part_of")

    pull = (1.0, 0.0, 0.0) if turned else (-1.0, 0.0, 0.0)
    if asset.drawers:
        height = drawer_band / asset.drawers
        for i in range(asset.drawers):
            if asset.drawer_bands:
                z_lo, z_hi = base_z + asset.drawer_bands[i][0], base_z + asset.drawer_bands[i][1]
            else:
                z_hi, z_lo = top - i * height - 0.005, top - (i + 1) * height + 0.005
            drawer = Box(x0, y0 + 0.02, z_lo, x0 + depth, y1 - 0.02, z_hi)
            zc = (z_lo + z_hi) / 2
            handle = Box(x0 - hx, cy - hy / 2, zc - hz / 2, x0, cy + hy / 2, zc + hz / 2)
            models += [part(f"{CABINET}.drawer_{i}", "drawer", drawer), part(f"{CABINET}.handle_{i}", "handle", handle)]
            joints.append(Joint(f"{CABINET}.drawer_{i}_joint", f"{CABINET}.drawer_{i}", f"{CABINET}.handle_{i}",
                                "prismatic", pull, turn_point(handle.center), 0.0, drawer_travel(asset)))
    if asset.doors:
        z_lo, z_hi = base_z + PLINTH, top - drawer_band
        width = sy / asset.doors
        for j in range(asset.doors):
            d_y1 = y1 - j * width
            d_y0 = d_y1 - width
            door = Box(x0 - 0.02, d_y0 + 0.005, z_lo + 0.005, x0, d_y1 - 0.005, z_hi - 0.005)
            zc = (z_lo + z_hi) / 2
            handle = Box(x0 - 0.02 - HANDLE[0], d_y0 + 0.03, zc - HANDLE[1] / 2, x0 - 0.02, d_y0 + 0.05,
                         zc + HANDLE[1] / 2)
            hinge = turn_point((x0 - 0.01, d_y1 - 0.005, zc))
            models += [part(f"{CABINET}.door_{j}", "door", door),
                       part(f"{CABINET}.door_handle_{j}", "handle", handle)]
            joints.append(Joint(f"{CABINET}.door_{j}_joint", f"{CABINET}.door_{j}", f"{CABINET}.door_handle_{j}",
                                "revolute", (0.0, 0.0, -1.0), hinge, 0.0, round(math.pi / 2, 6)))
    return models, joints
