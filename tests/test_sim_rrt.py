"""RRT-Connect and shortcutting of the sim planner (robot/backends/sim_rrt.py) on a 2-D joint space with a wall:
every path runs from the start to the goal through free segments, whichever tree made the connection."""

from __future__ import annotations

import numpy as np
import pytest

from robot.backends.sim_rrt import rrt_connect, shortcut

LOWER, UPPER = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
WALL = (-0.05, -0.8, 0.05, 1.0)  # x0, y0, x1, y1: a wall between start and goal with a gap at the bottom


def _free_point(q: np.ndarray) -> bool:
    return not (WALL[0] <= q[0] <= WALL[2] and WALL[1] <= q[1] <= WALL[3])


def _segment_free(a: np.ndarray, b: np.ndarray) -> bool:
    return all(_free_point(a + t * (b - a)) for t in np.linspace(0.0, 1.0, 25))


@pytest.mark.parametrize("seed", range(12))
def test_paths_run_from_the_start_to_the_goal_round_the_wall(seed):
    start, goal = np.array([-0.6, 0.5]), np.array([0.6, 0.5])
    rng = np.random.default_rng(seed)
    path = rrt_connect(start, goal, _segment_free, LOWER, UPPER, rng, step=0.1)
    assert path is not None
    assert np.allclose(path[0], start) and np.allclose(path[-1], goal)  # not reversed, whichever tree connected
    assert all(_segment_free(a, b) for a, b in zip(path, path[1:], strict=False))
    assert min(q[1] for q in path) < WALL[1]  # it went through the gap
    smooth = shortcut(path, _segment_free, rng)
    assert np.allclose(smooth[0], start) and np.allclose(smooth[-1], goal) and len(smooth) <= len(path)
    assert all(_segment_free(a, b) for a, b in zip(smooth, smooth[1:], strict=False))


def test_no_seed_gives_a_path_that_starts_at_the_goal():
    """The regression this guards: when the goal's tree made the connection, the path used to come out from the
    goal to the start, and the arm drove to its target and back."""
    start, goal = np.array([-0.6, 0.5]), np.array([0.6, 0.5])
    firsts = set()
    for seed in range(12):
        path = rrt_connect(start, goal, _segment_free, LOWER, UPPER, np.random.default_rng(seed), step=0.1)
        firsts.add(tuple(np.round(path[0], 6)))
    assert firsts == {tuple(start)}


def test_an_enclosed_goal_is_none_within_the_iteration_budget():
    boxed = lambda a, b: _segment_free(a, b) and all(  # noqa: E731 - a goal inside a closed square
        not (0.4 <= p[0] <= 0.8 and 0.3 <= p[1] <= 0.7) or (0.45 < p[0] < 0.75 and 0.35 < p[1] < 0.65)
        for p in (a + t * (b - a) for t in np.linspace(0.0, 1.0, 25)))
    path = rrt_connect(np.array([-0.6, 0.5]), np.array([0.6, 0.5]), boxed, LOWER, UPPER,
                       np.random.default_rng(0), step=0.1, max_iterations=500)
    assert path is None


def test_the_same_seed_gives_the_same_path_whatever_the_machine_load():
    """The budget counts iterations, so a plan is a function of its inputs and seed (no clock in it)."""
    import time

    start, goal = np.array([-0.6, 0.5]), np.array([0.6, 0.5])

    def slow_segment_free(a, b):
        time.sleep(0.0005)   # a loaded machine: every collision check takes longer
        return _segment_free(a, b)

    fast = rrt_connect(start, goal, _segment_free, LOWER, UPPER, np.random.default_rng(3), step=0.1)
    slow = rrt_connect(start, goal, slow_segment_free, LOWER, UPPER, np.random.default_rng(3), step=0.1)
    assert fast is not None and len(fast) == len(slow) and all(np.array_equal(a, b) for a, b in zip(fast, slow))


def test_the_tree_s_nearest_node_is_the_one_the_whole_list_gives():
    """The tree keeps its nodes in a growing array for ``nearest``; the choice must be the one the list of nodes
    gives (the first of equals too), past every growth of the array."""
    from robot.backends.sim_rrt import _Tree

    rng = np.random.default_rng(3)
    tree = _Tree(np.array([0.0, 0.0, 0.0]))
    for i in range(200):
        q = rng.uniform(-1, 1, 3) if i % 7 else tree.nodes[int(rng.integers(len(tree.nodes)))].copy()  # duplicates
        target = rng.uniform(-1, 1, 3)
        expected = int(np.argmin(np.linalg.norm(np.array(tree.nodes) - target, axis=1)))
        assert tree.nearest(target) == expected
        assert tree.add(q, expected) == len(tree.nodes) - 1
    assert np.array_equal(tree._rows[: len(tree.nodes)], np.array(tree.nodes))


# ---------------------------------------------------------------------------------------------- start in collision

from robot.backends.sim_rrt import JIGGLE_ATTEMPTS, JIGGLE_FRACTION, jiggle  # noqa: E402 - the section's subject


def test_jiggle_finds_a_valid_configuration_within_the_fraction_of_each_joint_s_range():
    """MoveIt's FixStartStateCollision: each joint sampled within 0.02 of its range around the start, inside the
    limits; the first valid configuration is taken."""
    start = np.array([0.03, 0.5])                 # inside the wall (|x| <= 0.05), 2 cm from its side
    assert not _free_point(start)
    q = jiggle(start, _free_point, LOWER, UPPER, np.random.default_rng(0))
    assert q is not None and _free_point(q)
    assert np.all(np.abs(q - start) <= (UPPER - LOWER) * JIGGLE_FRACTION + 1e-12)
    assert np.array_equal(q, jiggle(start, _free_point, LOWER, UPPER, np.random.default_rng(0)))  # seeded


def test_jiggle_keeps_to_the_joint_limits():
    start = np.array([1.0, -1.0])                 # at a corner of the limits, inside a box that covers it
    corner = lambda q: not (q[0] > 0.99 and q[1] < -0.99)  # noqa: E731 - free only off the very corner
    for seed in range(20):
        q = jiggle(start, corner, LOWER, UPPER, np.random.default_rng(seed))
        assert q is not None and np.all(q >= LOWER) and np.all(q <= UPPER)


def test_jiggle_gives_up_after_its_attempts_when_nothing_nearby_is_valid():
    calls = []

    def never(q):
        calls.append(q.copy())
        return False

    assert jiggle(np.array([0.0, 0.5]), never, LOWER, UPPER, np.random.default_rng(0)) is None
    assert len(calls) == JIGGLE_ATTEMPTS * 2      # one check after each joint's sample, as the adapter does
