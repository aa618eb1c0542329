"""The perception ablation (paper V-C, Figs. 7-8): how much success the perception pipeline costs.

The shape study's two fixed, verified tasks (``tasks/roboscript/eval/shapes.py``: pick-and-place; open the middle drawer and place)
run on each configured object under each setting:

* ``gt`` -- ground-truth detection and planning scene (the ``ground_truth`` mode);
* ``gt_planning_scene`` -- perception tools from the pipeline, the planner avoids the true geometry;
* ``gt_detection`` -- ground-truth perception tools, the planner avoids the reconstruction;
* ``no_gt`` -- both from the pipeline;
* ``detector_model`` -- ``gt_planning_scene`` with a grounding model in the loop: the pipeline's 2-D grounding is
  the ``hf-detector`` backend on a tiny random-weight OWL-ViT (``tiny_detector.py``) instead of ``sim-seg``.

With the default ``sim-seg`` grounding the pipeline's 2-D boxes come from the simulator's segmentation masks, so the
perceived settings measure the rest of the pipeline (fusion, matching, instances, grasps, planning scene) behind
perfect 2-D detection; ``detector_model`` is the setting with a detector model in the loop.

Fig. 7 of the paper shows gt / gt_planning_scene / no_gt for pick-and-place, Fig. 8 gt / gt_planning_scene /
gt_detection for the drawer task; here every configured setting runs on every study.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from robot.contract.catalog import Catalog
from robot.contract.params import GroundingParams
from tasks.roboscript.eval import shapes
from tasks.roboscript.params import (
    ABLATION_SETTINGS,
    DETECTOR_SETTINGS,
    RobotEvalParams,
    WorldsParams,
)

STUDY_TITLES = {"pick_place": "pick and place", "drawer": "open drawer and place"}
SETTING_TITLES = {"gt": "GT detection & planning", "gt_planning_scene": "GT planning scene (perceived detection)",
                  "gt_detection": "GT detection (perceived planning scene)", "no_gt": "No GT",
                  "detector_model": "GT planning scene, detection by a model (tiny random OWL-ViT)"}


@dataclass(frozen=True)
class AblationTrial:
    setting: str
    trial: shapes.Trial

    @property
    def key(self) -> str:
        return f"{self.setting}/{self.trial.study}/{self.trial.asset}"


def trials(catalog: Catalog, worlds: WorldsParams, ep: RobotEvalParams) -> tuple[list[AblationTrial], list[dict]]:
    """Every (setting, study, object) trial, and the (study, object) pairs that are not applicable."""
    ab = ep.ablation
    try:
        base, skipped = shapes.study_trials(catalog, worlds, ab.objects, ab.studies)
    except ValueError as exc:
        raise ConfigError(f"roboscript.eval.ablation.objects: {exc}.") from None
    return [AblationTrial(setting, t) for setting in ab.settings for t in base], skipped


DETECTOR_THRESHOLD = 0.0
"""Score threshold of the random detector: its scores carry no meaning, so every box it proposes is kept."""


def goal(trial: AblationTrial, ep: RobotEvalParams, detector_path: Path | None = None) -> dict:
    """The runner goal of one trial: the shape study's goal with this setting's perception. ``detector_path``: the
    checkpoint of the ``detector_model`` setting (required for it)."""
    request = shapes.goal(trial.trial, ep) | {"episode_id": trial.key, "repeats": ep.ablation.repeats}
    sources = ABLATION_SETTINGS[trial.setting]
    if trial.setting == "gt":
        return request | {"perception": "ground_truth"}
    pipeline = ep.pipeline.model_copy(update=sources)
    if trial.setting in DETECTOR_SETTINGS:
        if detector_path is None:
            raise ConfigError(f"the ablation setting {trial.setting} needs the detector checkpoint "
                              "(tasks/roboscript/eval/tiny_detector.py builds it).")
        grounding = GroundingParams(backend="hf-detector", model_path=str(detector_path),
                                    threshold=DETECTOR_THRESHOLD)
        pipeline = pipeline.model_copy(update={"grounding": grounding})
    return request | {"perception": "perceived", "pipeline": pipeline.model_dump(mode="json")}


SHARED = "perceived"
"""The first part of the key of a goal that runs a (study, object)'s perceived settings together (not a setting)."""


def goals(trials: list[AblationTrial], ep: RobotEvalParams, detector_path: Path | None = None) -> dict[str, dict]:
    """The runner goals of ``trials`` by key. The perceived settings of one (study, object) are one goal with a
    variant per setting (``robot/episode.py``): until the robot first moves they all see the same scene, and the
    runner computes each pipeline stage they share once (robot/perception/shared.py). Such a goal is keyed
    ``perceived/<study>/<object>`` and comes first (the longest goals start first); ``gt``, and a perceived setting
    that is the only one, are goals of their own, as before."""
    single = {t.key: goal(t, ep, detector_path) for t in trials}
    members: dict[str, list[str]] = {}
    for t in trials:
        if single[t.key]["perception"] == "perceived":
            members.setdefault(f"{SHARED}/{t.trial.study}/{t.trial.asset}", []).append(t.key)
    grouped: dict[str, dict] = {}
    for key, keys in members.items():
        if len(keys) < 2:
            continue
        common = {k: v for k, v in single[keys[0]].items() if k not in ("episode_id", "perception", "pipeline")}
        grouped[key] = common | {"episode_id": key, "variants": [
            {"episode_id": k, "perception": single[k]["perception"], "pipeline": single[k]["pipeline"]} for k in keys]}
        for k in keys:
            del single[k]
    return grouped | single


ACTION_FIELDS = ("goal_state", "attempts", "runner_errors")
"""What the client adds to a goal's result about the goal's action (robot/client.py): the variants share it."""


def trial_results(results: dict[str, dict], requests: dict[str, dict]) -> dict[str, dict]:
    """Each trial's result from the results of :func:`goals`' goals: a variant's result is its trial's (with its
    goal's :data:`ACTION_FIELDS`); a goal with variants that could not run gives each of its trials its error."""
    out: dict[str, dict] = {}
    for key, request in requests.items():
        result = results[key]
        if "variants" not in request:
            out[key] = result
            continue
        ran = {r.get("episode_id"): r for r in result.get("variants") or []}
        action = {k: result[k] for k in ACTION_FIELDS if k in result}
        for variant in request["variants"]:
            trial = variant["episode_id"]
            out[trial] = (ran.get(trial) or {"ok": False, "error": result.get("error") or "the variant did not run",
                                             "episode_id": trial, "repeats": []}) | action
    return out


def shared_counts(results: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Per pipeline stage, how many results the goals' runners computed and how many they reused (a run fact)."""
    total: dict[str, dict[str, int]] = {}
    for result in results.values():
        for stage, counts in (result.get("perception_shared") or {}).items():
            for kind, n in counts.items():
                total.setdefault(stage, {}).setdefault(kind, 0)
                total[stage][kind] += n
    return total


def summarise(results: dict[str, dict], settings: list[str]) -> dict:
    """Success per setting, study and object; means per setting and study; the drop against ``gt`` in points."""
    rates: dict[str, dict[str, dict[str, float | None]]] = {}
    for key, result in sorted(results.items()):
        setting, study, asset = key.split("/")
        rates.setdefault(setting, {}).setdefault(study, {})[asset] = shapes.success_rate(result)
    means = {s: {study: _mean(v) for study, v in studies.items()} for s, studies in rates.items()}
    drops = {}
    for setting in settings:
        if setting == "gt" or "gt" not in means or setting not in means:
            continue
        drops[setting] = {study: round(100 * (means["gt"][study] - value), 1)
                          for study, value in means[setting].items()
                          if value is not None and means["gt"].get(study) is not None}
    return {"success": rates, "mean": means, "drop_points": drops}


def report(results: dict[str, dict], skipped: list[dict], ep: RobotEvalParams) -> dict:
    """reports/roboscript/perception.json: the settings, the success table and its means, how repeats ended (the
    perception time per setting is a run fact: :func:`perception_seconds`)."""
    ab = ep.ablation
    return {"settings": ab.settings, "objects": ab.objects, "studies": ab.studies, "repeats": ab.repeats,
            "arm": ep.arm, "grounding": ep.pipeline.grounding.backend, "grasp": ep.pipeline.grasp,
            **summarise(results, ab.settings), "outcomes": failures(results), "not_applicable": skipped}


def mlflow_fields(report: dict, ep: RobotEvalParams) -> tuple[dict, dict, dict[str, float]]:
    """(params, tags, metrics) of the ablation's MLflow run."""
    run_params = {"repeats": report["repeats"], "arm": ep.arm, "objects": ",".join(report["objects"]),
                  "settings": ",".join(report["settings"]), "grounding": ep.pipeline.grounding.backend,
                  "grasp": ep.pipeline.grasp, "cameras": len(ep.pipeline.cameras.cameras),
                  "voxel_m": ep.pipeline.fusion.voxel_m}
    tags = {"arm": ep.arm, "grounding": ep.pipeline.grounding.backend}
    metrics = {f"{setting}.{study}.{asset}": rate for setting, per in report["success"].items()
               for study, rates in per.items() for asset, rate in rates.items() if rate is not None}
    metrics |= {f"mean.{setting}.{study}": value for setting, per in report["mean"].items()
                for study, value in per.items() if value is not None}
    metrics |= {f"drop_points.{setting}.{study}": value for setting, per in report["drop_points"].items()
                for study, value in per.items()}
    return run_params, tags, metrics


def _mean(values: dict[str, float | None]) -> float | None:
    known = [v for v in values.values() if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def failures(results: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Per trial, how its repeats ended (status, or 'failed' for an ok run whose items did not hold)."""
    out = {}
    for key, result in sorted(results.items()):
        counts: dict[str, int] = {}
        for r in result.get("repeats") or []:
            outcome = "success" if r.get("success") else (r["status"] if r["status"] != "ok" else "failed")
            counts[outcome] = counts.get(outcome, 0) + 1
        out[key] = counts or {"error": 1}
    return out


def perception_seconds(results: dict[str, dict]) -> dict[str, float]:
    """Mean time the perception pipeline took per repeat, per setting (0 for ground truth)."""
    spent: dict[str, list[float]] = {}
    for key, result in results.items():
        setting = key.split("/")[0]
        for r in result.get("repeats") or []:
            spent.setdefault(setting, []).append(float((r.get("perception") or {}).get("wall_s", 0.0)))
    return {s: round(sum(v) / len(v), 3) for s, v in sorted(spent.items()) if v}


def markdown(summary: dict, settings: list[str], repeats: int, grounding: str = "sim-seg") -> str:
    """The report: what the settings' grounding is, success per object and setting for each study, the means,
    and the drop against GT."""
    lines = ["# Perception ablation (paper V-C, Figs. 7-8)", ""]
    if grounding == "sim-seg":
        lines += ["**Read this first:** the pipeline's 2-D grounding here is `sim-seg`, which takes the "
                  "**simulator's segmentation masks** as its detections. In the perceived settings "
                  "(`gt_planning_scene`, `no_gt`) detection therefore starts from perfect 2-D masks, and their drop "
                  "against GT measures fusion, matching, instance segmentation, grasping and the planning scene, not "
                  "a detector's mistakes. `detector_model` puts a grounding model in the loop instead: the "
                  "`hf-detector` backend on a tiny OWL-ViT with **random weights** (no trained weights can be fetched "
                  "here), so it shows the cost of an untrained detector, not of a trained one.", ""]
    else:
        lines += [f"The pipeline's 2-D grounding is `{grounding}`.", ""]
    lines += [f"Success rate over {repeats} repeat(s) per object; settings: "
              + "; ".join(f"`{s}` = {SETTING_TITLES[s]}" for s in settings) + ".", ""]
    for study in _studies(summary):
        objects = sorted({a for per in summary["success"].values() for a in per.get(study, {})})
        lines += [f"## {STUDY_TITLES[study]}", "", "| object | " + " | ".join(settings) + " |",
                  "| --- |" + " --- |" * len(settings)]
        for obj in objects:
            cells = [_cell(summary["success"].get(s, {}).get(study, {}).get(obj)) for s in settings]
            lines.append(f"| {obj} | " + " | ".join(cells) + " |")
        lines.append("| **mean** | " + " | ".join(_cell(summary["mean"].get(s, {}).get(study)) for s in settings)
                     + " |")
        lines.append("")
    if summary["drop_points"]:
        lines += ["Drop against GT detection & planning (percentage points; negative: better than GT):", ""]
        for setting, per in summary["drop_points"].items():
            lines.append(f"- {SETTING_TITLES[setting]}: " + ", ".join(f"{STUDY_TITLES[k]} {v:+.1f}"
                                                                     for k, v in sorted(per.items())))
        lines.append("")
    lines += ["The paper (Franka in Gazebo, AnyGrasp, 10 objects x 10 repeats) reports drops of 10.1 (pick and "
              "place) and 6.0 (drawer) points with perceived detection (GT planning scene), and 14.0 / 15.0 points "
              "with the perceived planning scene (No GT in its Fig. 7, GT detection in Fig. 8).", ""]
    return "\n".join(lines)


def _studies(summary: dict) -> list[str]:
    present = {study for per in summary["success"].values() for study in per}
    return [s for s in shapes.STUDIES if s in present]  # pick and place (Fig. 7), then the drawer (Fig. 8)


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def plot(summary: dict, settings: list[str], path) -> None:
    """One grouped bar chart per study (objects x settings), like the paper's Figs. 7 and 8."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    studies = _studies(summary)
    fig, axes = plt.subplots(1, len(studies), figsize=(7 * len(studies), 4.4), squeeze=False)
    width = 0.8 / len(settings)
    for ax, study in zip(axes[0], studies, strict=True):
        objects = sorted({a for per in summary["success"].values() for a in per.get(study, {})})
        x = np.arange(len(objects) + 1)
        for i, setting in enumerate(settings):
            per = summary["success"].get(setting, {}).get(study, {})
            values = [per.get(o) or 0.0 for o in objects] + [summary["mean"].get(setting, {}).get(study) or 0.0]
            ax.bar(x + (i - (len(settings) - 1) / 2) * width, values, width, label=SETTING_TITLES[setting])
        ax.set_xticks(x)
        ax.set_xticklabels([*objects, "mean"], rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("success rate")
        ax.set_title(f"perception ablation: {STUDY_TITLES[study]}")
    # One legend for all panels, under them: inside a panel it hides the bars that reach 1.0.
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(settings), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
