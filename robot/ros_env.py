"""Debian's ROS 1 (rospy, actionlib, genpy) inside the project's virtual environment, and nothing else of Debian's.

Debian 12 ships ROS Noetic-level packages (``ros-core``, ``python3-rospy``, ...) for its own Python 3.11 under
``/usr/lib/python3/dist-packages``. Putting that whole folder on ``sys.path`` would shadow the project's pinned
packages (numpy, yaml, pydantic ...) with Debian's. Instead :func:`build` makes a folder holding one symlink per
ROS package in :data:`ROS_PACKAGES` -- exactly what rospy, actionlib and the run-time message generation import --
and a ``.pth`` file in the environment's site-packages that puts the folder on every interpreter's path. The rest
of what they import (``rospkg``, ``catkin_pkg``, ``yaml``) comes from the package index (see pyproject.toml).

``python -m robot.ros_env`` builds the folder (``make setup`` runs it); ``--check`` only reports. Library code
calls :func:`activate`, which builds the folder when it is missing and puts it on ``sys.path`` of this process, so
a process started from an environment without the ``.pth`` file still works.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from core.errors import PipelineError

#: Where Debian's ROS Python packages live (``EMBP_ROS_DIST_PACKAGES`` overrides it, e.g. for another distribution).
DIST_PACKAGES = Path(os.environ.get("EMBP_ROS_DIST_PACKAGES", "/usr/lib/python3/dist-packages"))

#: Exactly the ROS packages the runner, the pool and the message generation import (measured: the import closure of
#: ``rospy``, ``actionlib`` and ``genpy.generator`` inside dist-packages, minus what the package index provides).
ROS_PACKAGES: tuple[str, ...] = (
    "rospy", "rosgraph", "roslib", "roscpp", "rosgraph_msgs", "std_msgs", "actionlib", "actionlib_msgs",
    "genpy", "genmsg", "catkin", "netifaces", "sensor_msgs", "geometry_msgs",
)
"""``netifaces`` is a C extension module (Debian's python3-netifaces, a dependency of rosgraph) that rosgraph
imports to tell local addresses when connecting topics; it is built for CPython 3.11's ABI, which the venv shares,
and its PyPI release has no wheel for 3.11."""

#: The Debian packages that provide them (``.ci/run`` and the README install these).
DEBIAN_PACKAGES: tuple[str, ...] = (
    "ros-core", "python3-rospy", "python3-std-msgs", "python3-genpy", "python3-genmsg", "python3-actionlib",
    "python3-actionlib-msgs", "ros-std-msgs", "ros-actionlib-msgs", "python3-netifaces", "python3-sensor-msgs",
    "python3-geometry-msgs",
)

#: ``.msg`` folders the message generator resolves dependencies in (Header, GoalID, GoalStatus).
MSG_SEARCH_PATH: dict[str, Path] = {
    "std_msgs": Path("/usr/share/std_msgs/msg"),
    "actionlib_msgs": Path("/usr/share/actionlib_msgs/msg"),
}

PTH_NAME = "embp_ros_debian.pth"


class RosUnavailable(PipelineError):
    """Debian's ROS packages are not installed, or the symlink folder cannot be made."""

    hint = ("Install them with `apt-get install -y " + " ".join(DEBIAN_PACKAGES) + "` (Debian 12), then run "
            "`python -m robot.ros_env`.")


def link_dir() -> Path:
    """The symlink folder: ``EMBP_ROS_PYTHONPATH``, else ``<venv>/ros-debian``, else ``build/ros-debian`` here."""
    if os.environ.get("EMBP_ROS_PYTHONPATH"):
        return Path(os.environ["EMBP_ROS_PYTHONPATH"])
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "ros-debian"
    return Path(__file__).resolve().parent.parent / "build" / "ros-debian"


def _source(name: str) -> Path | None:
    """The package folder or the extension/module file of ``name`` in Debian's dist-packages."""
    if (DIST_PACKAGES / name / "__init__.py").exists():
        return DIST_PACKAGES / name
    files = sorted(DIST_PACKAGES.glob(f"{name}.cpython-311*.so")) + sorted(DIST_PACKAGES.glob(f"{name}.py"))
    return files[0] if files else None


def missing_packages() -> list[str]:
    return [name for name in ROS_PACKAGES if _source(name) is None]


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def build(write_pth: bool = True) -> Path:
    """(Re)create the symlink folder and, inside a virtual environment, the ``.pth`` file. Idempotent."""
    missing = missing_packages()
    if missing:
        raise RosUnavailable(f"Debian's ROS Python packages are missing from {DIST_PACKAGES}: {', '.join(missing)}.")
    target = link_dir()
    target.mkdir(parents=True, exist_ok=True)
    sources = {name: _source(name) for name in ROS_PACKAGES}
    wanted = {src.name for src in sources.values() if src is not None}
    for entry in target.iterdir():  # drop links to packages no longer on the list
        if entry.is_symlink() and entry.name not in wanted:
            entry.unlink()
    for src in sources.values():
        link = target / src.name
        if link.is_symlink() and link.resolve() == src.resolve():
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        try:
            link.symlink_to(src, target_is_directory=src.is_dir())
        except FileExistsError:  # another process (a runner starting next to this one) made it meanwhile
            pass
    if write_pth and sys.prefix != sys.base_prefix:
        pth = _site_packages() / PTH_NAME
        text = f"{target}\n"
        if not pth.exists() or pth.read_text() != text:
            pth.write_text(text)
    return target


def is_built() -> bool:
    target = link_dir()
    for name in ROS_PACKAGES:
        src = _source(name)
        if src is None or not ((target / src.name).is_symlink() and (target / src.name).exists()):
            return False
    return True


def activate() -> Path:
    """Make rospy & co. importable in this process (building the folder if needed); returns the folder."""
    target = link_dir() if is_built() else build()
    entry = str(target)
    if entry not in sys.path:
        sys.path.append(entry)  # appended: never shadows the venv's own packages
    os.environ["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys([entry, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    return target


def check() -> list[str]:
    """Problems that stop the ROS side from working, as sentences ([] when all is well)."""
    problems = []
    missing = missing_packages()
    if missing:
        problems.append(f"missing Debian ROS packages in {DIST_PACKAGES}: {', '.join(missing)}")
    if shutil.which("rosmaster") is None:
        problems.append("no `rosmaster` on PATH (Debian package ros-core)")
    for name, folder in MSG_SEARCH_PATH.items():
        if not folder.is_dir():
            problems.append(f"no {name} message definitions in {folder}")
    for module in ("rospkg", "catkin_pkg", "yaml"):
        try:
            __import__(module)
        except ImportError:
            problems.append(f"the Python package {module} is not installed in {sys.prefix} (pip install it)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot.ros_env", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report what is missing")
    args = parser.parse_args(argv)
    problems = check()
    if args.check:
        for p in problems:
            print(f"ros_env: {p}", file=sys.stderr)
        print("ros_env: ok" if not problems else f"ros_env: {len(problems)} problem(s)")
        return 1 if problems else 0
    try:
        target = build()
    except RosUnavailable as exc:
        print(f"ros_env: {exc.paragraph()}", file=sys.stderr)
        return 1
    print(f"ros_env: {len(ROS_PACKAGES)} ROS packages linked in {target}")
    for p in problems:
        print(f"ros_env: warning: {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
