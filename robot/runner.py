"""The runner node: an actionlib server that runs generated code on one robot.

    python -m robot.runner --ns /runner1 --backend sim [--arm panda] [--world-dir DIR] [--isolation auto]

It serves ``<ns>/run_episodes`` (type ``embp_robot/RunEpisodesAction``, robot/msgs.py): a goal is a JSON request
(robot/episode.py), feedback is published after every step (tool call) and at the end of every repeat, and the
result carries every repeat's outcome. A goal it cannot run (malformed JSON, unknown world, wrong arm) is aborted
with an error result; cancelling a goal kills the running code at once and stops the motion in progress, and the
result holds the repeats finished so far. One goal at a time: a new goal preempts the running one, so a pool never
sends a second goal to a busy runner.

If the ROS master goes away for longer than ``--master-grace`` seconds, the runner exits with status 3 and says so
(a pool restarts it once a master is back); rospy cannot re-register with a new master by itself.

Generated code runs in the sandbox (robot/sandbox/) with ``--isolation`` (``auto``: bubblewrap's namespaces; the
runner refuses to start, status 2, where they cannot be created; ``none``: without them, warned about on every
episode). The runner cancels a goal whose client has gone away (its node no longer answers), and a runner started
by a local pool (``--parent-pid``) exits when that process is gone.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from robot import ros_env

log = logging.getLogger("embp.runner")
EXIT_MASTER_GONE = 3
CLIENT_GRACE_S = 3.0
"""A goal whose client node has not answered for this long is cancelled."""


def _master_alive(caller_id: str) -> bool:
    """The master answers within 2 s (rosgraph's own proxy has no timeout: a half-dead master could hang it)."""
    from robot.client import master_up

    return master_up(os.environ.get("ROS_MASTER_URI", "http://localhost:11311"), timeout_s=2.0)


def _watch_master(caller_id: str, grace_s: float) -> None:
    lost_since = None
    while True:
        time.sleep(0.5)
        if _master_alive(caller_id):
            lost_since = None
            continue
        lost_since = lost_since or time.monotonic()
        if time.monotonic() - lost_since > grace_s:
            print(f"runner {caller_id}: the ROS master at {os.environ.get('ROS_MASTER_URI')} has been unreachable for "
                  f"{grace_s:g} s; exiting (status {EXIT_MASTER_GONE}) so that a supervisor can restart it.",
                  file=sys.stderr, flush=True)
            os._exit(EXIT_MASTER_GONE)


def _client_node(goal_id: str) -> str | None:
    """The node that sent a goal: actionlib's goal ids read ``<caller node>-<count>-<stamp>``."""
    parts = goal_id.rsplit("-", 2)
    return parts[0] if len(parts) == 3 and parts[0].startswith("/") else None


class ClientWatch:
    """A thread that tells whether the node that sent the current goal is still there: its XML-RPC server answers
    ``getPid`` (a node killed with SIGKILL stays registered on the master, but its server is gone)."""

    def __init__(self, caller_id: str, node: str | None, grace_s: float = CLIENT_GRACE_S, every_s: float = 0.5):
        self.caller_id, self.node, self.grace_s, self.every_s = caller_id, node, grace_s, every_s
        self.gone = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="embp-client-watch", daemon=True)

    def __enter__(self) -> ClientWatch:
        if self.node is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def _answers(self) -> bool:
        import rosgraph.masterapi

        from robot.client import master_up

        try:
            uri = rosgraph.masterapi.Master(self.caller_id).lookupNode(self.node)
        except rosgraph.masterapi.MasterError:
            return False  # the master does not know the node (any more)
        except Exception:  # noqa: BLE001 - the master itself is unreachable: the master watch handles that
            return True
        return master_up(uri, 1.0)  # any ROS node's XML-RPC server answers getPid

    def _watch(self) -> None:
        lost_since = None
        while not self._stop.wait(self.every_s):
            if self._answers():
                lost_since = None
                continue
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since >= self.grace_s:
                self.gone = True
                return


class RunnerNode:
    def __init__(self, ns: str, backend_name: str, arm: str, world_dir: Path | None, isolation: str = "auto"):
        from robot import sandbox
        from robot.backends import create_backend
        from robot.episode import EpisodeRunner

        self.ns = ns.rstrip("/") or "/runner"
        self.world_dir = world_dir
        sandbox.prepare(isolation)  # refuse to start without the isolation asked for; before rospy's threads
        self.episodes = EpisodeRunner(create_backend(backend_name, arm=arm), name=self.ns, isolation=isolation)
        self.msgs = None
        self.server = None

    def start(self) -> None:
        from robot import msgs

        self.msgs = msgs.load()
        import actionlib
        import rospy

        rospy.init_node(f"runner_{self.ns.strip('/').replace('/', '_')}", disable_signals=False)
        self.server = actionlib.SimpleActionServer(f"{self.ns}/run_episodes", self.msgs.Action,
                                                   execute_cb=self.execute, auto_start=False)
        self.server.start()
        rospy.set_param(f"{self.ns}/runner_info", json.dumps({
            "backend": self.episodes.backend.name, "arm": getattr(self.episodes.backend, "arm", None),
            "pid": os.getpid()}))
        print(f"runner {self.ns}: serving {self.ns}/run_episodes ({self.episodes.backend.name}, "
              f"{getattr(self.episodes.backend, 'arm', '?')}) on {os.environ.get('ROS_MASTER_URI')}", flush=True)

    def _finish(self, result: dict, how: str, text: str = "") -> None:
        message = self.msgs.Result(result_json=json.dumps(result))
        getattr(self.server, f"set_{how}")(message, text)

    def execute(self, goal) -> None:
        from robot.episode import error_result, parse_goal
        from robot.errors import GoalError

        try:
            parsed = parse_goal(goal.request_json, self.world_dir)
        except GoalError as exc:
            self._finish(error_result(str(exc), self.ns), "aborted", str(exc))
            return

        def feedback(record: dict) -> None:
            record = record | {"runner": self.ns}
            self.server.publish_feedback(self.msgs.Feedback(feedback_json=json.dumps(record, default=str)))

        import rospy

        goal_id = self.server.current_goal.get_goal_id().id if self.server.current_goal.goal else ""
        client = ClientWatch(rospy.get_name(), _client_node(goal_id))

        def should_stop() -> bool:
            return self.server.is_preempt_requested() or client.gone

        try:
            with client:
                result = self.episodes.run(parsed, on_feedback=feedback, should_stop=should_stop)
            if client.gone:
                print(f"runner {self.ns}: the client {client.node} of goal {parsed.episode_id} went away; the goal "
                      "was cancelled.", file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001 - a fault on the robot side: report it, keep serving
            traceback.print_exc()
            message = f"the runner failed: {type(exc).__name__}: {exc}"
            self._finish(error_result(message, self.ns, parsed.episode_id), "aborted", message)
            self.episodes._world_key = None  # rebuild the scene for the next goal
            return
        if result.get("cancelled"):
            why = "the client went away" if client.gone else "cancelled"
            self._finish(result, "preempted" if self.server.is_preempt_requested() else "aborted", why)
        elif not result["ok"]:
            self._finish(result, "aborted", result["error"])
        else:
            self._finish(result, "succeeded")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot.runner", description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="/runner1", help="namespace of the action (default /runner1)")
    parser.add_argument("--backend", default="sim", help="robot backend: sim | moveit")
    parser.add_argument("--arm", default="panda", choices=["panda", "ur5"])
    parser.add_argument("--world-dir", default=None, help="folder that relative world_file paths start from")
    parser.add_argument("--master-grace", type=float, default=10.0,
                        help="seconds without a master before exiting with status 3")
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "none"],
                        help="how generated code is confined: auto|bwrap (bubblewrap namespaces; refuse to start "
                             "without them), none (no namespaces; every episode warns)")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process (a local pool's) is gone")
    args, _ros_remaps = parser.parse_known_args(argv)
    if args.parent_pid is not None:
        from robot import lifetime

        lifetime.watch_parent(args.parent_pid, f"runner {args.ns}")
    from core.errors import PipelineError

    try:
        from robot import sandbox

        sandbox.prepare(args.isolation)  # first: no ROS, no simulator for a runner that may not run code
    except PipelineError as exc:
        print(f"runner {args.ns}: refusing to start: {exc.paragraph()}", file=sys.stderr, flush=True)
        return 2
    ros_env.activate()
    try:
        node = RunnerNode(args.ns, args.backend, args.arm, Path(args.world_dir) if args.world_dir else None,
                          args.isolation)
        node.start()
    except PipelineError as exc:
        print(f"runner {args.ns}: {exc.paragraph()}", file=sys.stderr)
        return 2
    import rospy

    threading.Thread(target=_watch_master, args=(rospy.get_name(), args.master_grace), daemon=True).start()
    rospy.spin()
    return 0


if __name__ == "__main__":
    sys.exit(main())
