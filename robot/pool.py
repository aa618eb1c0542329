"""A local pool of simulated runners: a ROS master (unless one is given) and N runner processes.

    python -m robot.pool --runners 2 [--port 11311] [--backend sim] [--arm panda] [--isolation auto]

prints the master URI and the runners' namespaces (/runner1 ... /runnerN) and supervises them until Ctrl-C: a
runner that exits is restarted, and so is the master. The evaluation flow starts the same pool in-process
(:class:`LocalPool`) when no ``master_uri`` is configured. Runners on other hosts or real robots join a master with
``ROS_MASTER_URI=http://<master-host>:11311 python -m robot.runner --ns /franka --backend moveit``.

A local pool lives and dies with the process that started it, whatever kills that process: the master and the
runners get the parent-death signal (SIGKILL; set from one long-lived thread, robot/lifetime.py), the runners also
watch their parent, and a runner's sandbox dies with the runner.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.errors import PipelineError
from robot import lifetime, ros_env
from robot.client import master_pid, master_up

READY_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ros_process_env(master_uri: str, log_dir: Path) -> dict[str, str]:
    ros_env.activate()
    env = dict(os.environ)
    env.update(ROS_MASTER_URI=master_uri, ROS_HOSTNAME=env.get("ROS_HOSTNAME", "localhost"),
               ROS_LOG_DIR=str(log_dir), ROS_HOME=str(log_dir), PYTHONUNBUFFERED="1")
    return env


def start_master(port: int, log_dir: Path) -> tuple[subprocess.Popen, str]:
    """``rosmaster --core -p PORT``; returns the process and its URI once it answers. The master must be this one
    (its pid): a port another pool took between :func:`free_port` and the bind (stages run side by side) is an
    error here, never a pool joining another pool's master."""
    uri = f"http://localhost:{port}/"
    log = open(log_dir / f"rosmaster-{port}.log", "ab")  # noqa: SIM115 - lives as long as the process
    try:
        process = lifetime.spawn(["rosmaster", "--core", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                 env=ros_process_env(uri, log_dir), start_new_session=True)
    except FileNotFoundError:
        raise PipelineError("`rosmaster` is not installed.", hint=ros_env.RosUnavailable.hint) from None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if master_pid(uri, 0.5) == process.pid:
            return process, uri
        if process.poll() is not None:
            break
        time.sleep(0.1)
    stop_process(process)
    raise PipelineError(f"the ROS master on port {port} did not start; see {log_dir / f'rosmaster-{port}.log'}.")


def start_local_master(log_dir: Path, tries: int = 3) -> tuple[subprocess.Popen, str]:
    """A master of our own on a free port, another port if that one was taken before the master bound it."""
    for _ in range(tries - 1):
        with contextlib.suppress(PipelineError):
            return start_master(free_port(), log_dir)
    return start_master(free_port(), log_dir)       # the last try's error is the one reported


def stop_process(process: subprocess.Popen | None, grace_s: float = 5.0) -> None:
    """SIGTERM the process's group (runner + its sandbox fork server), SIGKILL after ``grace_s``."""
    if process is None or process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def published(master_uri: str, topic: str) -> bool:
    import rosgraph

    try:
        topics = rosgraph.Master("/embp_pool", master_uri=master_uri).getPublishedTopics("")
    except Exception:  # noqa: BLE001 - the master is starting or gone
        return False
    return any(t == topic for t, _ in topics)


class LocalPool:
    """Master + N runner processes on this machine. A context manager: everything it started stops on exit."""

    def __init__(self, runners: int, backend: str = "sim", arm: str = "panda", master_uri: str | None = None,
                 log_dir: Path | None = None, prefix: str = "/runner", master_grace_s: float = 10.0,
                 isolation: str | None = None):
        """``isolation``: the runners' sandbox (``auto`` / ``bwrap`` / ``none``; None: this process's, see
        robot.sandbox.configure)."""
        if runners < 1:
            raise PipelineError("a pool needs at least one runner.")
        from robot.sandbox import default_mode
        from robot.sandbox import isolation as modes

        self.n, self.backend, self.arm = runners, backend, arm
        self.isolation = modes.check_mode(isolation or default_mode())
        self.master_uri = master_uri
        self._tmp = None if log_dir else tempfile.TemporaryDirectory(prefix="embp-pool-")
        self.log_dir = Path(log_dir) if log_dir else Path(self._tmp.name)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.namespaces = [f"{prefix}{i}" for i in range(1, runners + 1)]
        self.master: subprocess.Popen | None = None
        self.processes: dict[str, subprocess.Popen] = {}
        self.master_grace_s = master_grace_s

    def __enter__(self) -> LocalPool:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        from robot.sandbox import isolation

        isolation.resolve(self.isolation)  # refuse before starting anything: IsolationUnavailable names the setting
        if self.master_uri is None:
            self.master, self.master_uri = start_local_master(self.log_dir)
        elif not master_up(self.master_uri):
            raise PipelineError(f"no ROS master answers at {self.master_uri}.")
        for ns in self.namespaces:
            self._spawn(ns)
        for ns in self.namespaces:
            self._wait_ready(ns)

    def _spawn(self, ns: str) -> None:
        log = open(self.log_dir / f"{ns.strip('/').replace('/', '_')}.log", "ab")  # noqa: SIM115
        cmd = [sys.executable, "-m", "robot.runner", "--ns", ns, "--backend", self.backend, "--arm", self.arm,
               "--master-grace", str(self.master_grace_s), "--isolation", self.isolation,
               "--parent-pid", str(os.getpid())]
        self.processes[ns] = lifetime.spawn(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env=ros_process_env(self.master_uri, self.log_dir))

    def _wait_ready(self, ns: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if published(self.master_uri, f"{ns}/run_episodes/status"):
                return
            if self.processes[ns].poll() is not None:
                break
            time.sleep(0.2)
        raise PipelineError(f"runner {ns} did not come up; its log: {self.log_path(ns)}:\n"
                            + self.log_path(ns).read_text(errors="replace")[-2000:])

    def log_path(self, ns: str) -> Path:
        return self.log_dir / f"{ns.strip('/').replace('/', '_')}.log"

    def alive(self, ns: str) -> bool:
        process = self.processes.get(ns)
        return process is not None and process.poll() is None

    def kill(self, ns: str) -> None:
        """SIGKILL a runner (tests: a runner that dies mid-episode)."""
        process = self.processes[ns]
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)

    def restart(self, ns: str) -> bool:
        stop_process(self.processes.get(ns), grace_s=2.0)
        self._spawn(ns)
        try:
            self._wait_ready(ns)
        except PipelineError:
            return False
        return True

    def stop(self) -> None:
        for process in self.processes.values():
            stop_process(process, grace_s=3.0)
        stop_process(self.master)
        self.master = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot.pool", description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--port", type=int, default=None, help="master port (default: a free one)")
    parser.add_argument("--master-uri", default=None, help="join this master instead of starting one")
    parser.add_argument("--backend", default="sim")
    parser.add_argument("--arm", default="panda", choices=["panda", "ur5"])
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "none"],
                        help="how the runners confine generated code (docs/robot.md, Sandbox)")
    args = parser.parse_args(argv)
    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="embp-pool-"))
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pool = LocalPool(args.runners, args.backend, args.arm, args.master_uri, log_dir, isolation=args.isolation)
    try:
        if args.port and not args.master_uri:
            pool.master, pool.master_uri = start_master(args.port, log_dir)
        pool.start()
        print(f"export ROS_MASTER_URI={pool.master_uri}\nrunners: {' '.join(pool.namespaces)}\nlogs: {log_dir}",
              flush=True)
        while not stopping:
            time.sleep(1.0)
            if pool.master is not None and pool.master.poll() is not None:
                port = int(pool.master_uri.rstrip("/").rsplit(":", 1)[1])
                print(f"the master exited; restarting it on port {port}", flush=True)
                pool.master, _ = start_master(port, log_dir)
            for ns in pool.namespaces:
                if not stopping and not pool.alive(ns):
                    print(f"runner {ns} exited (status {pool.processes[ns].returncode}); restarting it", flush=True)
                    pool.restart(ns)
    except PipelineError as exc:
        print(f"pool: {exc.paragraph()}", file=sys.stderr)
        return 2
    finally:
        pool.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
