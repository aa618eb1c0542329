"""The IK solver keeps its seed attempts (robot/backends/sim_ik.py, issue #32): an attempt solved again -- the same
arm, base, fingers, pose and start -- gives the joints it gave, and sets the arm to the same joints in the same order
as computing it did, so the simulation after it is the same (PyBullet's contact caches depend on where the links
have been). Solves with the kept attempts and without them give the same results."""

from __future__ import annotations

import numpy as np
import pytest

from robot.backends import sim_ik
from robot.backends.sim import SimBackend
from robot.contract.tool_api import Pose
from tasks.roboscript.eval import shapes
from tasks.roboscript.params import WorldsParams

pytestmark = pytest.mark.sim

BOX = "brown_box"
POSES = [Pose((0.45, -0.1, 0.95), (1.0, 0.0, 0.0, 0.0)),        # reachable, top-down
         Pose((0.35, 0.2, 1.05), (0.0, 1.0, 0.0, 0.0)),
         Pose((1.6, 0.0, 0.9), (1.0, 0.0, 0.0, 0.0))]           # out of reach: every seed fails


@pytest.fixture
def backend(catalog):
    sim_ik.forget_attempts()
    backend = SimBackend(grasp="contact")
    backend.load_world(shapes.pick_place_trial(catalog[BOX], WorldsParams()).world)
    backend.reset(0)
    yield backend
    backend.close()
    sim_ik.forget_attempts()


def _recording(backend, monkeypatch) -> list[bytes]:
    settings: list[bytes] = []
    original = backend._set_q
    monkeypatch.setattr(backend, "_set_q", lambda q: settings.append(np.asarray(q, float).tobytes()) or original(q))
    return settings


def _solve_all(backend, restarts: int) -> list[np.ndarray | None]:
    solver = backend.planner.solver
    return [solver.solve(pose, backend.q(), restarts) for pose in POSES]


def _same(a: list, b: list) -> bool:
    return all((x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
               for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("restarts", [0, 3])
def test_a_kept_attempt_gives_the_same_joints_and_replays_the_same_settings(backend, monkeypatch, restarts):
    settings = _recording(backend, monkeypatch)
    first = _solve_all(backend, restarts)
    computed = list(settings)
    settings.clear()
    again = _solve_all(backend, restarts)              # every attempt kept now
    assert _same(first, again)
    assert settings == computed                        # the arm went through the same joints, in the same order
    assert first[0] is not None and first[-1] is None  # the cases the test means: one found, one unreachable


def test_kept_attempts_are_shared_by_simulators_of_the_same_arm_and_match_fresh_ones(backend, catalog):
    first = _solve_all(backend, 3)
    twin = backend.twin()                              # another physics client: the attempts are the process's
    twin.load_world(shapes.pick_place_trial(catalog[BOX], WorldsParams()).world)
    twin.reset(0)
    try:
        calls = []
        dls = twin.planner.solver._dls
        twin.planner.solver._dls = lambda pose, q: calls.append(1) or dls(pose, q)
        assert _same(first, _solve_all(twin, 3)) and not calls          # nothing computed again
        sim_ik.forget_attempts()
        assert _same(first, _solve_all(twin, 3)) and calls              # computed afresh: the same joints
    finally:
        twin.close()


def test_the_finger_opening_is_part_of_what_an_attempt_is_kept_under(backend):
    solver = backend.planner.solver
    solver.solve(POSES[0], backend.q(), 0)
    kept = len(sim_ik._ATTEMPTS)
    backend._set_fingers(0.01)                         # another opening: another attempt
    solver.solve(POSES[0], backend.q(), 0)
    assert len(sim_ik._ATTEMPTS) == kept + 1
