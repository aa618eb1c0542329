"""The runner's ROS action type, generated at run time with genpy (no catkin build).

One action, ``embp_robot/RunEpisodes``: its goal, feedback and result each carry one JSON document (the schemas are
in ``robot/episode.py`` and docs/robot.md), so the protocol can grow without regenerating types and any client
that speaks actionlib can drive a runner. The seven messages an action needs (goal, result, feedback, their
``Action*`` envelopes with header + goal id / status, and the action itself) are written here as ``.msg`` text,
generated into Python modules with genpy's own generator, and cached on disk under a hash of the definitions and
genpy's version, so every runner and client of the same code derives the same classes (and MD5 sums) in
milliseconds.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from robot import ros_env

PACKAGE = "embp_robot"
ACTION = "RunEpisodes"

#: The action's three payloads: one JSON document each.
GOAL = "# JSON: world (inline) or world_file, code, repeats, perception, ... (docs/robot.md)\nstring request_json\n"
RESULT = "# JSON: per-repeat outcomes, the policy verdict, timings\nstring result_json\n"
FEEDBACK = "# JSON: one step (a tool call) or the end of a repeat\nstring feedback_json\n"


def definitions(action: str = ACTION) -> dict[str, str]:
    """The ``.msg`` texts of an action, named as actionlib's ``genaction`` names them."""
    a = action
    return {
        f"{a}Goal": GOAL,
        f"{a}Result": RESULT,
        f"{a}Feedback": FEEDBACK,
        f"{a}ActionGoal": f"Header header\nactionlib_msgs/GoalID goal_id\n{a}Goal goal\n",
        f"{a}ActionResult": f"Header header\nactionlib_msgs/GoalStatus status\n{a}Result result\n",
        f"{a}ActionFeedback": f"Header header\nactionlib_msgs/GoalStatus status\n{a}Feedback feedback\n",
        f"{a}Action": f"{a}ActionGoal action_goal\n{a}ActionResult action_result\n{a}ActionFeedback action_feedback\n",
    }


def _fingerprint(defs: dict[str, str]) -> str:
    import genpy

    text = "\n".join(f"{k}\n{v}" for k, v in sorted(defs.items()))
    version = getattr(genpy, "__version__", "") or str(Path(genpy.__file__).resolve())
    return hashlib.sha256(f"{PACKAGE}\n{version}\n{text}".encode()).hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("EMBP_ROS_MSG_CACHE") or os.path.join(tempfile.gettempdir(), f"embp-ros-msgs-{os.getuid()}")
    return Path(base)


def generate(out_dir: Path, defs: dict[str, str]) -> None:
    """Write ``<out_dir>/embp_robot/msg/_<Name>.py`` for every definition, and the package ``__init__`` files."""
    from genmsg import MsgContext
    from genmsg.msg_loader import load_depends, load_msg_from_string
    from genpy.generator import msg_generator

    search = {pkg: [str(folder)] for pkg, folder in ros_env.MSG_SEARCH_PATH.items()}
    search[PACKAGE] = []
    context = MsgContext.create_default()
    specs = {name: load_msg_from_string(context, text, f"{PACKAGE}/{name}") for name, text in defs.items()}
    package_dir = out_dir / PACKAGE / "msg"
    package_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PACKAGE / "__init__.py").write_text("")
    for spec in specs.values():
        load_depends(context, spec, search)
    for name, spec in specs.items():
        code = "\n".join(msg_generator(context, spec, search))
        (package_dir / f"_{name}.py").write_text(code + "\n")
    (package_dir / "__init__.py").write_text("".join(f"from ._{name} import *\n" for name in sorted(defs)))


def _ensure_generated(defs: dict[str, str]) -> Path:
    root = cache_root() / _fingerprint(defs)
    if (root / PACKAGE / "msg" / "__init__.py").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="gen-", dir=root.parent))
    generate(staging, defs)
    try:
        staging.rename(root)  # atomic: concurrent runners starting together never see half a package
    except OSError:
        if not (root / PACKAGE / "msg" / "__init__.py").exists():
            raise
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return root


@lru_cache(maxsize=1)
def load() -> SimpleNamespace:
    """The generated classes: ``Action``, ``Goal``, ``Result``, ``Feedback`` (+ the package module)."""
    ros_env.activate()
    defs = definitions()
    root = _ensure_generated(defs)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"{PACKAGE}.msg")
    return SimpleNamespace(
        module=module,
        Action=getattr(module, f"{ACTION}Action"),
        Goal=getattr(module, f"{ACTION}Goal"),
        Result=getattr(module, f"{ACTION}Result"),
        Feedback=getattr(module, f"{ACTION}Feedback"),
        type_name=f"{PACKAGE}/{ACTION}Action",
    )
