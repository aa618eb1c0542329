"""Process-tree helpers for the tests that kill a process and look for what it left behind (issue #19)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, None when it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (children, their children...), by parent pid."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                parents[int(entry)] = info[0]
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a dead process nobody has reaped yet)."""
    info = _stat(pid)
    return info is not None and info[1] != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def survivors(pids: set[int], within_s: float) -> dict[int, str]:
    """Those of ``pids`` still running after ``within_s`` seconds (returns as soon as none is), with their commands."""
    deadline = time.monotonic() + within_s
    while True:
        left = {pid for pid in pids if running(pid)}
        if not left or time.monotonic() > deadline:
            return {pid: cmdline(pid) for pid in left}
        time.sleep(0.2)
