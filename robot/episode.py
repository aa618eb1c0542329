"""One goal of a runner: parse and validate its JSON, run its repeats on a backend, build the result JSON.

Goal (``request_json``)::

    {"episode_id": "Simple_0/panda", "task_id": "Simple_0",
     "world": {<world definition, roboscript-world/1>}  |  "world_file": "worlds/w0001.json",
     "code": "...", "repeats": 10, "perception": "ground_truth" | "noisy" | "perceived",
     "noise": {"position_m": 0.005, ...}, "pipeline": {"detection": "perceived", ...}, "pose_jitter_m": 0.005,
     "seed": 0,
     "timeout_s": 60, "memory_mb": 512, "arm": "panda", "isolation": "auto", "motion_failure": "return_false",
     "grasp": "contact",
     "evaluation": [{"type": "in_receptacle", "object": "apple", "receptacle": "footed_bowl"}, ...]}

A goal may instead carry ``"variants": [{"episode_id": ..., "perception": ..., "pipeline": {...}}, ...]`` (and no
top-level ``perception`` / ``pipeline``): the same repeats under several perception settings, as the perception
ablation runs them. Its result holds ``variants``, each variant's result as the goal with that variant's three
fields would give it alone, and ``perception_shared``: per pipeline stage, how many results were computed and how
many were reused from another variant's same repeat (robot/perception/shared.py; null where the backend cannot
run the variants side by side).

Only ``code`` and one of ``world`` / ``world_file`` are required. ``isolation`` is what the goal demands of the
runner's sandbox: ``auto`` / ``bwrap`` (namespaces: a runner started with ``--isolation none`` refuses the goal) or
``none`` (anything). ``motion_failure`` is what a motion tool does when the robot cannot carry it out
(``robot/contract/outcomes.py``): ``return_false`` (default, the public RoboScript contract) or ``raise``.
``grasp`` is how the sim holds what it grasps (``robot/backends/sim.py``): ``contact`` (friction and the gripper's
force) or ``rigid``; absent, the runner's backend keeps the mode it was built with; a backend without grasp modes
refuses a goal that names one. Result (``result_json``): ``ok`` (the goal could be run), ``error``, ``runner``, ``isolation``
(what the runner's sandbox uses), ``warnings``, ``policy`` (the code check), and per repeat: ``status``
(robot/sandbox/),
``grammatical``, ``error``, ``steps``, ``calls`` (each tool call: line, arguments, result or error), ``notes``,
``failed_motions`` (each motion call that failed: its number among the motion calls, tool, error, text), ``stdout``,
``wall_s``, the evaluation ``items`` with their
details, ``success`` (all items hold; null without items), the final ``state`` (boxes, joint values) and what the
perception mode did (``perception``: the pipeline's calls, stage timings and what each found).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import DataError
from core.plugins import PERCEPTION_MODES
from robot import sandbox
from robot.backends.base import RobotBackend
from robot.contract import items as scoring
from robot.contract.code_policy import DEFAULT_POLICY
from robot.backends.sim_contact import GRASP_MODES
from robot.contract.outcomes import MOTION_FAILURE, MOTION_FAILURE_MODES
from robot.contract.params import NoiseParams, PipelineParams
from robot.contract.world import World, read_world
from robot.errors import BackendUnavailable, GoalError
from robot.perception import create_perception
from robot.perception.shared import PerceptionMemo
from robot.sandbox import wire
from robot.tools_impl import RobotTools

MAX_REPEATS = 100
log = logging.getLogger("embp.runner")


@dataclass
class Goal:
    episode_id: str
    world: World
    code: str
    repeats: int = 1
    perception: str = "ground_truth"
    noise: NoiseParams = field(default_factory=NoiseParams)
    pipeline: PipelineParams = field(default_factory=PipelineParams)
    pose_jitter_m: float = 0.0
    seed: int = 0
    timeout_s: float = 60.0
    memory_mb: int = 512
    arm: str | None = None
    task_id: str | None = None
    evaluation: list = field(default_factory=list)
    isolation: str | None = None
    motion_failure: str = MOTION_FAILURE
    grasp: str | None = None
    variants: list[Variant] = field(default_factory=list)


@dataclass(frozen=True)
class Variant:
    """One perception setting of a goal with ``variants``: its repeats run as the goal with these fields would."""

    episode_id: str
    perception: str
    pipeline: PipelineParams


def _field(data: dict, key: str, kind: type | tuple, default: Any = None, required: bool = False) -> Any:
    if key not in data or data[key] is None:
        if required:
            raise GoalError(f"the goal has no '{key}'.")
        return default
    value = data[key]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise GoalError(f"goal field '{key}' must be a number, got {value!r}.")
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise GoalError(f"goal field '{key}' must be a {name}, got {type(value).__name__}.")
    return value


def parse_goal(text: str, world_dir: Path | None = None) -> Goal:
    """A validated goal, or :class:`GoalError` saying what is wrong with it."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise GoalError(f"the goal is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise GoalError(f"the goal must be a JSON object, got {type(data).__name__}.")
    code = _field(data, "code", str, required=True)
    if "world" in data and data["world"] is not None:
        world_data = _field(data, "world", dict)
        try:
            world = World.from_json(world_data, source="the goal's world")
        except DataError as exc:
            raise GoalError(str(exc)) from None
    elif data.get("world_file"):
        path = Path(_field(data, "world_file", str))
        if not path.is_absolute() and world_dir is not None:
            path = world_dir / path
        try:
            world = read_world(path)
        except DataError as exc:
            raise GoalError(f"unknown world: {exc}") from None
    else:
        raise GoalError("the goal names no world: give 'world' (inline) or 'world_file'.")
    repeats = _field(data, "repeats", int, 1)
    if not 1 <= repeats <= MAX_REPEATS:
        raise GoalError(f"repeats must be 1-{MAX_REPEATS}, got {repeats}.")
    perception, pipeline = _perception(data)
    try:
        noise = NoiseParams.model_validate(_field(data, "noise", dict, {}))
    except ValidationError as exc:
        raise GoalError(f"invalid noise settings: {exc.errors()[0]['msg']}.") from None
    variants = [_variant(v, i) for i, v in enumerate(_field(data, "variants", list, []))]
    if variants and ({"perception", "pipeline"} & set(data)):
        raise GoalError("a goal with 'variants' sets perception and pipeline in each variant, not at its top.")
    if len({v.episode_id for v in variants}) < len(variants):
        raise GoalError("the goal's variants must have distinct episode_ids.")
    timeout = float(_field(data, "timeout_s", (int, float), 60.0))
    memory = _field(data, "memory_mb", int, 512)
    jitter = float(_field(data, "pose_jitter_m", (int, float), 0.0))
    if not (0 < timeout <= 3600 and 64 <= memory <= 65536 and 0 <= jitter <= 0.05):
        raise GoalError("timeout_s must be in (0, 3600], memory_mb in [64, 65536], pose_jitter_m in [0, 0.05].")
    isolation = _field(data, "isolation", str)
    if isolation is not None and isolation not in sandbox.MODES:
        raise GoalError(f"goal field 'isolation' must be one of {', '.join(sandbox.MODES)}, got {isolation!r}.")
    motion_failure = _field(data, "motion_failure", str, MOTION_FAILURE)
    if motion_failure not in MOTION_FAILURE_MODES:
        raise GoalError(f"goal field 'motion_failure' must be one of {', '.join(MOTION_FAILURE_MODES)}, got "
                        f"{motion_failure!r}.")
    grasp = _field(data, "grasp", str)
    if grasp is not None and grasp not in GRASP_MODES:
        raise GoalError(f"goal field 'grasp' must be one of {', '.join(GRASP_MODES)}, got {grasp!r}.")
    try:
        items = scoring.parse_items(_field(data, "evaluation", list, []), world)
    except DataError as exc:
        raise GoalError(str(exc)) from None
    return Goal(episode_id=str(data.get("episode_id") or world.world_id), world=world, code=code, repeats=repeats,
                perception=perception, noise=noise, pipeline=pipeline, pose_jitter_m=jitter,
                seed=_field(data, "seed", int, 0),
                timeout_s=timeout, memory_mb=memory, arm=_field(data, "arm", str), task_id=data.get("task_id"),
                evaluation=items, isolation=isolation, motion_failure=motion_failure, grasp=grasp, variants=variants)


def _perception(data: dict, where: str = "") -> tuple[str, PipelineParams]:
    """The perception mode and pipeline settings of a goal (or of one of its variants: ``where`` says which)."""
    perception = _field(data, "perception", str, "ground_truth")
    if perception not in PERCEPTION_MODES:
        raise GoalError(f"{where}unknown perception mode {perception!r}; known: "
                        f"{', '.join(PERCEPTION_MODES.names())}.")
    try:
        pipeline = PipelineParams.model_validate(_field(data, "pipeline", dict, {}))
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(part) for part in error["loc"])
        raise GoalError(f"{where}invalid pipeline settings{f' at {at}' if at else ''}: {error['msg']}.") from None
    if perception == "perceived":
        _check_pipeline(pipeline)
    return perception, pipeline


def _variant(data, index: int) -> Variant:
    where = f"goal field 'variants' item {index}: "
    if not isinstance(data, dict):
        raise GoalError(f"{where}must be a JSON object, got {type(data).__name__}.")
    unknown = sorted(set(data) - {"episode_id", "perception", "pipeline"})
    if unknown:
        raise GoalError(f"{where}unknown field(s) {', '.join(unknown)}; a variant sets episode_id, perception and "
                        "pipeline.")
    try:
        episode_id = _field(data, "episode_id", str, required=True)
    except GoalError as exc:
        raise GoalError(f"{where}{exc}") from None
    return Variant(episode_id, *_perception(data, where))


def _check_pipeline(pipeline: PipelineParams) -> None:
    """Fail at the goal, not in the middle of a repeat, when a configured model or package is missing."""
    from robot.perception.grasp_backends import create_grasp_backend
    from robot.perception.grounding import create_grounder

    try:
        create_grounder(pipeline.grounding)
        create_grasp_backend(pipeline.grasp)
    except BackendUnavailable as exc:
        raise GoalError(exc.paragraph()) from None


def error_result(message: str, runner: str = "", episode_id: str | None = None) -> dict:
    return {"ok": False, "error": message, "runner": runner, "episode_id": episode_id, "repeats": []}


def _state_json(state) -> dict:
    return {"boxes": {k: [round(v, 5) for v in b.as_list()] for k, b in state.boxes.items()},
            "joints": {k: round(v, 5) for k, v in state.joints.items()}}


class EpisodeRunner:
    """Runs goals on one backend (one robot): the runner node's work, also usable without ROS. ``isolation``: the
    sandbox's (``auto`` / ``bwrap`` / ``none``; None: this process's, robot.sandbox.configure)."""

    def __init__(self, backend: RobotBackend, name: str = "", isolation: str | None = None):
        self.backend = backend
        self.name = name
        self.isolation = isolation
        self._grasp = getattr(backend, "grasp", None)
        """The grasp mode the backend was built with: a goal that names none runs under it."""

    def _load(self, world: World, grasp: str | None = None, backend: RobotBackend | None = None) -> None:
        """Every goal starts from a fresh backend and its world loaded anew (``RobotBackend.restart``): the same goal
        gives the same outcome on any runner of a pool, whatever ran there before."""
        backend = backend or self.backend
        if self._grasp is not None:
            backend.grasp = grasp or self._grasp
        backend.restart()
        backend.load_world(world)

    def _refusal(self, goal: Goal, host, warnings: list[str]) -> dict | None:
        """The error result of a goal this runner cannot run (arm, isolation, grasp modes), else None; says what
        the goal should know about the sandbox in ``warnings``."""
        if goal.arm and goal.arm != getattr(self.backend, "arm", goal.arm):
            return error_result(f"this runner drives a {self.backend.arm}, the goal asks for a {goal.arm}.",
                                self.name, goal.episode_id)
        if host.mode == "none":
            if goal.isolation in ("auto", "bwrap"):
                return error_result(f"this runner runs generated code without namespaces (isolation: none); the "
                                    f"goal asks for isolation: {goal.isolation}.", self.name, goal.episode_id)
            warnings.append(f"{self.name or 'runner'}: {sandbox.NONE_WARNING}")
            log.warning("episode %s: %s", goal.episode_id, warnings[-1])
        if goal.grasp and self._grasp is None:
            return error_result(f"this runner's {self.backend.name} backend has no grasp modes; the goal asks for "
                                f"grasp: {goal.grasp}.", self.name, goal.episode_id)
        return None

    def _caveat(self, goal: Goal, backend: RobotBackend, warnings: list[str]) -> None:
        caveat = getattr(backend, "grasp_caveat", lambda: None)()
        if caveat:  # said, never silently switched: the goal runs in the mode it asked for
            warnings.append(f"{self.name or 'runner'}: {caveat}")
            log.warning("episode %s: %s", goal.episode_id, warnings[-1])

    def _result(self, goal: Goal, host, warnings: list[str], verdict, repeats: list[dict], cancelled: bool,
                wall_s: float) -> dict:
        return {"ok": True, "error": None, "runner": self.name, "episode_id": goal.episode_id,
                "task_id": goal.task_id, "arm": getattr(self.backend, "arm", None), "backend": self.backend.name,
                "perception": goal.perception, "cancelled": cancelled, "isolation": host.mode, "warnings": warnings,
                "policy": {"ok": verdict.ok, "reasons": [wire.clip(m, 300) for m in verdict.messages()[:20]]},
                "repeats": repeats,
                "wall_s": round(wall_s, 4)}

    def run(self, goal: Goal, on_feedback: Callable[[dict], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict:
        if goal.variants:
            return self._run_variants(goal, on_feedback, should_stop)
        started = time.monotonic()
        host = sandbox.host_for(self.isolation)
        warnings: list[str] = []
        refused = self._refusal(goal, host, warnings)
        if refused is not None:
            return refused
        verdict = DEFAULT_POLICY.check(goal.code)
        self._load(goal.world, goal.grasp)
        self._caveat(goal, self.backend, warnings)
        limits = sandbox.Limits(timeout_s=goal.timeout_s, memory_mb=goal.memory_mb)
        repeats, cancelled = [], False
        for index in range(goal.repeats):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            repeats.append(self._repeat(goal, index, limits, on_feedback, should_stop))
            if repeats[-1]["status"] == "cancelled":
                cancelled = True
                break
        return self._result(goal, host, warnings, verdict, repeats, cancelled, time.monotonic() - started)

    def _run_variants(self, goal: Goal, on_feedback, should_stop) -> dict:
        """A goal with ``variants``: each variant's result is the one the goal with the variant's fields gives alone
        (``variants`` in the result, in order). Each variant runs on a backend of its own, so that its repeats
        follow each other as they would alone; repeat by repeat, the variants share the perception pipeline's
        results through a memo (robot/perception/shared.py). A backend that cannot have a twin (a real robot) runs
        the variants one after another, without sharing."""
        started = time.monotonic()
        goals = [replace(goal, episode_id=v.episode_id, perception=v.perception, pipeline=v.pipeline, variants=[])
                 for v in goal.variants]
        host = sandbox.host_for(self.isolation)
        refused = self._refusal(goal, host, [])
        if refused is not None:
            return refused
        twins = [self.backend.twin() for _ in goals[1:]]
        if any(t is None for t in twins):
            results = []
            for one in goals:
                results.append(self.run(one, on_feedback, should_stop))
                if results[-1].get("cancelled"):
                    break
            return self._variants_result(goal, results, None, started)
        backends = [self.backend, *twins]
        shared: dict[str, dict[str, int]] = {}
        try:
            runs = []
            for one, backend in zip(goals, backends, strict=True):
                clock = time.monotonic()
                warnings: list[str] = []
                self._refusal(one, host, warnings)
                self._load(one.world, one.grasp, backend)
                self._caveat(one, backend, warnings)
                runs.append({"goal": one, "backend": backend, "warnings": warnings, "repeats": [],
                             "wall_s": time.monotonic() - clock})
            verdict = DEFAULT_POLICY.check(goal.code)
            limits = sandbox.Limits(timeout_s=goal.timeout_s, memory_mb=goal.memory_mb)
            cancelled = False
            for index in range(goal.repeats):
                memo = PerceptionMemo()  # what repeat `index` perceives: no other repeat starts from its scene
                for run in runs:
                    if should_stop is not None and should_stop():
                        cancelled = True
                        break
                    clock = time.monotonic()
                    run["repeats"].append(self._repeat(run["goal"], index, limits, on_feedback, should_stop, memo,
                                                       run["backend"]))
                    run["wall_s"] += time.monotonic() - clock
                    if run["repeats"][-1]["status"] == "cancelled":
                        cancelled = True
                        break
                for stage, counts in memo.counts.items():
                    total = shared.setdefault(stage, {"computed": 0, "reused": 0})
                    for kind, n in counts.items():
                        total[kind] += n
                if cancelled:
                    break
        finally:
            for twin in twins:
                twin.close()
        results = [self._result(run["goal"], host, run["warnings"], verdict, run["repeats"], cancelled,
                                run["wall_s"]) for run in runs]
        return self._variants_result(goal, results, shared, started)

    def _variants_result(self, goal: Goal, results: list[dict], shared: dict | None, started: float) -> dict:
        """``shared``: per pipeline stage, how many results were computed and how many reused (None: no sharing)."""
        failed = next((r for r in results if not r["ok"]), None)
        warnings = list(dict.fromkeys(w for r in results for w in r.get("warnings", [])))
        return {"ok": failed is None, "error": failed["error"] if failed else None, "runner": self.name,
                "episode_id": goal.episode_id, "task_id": goal.task_id,
                "cancelled": any(r.get("cancelled") for r in results), "warnings": warnings, "variants": results,
                "perception_shared": shared, "wall_s": round(time.monotonic() - started, 4)}

    def _repeat(self, goal: Goal, index: int, limits: sandbox.Limits, on_feedback, should_stop,
                memo: PerceptionMemo | None = None, backend: RobotBackend | None = None) -> dict:
        backend = backend or self.backend
        seed = goal.seed * 1000 + index
        backend.reset(seed, goal.pose_jitter_m)
        perception = create_perception(goal.perception, backend, goal.noise, seed, goal.pipeline, memo)
        tools = RobotTools(backend, perception, motion_failure=goal.motion_failure)

        def step(record: dict) -> None:
            if on_feedback is not None:
                on_feedback({"episode_id": goal.episode_id, "repeat": index, **record})

        outcome = sandbox.run_code(goal.code, tools, limits, on_step=step, should_stop=should_stop,
                                   host=sandbox.host_for(self.isolation))
        state = backend.world_state()
        items = scoring.check_items(goal.evaluation, goal.world, state) if goal.evaluation else []
        success = all(i["ok"] for i in items) if items else None
        record = {"repeat": index, "seed": seed, "status": outcome.status, "grammatical": outcome.grammatical,
                  "error": outcome.error, "reasons": outcome.reasons, "steps": outcome.steps,
                  "failed_motions": tools.failed_motions, "stdout": outcome.stdout, "wall_s": outcome.wall_s,
                  "items": items, "success": success, "calls": outcome.calls,
                  "state": _state_json(state), "perception": perception.report()}
        if on_feedback is not None:
            on_feedback({"episode_id": goal.episode_id, "repeat": index, "done": True, "status": outcome.status,
                         "success": success, "steps": outcome.steps})
        return record
