"""URDF text generated at run time: the cabinet of a world (prismatic drawers, revolute doors, handles) and the UR5.

The cabinet follows the world definition exactly: the body is a hollow box (back, sides, top and plinth panels) at
the ``cabinet`` model; every ``cabinet.drawer_i`` is an open-topped tray whose front panel closes the body, sliding
on a prismatic joint along the world file's axis within its limits; every ``cabinet.door_j`` swings about its hinge
on a revolute joint; each handle is a link fixed to its drawer or door, so its pose follows the joint.

The UR5 has no model in ``pybullet_data``; it is built here from Universal Robots' published kinematic parameters
(the DH table: d1 = 0.089159, a2 = -0.425, a3 = -0.39225, d4 = 0.10915, d5 = 0.09465, d6 = 0.0823, written as
``ur_description``'s joint offsets) with cylinder links, and a parallel gripper of a Robotiq 2F-85's size (85 mm
stroke) whose tool frame sits between the fingertips.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from robot.contract.world import CABINET, World

PANEL = 0.02


def _f(values: Iterable[float]) -> str:
    return " ".join(f"{v:.6f}" for v in values)


def _box(xyz: Iterable[float], size: Iterable[float]) -> str:
    xyz, size = list(xyz), list(size)
    return (f'\n  <collision><origin xyz="{_f(xyz)}"/><geometry><box size="{_f(size)}"/></geometry></collision>'
            f'\n  <visual><origin xyz="{_f(xyz)}"/><geometry><box size="{_f(size)}"/></geometry></visual>')


def _cylinder(xyz: Iterable[float], rpy: Iterable[float], radius: float, length: float) -> str:
    geo = f'<geometry><cylinder radius="{radius:.4f}" length="{length:.4f}"/></geometry>'
    origin = f'<origin xyz="{_f(xyz)}" rpy="{_f(rpy)}"/>'
    return f"<collision>{origin}{geo}</collision><visual>{origin}{geo}</visual>"


def _inertial(mass: float, inertia: float = 0.01) -> str:
    return (f'<inertial><mass value="{mass:.4f}"/><inertia ixx="{inertia}" ixy="0" ixz="0" iyy="{inertia}" '
            f'iyz="0" izz="{inertia}"/></inertial>')


def _link(name: str, body: str, mass: float) -> str:
    return f'<link name="{name}">{_inertial(mass)}{body}</link>'


def _joint(name: str, kind: str, parent: str, child: str, xyz: Iterable[float], axis: Iterable[float] = (1, 0, 0),
           limits: tuple[float, float] | None = None, rpy: Iterable[float] = (0, 0, 0)) -> str:
    limit = (f'<limit lower="{limits[0]:.6f}" upper="{limits[1]:.6f}" effort="200" velocity="1.0"/>'
             f'<dynamics damping="5.0" friction="2.0"/>' if limits else "")
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{_f(xyz)}" rpy="{_f(rpy)}"/><axis xyz="{_f(axis)}"/>{limit}</joint>')


def _sub(a: Iterable[float], b: Iterable[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _handle_geometry(size: tuple[float, float, float]) -> str:
    """A pull handle inside its box (the cabinet faces -x): a bar at the front, standing off the face on two posts
    at its ends, so fingers can close round the bar."""
    sx, sy, sz = size
    bar_t = min(0.012, sx / 2)
    long_y = sy >= sz
    length = sy if long_y else sz
    post = min(0.012, length / 4)
    pieces = [((-sx / 2 + bar_t / 2, 0, 0), (bar_t, sy, sz))]
    for end in (-1, 1):
        offset = end * (length / 2 - post / 2)
        xyz = (bar_t / 2, offset, 0) if long_y else (bar_t / 2, 0, offset)
        dims = (sx - bar_t, post, sz) if long_y else (sx - bar_t, sy, post)
        pieces.append((xyz, dims))
    return "".join(_box(xyz, dims) for xyz, dims in pieces)


def cabinet_urdf(world: World) -> tuple[str, dict[str, str]]:
    """URDF of the world's cabinet (base link at the cabinet's box centre) and the link name of each part model.

    The links are in the cabinet's own frame, front to -x; a cabinet turned round (``yaw_deg`` 180, the public
    benchmark's) is loaded with that yaw, so world offsets and axes are turned back into its frame here."""
    body = world.model(CABINET)
    centre, (sx, sy, sz) = body.position, body.size
    turned = round(body.yaw_deg) % 360 == 180

    def own(v: Iterable[float]) -> list[float]:
        x, y, z = v
        return [-x, -y, z] if turned else [x, y, z]

    panels = [
        ((sx / 2 - PANEL / 2, 0, 0), (PANEL, sy, sz)),                     # back
        ((0, -sy / 2 + PANEL / 2, 0), (sx, PANEL, sz)),                    # right side (-y)
        ((0, sy / 2 - PANEL / 2, 0), (sx, PANEL, sz)),                     # left side (+y)
        ((0, 0, sz / 2 - PANEL / 2), (sx, sy, PANEL)),                     # top
        ((0, 0, -sz / 2 + PANEL / 2), (sx, sy, PANEL)),                    # plinth
    ]
    parts = ["".join(_box(xyz, size) for xyz, size in panels)]
    links = [_link("body", parts[0], body.mass)]
    joints: list[str] = []
    link_of: dict[str, str] = {CABINET: "body"}
    for j, joint in enumerate(world.joints):
        part = world.model(joint.part)
        handle = world.model(joint.handle)
        part_link, handle_link = f"part_{j}", f"handle_{j}"
        if joint.type == "prismatic":
            frame = part.position  # the drawer's frame sits at its box centre
            dx, dy, dz = part.size
            t = 0.01
            wall_z = -0.1 * dz  # walls 0.8 dz high, standing on the floor
            tray = [((0, 0, -dz / 2 + t / 2), (dx, dy, t)),                 # floor
                    ((-dx / 2 + PANEL / 2, 0, 0), (PANEL, dy, dz)),         # front panel (the cabinet's face)
                    ((dx / 2 - t / 2, 0, wall_z), (t, dy, dz * 0.8)),       # back
                    ((0, -dy / 2 + t / 2, wall_z), (dx, t, dz * 0.8)),      # sides
                    ((0, dy / 2 - t / 2, wall_z), (dx, t, dz * 0.8))]
            geometry = "".join(_box(xyz, size) for xyz, size in tray)
        else:  # revolute door: its frame sits on the hinge
            frame = joint.origin
            geometry = _box(own(_sub(part.position, frame)), part.size)
        rel = own(_sub(frame, centre))
        links.append(_link(part_link, geometry, 1.0))
        joints.append(_joint(f"joint_{j}", joint.type, "body", part_link, rel, own(joint.axis),
                             (joint.lower, joint.upper)))
        links.append(_link(handle_link, _handle_geometry(handle.size), 0.1))
        joints.append(_joint(f"handle_fix_{j}", "fixed", part_link, handle_link, own(_sub(handle.position, frame))))
        link_of[joint.part], link_of[joint.handle] = part_link, handle_link
    text = '<?xml version="1.0"?>\n<robot name="cabinet">\n' + "\n".join(links + joints) + "\n</robot>\n"
    return text, link_of


# ---------------------------------------------------------------------------------------------------------- UR5

#: (joint, parent, child, xyz, rpy, axis, (lower, upper)) -- ur_description's offsets of the published DH table.
TWO_PI = 2 * math.pi
_UR5_JOINTS = (
    ("shoulder_pan_joint", "base_link", "shoulder_link", (0, 0, 0.089159), (0, 0, 0), (0, 0, 1), (-TWO_PI, TWO_PI)),
    ("shoulder_lift_joint", "shoulder_link", "upper_arm_link", (0, 0.13585, 0), (0, math.pi / 2, 0), (0, 1, 0),
     (-TWO_PI, TWO_PI)),
    ("elbow_joint", "upper_arm_link", "forearm_link", (0, -0.1197, 0.425), (0, 0, 0), (0, 1, 0), (-math.pi, math.pi)),
    ("wrist_1_joint", "forearm_link", "wrist_1_link", (0, 0, 0.39225), (0, math.pi / 2, 0), (0, 1, 0),
     (-TWO_PI, TWO_PI)),
    ("wrist_2_joint", "wrist_1_link", "wrist_2_link", (0, 0.093, 0), (0, 0, 0), (0, 0, 1), (-TWO_PI, TWO_PI)),
    ("wrist_3_joint", "wrist_2_link", "wrist_3_link", (0, 0, 0.09465), (0, 0, 0), (0, 1, 0), (-TWO_PI, TWO_PI)),
)
#: Link masses (kg) as Universal Robots publishes them.
_UR5_MASS = {"base_link": 4.0, "shoulder_link": 3.7, "upper_arm_link": 8.393, "forearm_link": 2.275,
             "wrist_1_link": 1.219, "wrist_2_link": 1.219, "wrist_3_link": 0.1879}
_UR5_SHAPES = {  # (xyz, rpy, radius, length) of a cylinder per link
    "base_link": ((0, 0, 0.04), (0, 0, 0), 0.075, 0.08),
    "shoulder_link": ((0, 0.06, 0), (math.pi / 2, 0, 0), 0.06, 0.15),
    "upper_arm_link": ((0, 0, 0.2125), (0, 0, 0), 0.054, 0.36),
    "forearm_link": ((0, 0, 0.196), (0, 0, 0), 0.043, 0.33),
    "wrist_1_link": ((0, 0.09, 0), (math.pi / 2, 0, 0), 0.04, 0.08),
    "wrist_2_link": ((0, 0, 0.09), (0, 0, 0), 0.04, 0.08),
    "wrist_3_link": ((0, 0.07, 0), (math.pi / 2, 0, 0), 0.035, 0.03),
}
UR5_FINGER_TRAVEL = 0.0425
"""Per finger: a Robotiq 2F-85 opens 85 mm."""
UR5_TOOL_OFFSET = 0.12
"""Flange to the tool frame between the fingertips (m)."""


def ur5_urdf() -> str:
    links = [_link(name, _cylinder(*_UR5_SHAPES[name]), mass) for name, mass in _UR5_MASS.items()]
    joints = [_joint(name, "revolute", parent, child, xyz, axis, limits, rpy)
              for name, parent, child, xyz, rpy, axis, limits in _UR5_JOINTS]
    # Flange (ee_link: x points out of the wrist) -> gripper hand whose z axis is the approach direction.
    links.append(_link("ee_link", "", 0.01))
    joints.append(_joint("ee_fixed_joint", "fixed", "wrist_3_link", "ee_link", (0, 0.0823, 0), rpy=(0, 0, math.pi / 2)))
    links.append(_link("gripper_hand", _box((0, 0, 0.035), (0.05, 0.13, 0.06)), 0.5))
    joints.append(_joint("hand_joint", "fixed", "ee_link", "gripper_hand", (0, 0, 0), rpy=(0, math.pi / 2, 0)))
    finger_len, tip = 0.05, UR5_TOOL_OFFSET + 0.011
    for side, sign in (("left", 1), ("right", -1)):
        links.append(_link(f"gripper_{side}_finger", _box((0, sign * 0.005, -finger_len / 2), (0.02, 0.01, finger_len)),
                           0.05))
        joints.append(_joint(f"gripper_{side}_finger_joint", "prismatic", "gripper_hand", f"gripper_{side}_finger",
                             (0, 0, tip), (0, sign, 0), (0.0, UR5_FINGER_TRAVEL)))
    links.append(_link("tool_frame", "", 0.01))
    joints.append(_joint("tool_frame_joint", "fixed", "gripper_hand", "tool_frame", (0, 0, UR5_TOOL_OFFSET)))
    return '<?xml version="1.0"?>\n<robot name="ur5">\n' + "\n".join(links + joints) + "\n</robot>\n"
