"""Talking to runners: the ROS node of a client process, runner discovery, one goal at a time per runner, and a
pool that spreads goals over runners and survives runners that die.

``rospy.init_node`` can run once per process and binds the process to one master: :func:`ensure_node` makes that
explicit and refuses a second, different master with a clear error.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import xmlrpc.client
from collections.abc import Callable
from typing import Any

from core.errors import PipelineError
from robot import ros_env
from robot.episode import error_result

STATUS_TIMEOUT_S = 5.0
"""A runner that publishes no action status for this long (it does at 5 Hz) is taken for dead."""

_NODE_MASTER: str | None = None


class RunnerDied(PipelineError):
    """The runner serving a goal went away before answering (process killed, host down, master lost)."""


def master_pid(uri: str, timeout_s: float = 2.0) -> int | None:
    """The process id of the ROS master answering at ``uri``, or None when none answers."""
    class _Transport(xmlrpc.client.Transport):
        def make_connection(self, host):
            conn = super().make_connection(host)
            conn.timeout = timeout_s
            return conn

    try:
        code, _, pid = xmlrpc.client.ServerProxy(uri, transport=_Transport()).getPid("/embp_probe")
        return int(pid) if code == 1 else None
    except (OSError, ValueError, TypeError, xmlrpc.client.Error):
        return None


def master_up(uri: str, timeout_s: float = 2.0) -> bool:
    return master_pid(uri, timeout_s) is not None


def ensure_node(master_uri: str, name: str = "embp_client") -> None:
    """Initialise this process's ROS node against ``master_uri`` (once); a second, different master is an error."""
    global _NODE_MASTER
    ros_env.activate()
    if _NODE_MASTER is not None:
        if _NODE_MASTER != master_uri:
            raise PipelineError(f"this process's ROS node already talks to {_NODE_MASTER}; it cannot switch to "
                                f"{master_uri} (rospy allows one node per process).",
                                hint="Use one master per process, or run the second evaluation in a new process.")
        return
    if not master_up(master_uri):
        raise PipelineError(f"no ROS master answers at {master_uri}.",
                            hint="Start runners with `python -m robot.pool --runners N` (it starts a master), or "
                                 "point roboscript.eval.master_uri at a running one.")
    os.environ["ROS_MASTER_URI"] = master_uri
    if not os.environ.get("ROS_HOME"):  # rospy's log files: not into ~/.ros of whoever runs the evaluation
        import tempfile

        os.environ["ROS_HOME"] = os.path.join(tempfile.gettempdir(), f"embp-ros-home-{os.getuid()}")
    host = master_uri.split("//", 1)[-1].split(":", 1)[0]
    if host in ("localhost", "127.0.0.1") and not (os.environ.get("ROS_HOSTNAME") or os.environ.get("ROS_IP")):
        os.environ["ROS_HOSTNAME"] = "localhost"  # a local pool: keep every connection on the loopback
    import rospy

    rospy.init_node(name, anonymous=True, disable_signals=True)
    _NODE_MASTER = master_uri


def discover(master_uri: str) -> list[str]:
    """Namespaces of the runners registered on a master (every ``<ns>/run_episodes`` action server)."""
    ros_env.activate()
    import rosgraph

    try:
        topics = rosgraph.Master("/embp_discover", master_uri=master_uri).getPublishedTopics("")
    except Exception as exc:  # noqa: BLE001 - connection refused, XML-RPC fault
        raise PipelineError(f"cannot list the runners on {master_uri}: {exc}.") from None
    suffix = "/run_episodes/status"
    return sorted(t[: -len(suffix)] for t, kind in topics
                  if t.endswith(suffix) and kind == "actionlib_msgs/GoalStatusArray")


class RunnerClient:
    """One runner's action: send a goal, stream its feedback, wait for its result, cancel it."""

    def __init__(self, ns: str, alive: Callable[[], bool] | None = None,
                 status_timeout_s: float = STATUS_TIMEOUT_S):
        import actionlib

        from robot import msgs

        self.ns = ns
        self.msgs = msgs.load()
        self.alive = alive
        self.status_timeout_s = status_timeout_s
        self.last_status = time.monotonic()
        outer = self

        class _Tracked(actionlib.ActionClient):
            def _status_cb(self, msg):  # noqa: N802 - actionlib's name
                outer.last_status = time.monotonic()
                super()._status_cb(msg)

        self.client = _Tracked(f"{ns}/run_episodes", self.msgs.Action)

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        import rospy

        ok = self.client.wait_for_server(rospy.Duration(timeout_s))
        self.last_status = time.monotonic()
        return bool(ok)

    def run(self, request: dict | str, on_feedback: Callable[[dict], None] | None = None,
            should_cancel: Callable[[], bool] | None = None, timeout_s: float | None = None) -> dict:
        """Send one goal (a dict, or JSON text as is) and wait for its result (a dict, robot/episode.py); cancel it
        when ``should_cancel`` says so or after ``timeout_s``. Raises RunnerDied."""
        from actionlib.action_client import CommState, get_name_of_constant
        from actionlib_msgs.msg import GoalStatus

        done = threading.Event()

        def transition(handle) -> None:
            if handle.get_comm_state() == CommState.DONE:
                done.set()

        def feedback(_handle, message) -> None:
            if on_feedback is not None:
                try:
                    on_feedback(json.loads(message.feedback_json))
                except Exception:  # noqa: BLE001 - a consumer's error must not stop the goal
                    pass

        self.last_status = time.monotonic()
        text = request if isinstance(request, str) else json.dumps(request)
        handle = self.client.send_goal(self.msgs.Goal(request_json=text), transition, feedback)
        started, cancelled = time.monotonic(), False
        while not done.wait(0.1):
            now = time.monotonic()
            if not cancelled and ((should_cancel is not None and should_cancel())
                                  or (timeout_s is not None and now - started > timeout_s)):
                handle.cancel()
                cancelled = True
            if self.alive is not None and not self.alive():
                raise RunnerDied(f"runner {self.ns} exited while running a goal.")
            if now - self.last_status > self.status_timeout_s:
                raise RunnerDied(f"runner {self.ns} stopped answering (no action status for "
                                 f"{self.status_timeout_s:g} s).")
        terminal = get_name_of_constant(GoalStatus, handle.get_terminal_state())
        message = handle.get_result()
        if message is None:
            return error_result(f"runner {self.ns} ended the goal ({terminal}) without a result.", self.ns)
        result = json.loads(message.result_json)
        result["goal_state"] = terminal
        return result


class RunnerPool:
    """Goals spread over runners: each runner serves one goal at a time; a goal whose runner dies goes to the next
    free runner (up to ``max_retries`` times), and the dead runner is restarted when ``restart`` is given."""

    def __init__(self, namespaces: list[str], alive: Callable[[str], bool] | None = None,
                 restart: Callable[[str], bool] | None = None, max_retries: int = 2,
                 status_timeout_s: float = STATUS_TIMEOUT_S, ready_timeout_s: float = 60.0):
        if not namespaces:
            raise PipelineError("the runner pool is empty: no runner namespaces given or found.")
        self.namespaces = list(namespaces)
        self.max_retries = max_retries
        self.restart = restart
        self.clients = {ns: RunnerClient(ns, (lambda ns=ns: alive(ns)) if alive else None, status_timeout_s)
                        for ns in namespaces}
        self._idle: queue.Queue[str] = queue.Queue()
        self._lock = threading.Lock()
        self._dead: set[str] = set()
        self._restarting: set[str] = set()
        unready = [ns for ns, c in self.clients.items() if not c.wait_ready(ready_timeout_s)]
        for ns in namespaces:
            if ns in unready:
                self._dead.add(ns)
            else:
                self._idle.put(ns)
        if len(unready) == len(namespaces):
            raise PipelineError(f"no runner answered within {ready_timeout_s:g} s: {', '.join(unready)}.")

    @property
    def size(self) -> int:
        return len(self.namespaces)

    def _acquire(self) -> str | None:
        while True:
            try:
                return self._idle.get(timeout=0.2)
            except queue.Empty:
                with self._lock:
                    if len(self._dead) == len(self.namespaces) and not self._restarting:
                        return None

    def _lost(self, ns: str) -> None:
        with self._lock:
            self._dead.add(ns)
            if self.restart is None:
                return
            self._restarting.add(ns)

        def bring_back() -> None:
            ok = False
            try:
                ok = self.restart(ns) and self.clients[ns].wait_ready(60.0)
            finally:
                with self._lock:
                    self._restarting.discard(ns)
                    if ok:
                        self._dead.discard(ns)
                if ok:
                    self._idle.put(ns)

        threading.Thread(target=bring_back, daemon=True).start()

    def run(self, request: dict, on_feedback: Callable[[dict], None] | None = None) -> dict:
        """Run one goal on the next free runner; never raises for a runner's failure (the result says it)."""
        errors: list[str] = []
        for attempt in range(1, self.max_retries + 2):
            ns = self._acquire()
            if ns is None:
                errors.append("no runner is alive")
                break
            try:
                result = self.clients[ns].run(request, on_feedback)
            except RunnerDied as exc:
                errors.append(str(exc))
                self._lost(ns)
                continue
            except Exception as exc:  # noqa: BLE001 - a client-side fault: keep the runner, report the goal
                self._idle.put(ns)
                return error_result(f"sending the goal to {ns} failed: {type(exc).__name__}: {exc}", ns,
                                    request.get("episode_id")) | {"attempts": attempt, "runner_errors": errors}
            self._idle.put(ns)
            result["attempts"] = attempt
            result["runner_errors"] = errors
            return result
        return error_result("the episode could not be run: " + "; ".join(errors), "",
                            request.get("episode_id")) | {"attempts": len(errors), "runner_errors": errors}

    def alive_count(self) -> int:
        with self._lock:
            return len(self.namespaces) - len(self._dead)

    def __repr__(self) -> str:
        return f"RunnerPool({self.namespaces}, dead={sorted(self._dead)})"


def run_many(pool: RunnerPool, requests: list[dict], on_result: Callable[[int, dict], Any] | None = None,
             on_feedback: Callable[[dict], None] | None = None) -> list[dict]:
    """Run every request with ``pool.size`` goals in flight (one per runner); results in request order."""
    results: list[dict | None] = [None] * len(requests)
    jobs: queue.Queue[int] = queue.Queue()
    for i in range(len(requests)):
        jobs.put(i)

    def worker() -> None:
        while True:
            try:
                i = jobs.get_nowait()
            except queue.Empty:
                return
            results[i] = pool.run(requests[i], on_feedback)
            if on_result is not None:
                on_result(i, results[i])

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(pool.size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]
