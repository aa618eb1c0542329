"""The object-shape study (paper V-B): how an object's shape and size decide grasp and motion success.

Two studies per catalog object (objects and containers; cabinets are the furniture):

* ``pick_place`` -- the object alone on the table at (0.40, -0.25); pick it up with the adaptive grasp, put it down
  at (0.40, 0.25). Success: it rests on the table within 5 cm of the target (item ``placed_at``).
* ``drawer`` -- a three-drawer cabinet at (0.72, 0.0) facing the robot (its front within the arm's comfortable
  reach) and the object at (0.45, -0.40): open the middle drawer (``cabinet.drawer_1``) by its handle, then put the
  object into it. Success: the drawer is open by at least 0.15 m (0.75 x the 0.2 m pull) and the object is in it (items ``joint_opened`` +
  ``in_receptacle``). Objects whose footprint cannot fit the opened part of the drawer, or that are taller than the
  drawer, are reported as not applicable.

The code of both is fixed and verified (it passes the code check), so the study measures the robot side only.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot.contract.catalog import Asset, Catalog
from robot.contract.world import World, cabinet_models, drawer_travel, model_of
from tasks.roboscript.params import RobotEvalParams, WorldsParams

STUDIES = ("pick_place", "drawer")
START = (0.40, -0.25)
TARGET = (0.40, 0.25)
CABINET_ASSET = "cabinet_3_drawers"
CABINET_AT = (0.72, 0.0)
DRAWER_START = (0.45, -0.40)
DRAWER = "cabinet.drawer_1"
HANDLE = "cabinet.handle_1"
PULL_M = 0.2
"""How far DRAWER_CODE pulls the handle."""
DRAWER_OPENED_M = round(0.75 * PULL_M, 4)
"""The drawer counts as opened past 0.75 x the pull distance, the public drawer script's joint test
(``instruct_to_policy/scripts/data/eval_drawer_pick_and_place.py``, l. 185-199)."""

PICK_PLACE_CODE = """\
# Pick the {phrase} up with a grasp suited to its shape and put it down at the target spot.
detect_objects(object_list=['{name}'])
open_gripper()
grasp_pose = parse_adaptive_shape_grasp_pose(object_name='{name}')
grasp(grasp_pose)
close_gripper()
attach_object('{name}')
move_in_direction(np.array([0.0, 0.0, 1.0]), distance=0.1)
place_pose = parse_place_pose(object_name='{name}', position=np.array([{tx}, {ty}, 0.0]))
move_to_pose(place_pose)
open_gripper()
detach_object('{name}')
reset_to_default_pose()
"""

DRAWER_CODE = """\
# Open the middle drawer: grasp its handle and pull along the drawer's joint axis.
detect_objects(object_list=['{drawer}', '{handle}'])
open_gripper()
grasp_pose = parse_adaptive_shape_grasp_pose(object_name='{handle}')
grasp(grasp_pose)
close_gripper()
attach_object('{handle}')
handle_position = get_object_center_position('{handle}')
joint_info = get_object_joint_info(object_name='{drawer}', position=handle_position, type='prismatic')
move_in_direction(joint_info['joint_axis'], distance={pull})
open_gripper()
detach_object('{handle}')
reset_to_default_pose()
# Put the {phrase} into the opened drawer.
detect_objects(object_list=['{drawer}', '{name}'])
open_gripper()
grasp_pose = parse_adaptive_shape_grasp_pose(object_name='{name}')
grasp(grasp_pose)
close_gripper()
attach_object('{name}')
place_pose = parse_place_pose(object_name='{name}', receptacle_name='{drawer}')
move_to_pose(place_pose)
open_gripper()
detach_object('{name}')
reset_to_default_pose()
"""


@dataclass(frozen=True)
class Trial:
    study: str
    asset: str
    world: World
    code: str
    evaluation: list[dict]


def study_assets(catalog: Catalog, which: str | list[str]) -> list[Asset]:
    pool = [a for a in catalog.assets.values() if a.kind in ("object", "container")]
    if which == "all":
        return pool
    known = {a.name: a for a in pool}
    unknown = [n for n in which if n not in known]
    if unknown:
        raise ValueError(f"unknown or non-pickable asset(s) {unknown}")
    return [known[n] for n in which]


def _world(world_id: str, models, joints, worlds: WorldsParams) -> World:
    return World(world_id, "shape-study", worlds.table, worlds.robot, models, joints)


def pick_place_trial(asset: Asset, worlds: WorldsParams) -> Trial:
    obj = model_of(asset, asset.name, START, worlds.table.height, 0.0, "table", "on")
    code = PICK_PLACE_CODE.format(name=asset.name, phrase=asset.phrase, tx=TARGET[0], ty=TARGET[1])
    items = [{"type": "placed_at", "object": asset.name, "position": list(TARGET), "tolerance": 0.05}]
    return Trial("pick_place", asset.name, _world(f"shape-pick-{asset.name}", [obj], [], worlds), code, items)


def drawer_trial(asset: Asset, cabinet: Asset, worlds: WorldsParams) -> Trial | None:
    """None when the object cannot fit the opened drawer at all."""
    parts, joints = cabinet_models(cabinet, CABINET_AT, worlds.table.height)
    drawer = next(m for m in parts if m.name == DRAWER)
    depth = drawer_travel(cabinet) - 0.04
    width, height = drawer.size[1] - 0.02, drawer.size[2] - 0.01
    sx, sy, sz = asset.size
    if min(sx, sy) > depth or max(sx, sy) > width or sz > height:
        return None
    obj = model_of(asset, asset.name, DRAWER_START, worlds.table.height, 0.0, "table", "on")
    code = DRAWER_CODE.format(name=asset.name, phrase=asset.phrase, drawer=DRAWER, handle=HANDLE, pull=PULL_M)
    items = [{"type": "joint_opened", "part": DRAWER, "min_value": DRAWER_OPENED_M},
             {"type": "in_receptacle", "object": asset.name, "receptacle": DRAWER}]
    return Trial("drawer", asset.name, _world(f"shape-drawer-{asset.name}", [*parts, obj], joints, worlds), code,
                 items)


def trials(catalog: Catalog, worlds: WorldsParams, ep: RobotEvalParams) -> tuple[list[Trial], list[dict]]:
    """Every trial of the study and the (study, asset) pairs that are not applicable."""
    return study_trials(catalog, worlds, ep.shapes.objects, ep.shapes.studies)


def study_trials(catalog: Catalog, worlds: WorldsParams, objects: str | list[str], studies: list[str]
                 ) -> tuple[list[Trial], list[dict]]:
    """The pick-and-place and drawer trials of ``studies`` for ``objects`` (``"all"`` or asset names; unknown ones
    raise ValueError), and the (study, asset) pairs that are not applicable. The shape study and the perception
    ablation both run these."""
    out, skipped = [], []
    cabinet = catalog[CABINET_ASSET]
    for asset in study_assets(catalog, objects):
        if "pick_place" in studies:
            out.append(pick_place_trial(asset, worlds))
        if "drawer" in studies:
            trial = drawer_trial(asset, cabinet, worlds)
            if trial is None:
                skipped.append({"study": "drawer", "asset": asset.name, "reason": "does not fit the opened drawer"})
            else:
                out.append(trial)
    return out, skipped


def goal(trial: Trial, ep: RobotEvalParams) -> dict:
    return {"episode_id": f"{trial.study}/{trial.asset}", "task_id": trial.study, "world": trial.world.to_json(),
            "code": trial.code, "repeats": ep.shapes.repeats, **ep.episode_settings(),
            "evaluation": trial.evaluation}


def success_rate(result: dict) -> float | None:
    repeats = result.get("repeats") or []
    if not result.get("ok") or not repeats:
        return None
    return round(sum(bool(r.get("success")) for r in repeats) / len(repeats), 4)


def report(results: dict[str, dict], skipped: list[dict], ep: RobotEvalParams) -> dict:
    """reports/roboscript/shapes.json from the results by ``<study>/<asset>``: success per study and object, means,
    how each trial's repeats ended."""
    rates: dict[str, dict] = {}
    for key, result in sorted(results.items()):
        study, asset = key.split("/")
        rates.setdefault(study, {})[asset] = success_rate(result)
    statuses = {key: sorted({r["status"] for r in res.get("repeats", [])}) or [res.get("error")]
                for key, res in results.items()}
    return {"repeats": ep.shapes.repeats, "arm": ep.arm, "perception": ep.perception, "success": rates,
            "not_applicable": skipped, "statuses": statuses,
            "mean": {s: round(sum(v or 0 for v in r.values()) / len(r), 4) for s, r in rates.items() if r}}


def mlflow_metrics(report: dict) -> dict[str, float]:
    return ({f"{study}.{asset}": rate for study, rates in report["success"].items()
             for asset, rate in rates.items() if rate is not None}
            | {f"mean.{study}": value for study, value in report["mean"].items()})


def plot(rates: dict[str, dict[str, float | None]], catalog: Catalog, path) -> None:
    """One bar chart per study: success rate per object, grouped by kind (objects, then containers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = [s for s in STUDIES if s in rates]
    fig, axes = plt.subplots(len(studies), 1, figsize=(16, 3.6 * len(studies)), squeeze=False)
    for ax, study in zip(axes[:, 0], studies, strict=True):
        names = sorted(rates[study], key=lambda n: (catalog[n].kind, n))
        values = [rates[study][n] if rates[study][n] is not None else 0.0 for n in names]
        colours = ["tab:blue" if catalog[n].kind == "object" else "tab:orange" for n in names]
        ax.bar(range(len(names)), values, color=colours)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=90, fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("success rate")
        ax.set_title(f"{study.replace('_', ' ')}: success per object (blue: YCB-style objects, orange: containers)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
