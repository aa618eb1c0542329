"""The process layer: how the zygote is started -- inside bubblewrap's namespaces, or (``isolation: none``) as a
plain process -- and whether bubblewrap works here.

Modes (``roboscript.eval.isolation`` in params.yaml, ``--isolation`` of ``python -m robot.runner``):

* ``auto`` -- bubblewrap; when it is missing or cannot create namespaces (a container without CAP_SYS_ADMIN and
  with Docker's default seccomp profile), the runner refuses to start with :class:`IsolationUnavailable`;
* ``bwrap`` -- the same, said explicitly;
* ``none`` -- no namespaces: the zygote is a plain process whose environment holds only what ``host._sandbox_env``
  passes (one BLAS thread, the CPU pins of ``core/cpu.py``; in bwrap, ``--clearenv`` leaves only the BLAS setting),
  and each child clears even that (``child.setup``: ``os.environ`` and the C environment are empty). Each child still
  drops to uid 65534 (as root), sets its resource limits and installs the seccomp filter, and the restricted
  compiler and guards are the same; but the file system, process list and network are the host's. Every episode warns.

bubblewrap as root (CI, these machines) runs in its *privileged* mode, without a user namespace. Two things matter
there: it keeps **every** capability of root unless told otherwise -- hence ``--cap-drop ALL`` and back only
CAP_SETUID, CAP_SETGID and CAP_SETPCAP (the child uses them once, to become uid 65534 with an empty bounding set)
and CAP_KILL (the zygote, still uid 0, must SIGKILL a uid-65534 child on timeout or cancel); and ``--uid 65534``
would need ``--unshare-user`` and then map the sandbox's 65534 to *root* outside, so the uid change happens in the
child (``setresuid``) instead.

The file system the sandbox sees is built from nothing: /usr read-only (with the merged-/usr symlinks), the
interpreter's prefix, numpy, numpy.libs and RestrictedPython under /sbx/site, this repository's ``core`` and
``robot`` packages under /sbx/lib (read-only), a fresh /proc and minimal /dev, and a 1 MiB tmpfs on /tmp. No /etc,
/home, /root contents, repository data, params or credentials. Namespaces: pid, net (no interface but a downed
loopback), ipc, uts, cgroup; bwrap runs with ``--die-with-parent`` and ``--new-session``. bwrap creates the parents
of bind targets with mode 0700 in privileged mode, so each parent is made with ``--perms 0755 --dir`` first
(otherwise uid 65534 could not reach the interpreter, which lives under /root/.pyenv on these machines).

Not root (a developer's machine): bwrap's unprivileged mode, ``--unshare-user --disable-userns``; the child keeps
the user's uid (mapped), and sees only the bound paths above.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from core.errors import PipelineError

MODES = ("auto", "bwrap", "none")
SBX_ROOT = "/sbx"
TMP_BYTES = 1 << 20
REPO = Path(__file__).resolve().parents[2]
OWN_PACKAGES = ("core", "robot")
HINT = ("Install bubblewrap (apt-get install bubblewrap) where namespaces are allowed (in Docker: a container with "
        "CAP_SYS_ADMIN, or seccomp=unconfined), or -- knowing that generated code then runs without namespaces -- "
        "set roboscript.eval.isolation: none in params.yaml (python -m robot.runner --isolation none); every "
        "episode then warns.")


class IsolationUnavailable(PipelineError):
    """bubblewrap is missing or cannot create namespaces here, and the settings did not say ``isolation: none``."""

    hint = HINT


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise PipelineError(f"isolation must be one of {', '.join(MODES)}, got {mode!r}.",
                            hint="Set roboscript.eval.isolation in params.yaml (or --isolation of robot.runner).")
    return mode


def bwrap_binary() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise IsolationUnavailable("bubblewrap (bwrap) is not installed, so generated code cannot run in its own "
                                   "namespaces.")
    return found


def interpreter() -> str:
    return os.path.realpath(sys.executable)


def site_dirs() -> list[Path]:
    """The third-party directories the zygote imports: numpy (and its bundled libraries) and RestrictedPython."""
    dirs = []
    for name in ("numpy", "RestrictedPython"):
        spec = importlib.util.find_spec(name)  # located, not imported: the probe stays cheap
        if spec is None or spec.origin is None:
            raise IsolationUnavailable(f"the sandbox needs the package {name}, which is not installed.")
        dirs.append(Path(spec.origin).resolve().parent)
    libs = dirs[0].parent / "numpy.libs"
    if libs.is_dir():
        dirs.append(libs)
    return dirs


def _parents(path: Path) -> list[str]:
    return [str(p) for p in reversed(path.parents) if str(p) != "/"]


def bwrap_argv(command: list[str], as_root: bool) -> list[str]:
    """bubblewrap's command line around ``command`` (which must only need the paths bound here)."""
    python = Path(interpreter())
    prefix = Path(os.path.realpath(sys.base_prefix))
    argv = [bwrap_binary(), "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--clearenv", "--setenv", "OPENBLAS_NUM_THREADS", "1",
            "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "lib", "lib64", "sbin"):  # merged /usr: symlinks; otherwise the real directory
        path = Path("/" + top)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    made = {"/usr", "/bin", "/lib", "/lib64", "/sbin"}

    def bind(source: Path, target: str) -> None:
        for parent in _parents(Path(target)):
            if parent not in made:
                argv.extend(["--perms", "0755", "--dir", parent])
                made.add(parent)
        argv.extend(["--ro-bind", str(source), target])
        made.add(target)

    if not str(prefix).startswith("/usr/"):
        bind(prefix, str(prefix))
    if not str(python).startswith(("/usr/", str(prefix) + "/")):
        bind(python, str(python))
    for directory in site_dirs():
        bind(directory, f"{SBX_ROOT}/site/{directory.name}")
    for package in OWN_PACKAGES:
        bind(REPO / package, f"{SBX_ROOT}/lib/{package}")
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
             "--chdir", "/"]
    if as_root:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_KILL"]
    else:
        argv += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    return argv + ["--", *command]


def sandbox_paths() -> list[str]:
    """``sys.path`` of the zygote inside bubblewrap."""
    return [f"{SBX_ROOT}/site", f"{SBX_ROOT}/lib"]


def plain_paths() -> list[str]:
    """``sys.path`` of the zygote without namespaces: the directories holding numpy, RestrictedPython, the repo."""
    return sorted({str(d.parent) for d in site_dirs()[:2]} | {str(REPO)})


def python_command(boot: str, paths: list[str], config: dict) -> list[str]:
    """The interpreter isolated from the environment (-I: no PYTHON* variables, no user site; -S: no site
    packages, no .pth files; -B: no byte-code written), running ``boot`` with the paths and the config."""
    return [interpreter(), "-I", "-S", "-B", "-c", boot, json.dumps(paths), json.dumps(config)]


_STATUS: tuple[bool, str] | None = None


def bwrap_status(refresh: bool = False) -> tuple[bool, str]:
    """(whether bubblewrap can start the sandbox here, why not); probed once per process with the same namespaces,
    binds and capabilities the zygote gets, running the interpreter inside."""
    global _STATUS
    if _STATUS is not None and not refresh:
        return _STATUS
    try:
        argv = bwrap_argv([interpreter(), "-I", "-S", "-c", "pass"], os.geteuid() == 0)
        done = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env={})
        ok = done.returncode == 0
        why = "" if ok else (done.stderr.decode(errors="replace").strip()[-400:] or f"exit status {done.returncode}")
    except IsolationUnavailable as exc:
        ok, why = False, str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        ok, why = False, f"{type(exc).__name__}: {exc}"
    _STATUS = (ok, why)
    return _STATUS


def resolve(mode: str) -> str:
    """The mode a sandbox actually runs in: ``none`` when asked for, else ``bwrap`` -- or
    :class:`IsolationUnavailable` when bubblewrap does not work here."""
    if check_mode(mode) == "none":
        return "none"
    ok, why = bwrap_status()
    if not ok:
        raise IsolationUnavailable(f"isolation: {mode} needs bubblewrap, which cannot start the sandbox here: {why}.")
    return "bwrap"
