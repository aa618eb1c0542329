"""The simulated arms: Franka Panda (``pybullet_data``'s model) and UR5 (built in ``robot/backends/urdf.py``).

Each is loaded with its base on the table top at the world's robot base, facing +x. An :class:`Arm` knows its arm
and finger joints, the tool-frame link (between the fingertips: z = approach, y = closing direction) and its home
configuration, which puts the gripper 0.3 m in front of the base and ~0.5 m above the table, pointing down.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot.backends.urdf import UR5_FINGER_TRAVEL, ur5_urdf

#: The tool pose of the home configuration, relative to the robot's base.
HOME_OFFSET = (0.307, 0.0, 0.485)


@dataclass
class Arm:
    name: str
    body: int
    joints: list[int]
    fingers: list[int]
    finger_open: float
    tool_link: int
    lower: np.ndarray
    upper: np.ndarray
    home: np.ndarray
    max_opening: float


def _joint_index(pb, body: int, client: int) -> dict[str, int]:
    return {pb.getJointInfo(body, i, physicsClientId=client)[1].decode(): i
            for i in range(pb.getNumJoints(body, physicsClientId=client))}


def _limits(pb, body: int, joints: list[int], client: int) -> tuple[np.ndarray, np.ndarray]:
    info = [pb.getJointInfo(body, j, physicsClientId=client) for j in joints]
    return np.array([i[8] for i in info]), np.array([i[9] for i in info])


def load_arm(pb, client: int, name: str) -> Arm:
    if name == "panda":
        import pybullet_data

        path = str(Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf")
        body = pb.loadURDF(path, useFixedBase=True, physicsClientId=client)
        index = _joint_index(pb, body, client)
        joints = [index[f"panda_joint{i}"] for i in range(1, 8)]
        fingers = [index["panda_finger_joint1"], index["panda_finger_joint2"]]
        tool = index["panda_grasptarget_hand"]
        home = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
        finger_open, opening = 0.04, 0.072
    elif name == "ur5":
        folder = Path(tempfile.gettempdir()) / "embp-sim-models"
        folder.mkdir(exist_ok=True)
        path = folder / "ur5.urdf"
        text = ur5_urdf()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        body = pb.loadURDF(str(path), useFixedBase=True, physicsClientId=client)
        index = _joint_index(pb, body, client)
        joints = [index[n] for n in ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
                                     "wrist_2_joint", "wrist_3_joint")]
        fingers = [index["gripper_left_finger_joint"], index["gripper_right_finger_joint"]]
        tool = index["tool_frame_joint"]
        home = np.array([0.0, -1.9, 1.9, -1.571, -1.571, 0.0])  # refined by inverse kinematics at load
        finger_open, opening = UR5_FINGER_TRAVEL, 2 * UR5_FINGER_TRAVEL
    else:
        raise ValueError(f"unknown arm {name!r}; known: panda, ur5")
    for link in range(-1, pb.getNumJoints(body, physicsClientId=client)):
        pb.changeDynamics(body, link, lateralFriction=1.0, physicsClientId=client)
    lower, upper = _limits(pb, body, joints, client)
    return Arm(name, body, joints, fingers, finger_open, tool, lower, upper, home, opening)
