"""RRT-Connect in joint space with shortcut smoothing: the planner of last resort when neither the straight joint
path nor the "up, over and down" detour is collision-free (an arm reaching round a cabinet's corner)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Config = np.ndarray


class _Tree:
    def __init__(self, root: Config):
        self.nodes = [root]
        self.parents = [-1]
        # the nodes as rows of one array, grown by doubling: ``nearest`` ran np.array(self.nodes) on every call,
        # a copy of the whole tree per extend (a tenth of a failing drawer plan's 10,000 rounds); the same rows, the
        # same distances, the same choice
        self._rows = np.empty((16, len(root)), dtype=float)
        self._rows[0] = root

    def nearest(self, q: Config) -> int:
        return int(np.argmin(np.linalg.norm(self._rows[: len(self.nodes)] - q, axis=1)))

    def add(self, q: Config, parent: int) -> int:
        n = len(self.nodes)
        if n == len(self._rows):
            self._rows = np.concatenate([self._rows, np.empty_like(self._rows)])
        self._rows[n] = q
        self.nodes.append(q)
        self.parents.append(parent)
        return n

    def path_to(self, index: int) -> list[Config]:
        out = []
        while index != -1:
            out.append(self.nodes[index])
            index = self.parents[index]
        return out[::-1]


#: RRT-Connect's budget in extend rounds: ~0.7 ms each in the PyBullet sim (7 s on an idle core); the hardest
#: default plan needs about 6,400.
MAX_ITERATIONS = 10_000


def rrt_connect(start: Config, goal: Config, segment_free: Callable[[Config, Config], bool],
                lower: np.ndarray, upper: np.ndarray, rng: np.random.Generator, step: float = 0.2,
                max_iterations: int = MAX_ITERATIONS, goal_bias: float = 0.1) -> list[Config] | None:
    """Waypoints from start to goal whose straight segments are all free, or None after ``max_iterations``.

    The budget is a count, not a clock: the same seed gives the same path (or the same failure) on any machine at
    any load. (It was a 4 s wall-clock limit: a drawer plan that takes 6,400 iterations, 3.5 s on an idle core,
    failed on a busy machine and the perception ablation's numbers moved between two runs of the same inputs.)"""
    from_start, from_goal = _Tree(start), _Tree(goal)
    a, b = from_start, from_goal  # the tree that grows this round, and the one that tries to reach it
    for _ in range(max_iterations):
        target = goal if (a is from_start and rng.random() < goal_bias) else rng.uniform(lower, upper)
        new = _extend(a, target, segment_free, step)
        if new is not None:
            reached = _connect(b, a.nodes[new], segment_free, step)
            if reached is not None:
                # the trees alternate roles: the path always runs from the start tree's root to the goal tree's
                i_start, i_goal = (new, reached) if a is from_start else (reached, new)
                return from_start.path_to(i_start) + from_goal.path_to(i_goal)[::-1][1:]
        a, b = b, a
    return None


#: MoveIt's ``FixStartStateCollision`` defaults (moveit_ros/planning/planning_request_adapter_plugins): each joint
#: is sampled within this fraction of its range around the start, for at most this many rounds over the joints.
JIGGLE_FRACTION = 0.02
JIGGLE_ATTEMPTS = 100


def jiggle(start: Config, valid: Callable[[Config], bool], lower: np.ndarray, upper: np.ndarray,
           rng: np.random.Generator, fraction: float = JIGGLE_FRACTION,
           attempts: int = JIGGLE_ATTEMPTS) -> Config | None:
    """A valid configuration near an invalid ``start``, or None: what MoveIt's ``FixStartStateCollision`` adapter
    does before OMPL plans. Round after round, joint after joint, one joint is moved to a uniform sample within
    ``fraction`` of its range around its start value (inside its limits), keeping the other joints' last samples,
    and the configuration is checked after each move; the first valid one is returned."""
    start = np.asarray(start, dtype=float)
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    reach = (upper - lower) * fraction
    low, high = np.maximum(lower, start - reach), np.minimum(upper, start + reach)
    q = start.copy()
    for _ in range(attempts):
        for joint in range(len(q)):
            q[joint] = rng.uniform(low[joint], high[joint])
            if valid(q):
                return q.copy()
    return None


def _extend(tree: _Tree, target: Config, segment_free, step: float) -> int | None:
    near = tree.nearest(target)
    q_near = tree.nodes[near]
    delta = target - q_near
    dist = float(np.linalg.norm(delta))
    q_new = target if dist <= step else q_near + delta / dist * step
    if not segment_free(q_near, q_new):
        return None
    return tree.add(q_new, near)


def _connect(tree: _Tree, target: Config, segment_free, step: float) -> int | None:
    while True:
        index = _extend(tree, target, segment_free, step)
        if index is None:
            return None
        if np.allclose(tree.nodes[index], target):
            return index


def shortcut(path: list[Config], segment_free: Callable[[Config, Config], bool], rng: np.random.Generator,
             tries: int = 40) -> list[Config]:
    path = list(path)
    for _ in range(tries):
        if len(path) < 3:
            break
        i, j = sorted(rng.choice(len(path), size=2, replace=False))
        if j - i < 2:
            continue
        if segment_free(path[i], path[j]):
            path = path[: i + 1] + path[j:]
    return path
