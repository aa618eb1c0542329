"""Motion planning for the simulated arm: inverse kinematics, collision checks, joint and Cartesian paths.

A joint path is a straight line in joint space sampled every ``JOINT_STEP`` radians; a Cartesian path follows the
tool frame along straight segments (orientation slerped) every ``CART_STEP`` metres by inverse kinematics seeded
with the previous point. Every sample is checked: the arm's links and whatever it holds against every model except
those the caller allows to be touched. When the straight joint path is blocked, :meth:`MotionPlanner.move_to`
tries "up, over, down": a vertical Cartesian lift to a transit height above everything in the corridor, a joint
move above the goal, and a vertical descent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from robot.backends.sim_ik import IKSolver
from robot.backends.sim_rrt import jiggle, rrt_connect, shortcut
from robot.contract.tool_api import Pose
from robot.contract.world import CABINET
from robot.errors import PlanningError
from robot.grasps import matrix_from_quat as _matrix

if TYPE_CHECKING:
    from robot.backends.sim import SimBackend

JOINT_STEP = 0.03
CART_STEP = 0.01
MAX_JUMP = 0.35
PENETRATION = 0.003
LOOSE_CLEARANCE = 0.005
"""Under ``grasp: contact`` the arm and palm keep this far from loose objects in a plan (the fingers are allowed
PENETRATION, as everything is under ``rigid``: they must reach round what they grasp). The driven arm pushes what
it grazes: a joint path home that passed 1 mm from an apple just put down (Hard_1) gave it 0.4 m/s."""
CLEARANCE = 0.05
IK_RESTARTS = 12
BACK_OUT_M = 0.08
"""How far the hand backs straight out (approach axis, up or sideways) before going home when the straight way home
collides. (Not sim.RETREAT_M: how far a hand that let go of an object may still touch it.)"""


def quat_angle(a, b) -> float:
    dot = abs(float(np.dot(np.asarray(a, dtype=float), np.asarray(b, dtype=float))))
    return 2 * math.acos(min(1.0, dot))


def slerp(a, b, t: float) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    dot = float(np.dot(a, b))
    if dot < 0:
        b, dot = -b, -dot
    if dot > 0.9995:
        out = a + t * (b - a)
        return out / np.linalg.norm(out)
    theta = math.acos(dot)
    return (math.sin((1 - t) * theta) * a + math.sin(t * theta) * b) / math.sin(theta)


class MotionPlanner:
    def __init__(self, sim: SimBackend):
        self.sim = sim
        self.solver = IKSolver(sim)

    def ik(self, pose: Pose, seed: np.ndarray, restarts: int = IK_RESTARTS,
           ignore: frozenset[str] | None = None) -> np.ndarray | None:
        """Joint values putting the tool frame at ``pose`` (None when unreachable), from ``seed`` first, then the
        home configuration and ``restarts`` random ones; with ``ignore`` given, only a solution free of collisions
        (except with those models) counts. The arm is left as it was."""
        if ignore is None:
            return self.solver.solve(pose, seed, restarts)
        return self.solver.solve(pose, seed, restarts, accept=lambda q: self._check_path([q], ignore) is None)

    # ------------------------------------------------------------------------------------------------ collisions

    def _obstacles(self, ignore: frozenset[str]):
        sim = self.sim
        skip = set(ignore) | set(sim.attached)
        held = sim.held
        objects = sim.collision_objects()
        released = sim.just_released() if sim.perceived_scene else None
        if released is not None:
            skip.add(released)
        if held is not None:
            skip.add(held)
            if sim.sim_model(held).shape == "part":  # the hand is at the cabinet: its parts move with it
                skip |= {name for name in objects if name == CABINET or name.startswith(CABINET + ".")}
        return [(name, m) for name, m in objects.items() if name not in skip]

    def check_start(self, ignore: frozenset[str]) -> None:
        """In a perceived planning scene, refuse every motion when the arm already collides with it -- the robot
        itself in the scene (no self filter, or a box that swallowed the arm: paper Fig. 9), as MoveIt refuses a
        start state in collision."""
        if not self.sim.perceived_scene:
            return
        hit = self._check_path([self.sim.q()], ignore)
        if hit is not None:
            raise PlanningError(f"motion refused: the robot's current state collides with the perceived planning "
                                f"scene ({hit}); the reconstruction holds the robot itself or a wrong object box")

    def collision(self, q: np.ndarray, obstacles: list) -> str | None:
        """The first of ``obstacles`` the arm (or what it holds) would penetrate at ``q``, or None. Leaves the arm
        at q and what it holds with it."""
        sim, pb = self.sim, self.sim.pb
        sim._set_q(q)
        held = sim._held
        if held is not None and held.joint is None:
            tool = sim.tool_pose()
            pos, orn = pb.multiplyTransforms(tool.position, tool.orientation, *held.rel)
            pb.resetBasePositionAndOrientation(held.model.body, pos, orn, physicsClientId=sim.client)
        driven = sim.grasp == "contact"
        for name, model in obstacles:
            margin = LOOSE_CLEARANCE if driven and model.dynamic else 0.0
            for point in pb.getClosestPoints(sim.robot.body, model.body, margin, linkIndexB=model.link,
                                             physicsClientId=sim.client):
                if point[3] in sim.robot.fingers or not margin:
                    if point[8] < -PENETRATION and not (point[3] == -1 and name == "table"):
                        return f"{name} (with {self._link_name(point[3])})"
                elif point[8] < margin:
                    return f"{name} (with {self._link_name(point[3])}, within {LOOSE_CLEARANCE * 1000:.0f} mm)"
            if held is not None and held.joint is None:
                points = pb.getClosestPoints(held.model.body, model.body, 0.0, linkIndexB=model.link,
                                             physicsClientId=sim.client)
                if any(p[8] < -PENETRATION for p in points):
                    return f"{name} (hit by the held {held.name})"
        return None

    def _link_name(self, link: int) -> str:
        if link < 0:
            return "the base"
        info = self.sim.pb.getJointInfo(self.sim.robot.body, link, physicsClientId=self.sim.client)
        return info[12].decode()

    # ------------------------------------------------------------------------------------------------ paths

    @staticmethod
    def joint_path(q0: np.ndarray, q1: np.ndarray) -> list[np.ndarray]:
        n = max(1, int(math.ceil(float(np.max(np.abs(q1 - q0))) / JOINT_STEP)))
        return [q0 + (q1 - q0) * (i / n) for i in range(1, n + 1)]

    def cartesian_path(self, waypoints: list[Pose], start_q: np.ndarray,
                       partial: bool = False) -> tuple[list[np.ndarray], float, str]:
        """Joint path along the waypoints, the fraction of the length it covers and why it stops short. Without
        ``partial`` a path that cannot be completed raises PlanningError."""
        sim = self.sim
        saved = sim.q()
        sim._set_q(start_q)
        start = sim.tool_pose()
        sim._set_q(saved)
        path, q = [], start_q
        prev = start
        segments = [(start, waypoints[0]), *zip(waypoints, waypoints[1:], strict=False)]
        total = sum(float(np.linalg.norm(np.subtract(b.position, a.position))) for a, b in segments) or 1e-9
        done = 0.0
        for target in waypoints:
            dist = float(np.linalg.norm(np.subtract(target.position, prev.position)))
            turn = quat_angle(prev.orientation, target.orientation)
            n = max(1, int(math.ceil(max(dist / CART_STEP, turn / 0.05))))
            for i in range(1, n + 1):
                t = i / n
                pos = np.asarray(prev.position) + (np.asarray(target.position) - np.asarray(prev.position)) * t
                orn = slerp(prev.orientation, target.orientation, t)
                nxt = self.ik(Pose(tuple(pos), tuple(orn)), q, restarts=0)
                problem = ""
                if nxt is None:
                    problem = f"the straight path leaves the arm's reach near {np.round(pos, 3).tolist()}"
                elif float(np.max(np.abs(nxt - q))) > MAX_JUMP:
                    problem = f"the straight path needs a joint flip near {np.round(pos, 3).tolist()}"
                if problem:
                    if not partial:
                        raise PlanningError(problem)
                    return path, min(1.0, done / total), problem
                path += self.joint_path(q, nxt)
                q = nxt
                done += dist / n
            prev = target
        return path, 1.0, ""

    def _first_collision(self, path: list[np.ndarray], ignore: frozenset[str]) -> tuple[int, str] | None:
        sim = self.sim
        saved_q = sim.q()
        held = sim._held
        saved_held = None
        if held is not None and held.joint is None:
            saved_held = sim.pb.getBasePositionAndOrientation(held.model.body, physicsClientId=sim.client)
        obstacles = self._obstacles(ignore)
        try:
            for index, q in enumerate(path):
                hit = self.collision(q, obstacles)
                if hit:
                    return index, hit
            return None
        finally:
            sim._set_q(saved_q)
            if saved_held is not None:
                sim.pb.resetBasePositionAndOrientation(held.model.body, *saved_held, physicsClientId=sim.client)

    def _check_path(self, path: list[np.ndarray], ignore: frozenset[str]) -> str | None:
        found = self._first_collision(path, ignore)
        return None if found is None else found[1]

    def move_joints(self, q_goal: np.ndarray, ignore: frozenset[str]) -> None:
        """Joint motion to ``q_goal`` (going home): straight in joint space; if that collides, first back the hand
        out (``_retreat``: fingers still round a handle or in a receptacle just let go of, as MoveIt's post-grasp
        retreat does), then straight again or a detour."""
        self.check_start(ignore)
        if self.sim.should_back_out():  # under contact: a finger still at what it let go of would drag it
            self._retreat(ignore)
        path = self.joint_path(self.sim.q(), q_goal)
        blocked = self._check_path(path, ignore)
        if blocked is not None and self._retreat(ignore):
            path = self.joint_path(self.sim.q(), q_goal)
            blocked = self._check_path(path, ignore)
        if blocked is None:
            self.sim.execute(path)
            return
        self._detour(q_goal, None, ignore, blocked)

    def _retreat(self, ignore: frozenset[str]) -> bool:
        """Back the hand straight out by up to BACK_OUT_M: along its approach axis first, else up, else sideways
        along its finger plane or its closing axis (an arm at its inner reach limit, after pulling a drawer, can
        only slide off the handle's bar) -- the first direction that moves it at least 2 cm, as far as that is
        reachable and collision-free. Whether it moved."""
        tool = self.sim.tool_pose()
        rotation = _matrix(tool.orientation)
        directions = [-rotation[:, 2], np.array([0.0, 0.0, 1.0]), rotation[:, 0], -rotation[:, 0],
                      rotation[:, 1], -rotation[:, 1]]
        start = np.array(tool.position)
        for direction in directions:
            back = Pose(tuple(float(v) for v in start + BACK_OUT_M * direction), tool.orientation)
            path, fraction, _ = self._free_straight([back], ignore)
            if path and fraction * BACK_OUT_M >= 0.02:
                self.sim.execute(path)
                return True
        return False

    def _free_straight(self, waypoints: list[Pose], ignore: frozenset[str]) -> tuple[list[np.ndarray], float, str]:
        """The reachable part of the straight path from here along the waypoints, cut before its first collision:
        (joint path, fraction of the length it covers, why it stops short)."""
        path, fraction, problem = self.cartesian_path(waypoints, self.sim.q(), partial=True)
        found = self._first_collision(path, ignore)
        if found is not None:
            index, hit = found
            fraction *= index / max(len(path), 1)
            path, problem = path[:index], f"the arm would collide with {hit}"
        return path, fraction, problem

    def approach(self, pre: Pose, target: Pose, ignore: frozenset[str]) -> tuple[float, str]:
        """Move to ``pre`` then straight to ``target`` (a grasp). Both are solved on one branch of the arm's
        kinematics -- the straight path is planned backwards from the target -- so the final approach never needs
        a joint flip; models in ``ignore`` may be touched on the straight part only."""
        sim = self.sim
        self.check_start(ignore)
        q_target = self.ik(target, sim.q(), ignore=ignore)
        if q_target is None:
            raise PlanningError(f"no inverse-kinematics solution for the grasp pose at "
                                f"{np.round(target.position, 3).tolist()}")
        back, fraction, _ = self.cartesian_path([pre], q_target, partial=True)
        if fraction < 0.999 or not back or self._check_path([back[-1]], frozenset()) is not None:
            # no straight approach on this branch, or its pre-grasp configuration collides: plain motions
            self.move_to(pre, frozenset())
            return self.cartesian([target], ignore)
        q_pre = back[-1]
        self.move_joints(q_pre, frozenset())
        forward = back[::-1][1:] + [q_target]
        found = self._first_collision(forward, ignore)
        if found is not None:
            index, hit = found
            if index == 0:
                raise PlanningError(f"the approach is blocked at once: the arm would collide with {hit}")
            sim.execute(forward[:index])
            return index / len(forward), f"the arm would collide with {hit}"
        sim.execute(forward)
        return 1.0, ""

    def cartesian(self, waypoints: list[Pose], ignore: frozenset[str]) -> tuple[float, str]:
        """Execute as much of the straight path as is reachable and collision-free (MoveIt's Cartesian planning
        does the same); returns the fraction done and why it stopped. Nothing possible raises PlanningError."""
        self.check_start(ignore)
        path, fraction, problem = self._free_straight(waypoints, ignore)
        if not path:
            raise PlanningError(f"the Cartesian path is impossible from the start: {problem}")
        self.sim.execute(path)
        return fraction, problem

    def move_to(self, pose: Pose, ignore: frozenset[str]) -> None:
        sim = self.sim
        self.check_start(ignore)
        q0 = sim.q()
        q_goal = self.ik(pose, q0, ignore=ignore)
        if q_goal is None:
            q_any = self.ik(pose, q0)
            if q_any is None:
                raise PlanningError(f"no inverse-kinematics solution: the pose at "
                                    f"{np.round(pose.position, 3).tolist()} is not reachable with that orientation")
            raise PlanningError(f"the target pose puts the arm in collision with {self._check_path([q_any], ignore)}")
        path = self.joint_path(q0, q_goal)
        blocked = self._check_path(path, ignore)
        if blocked is None:
            sim.execute(path)
            return
        self._detour(q_goal, pose, ignore, blocked)

    # ------------------------------------------------------------------------------------------------ detour

    def _transit_height(self, a: np.ndarray, b: np.ndarray, ignore: frozenset[str]) -> float:
        sim = self.sim
        lo = np.minimum(a[:2], b[:2]) - 0.12
        hi = np.maximum(a[:2], b[:2]) + 0.12
        top = sim.world.table.height
        for name, _ in self._obstacles(ignore):
            if name == "table":
                continue
            box = sim.obstacle_box(name)
            if box[0] < hi[0] and box[3] > lo[0] and box[1] < hi[1] and box[4] > lo[1]:
                top = max(top, float(box[5]))
        hang = sim.finger_reach
        if sim.held is not None and sim._held.joint is None:
            hang = max(hang, float(a[2] - sim.model_box(sim.held)[2]))
        return min(max(top + hang + CLEARANCE, a[2], b[2]), sim.workspace.z[1])

    def _detour(self, q_goal: np.ndarray, pose: Pose | None, ignore: frozenset[str], blocked: str) -> None:
        sim = self.sim
        start = sim.tool_pose()
        saved = sim.q()
        sim._set_q(q_goal)
        goal = sim.tool_pose() if pose is None else pose
        sim._set_q(saved)
        a, b = np.array(start.position), np.array(goal.position)
        problem = "no detour found"
        for extra in (0.0, 0.15):
            z = min(self._transit_height(a, b, ignore) + extra, sim.workspace.z[1])
            try:
                up = self.cartesian_path([Pose((a[0], a[1], z), start.orientation)], saved)[0]
                q_up = up[-1] if up else saved
                above = self.ik(Pose((b[0], b[1], z), goal.orientation), q_up)
                if above is None:
                    raise PlanningError(f"the pose above the goal at z = {z:.3f} is not reachable")
                over = self.joint_path(q_up, above)
                down = self.cartesian_path([goal], above)[0] if pose is not None else self.joint_path(above, q_goal)
            except PlanningError as exc:
                problem = str(exc)
                continue
            path = up + over + down
            hit = self._check_path(path, ignore)
            if hit is None:
                sim.execute(path)
                return
            problem = f"the arm would collide with {hit}"
        path = self._sample_based(saved, q_goal, ignore)
        if path is not None:
            sim.execute(path)
            return
        raise PlanningError(f"no collision-free path to {np.round(b, 3).tolist()}: the direct path hits {blocked}; "
                            f"going over: {problem}; no sampled path either")

    def _sample_based(self, q0: np.ndarray, q1: np.ndarray, ignore: frozenset[str]) -> list[np.ndarray] | None:
        """RRT-Connect + shortcuts between two configurations; None when it finds nothing in its budget.

        As MoveIt plans with OMPL (the panda_moveit_config that RoboScript runs): a goal configuration in collision
        is refused at once (OMPL's goal tree has no valid root), and a start in collision -- the fingers within
        ``LOOSE_CLEARANCE`` of what they just let go of -- is first moved to a valid configuration nearby as the
        ``FixStartStateCollision`` request adapter does (``jiggle``); the path then starts with that step. The
        search is never run from an invalid start: before 2026-12-06 it was, and such searches were most of the
        ones that used the whole budget (10,000 rounds, ~3 s each)."""
        sim = self.sim
        saved = sim.q()
        obstacles = self._obstacles(ignore)
        held = sim._held
        saved_held = None
        if held is not None and held.joint is None:
            saved_held = sim.pb.getBasePositionAndOrientation(held.model.body, physicsClientId=sim.client)

        def free(a: np.ndarray, b: np.ndarray) -> bool:
            return all(self.collision(q, obstacles) is None for q in self.joint_path(a, b))

        rng = np.random.default_rng(0)
        try:
            if self.collision(q1, obstacles) is not None:
                return None
            start = q0
            if self.collision(q0, obstacles) is not None:
                start = jiggle(q0, lambda q: self.collision(q, obstacles) is None, sim.robot.lower,
                               sim.robot.upper, rng)
                if start is None:
                    return None
            waypoints = rrt_connect(start, q1, free, sim.robot.lower, sim.robot.upper, rng)
            if waypoints is None:
                return None
            waypoints = shortcut(waypoints, free, rng)
        finally:
            sim._set_q(saved)
            if saved_held is not None:
                sim.pb.resetBasePositionAndOrientation(held.model.body, *saved_held, physicsClientId=sim.client)
        if start is not q0:
            waypoints = [q0, *waypoints]   # the adapter's prefix: from where the arm is to the valid start
        path: list[np.ndarray] = []
        for a, b in zip(waypoints, waypoints[1:], strict=False):
            path += self.joint_path(a, b)
        return path
