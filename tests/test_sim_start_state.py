"""The sim planner's sample-based last resort never searches from an invalid configuration (issue #32): as MoveIt
plans with OMPL, a start in collision is first moved to a valid configuration nearby (MoveIt's
``FixStartStateCollision`` request adapter: ``sim_rrt.jiggle``) and the path begins with that step; a start no
jiggle frees, or a goal in collision, is refused at once instead of spending RRT-Connect's whole budget."""

from __future__ import annotations

import numpy as np
import pytest

from robot.backends import sim_motion
from robot.backends.sim import SimBackend
from robot.backends.sim_rrt import JIGGLE_FRACTION
from tasks.roboscript.eval import shapes
from tasks.roboscript.params import WorldsParams

pytestmark = pytest.mark.sim

BOX = "brown_box"
LINK = "panda_link5"
"""An arm link: it keeps ``LOOSE_CLEARANCE`` from loose objects under ``grasp: contact``."""


@pytest.fixture
def backend(catalog):
    backend = SimBackend(grasp="contact")
    backend.load_world(shapes.pick_place_trial(catalog[BOX], WorldsParams()).world)
    backend.reset(0)
    yield backend
    backend.close()


def _link(backend: SimBackend, name: str) -> int:
    pb = backend.pb
    for index in range(pb.getNumJoints(backend.robot.body, physicsClientId=backend.client)):
        if pb.getJointInfo(backend.robot.body, index, physicsClientId=backend.client)[12].decode() == name:
            return index
    raise AssertionError(name)


def _box_at_gap(backend: SimBackend, gap_m: float) -> None:
    """Move the box beside ``LINK`` of the arm as it stands, ``gap_m`` from it (negative: into it)."""
    pb, client = backend.pb, backend.client
    body, link = backend.sim_model(BOX).body, _link(backend, LINK)
    state = pb.getLinkState(backend.robot.body, link, computeForwardKinematics=True, physicsClientId=client)
    orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)[1]
    position = np.array(state[0]) + np.array([0.0, 0.0, 0.25])   # well away first, then closed in along the normal
    for _ in range(6):
        pb.resetBasePositionAndOrientation(body, position.tolist(), orientation, physicsClientId=client)
        points = pb.getClosestPoints(backend.robot.body, body, 1.0, linkIndexA=link, physicsClientId=client)
        nearest = min(points, key=lambda p: p[8])
        # contact normal points from the box (B) to the link (A): move the box along it by what is too much
        position = position + np.array(nearest[7]) * (nearest[8] - gap_m)
    pb.resetBasePositionAndOrientation(body, position.tolist(), orientation, physicsClientId=client)
    distance = min(p[8] for p in pb.getClosestPoints(backend.robot.body, body, 1.0, linkIndexA=link,
                                                      physicsClientId=client))
    assert abs(distance - gap_m) < 5e-4, distance


def _goal(backend: SimBackend) -> np.ndarray:
    goal = backend.q().copy()
    goal[0] += 1.2                                               # swing round the base, away from the box
    return np.clip(goal, backend.robot.lower, backend.robot.upper)


def _record_searches(monkeypatch) -> list[np.ndarray]:
    starts: list[np.ndarray] = []
    search = sim_motion.rrt_connect

    def recorded(start, goal, *args, **kwargs):
        starts.append(np.array(start))
        return search(start, goal, *args, **kwargs)

    monkeypatch.setattr(sim_motion, "rrt_connect", recorded)
    return starts


def test_a_start_within_the_clearance_is_jiggled_free_and_the_path_begins_there(backend, monkeypatch):
    _box_at_gap(backend, 0.002)                  # 2 mm from an arm link: inside LOOSE_CLEARANCE (5 mm)
    planner = backend.planner
    obstacles = planner._obstacles(frozenset())
    q0 = backend.q().copy()
    assert "within 5 mm" in (planner.collision(q0, obstacles) or "")   # the start is invalid, as the test needs
    backend._set_q(q0)
    starts = _record_searches(monkeypatch)
    goal = _goal(backend)
    before = backend.q()
    path = planner._sample_based(q0, goal, frozenset())
    assert np.array_equal(backend.q(), before)                           # the arm is left where it was
    assert path is not None and np.allclose(path[-1], goal)
    assert len(starts) == 1 and not np.array_equal(starts[0], q0)          # searched from elsewhere ...
    reach = (backend.robot.upper - backend.robot.lower) * JIGGLE_FRACTION
    assert np.all(np.abs(starts[0] - q0) <= reach + 1e-12)               # ... nearby, as the adapter samples
    assert planner.collision(starts[0], obstacles) is None               # ... and valid
    prefix = planner.joint_path(q0, starts[0])
    assert all(np.array_equal(a, b) for a, b in zip(path[: len(prefix)], prefix, strict=True))  # the first step
    after = path[len(prefix):]
    assert after and all(planner.collision(q, obstacles) is None for q in after)   # then a free path
    again = planner._sample_based(q0, goal, frozenset())                 # deterministic
    assert len(again) == len(path) and all(np.array_equal(a, b) for a, b in zip(again, path, strict=True))


def test_a_valid_start_is_searched_from_as_it_is(backend, monkeypatch):
    _box_at_gap(backend, 0.02)                   # 2 cm off: a valid start
    q0 = backend.q().copy()
    starts = _record_searches(monkeypatch)
    path = backend.planner._sample_based(q0, _goal(backend), frozenset())
    assert path is not None and len(starts) == 1 and np.array_equal(starts[0], q0)


def test_a_start_deep_in_collision_or_a_goal_in_collision_is_refused_without_a_search(backend, monkeypatch):
    planner = backend.planner
    q0 = backend.q().copy()
    starts = _record_searches(monkeypatch)
    checks = []
    collision = planner.collision
    monkeypatch.setattr(planner, "collision", lambda q, obstacles: checks.append(1) or collision(q, obstacles))

    _box_at_gap(backend, -0.03)                  # 3 cm into the arm: no configuration within the jiggle is free
    assert planner._sample_based(q0, _goal(backend), frozenset()) is None
    assert starts == [] and len(checks) <= 2 + 100 * len(q0)   # goal, start, then the adapter's samples only

    _box_at_gap(backend, 0.05)                   # the start is free now; the goal is where the box is
    checks.clear()
    pb, client = backend.pb, backend.client
    goal = _goal(backend)
    backend._set_q(goal)
    state = pb.getLinkState(backend.robot.body, _link(backend, LINK), computeForwardKinematics=True,
                            physicsClientId=client)
    body = backend.sim_model(BOX).body
    pb.resetBasePositionAndOrientation(body, list(state[0]), (0, 0, 0, 1), physicsClientId=client)
    backend._set_q(q0)
    assert planner.collision(goal, planner._obstacles(frozenset())) is not None
    checks.clear()
    assert planner._sample_based(q0, goal, frozenset()) is None
    assert starts == [] and len(checks) == 1
