"""Benchmark of the floors of the four big paper-profile stages (issue #32 item 1): what one unit of each stage's work
must cost at least on this machine, composed from the primitive operations the unit cannot avoid, set against what
the stage spends per unit.

    python bench/floors.py                          # params.yaml's sizes: the floors and a sample's cost per unit
    python bench/floors.py --profile paper          # the same under a profile (its sample units and settings)
    python bench/floors.py --from-run DIR           # ... and a kept run's cost per unit against the floors
    python bench/floors.py --only muep --repeat 7 --scene-instances 3 --ops 12

Stages and their units: ``muep-demos`` one demonstration episode, ``muep-eval`` one agent-episode,
``roboscript-perception`` and ``roboscript-shapes`` one repeat of a trial. Everything runs in this process, with the
stages' own code (tasks/, robot/), no Prefect, no ROS; nothing is read from or written to the repository's data/.

1. **Sample units.** A few real units of each stage, run as its workers run them: MuEP episodes of
   ``--scene-instances`` scene instances (all of their selected episodes, so work shared per scene instance is shared
   as in the stage: ``expect_games`` per batch, then ``run_episode``, as ``tasks.muep.demos.run_batch`` does but for
   the shard writes), then ``tasks.muep.eval.harness.run_batch`` with the stage's scripted agents on the test
   instances' episodes; for the robot stages ``--objects`` objects of each study, evenly spread over its list (every
   ablation setting but ``detector_model``, whose tiny OWL-ViT needs torch), for ``--robot-repeats`` repeats on an
   in-process :class:`~robot.episode.EpisodeRunner` (sim, the params' grasp mode). One unit of another scene
   instance (MuEP) or the first goal (robot) runs first, uncounted: a worker's one-off costs. The sample's measured
   parts per unit (the stages' own timers; for the robot a meter on the sim's physics steps, motion calls, IK solves
   outside motions and world loads, and every tool's own seconds) and its **counts per unit** of each primitive come
   from these runs. Inputs: ``--from-run``'s data/muep (stages 1-3 of that run) or stages 1-3 computed here in
   memory (offline LLM) under the params.
2. **Primitives**, each alone, warm (one untimed call first), ``--repeat`` times on each of ``--ops`` operations of
   the sample (its own problems, games, actions, states, worlds): ``min s`` and ``median s`` are the means over the
   operations of each one's minimum and median. MuEP: the FF plan (the stage's planner process), Fast Downward's
   translation of a scene instance with all its goals (what ``GameEngine`` does once per scene instance), the load
   and reset of a game whose translation is done, one TextWorld step, one render, and for the evaluation the
   episode's start (``EvalEnv.start``), the admissible commands, a step with goal counting, a viewer image (a render
   and a viewer image are timed as drawings: what the worker kept of a state drawn before is cleared first). Robot:
   the world's load on a fresh physics client (``restart`` + ``load_world``), a repeat's reset, the sandbox's run of
   ``x = 1`` and one tool call's round trip (bench/robot_runs.py's stand-in tools), one motion plan (the sim
   planner's IK with collision checks, joint path and its check, to a pose above the object; not executed), one IK
   solve of that pose (what each of the tools' IK solves outside motions costs at least), one
   second of simulated time of the arm driven along a plan under the params' grasp mode, and one detection:
   capturing the k camera views, their TSDF fusion, and the rest of the pipeline (grounding, matching,
   segmentation, planning scene; the stage timings ``Pipeline.run`` records).
3. **Floor per unit** = sum over primitives of count per unit x primitive ``min s`` (``floor med`` with the
   medians). World loads count 1 / the stage's repeats per trial.
4. **Against a run** (``--from-run DIR``, a folder kept by ``bench/pipeline.py --keep DIR``): cost per unit = the
   stage's work seconds (``reports/timings/<stage>.json``'s ``wall_s``) x its workers / its units (episodes in
   the facts' batches; agent-episodes; repeats in the stage's kept goal results). The counts per unit then come from
   the run where it has them (plan lengths, steps, scene instances per episode, detections and tool calls per
   repeat). Per named part (the stages' own timers: the run's, else the sample's), gap = part cost - its floor;
   ``outside`` = cost - the parts (orchestration, pool, transfer, idle workers); the largest is named.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import muep_demos  # noqa: E402 - the table format, the stratified sample and the params overlay of stage 4's bench

STAGES = {"muep-demos": "episode", "muep-eval": "agent-episode", "roboscript-perception": "repeat",
          "roboscript-shapes": "repeat"}
SCRIPTED_AGENTS = ("oracle", "random")   # the evaluation agents that need no model


@dataclass
class Primitive:
    name: str
    ops: int = 0
    repeat: int = 0
    mins: list[float] = field(default_factory=list)
    medians: list[float] = field(default_factory=list)

    def add(self, times: list[float]) -> None:
        self.ops += 1
        self.repeat = len(times)
        self.mins.append(min(times))
        self.medians.append(statistics.median(times))

    @property
    def min_s(self) -> float:
        return statistics.fmean(self.mins) if self.mins else float("nan")

    @property
    def median_s(self) -> float:
        return statistics.fmean(self.medians) if self.medians else float("nan")


def timed(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> list[float]:
    """``fn``'s wall times over ``repeat`` calls after one untimed warm-up call; ``setup`` runs untimed before each."""
    times = []
    for i in range(repeat + 1):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        if i:
            times.append(time.perf_counter() - start)
    return times


@dataclass
class StageFloor:
    """One stage: its primitives, the counts per unit of each, the sample's parts per unit and which primitives
    make each part's floor."""

    stage: str
    units: int = 0                                                  # sample units
    cost_s: float = 0.0                                             # the sample's measured seconds, all units
    counts: dict[str, float] = field(default_factory=dict)          # primitive -> count per unit
    prims: dict[str, Primitive] = field(default_factory=dict)
    parts: dict[str, float] = field(default_factory=dict)           # part -> sample seconds per unit
    part_prims: dict[str, list[str]] = field(default_factory=dict)  # part -> primitives of its floor
    notes: list[str] = field(default_factory=list)

    def prim(self, name: str) -> Primitive:
        return self.prims.setdefault(name, Primitive(name))


def compose(counts: dict[str, float], prims: dict[str, Primitive], which: str = "min_s") -> dict[str, float]:
    """Each primitive's share of the floor of one unit: count per unit x its floor (``min_s`` or ``median_s``).
    A primitive with a count but no measurement is an error: the floor would silently leave it out."""
    missing = [name for name, count in counts.items() if count and name not in prims]
    if missing:
        raise ValueError(f"counts for unmeasured primitives: {', '.join(missing)}")
    return {name: count * getattr(prims[name], which) for name, count in counts.items() if count}


def gaps(cost: float, parts: dict[str, float], part_prims: dict[str, list[str]], floor: dict[str, float]
         ) -> dict[str, float]:
    """Per named part, its cost per unit minus its floor (the floor shares of its primitives); ``outside``: the cost
    per unit the parts leave unexplained (orchestration, transfer, idle workers)."""
    out = {part: seconds - sum(floor.get(p, 0.0) for p in part_prims.get(part, [])) for part, seconds in parts.items()}
    out["outside"] = cost - sum(parts.values())
    return out


def largest(named: dict[str, float]) -> tuple[str, float]:
    return max(named.items(), key=lambda kv: kv[1])


# ----------------------------------------------------------------------------------------------------------------
# Params and MuEP inputs


def load_bench_params(tmp: Path, profile: str | None, run: Path | None):
    """The run's params (its params.yaml: ``embp run --profile`` leaves the profile applied there), else the
    repository's with ``profile`` merged in."""
    import yaml

    from tasks.params import deep_merge, load_params, read_yaml

    if run is not None:
        return load_params(run / "params.yaml")
    params = read_yaml(REPO / "params.yaml")
    if profile:
        params = deep_merge(params, read_yaml(REPO / "profiles" / f"{profile}.yaml"))
    path = tmp / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return load_params(path)


def muep_inputs(params, tmp: Path, run: Path | None):
    """(data/muep folder, accepted tasks, scenes): the run's stages 1-3, or computed here with the stages'
    functions (offline LLM, cache in ``tmp``)."""
    from tasks.llm import build_client
    from tasks.muep.filter import filter_tasks, scene_facts
    from tasks.muep.generate import TaskRecord, generate
    from tasks.muep.metadata import InstanceRecord, ObjectTypeRecord, SceneRecord, collect_all, write_tables
    from tasks.records import read_table, to_frame

    if run is not None:
        data = run / "data" / "muep"
        for path in (data / "metadata" / "scenes.parquet", data / "filter" / "accepted.parquet"):
            if not path.exists():
                sys.exit(f"--from-run {run}: {path} does not exist (a kept run of stages 1-3 is needed)")
        return (data, read_table(data / "filter" / "accepted.parquet", TaskRecord),
                read_table(data / "metadata" / "scenes.parquet", SceneRecord))
    data = tmp / "muep"
    meta = data / "metadata"
    write_tables(collect_all(params.muep.scenes, params.muep.metadata), meta)
    scenes = read_table(meta / "scenes.parquet", SceneRecord)
    types = read_table(meta / "object_types.parquet", ObjectTypeRecord)
    tasks, _, _ = generate(scenes, types, params.muep.generate, params.llm, build_client(params.llm, tmp / "llm"))
    facts = scene_facts(scenes, types, read_table(meta / "instances.parquet", InstanceRecord))
    accepted, _, _ = filter_tasks(tasks, facts, drop_duplicates=params.muep.filter.drop_duplicates)
    return data, to_frame(accepted, TaskRecord), scenes


def spread(frame, n: int, size: dict[str, float]) -> list[str]:
    """``n`` scene instances of ``frame``'s, centred and evenly spaced over them in order of receptacle count
    (stage 1's cost proxy, bench/muep_demos.py's ``receptacle_counts``; then floorplan order)."""
    names = sorted(frame.scene.unique(), key=lambda s: (size.get(s, 0.0), muep_demos.floorplan_order(s)))
    return sorted({names[(2 * i + 1) * len(names) // (2 * n)] for i in range(min(n, len(names)))})


def muep_sample(params, data: Path, accepted, scenes, n_instances: int):
    """The stage's selection, and the scene instances of the sample: ``n_instances`` of all for the demonstrations
    and as many of the evaluation's test splits for the evaluation (``spread``), all of their selected episodes."""
    from tasks.muep.demos import select_episodes

    demos = params.muep.demos
    selected = select_episodes(accepted, scenes, demos.episodes, demos.seed)
    size = muep_demos.receptacle_counts(data)
    tests = selected[selected.split.isin(params.muep.eval.splits)]
    return selected, spread(selected, n_instances, size), spread(tests, n_instances, size) if len(tests) else []


# ----------------------------------------------------------------------------------------------------------------
# muep-demos


def warm_up_task(selected, sample_scenes: set[str]) -> dict | None:
    """An episode of a scene instance outside the sample, to pay a worker's one-off costs before the sample."""
    others = selected[~selected.scene.isin(sample_scenes)]
    return others.iloc[0].to_dict() if len(others) else None


def demos_floor(params, data: Path, selected, picked: list[str], test_picked: list[str], repeat: int, ops: int,
                tmp: Path) -> tuple[StageFloor, list, object]:
    """Runs the sample's episodes as a stage-4 worker does, then times each primitive alone on the first ``ops``
    ok episodes. Returns the floor, the sample's episode records (the evaluation plays their test episodes) and the
    warm-up episode's record (an episode of another scene instance, run first and not counted)."""
    from tasks.muep import textworld_fast
    from tasks.muep.demos import DemoSettings, _target, expect_games, make_batches, run_episode, scene_context
    from tasks.muep.pddl import Problem
    from tasks.muep.planner import PlannerWorker
    from tasks.muep.render import build_renderer
    from tasks.muep.textworld_env import START_LOCATION, GameEngine, _domain, for_grammar

    demos = params.muep.demos
    settings = DemoSettings(grammar=demos.grammar, search=demos.search, plan_timeout_s=demos.plan_timeout_s,
                            max_plan_length=demos.max_plan_length, renderer=demos.renderer,
                            render_size=demos.render_size, metadata_dir=str(data / "metadata"),
                            out_dir=str(tmp / "demos"))
    sample = selected[selected.scene.isin(set(picked) | set(test_picked))]

    def problem_of(task: dict) -> Problem:
        ctx = scene_context(settings.metadata_dir, task["scene"])
        return Problem(f"muep_{task['task_id']}", ctx.receptacles, ctx.instances, task["task_type"],
                       task["object_type"], _target(task))

    sf = StageFloor("muep-demos")
    planner, games = PlannerWorker(), GameEngine()
    renderer = build_renderer(settings.renderer, size=settings.render_size)
    records, costs = [], []
    warm = warm_up_task(selected, set(sample.scene))
    try:
        if warm is not None:   # a worker's one-off costs (planner process, TextWorld's env, the grammar, renderer)
            games.expect([problem_of(warm)])
            warm_record = run_episode(warm, settings, planner, renderer, "warm-up", games)[0]
        for batch in make_batches(sample, demos.batch_size):
            clock = time.perf_counter()
            expect_games(games, batch, settings.metadata_dir)
            sf.cost_s += time.perf_counter() - clock
            for task in batch.tasks:
                clock = time.perf_counter()
                record, _, timer = run_episode(task, settings, planner, renderer, batch.batch_id, games)
                sf.cost_s += time.perf_counter() - clock
                records.append((task, record))
                costs.append(timer.t)
        sf.units = len(records)
        for part in ("plan", "load", "steps", "render"):
            sf.parts[part] = sum(t[part] for t in costs) / sf.units
        ok = [(t, r) for t, r in records if r.status == "ok"]
        n_scenes = len({t["scene"] for t, _ in records})
        sf.counts = {"FF plan": 1.0 * sum(1 for _, r in records if r.status != "not_posable") / sf.units,
                     "translation (scene instance)": n_scenes / sf.units,
                     "game load (translated)": len(ok) / sf.units,
                     "TextWorld step": sum(r.plan_length for _, r in ok) / sf.units,
                     "render": sum(r.plan_length + 1 for _, r in ok) / sf.units}
        sf.part_prims = {"plan": ["FF plan"], "load": ["translation (scene instance)", "game load (translated)"],
                         "steps": ["TextWorld step"], "render": ["render"]}
        sf.notes.append(f"sample: {sf.units} episodes ({len(ok)} ok) of {n_scenes} scene instances; its cost: "
                        "whole episodes and the batches' goal announcements, without the shard writes")

        timed_scenes: set[str] = set()
        for task, record in ok[:ops]:
            problem = problem_of(task)
            sf.prim("FF plan").add(timed(lambda: planner.solve(problem.strips(), settings.search,
                                                               settings.plan_timeout_s), repeat))
            if task["scene"] not in timed_scenes:   # the scene instance's translation with all its sample goals
                timed_scenes.add(task["scene"])
                posed = [for_grammar(problem_of(t), settings.grammar) for t, r in ok if t["scene"] == task["scene"]]
                goals = sorted({p.adl_goal() for p in posed})
                first = posed[0]
                sf.prim("translation (scene instance)").add(timed(lambda: textworld_fast.translate_scene(
                    _domain(), lambda g: first.adl(START_LOCATION, goal=g), goals), repeat))
            games.expect([problem])

            def load():
                game = games.load(problem, task["instruction"], settings.grammar)
                game.reset()
                return game

            sf.prim("game load (translated)").add(timed(load, repeat))
            step_times: list[list[float]] = [[] for _ in record.actions]
            states = []
            for r in range(repeat + 1):
                game = load()
                for i, command in enumerate(record.actions, start=1):
                    start = time.perf_counter()
                    step = game.step(command, i)
                    if r:
                        step_times[i - 1].append(time.perf_counter() - start)
                    if r == 0:
                        states.append(step.state)
            for times in step_times:
                sf.prim("TextWorld step").add(times)
            ctx = scene_context(settings.metadata_dir, task["scene"])
            renderer.begin_scene(ctx.layout)
            # a drawing, not a look-up: the renderer keeps the PNG of each (layout, state) it encoded, and a repeat of
            # the same state would time the look-up (the stage's own hits are in its run cost, not in the floor); the
            # text runs its fonts keep stay kept, as in a worker, where the same few hundred recur
            forget = getattr(renderer, "forget_pictures", None)
            for state in [load().reset()[1], *states]:
                sf.prim("render").add(timed(lambda s=state: renderer.render(ctx.layout, s), repeat, setup=forget))
    finally:
        planner.close()
    return sf, [r for _, r in records], (warm_record if warm is not None else None)


# ----------------------------------------------------------------------------------------------------------------
# muep-eval


def eval_floor(params, data: Path, records: list, test_picked: list[str], repeat: int, ops: int, tmp: Path,
               warm=None) -> StageFloor:
    """Plays the sample's test episodes as an evaluation worker does (the scripted agents of ``muep.eval.agents``),
    then times each primitive alone on the first ``ops`` agent-episodes."""
    from tasks.muep.eval import episodes as eval_episodes
    from tasks.muep.eval.agents import AGENTS, AgentContext
    from tasks.muep.eval.env import EvalEnv, engine, for_protocol, pose
    from tasks.muep.eval.harness import (EvalSettings, _viewer_image, _viewer_renderer, forget_saved_images,
                                        run_batch)
    from tasks.muep.eval.protocol import PROTOCOLS
    from tasks.muep.eval.records import EpisodeSpec
    from tasks.muep.textworld_env import START_LOCATION, _domain, for_grammar
    from tasks.muep import textworld_fast

    ev = params.muep.eval
    sf = StageFloor("muep-eval")
    agents = [a for a in ev.agents if a in SCRIPTED_AGENTS]
    if len(agents) < len(ev.agents):
        sf.notes.append(f"agents {', '.join(a for a in ev.agents if a not in agents)} left out (need a model)")
    def spec_of(r) -> EpisodeSpec:
        return EpisodeSpec(episode_id=r.episode_id, split=r.split, scene=r.scene, task_type=r.task_type,
                           instruction=r.instruction, object_type=r.object_type, target_type=r.target_type,
                           grammar=r.grammar, expert_actions=tuple(r.actions), source="demos")

    specs = [spec_of(r) for r in records if r.status == "ok" and r.scene in set(test_picked) and r.split in ev.splits]
    if not specs or not agents:
        sf.notes.append("no test episode in the sample: nothing to evaluate")
        return sf
    settings = EvalSettings(metadata_dir=str(data / "metadata"), params=ev,
                            context=AgentContext(seed=ev.seed, history_window=params.muep.sft.history_window),
                            images_dir=str(tmp / "eval-images"))
    labels = [(a, AGENTS.load(a).describe(ev).label) for a in agents]
    if warm is not None and warm.status == "ok":   # a worker's one-off costs, on a scene instance outside the sample
        run_batch(eval_episodes.make_batches([spec_of(warm)], labels, 1)[0], settings)
    outputs = [run_batch(b, settings) for b in eval_episodes.make_batches(specs, labels, ev.batch_size)]
    timings = [t for o in outputs for t in o.timings]
    results = [r for o in outputs for r in o.results]
    sf.units = len(timings)
    sf.cost_s = sum(t.total_s for t in timings)
    for part in ("load", "game", "agent", "metrics"):
        sf.parts[part] = sum(getattr(t, f"{part}_s") for t in timings) / sf.units
    sf.parts["other"] = sf.cost_s / sf.units - sum(sf.parts.values())
    steps = sum(t.steps for t in timings)
    n_scenes = len({s.scene for s in specs})
    sf.counts = {"translation (scene instance)": n_scenes / sf.units, "episode start (translated)": 1.0,
                 "admissible commands": steps / sf.units, "step + goal counting": steps / sf.units,
                 "viewer image": (steps + sf.units) / sf.units if settings.images_dir else 0.0}
    sf.part_prims = {"load": ["translation (scene instance)", "episode start (translated)"],
                     "game": ["admissible commands", "step + goal counting"], "other": ["viewer image"]}
    sf.notes.append(f"sample: {len(specs)} test episodes x {len(agents)} agents of {n_scenes} scene instances, "
                    f"{steps / sf.units:.1f} steps each")

    protocol = PROTOCOLS[ev.protocol]
    by_spec = {s.episode_id: s for s in specs}
    games = engine()
    timed_scenes: set[str] = set()
    for result in results[:ops]:
        spec = for_protocol(by_spec[result.episode_id], protocol)
        if spec.scene not in timed_scenes:
            timed_scenes.add(spec.scene)
            posed = [for_grammar(pose(for_protocol(s, protocol), settings.metadata_dir)[0], protocol.grammar)
                     for s in specs if s.scene == spec.scene]
            goals = sorted({p.adl_goal() for p in posed})
            sf.prim("translation (scene instance)").add(timed(lambda: textworld_fast.translate_scene(
                _domain(), lambda g: posed[0].adl(START_LOCATION, goal=g), goals), repeat))
        start = lambda: EvalEnv.start(spec, settings.metadata_dir, games)  # noqa: E731
        sf.prim("episode start (translated)").add(timed(start, repeat))
        actions = [s.action for s in result.steps]
        times = {k: [[] for _ in actions] for k in ("admissible commands", "step + goal counting", "viewer image")}
        for r in range(repeat + 1):
            env = start()
            viewer = _viewer_renderer(settings, env)
            for i, action in enumerate(actions):
                for name, call in (("admissible commands", env.admissible), ("step + goal counting",
                                                                             lambda a=action: env.step(a)),
                                   ("viewer image", lambda: _viewer_image(settings, env, viewer))):
                    if name == "viewer image":
                        forget_saved_images()  # a drawing and a save, not the look-up of a name saved before
                    clock = time.perf_counter()
                    call()
                    if r:
                        times[name][i].append(time.perf_counter() - clock)
        for name, per_step in times.items():
            for t in per_step:
                sf.prim(name).add(t)
    return sf


# ----------------------------------------------------------------------------------------------------------------
# Robot stages


class SimMeter:
    """Counts and times on an in-process runner's sim: physics steps (all go through ``SimBackend._step``), the
    planner's motion calls (outermost only: a motion that detours calls others), the physics inside them, its IK
    solves outside motions (the tools' reachability checks), and the goal's world load (``EpisodeRunner._load``: a
    fresh physics client and the world)."""

    MOTIONS = ("move_to", "approach", "cartesian", "move_joints")

    def __init__(self, runner) -> None:
        self.steps = self.motions = self.iks = 0
        self.physics_s = self.motion_s = self.physics_in_motion_s = self.load_s = self.ik_s = 0.0
        self._depth, self._loading = 0, False
        sim = runner.backend
        step = sim._step

        def counted_step(n: int = 1) -> None:
            clock = time.perf_counter()
            step(n)
            if not self._loading:
                took = time.perf_counter() - clock
                self.steps += n
                self.physics_s += took
                if self._depth:
                    self.physics_in_motion_s += took

        sim._step = counted_step   # an instance attribute: restart() re-runs __init__, which leaves it in place
        load = runner._load

        def counted_load(world, grasp=None) -> None:
            clock, self._loading = time.perf_counter(), True
            try:
                load(world, grasp)
            finally:
                self._loading = False
                self.load_s += time.perf_counter() - clock
            self._wrap(sim.planner)    # restart() made a new planner

        runner._load = counted_load

    def _wrap(self, planner) -> None:
        for name in self.MOTIONS:
            original = getattr(planner, name)

            def counted(*args, _original=original, **kwargs):
                outer = self._depth == 0
                self._depth += 1
                clock = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self._depth -= 1
                    if outer:
                        self.motions += 1
                        self.motion_s += time.perf_counter() - clock

            setattr(planner, name, counted)
        ik = planner.ik

        def counted_ik(*args, **kwargs):   # outside motions: the tools' reachability checks and grasp poses
            if self._depth:
                return ik(*args, **kwargs)
            clock = time.perf_counter()
            try:
                return ik(*args, **kwargs)
            finally:
                self.iks += 1
                self.ik_s += time.perf_counter() - clock

        planner.ik = counted_ik


ROBOT_PRIMS = ("world load", "reset", "sandbox repeat", "tool call", "motion plan", "IK solve", "physics (sim s)",
               "capture k views", "TSDF fusion of k views", "rest of the pipeline")


def robot_goals(stage: str, params, objects: int, repeats: int) -> tuple[list[tuple[object, dict]], int, list[str]]:
    """(trial, goal) pairs of the sample, the stage's repeats per trial, and notes."""
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.eval import ablation, shapes

    ep, worlds, catalog = params.roboscript.eval, params.roboscript.worlds, load_catalog()
    notes = []
    def spread_names(names: list[str]) -> list[str]:   # centred, evenly spaced over the study's objects
        picked = [names[(2 * i + 1) * len(names) // (2 * objects)] for i in range(min(objects, len(names)))]
        notes.append(f"objects: {', '.join(picked)} of {len(names)}")
        return picked

    if stage == "roboscript-shapes":
        names = spread_names([a.name for a in shapes.study_assets(catalog, ep.shapes.objects)])
        trials, _ = shapes.study_trials(catalog, worlds, names, ep.shapes.studies)
        return [(t, shapes.goal(t, ep) | {"repeats": repeats}) for t in trials], ep.shapes.repeats, notes
    names = spread_names(list(ep.ablation.objects))
    base, _ = shapes.study_trials(catalog, worlds, names, ep.ablation.studies)
    settings = [s for s in ep.ablation.settings if s != "detector_model"]
    if len(settings) < len(ep.ablation.settings):
        notes.append("setting detector_model left out of the sample (its tiny OWL-ViT needs torch)")
    pairs = []
    for setting in settings:
        for trial in base:
            at = ablation.AblationTrial(setting, trial)
            pairs.append((trial, ablation.goal(at, ep) | {"repeats": repeats}))
    return pairs, ep.ablation.repeats, notes


def robot_floor(stage: str, params, objects: int, sample_repeats: int, repeat: int, ops: int) -> StageFloor:
    """Runs the sample's goals on an in-process runner (the stage's runners' code, without ROS), then times each
    primitive alone in the sample's first ``ops`` trials' worlds."""
    from robot.backends.sim import SimBackend
    from robot.episode import EpisodeRunner, parse_goal

    ep = params.roboscript.eval
    sf = StageFloor(stage)
    pairs, stage_repeats, sf.notes = robot_goals(stage, params, objects, sample_repeats)
    runner = EpisodeRunner(SimBackend(arm=ep.arm, grasp=ep.grasp), "floors")
    warm = pairs[0][1] | {"repeats": 1}   # a runner's one-off costs (the sandbox's start, first imports), not counted
    runner.run(parse_goal(json.dumps(warm)))
    meter = SimMeter(runner)
    wall = detections = calls = perception_s = 0.0
    by_tool: dict[str, float] = {}
    initial: set[tuple[str, int]] = set()   # (trial, repeat) whose initial scene some setting detected
    perceiving = 0
    results = []
    with tool_clock(by_tool):
        for _, goal in pairs:
            results.append((goal, runner.run(parse_goal(json.dumps(goal)))))
    for goal, result in results:
        if not result["ok"]:
            sys.exit(f"{stage}: goal {goal['episode_id']} could not run: {result['error']}")
        wall += result["wall_s"]
        for r in result["repeats"]:
            sf.units += 1
            report = r.get("perception") or {}
            detections += report.get("calls", 0)
            if report.get("calls"):   # the same world, seed and jitter in every setting: the same initial scene
                perceiving += 1
                initial.add((goal["episode_id"].split("/", 1)[-1], r["repeat"]))
            perception_s += report.get("wall_s", 0.0)
            calls += len(r.get("calls") or [])
    runner.backend.close()
    n = sf.units
    time_step = runner.backend.time_step
    sf.counts = {"world load": 1 / stage_repeats, "reset": 1.0, "sandbox repeat": 1.0, "tool call": calls / n,
                 "motion plan": meter.motions / n, "physics (sim s)": meter.steps * time_step / n,
                 "capture k views": detections / n, "TSDF fusion of k views": detections / n,
                 "rest of the pipeline": detections / n}
    # per unit as the stage amortises a world load: over its own repeats per trial, not the sample's
    sf.counts["IK solve"] = meter.iks / n
    sf.parts = {"world load": meter.load_s / len(pairs) / stage_repeats, "perception": perception_s / n,
                "motion planning": (meter.motion_s - meter.physics_in_motion_s) / n, "physics": meter.physics_s / n,
                "IK outside motions": meter.ik_s / n}
    rest = wall / n - meter.load_s / n - sum(v for k, v in sf.parts.items() if k != "world load")
    sf.parts["sandbox, tools, rest"] = rest
    sf.cost_s = sum(sf.parts.values()) * n
    sf.part_prims = {"world load": ["world load"], "physics": ["physics (sim s)"], "motion planning": ["motion plan"],
                     "IK outside motions": ["IK solve"],
                     "perception": ["capture k views", "TSDF fusion of k views", "rest of the pipeline"],
                     "sandbox, tools, rest": ["reset", "sandbox repeat", "tool call"]}
    sf.notes.append(f"sample: {len(pairs)} goals x {sample_repeats} repeat(s); per repeat {meter.motions / n:.1f} "
                    f"motions, {meter.steps * time_step / n:.1f} sim s, {detections / n:.1f} detections, "
                    f"{calls / n:.1f} tool calls")
    slowest = sorted(((result["wall_s"] / max(1, len(result["repeats"])), goal["episode_id"])
                      for goal, result in results), reverse=True)[:3]
    sf.notes.append("slowest goals (s per repeat, world load included): "
                    + ", ".join(f"{key} {seconds:.2f}" for seconds, key in slowest))
    top = sorted(by_tool.items(), key=lambda kv: -kv[1])[:4]
    sf.notes.append(f"per repeat by tool (s, a tool's own time and the tools it calls; {meter.iks / n:.1f} IK "
                    f"solves outside motions, {meter.ik_s / n:.3f} s): "
                    + ", ".join(f"{k} {v / n:.3f}" for k, v in top))
    robot_primitives(sf, pairs, ep, repeat, ops)
    if perceiving > len(initial) and {"capture k views", "TSDF fusion of k views"} <= set(sf.prims):
        shared = (perceiving - len(initial)) / n
        each = sf.prims["capture k views"].min_s + sf.prims["TSDF fusion of k views"].min_s
        sf.notes.append(f"{perceiving} repeats perceive {len(initial)} distinct initial scenes (settings share "
                        f"them): {shared:.2f} first captures + fusions per repeat repeat another setting's, "
                        f"{shared * each:.3f} s of the floor per repeat")
    return sf


def sandbox_primitives(sf: StageFloor, repeat: int) -> None:
    """A repeat's sandbox run of ``x = 1`` and one tool call's round trip (20 calls less that, over 20), against
    bench/robot_runs.py's tools that answer at once."""
    import robot_runs
    from robot import sandbox

    sandbox.prepare()

    def run(code: str):
        outcome = sandbox.run_code(code, robot_runs._Tools(), sandbox.Limits(timeout_s=30))
        if outcome.status != "ok":
            raise RuntimeError(f"the sandbox did not run {code!r}: {outcome.status} {outcome.error}")
        return outcome

    calls = run(robot_runs.CALLS).steps
    trivial = sorted(timed(lambda: run(robot_runs.TRIVIAL), repeat))
    many = sorted(timed(lambda: run(robot_runs.CALLS), repeat))
    sf.prim("sandbox repeat").add(trivial)
    sf.prim("tool call").add([max(0.0, (m - t) / calls) for m, t in zip(many, trivial, strict=True)])


@contextmanager
def tool_clock(seconds: dict[str, float]):
    """Inside, every robot tool's calls (``RobotTools``' methods the tool API names) add their seconds to
    ``seconds[tool]``."""
    from robot.contract.tool_api import TOOL_SPECS
    from robot.tools_impl import RobotTools

    originals = {name: RobotTools.__dict__[name] for name in TOOL_SPECS if name in RobotTools.__dict__}

    def clocked(name: str, method):
        def tool(self, *args, **kwargs):
            clock = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - clock
        return tool

    for name, method in originals.items():
        setattr(RobotTools, name, clocked(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(RobotTools, name, method)


def _pose_above(sim, name: str):
    from robot.contract.tool_api import Pose

    box = sim.model_box(name)
    centre = (box[:3] + box[3:]) / 2
    return Pose((float(centre[0]), float(centre[1]), float(box[5]) + 0.10), (1.0, 0.0, 0.0, 0.0))


def plan_motion(sim, pose):
    """The planning half of ``MotionPlanner.move_to``: IK with collision checks, the straight joint path, its
    check (None when blocked: ``move_to`` would detour)."""
    planner = sim.planner
    q0 = sim.q()
    q_goal = planner.ik(pose, q0, ignore=frozenset())
    if q_goal is None:
        return None
    path = planner.joint_path(q0, q_goal)
    return path if planner._check_path(path, frozenset()) is None else None


def robot_primitives(sf: StageFloor, pairs: list[tuple[object, dict]], ep, repeat: int, ops: int) -> None:
    """The robot primitives in the worlds of the first ``ops`` distinct trials of the sample; the perception ones
    with the pipeline of each trial's first goal that perceives."""
    import numpy as np

    from robot.backends.sim import SimBackend
    from robot.backends.sim_ik import forget_attempts
    from robot.contract.params import NoiseParams, PipelineParams
    from robot.perception import create_perception, fusion

    sandbox_primitives(sf, repeat)
    trials: dict[str, tuple[object, dict | None]] = {}
    for trial, goal in pairs:
        key = f"{trial.study}/{trial.asset}"
        found = trials.setdefault(key, (trial, None))
        if found[1] is None and goal.get("perception") == "perceived":
            trials[key] = (trial, goal)
    sim = SimBackend(arm=ep.arm, grasp=ep.grasp)
    try:
        for trial, goal in list(trials.values())[:ops]:
            world = trial.world
            sf.prim("world load").add(timed(lambda: (sim.restart(), sim.load_world(world)), repeat))
            sf.prim("reset").add(timed(lambda: sim.reset(0, ep.pose_jitter_m), repeat))
            pose = _pose_above(sim, trial.asset)
            if plan_motion(sim, pose) is not None:
                # the solver keeps its seed attempts (sim_ik): forgotten before each call, so a solve is timed
                sf.prim("motion plan").add(timed(lambda: plan_motion(sim, pose), repeat, setup=forget_attempts))
                sf.prim("IK solve").add(timed(lambda: sim.planner.ik(pose, sim.q(), ignore=frozenset()), repeat,
                                              setup=forget_attempts))
                sim.reset(0, ep.pose_jitter_m)
                path = plan_motion(sim, pose)
                sim_s = len(path) * sim.substeps * sim.time_step   # nothing held: ``substeps`` steps a tick
                sf.prim("physics (sim s)").add([t / sim_s for t in timed(
                    lambda: sim.execute(path), repeat, setup=lambda: sim.reset(0, ep.pose_jitter_m))])
            if goal is None:
                continue
            pipeline = PipelineParams.model_validate(goal["pipeline"])
            sim.reset(0, ep.pose_jitter_m)
            perception = create_perception("perceived", sim, NoiseParams(), 0, pipeline)
            runner = perception.runner

            def capture():
                return sim.capture(runner.specs, np.random.default_rng(0), pipeline.cameras.depth_noise_m)

            frames = capture()
            sf.prim("capture k views").add(timed(capture, repeat))
            boxes = sim.robot_link_boxes() if pipeline.fusion.self_filter else None
            sf.prim("TSDF fusion of k views").add(timed(lambda: fusion.fuse(frames, pipeline.fusion,
                                                                            runner.bounds(), boxes), repeat))
            rest = []
            for _ in range(repeat + 1):
                perception.detect([trial.asset])
                rest.append(sum(perception.last.timings[k] for k in ("ground", "match", "segment", "scene")))
            sf.prim("rest of the pipeline").add(rest[1:])
    finally:
        sim.close()


# ----------------------------------------------------------------------------------------------------------------
# A kept run


def run_stage(run: Path, stage: str, params, sf: StageFloor) -> dict | None:
    """The run's cost per unit of ``stage``: units, workers, work seconds, the parts its facts time per unit, and the
    counts per unit the run itself tells; None when the run did not run the stage."""
    facts_file = run / "reports" / "timings" / f"{stage}.json"
    if not facts_file.exists():
        return None
    facts = json.loads(facts_file.read_text())
    out = {"work_s": facts["wall_s"], "parts": {}, "counts": {}}
    if stage == "muep-demos":
        import pandas as pd

        batches = facts.get("batches", {})
        out["units"] = sum(len(b) for b in batches.values())
        out["workers"] = params.muep.demos.workers
        for part in sf.parts:
            out["parts"][part] = facts["totals"][f"{part}_s"] / out["units"]
        index_file = run / "data" / "muep" / "demos" / "episodes.parquet"
        if index_file.exists():
            index = pd.read_parquet(index_file, columns=["scene", "status", "plan_length"])
            ok = index[index.status == "ok"]
            n = len(index)
            out["counts"] = {"translation (scene instance)": index.scene.nunique() / n,
                             "game load (translated)": len(ok) / n, "TextWorld step": ok.plan_length.sum() / n,
                             "render": (ok.plan_length + 1).sum() / n,
                             "FF plan": (index.status != "not_posable").sum() / n}
    elif stage == "muep-eval":
        episodes = [e for t in facts.get("timings", {}).values() for e in t["episodes"]]
        out["units"] = facts.get("played", facts.get("agent_episodes"))
        out["workers"] = facts.get("workers", params.muep.eval.workers)
        if episodes:
            n = len(episodes)
            for part in ("load", "game", "agent", "metrics"):
                out["parts"][part] = sum(e[f"{part}_s"] for e in episodes) / n
            out["parts"]["other"] = sum(e["total_s"] for e in episodes) / n - sum(out["parts"].values())
            steps = sum(e["steps"] for e in episodes) / n
            out["counts"] = {"admissible commands": steps, "step + goal counting": steps,
                             "viewer image": steps + 1 if sf.counts.get("viewer image") else 0.0}
    else:
        results = []
        for path in sorted((run / "data" / "cache" / "roboscript-goals" / stage).glob("*.json")):
            saved = json.loads(path.read_text())
            results.append((saved.get("key", ""), saved.get("result", {})))
        # a perception goal that shares its settings' perception carries one result per setting (``variants``, keyed
        # by their episode ids ``setting/study/object``), each with its own repeats
        repeats = [(key, r) for key, result in results for r in result.get("repeats") or []]
        repeats += [(variant.get("episode_id", key), r) for key, result in results
                    for variant in result.get("variants") or [] for r in variant.get("repeats") or []]
        out["units"] = len(repeats)
        out["workers"] = len(facts.get("pool", {}).get("runners", [])) or params.roboscript.eval.runners
        if repeats:
            n = len(repeats)
            detections = sum((r.get("perception") or {}).get("calls", 0) for _, r in repeats) / n
            out["counts"] = {"tool call": sum(len(r.get("calls") or []) for _, r in repeats) / n,
                             "capture k views": detections, "TSDF fusion of k views": detections,
                             "rest of the pipeline": detections}
            per_setting = facts.get("perception_s")
            if per_setting is not None:
                spent = sum(per_setting.get(key.split("/")[0], 0.0) for key, _ in repeats)
                out["parts"]["perception"] = spent / n
    units = out["units"] or 0
    out["cost"] = out["work_s"] * out["workers"] / units if units else None
    return out


# ----------------------------------------------------------------------------------------------------------------
# Tables


def _s(value: float | None, digits: int = 4) -> str:
    return "?" if value is None or value != value else f"{value:.{digits}f}"


def primitives_table(floors: list[StageFloor], counts: dict[str, dict[str, float]] | None = None) -> str:
    headers = ["stage", "primitive", "ops", "repeat", "min s", "median s", "count/unit", "floor s/unit"]
    rows = []
    for sf in floors:
        these = (counts or {}).get(sf.stage) or sf.counts
        for name, count in these.items():
            p = sf.prims.get(name)
            rows.append([sf.stage, name, str(p.ops if p else 0), str(p.repeat if p else 0),
                         _s(p.min_s if p else None, 5), _s(p.median_s if p else None, 5), f"{count:.3f}",
                         _s(count * p.min_s if p else None, 5)])
    return muep_demos._format(headers, rows)


def counts_for(sf: StageFloor, run: dict | None) -> dict[str, float]:
    """The counts per unit: the run's where it tells them, else the sample's."""
    return sf.counts | {k: v for k, v in ((run or {}).get("counts") or {}).items() if k in sf.counts}


def stage_rows(floors: list[StageFloor], runs: dict[str, dict | None]) -> tuple[list[list[str]], list[str]]:
    """One row per stage (the run's cost per unit when there is a run, else the sample's) and a line per stage
    with every named gap."""
    rows, lines = [], []
    for sf in floors:
        run = runs.get(sf.stage)
        counts = counts_for(sf, run)
        try:
            floor = compose(counts, sf.prims)
            floor_med = compose(counts, sf.prims, "median_s")
        except ValueError as exc:
            lines.append(f"{sf.stage}: no floor ({exc})")
            continue
        total, total_med = sum(floor.values()), sum(floor_med.values())
        sample_cost = sf.cost_s / sf.units if sf.units else None
        if run is not None and run.get("cost") is not None:
            cost, units, source = run["cost"], run["units"], "run"
            parts = sf.parts | run["parts"]
        else:
            cost, units, source = sample_cost, sf.units, "sample"
            parts = dict(sf.parts)
        named = gaps(cost, parts, sf.part_prims, floor) if cost is not None else {}
        name, gap = largest(named) if named else ("?", None)
        rows.append([sf.stage, STAGES[sf.stage], source, str(units), _s(sample_cost), _s(cost), _s(total),
                     _s(total_med), "?" if not cost or not total else f"{cost / total:.2f}",
                     f"{name} {_s(gap, 3)}" if gap is not None else "?"])
        if named:
            lines.append(f"{sf.stage} gaps per {STAGES[sf.stage]} (s; part cost - its floor, from the "
                         f"{'run where it times the part, else the sample' if source == 'run' else 'sample'}): "
                         + ", ".join(f"{k} {v:+.4f}" for k, v in sorted(named.items(), key=lambda kv: -kv[1])))
        lines += [f"  {note}" for note in sf.notes]
    return rows, lines


def floors_table(floors: list[StageFloor], runs: dict[str, dict | None]) -> str:
    headers = ["stage", "unit", "cost of", "units", "sample s/unit", "cost/unit s", "floor/unit s", "floor med s",
               "ratio", "largest gap s"]
    rows, lines = stage_rows(floors, runs)
    return muep_demos._format(headers, rows) + "\n" + "\n".join(lines)


#: The robot stages with a floor (``--only`` takes each by name, or both as ``robot``).
ROBOT_STAGES = ("roboscript-perception", "roboscript-shapes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None, help="a profile (profiles/<name>.yaml) for the params")
    parser.add_argument("--from-run", type=Path, default=None, help="a kept run (bench/pipeline.py --keep DIR): its "
                        "params, its stage 1-3 data, and its cost per unit against the floors")
    parser.add_argument("--only", default="muep,robot", help="comma-separated: muep (demos and eval), robot (both "
                        "robot stages), roboscript-perception, roboscript-shapes")
    parser.add_argument("--scene-instances", type=int, default=1, help="MuEP scene instances of the sample, of all "
                        "splits and again of the test splits (all their episodes)")
    parser.add_argument("--objects", type=int, default=2, help="objects per robot study in the sample (evenly "
                        "spread over the study's objects)")
    parser.add_argument("--robot-repeats", type=int, default=1, help="repeats per robot trial in the sample")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls of each primitive (after a warm-up)")
    parser.add_argument("--ops", type=int, default=6, help="operations of the sample each primitive is timed on "
                        "(episodes, agent-episodes, trials)")
    args = parser.parse_args(argv)
    if args.profile and args.from_run:
        parser.error("--from-run takes the run's own params: leave out --profile")
    parts = set(args.only.split(","))
    known = {"muep", "robot", *ROBOT_STAGES}
    if not parts <= known:
        parser.error(f"--only {args.only}: {', '.join(sorted(parts - known))} is not one of {', '.join(sorted(known))}")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    load_start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    run = args.from_run.resolve() if args.from_run else None
    floors: list[StageFloor] = []
    with tempfile.TemporaryDirectory(prefix="embp-bench-floors-") as tmp_name:
        tmp = Path(tmp_name)
        params = load_bench_params(tmp, args.profile, run)
        if "muep" in parts:
            print("MuEP inputs and sample ...", file=sys.stderr)
            data, accepted, scenes = muep_inputs(params, tmp, run)
            selected, picked, test_picked = muep_sample(params, data, accepted, scenes, args.scene_instances)
            demos, records, warm = demos_floor(params, data, selected, picked, test_picked, args.repeat, args.ops,
                                               tmp)
            floors += [demos, eval_floor(params, data, records, test_picked, args.repeat, args.ops, tmp, warm)]
        for stage in ROBOT_STAGES:
            if "robot" in parts or stage in parts:
                print(f"{stage} sample ...", file=sys.stderr)
                floors.append(robot_floor(stage, params, args.objects, args.robot_repeats, args.repeat, args.ops))
    runs = {sf.stage: run_stage(run, sf.stage, params, sf) if run else None for sf in floors}
    print(f"floors: {'run ' + str(run) if run else 'profile ' + (args.profile or 'none (params.yaml)')}; "
          f"{os.cpu_count()} cores; python {platform.python_version()}; load average {load_start} at the start, "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {time.strftime('%Y-%m-%d %H:%M')}")
    print()
    print("primitives (min / median s: means over the ops of each op's min / median over the repeats)")
    print(primitives_table(floors, {sf.stage: counts_for(sf, runs.get(sf.stage)) for sf in floors}))
    print()
    print("floor per unit = sum of count/unit x primitive min s; ratio = cost/unit / floor/unit")
    print(floors_table(floors, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
