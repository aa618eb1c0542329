"""The zygote: a fork server that lives inside the sandbox's namespaces (bubblewrap) for as long as its runner.

    python -I -S -B -c BOOT '<sys.path as JSON>' '<config as JSON>'       (started by robot/sandbox/host.py)

Importing numpy and RestrictedPython costs ~250 ms on the 2-core CI machines -- five times the per-repeat budget --
so the zygote does it once, runs a warm-up snippet (lazy imports, caches), and then forks one child per repeat
(``child.py``; a few ms). Nothing untrusted ever runs in the zygote: each child becomes uid 65534 and installs its
seccomp filter before it reads the snippet, so it cannot signal, trace or write to the zygote, and it never holds
the control socket (closed in the child).

Control socket: ``SOCK_SEQPACKET``, one JSON message per packet (``wire.py``); ``spawn`` carries the child's two
pipe ends by ``SCM_RIGHTS``. The zygote reports each child's exit status (``waitpid`` through a pidfd) -- the
runner's source of truth. When the runner goes away (the socket reads EOF, or the parent-death signal), the zygote
kills its children and exits.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import socket
import sys

import robot.sandbox.child as child
import robot.sandbox.wire as wire
from robot.contract.code_policy import DEFAULT_POLICY
from robot.contract.restricted import compile_snippet
from robot.errors import TOOL_EXCEPTIONS

MAX_PACKET = 1 << 16
BOOT = "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); from robot.sandbox.zygote import main; " \
       "main(json.loads(sys.argv[2]))"

WARM_UP = """\
v = np.array([1.0, 2.0, 3.0])
d = {'a': v, 'b': [1, 2]}
for k, x in d.items():
    s = '{} {:.3f}'.format(k, float(np.linalg.norm(np.asarray(x, dtype=float))))
n = sorted(['b', 'a'], key=lambda t: len(t))
m = [i * 2 for i in range(3)]
v[0] += 1.0
a, (b, c) = 1, (2, 3)
try:
    z = [][1]
except Exception as error:
    e = str(error)
print(v, s, n, m, f'{v[0]:.2f}', round(np.sqrt(2.0), 3), np.cross(v, v).tolist(), '%.2f' % 1.0)
"""


def _warm_up() -> None:
    """Run a representative snippet once, so lazy imports and caches (numpy's array printing, the restricted
    compiler, formatting, tracebacks) are done before any fork: a child cannot open a file after its filter is on."""
    code, errors = compile_snippet(WARM_UP)
    assert code is not None, errors
    out: list[str] = []
    namespace = DEFAULT_POLICY.runtime_globals({}, print_fn=lambda *a, **k: out.append(" ".join(map(str, a))),
                                               exception_types=tuple(TOOL_EXCEPTIONS.values()))
    exec(code, namespace)  # noqa: S102 - our own warm-up code
    wire.Codec(child.VALUE_CLASSES).decode(wire.Codec(child.VALUE_CLASSES).encode({"x": (1.0, [True])}))
    import traceback  # noqa: F401 - the child formats tracebacks after its filter is on

    ctypes.CDLL(None)


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (the parent is the host's long-lived keeper thread)


def main(config: dict) -> None:
    control = socket.socket(fileno=config["control_fd"])
    if config.get("isolation") == "none":
        _die_with_parent()  # in bwrap, --die-with-parent and the pid namespace do this
    _warm_up()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    uid = config.get("uid")
    me = os.getpid()
    control.send(wire.dumps({"t": "ready", "pid": me, "uid": os.geteuid(), "isolation": config["isolation"]}))
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    children: dict[int, tuple[int, int]] = {}  # repeat id -> (pid, pidfd)

    def report_exit(rid: int) -> None:
        pid, pidfd = children.pop(rid)
        selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        control.send(wire.dumps({"t": "exit", "id": rid, "code": code, "signal": sig}))

    while True:
        for key, _ in selector.select():
            if key.data is not None:
                report_exit(key.data)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(control, MAX_PACKET, 4)
            except OSError:
                data, fds = b"", []
            if not data:  # the runner is gone: take every child along
                for pid, _ in children.values():
                    _kill(pid)
                os._exit(0)
            message = wire.loads(data.rstrip(b"\n"), "host")
            if message["t"] == "kill":
                if message["id"] in children:
                    _kill(children[message["id"]][0])
                continue
            rid = message["id"]
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                control.send(wire.dumps({"t": "spawn_failed", "id": rid, "text": "spawn needs two descriptors"}))
                continue
            try:
                pid = os.fork()
            except OSError as exc:
                for fd in fds:
                    os.close(fd)
                control.send(wire.dumps({"t": "spawn_failed", "id": rid, "text": f"fork: {exc}"}))
                continue
            if pid == 0:
                try:
                    control.close()
                    child.main(fds[0], fds[1], message["memory_mb"], message["cpu_s"], uid, me,
                               bool(config.get("allow_probe")))
                finally:
                    os._exit(child.EXIT_SETUP)
            for fd in fds:
                os.close(fd)
            pidfd = os.pidfd_open(pid)
            children[rid] = (pid, pidfd)
            selector.register(pidfd, selectors.EVENT_READ, rid)
            control.send(wire.dumps({"t": "spawned", "id": rid}))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:  # gone already; EPERM would mean CAP_KILL is missing
        print(f"zygote: cannot kill {pid}: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
