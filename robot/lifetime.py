"""Processes that live and die with the process that started them, whatever kills it (issue #19).

Two mechanisms, used together by the local pool (``robot/pool.py``) and the sandbox (``robot/sandbox/host.py``):

* :func:`spawn` starts a process from **one long-lived keeper thread** with the parent-death signal set
  (``setpriv --pdeathsig``, util-linux): when this process dies -- SIGKILL included -- the kernel signals the child.
  The parent-death signal follows the *thread* that forked the child, not the process: a process started from a
  short-lived thread (a restart from a Prefect task or an actionlib callback) would be killed when that thread
  ends, hence the keeper thread.
* :func:`watch_parent` (in the child, for processes of our own): a daemon thread that ends the process when its
  parent changes (it was re-parented: the parent died), for the case where no parent-death signal could be set.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_JOBS: queue.Queue | None = None
_LOCK = threading.Lock()


def _keeper() -> None:
    assert _JOBS is not None
    while True:
        job, box, done = _JOBS.get()
        try:
            box.append(job())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box.append(exc)
        done.set()


def on_keeper(job: Callable[[], Any]) -> Any:
    """Run ``job`` on the keeper thread (started on first use, lives as long as the process) and return its result."""
    global _JOBS
    with _LOCK:
        if _JOBS is None:
            _JOBS = queue.Queue()
            threading.Thread(target=_keeper, name="embp-process-keeper", daemon=True).start()
    box: list[Any] = []
    done = threading.Event()
    _JOBS.put((job, box, done))
    done.wait()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def pdeathsig_prefix(sig: signal.Signals = signal.SIGKILL) -> list[str]:
    """``setpriv --pdeathsig SIG --`` when util-linux's setpriv is there, else [] (then only :func:`watch_parent`
    or the process's own liveness checks end it)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", sig.name.removeprefix("SIG"), "--"] if setpriv else []


def spawn(argv: list[str], pdeathsig: signal.Signals | None = signal.SIGKILL, **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)`` from the keeper thread, the parent-death signal set when given."""
    command = (pdeathsig_prefix(pdeathsig) if pdeathsig is not None else []) + list(argv)
    return on_keeper(lambda: subprocess.Popen(command, **popen))


def watch_parent(parent_pid: int, what: str, interval_s: float = 0.5,
                 on_orphan: Callable[[], None] | None = None) -> threading.Thread:
    """In a child: exit (status 4) once the process is no longer ``parent_pid``'s child."""
    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                print(f"{what}: the process that started it ({parent_pid}) is gone; exiting.", file=sys.stderr,
                      flush=True)
                if on_orphan is not None:
                    try:
                        on_orphan()
                    except Exception:  # noqa: BLE001 - exiting anyway
                        pass
                os._exit(4)
            time.sleep(interval_s)

    thread = threading.Thread(target=watch, name="embp-parent-watch", daemon=True)
    thread.start()
    return thread
