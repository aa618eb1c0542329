"""SmolLM2-135M's learning curve on MuEP (docs/ladder-muep.md, stage ``ladder-curve``): Q-LoRA of the registry's
``smollm2-135m`` baseline (``real_model.train``'s hyper-parameters, PEFT's save format) on nested subsets of the SFT
export's training records, one subset per size of ``ladder.curve.sizes`` (0 = the model as published, zero-shot),
each point played on the same fixed ALFWorld games by the ``hf`` agent as muep-real-eval plays it (``rank``: the
admissible command with the highest mean token log-likelihood). ``flows/ladder_curve.py`` only orchestrates.

Same inputs, same bytes: the subsets come from a seeded hash order, training is seeded (``real_model.train.seed``)
on a fixed number of torch threads with kernels capped as everywhere (core/cpu.py), play is greedy. What a run
measured (seconds, tokens/s, memory) is returned apart (:attr:`CurveRun.facts`) and never enters the report.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from core.errors import ConfigError, DataError
from tasks import paths
from tasks.ladder_muep import BATCH_SIZE, choose_games, stratified_subset
from tasks.muep.eval import metrics
from tasks.muep.eval.agents import AGENTS, AgentContext
from tasks.muep.eval.episodes import make_batches
from tasks.muep.eval.harness import EpisodeTiming, EvalSettings, run_batch
from tasks.muep.eval.records import EpisodeResult, EpisodeSpec
from tasks.muep.eval.runs import stop_rules
from tasks.params import EvalParams, HFAgentParams, LadderCurveParams, LadderMuEPParams, TrackingParams, TrainParams

REPORT = paths.REPORTS / "ladder" / "curve.json"
TABLE = paths.REPORTS / "ladder" / "curve.md"
TIMED_TABLE = paths.REPORTS / "timings" / "ladder-curve.md"
"""The table with each point's training and playing time: run facts, never a DVC output."""
MODELS = paths.ROOT / "models" / "ladder-curve"
"""``n<size>/sft/train.jsonl`` (the subset) and ``n<size>/<baseline>/`` (the PEFT adapter, ``baseline.json``)."""
TRAJECTORIES = paths.DATA / "muep" / "ladder-curve"
"""``n<size>/<split>.jsonl``: every game each point played, step by step (also each MLflow run's artifact)."""

AGENT = "hf"
SUBSET_SALT = "ladder-curve"
SUBSET_RULE = (
    "The SFT export's training records (data/muep/sft/train.jsonl) in order of sha256('ladder-curve:<seed>:' + "
    "record id), seed = ladder.curve.seed; the subset of size n is the first n of that order, so every subset "
    "holds every smaller one. Size 0 trains nothing: the zero-shot model.")
STEPS_RULE = "steps = ceil(epochs x records / (batch_size x grad_accum)) of real_model.train's micro-batches"
GAMES_RULE = (
    "The games ladder-muep plays (ladder.muep.games_per_split per split, stratified by task type), then of those "
    "ladder.curve.games_per_split per split by the same stratified rule (tasks.ladder_muep.stratified_subset); "
    "null = all of ladder-muep's games.")


# ----------------------------------------------------------------------------------------------------------------
# Which records, which games


def read_records(path: Path) -> dict[str, str]:
    """The SFT split's records by id (the JSON line as it is), in file order; checked as training reads them."""
    from tasks.train.data import read_split

    read_split(path)                        # a missing, empty or malformed file fails here, naming its line
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            record_id = json.loads(line).get("id")
            if not isinstance(record_id, str) or not record_id:
                raise DataError(f"{path}, line {number}: the record has no 'id'; the curve chooses records by id.",
                                hint="Rerun muep-sft (tasks/muep/sft.py writes an id per record).")
            if record_id in out:
                raise DataError(f"{path}, line {number}: record id {record_id!r} appears twice.")
            out[record_id] = line if line.endswith("\n") else line + "\n"
    return out


def subset_order(ids: Sequence[str], seed: int) -> list[str]:
    """The records' order of :data:`SUBSET_RULE` (independent of the file's order)."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{SUBSET_SALT}:{seed}:{i}".encode()).hexdigest())


def nested_subsets(ids: Sequence[str], sizes: Sequence[int], seed: int, source: str = "the SFT export"
                   ) -> dict[int, list[str]]:
    """Per size, the ids of its training subset: the first ``size`` of :func:`subset_order`. A size larger than the
    records there are is an error naming ``ladder.curve.sizes``."""
    order = subset_order(ids, seed)
    too_big = [n for n in sizes if n > len(order)]
    if too_big:
        raise ConfigError(f"ladder.curve.sizes asks for {too_big[0]} training records but {source} has "
                          f"{len(order)}.", hint="Use smaller sizes, or more demonstrations (muep.demos.episodes; "
                          "the ladder profile plays 96 episodes).")
    return {n: order[:n] for n in sizes}


def curve_games(index: pd.DataFrame, rules: LadderMuEPParams, per_split: int | None
                ) -> tuple[list[EpisodeSpec], dict[str, dict[str, int]]]:
    """The games every point plays (:data:`GAMES_RULE`) and per split how many ladder-muep plays and how many of
    them the curve plays."""
    ladder_specs, ladder_counts = choose_games(index, rules.splits, rules.games_per_split)
    chosen: set[str] = set()
    counts = {}
    for split in rules.splits:
        mine = pd.DataFrame([{"episode_id": s.episode_id, "task_type": s.task_type}
                             for s in ladder_specs if s.split == split])
        ids = stratified_subset(mine, per_split)
        chosen |= set(ids)
        counts[split] = {"games": ladder_counts[split]["games"], "ladder_muep": ladder_counts[split]["chosen"],
                         "chosen": len(ids)}
    return [s for s in ladder_specs if s.episode_id in chosen], counts


# ----------------------------------------------------------------------------------------------------------------
# Training


def train_params(train: TrainParams, curve: LadderCurveParams, size: int, models_dir: Path) -> TrainParams:
    """``real_model.train`` for one point: the curve's baseline, the steps of :data:`STEPS_RULE`, no held-out loss
    (its batches would cost as much as a training step), the curve's threads, ``<models_dir>/n<size>``."""
    from tasks.train.pipeline import resolve_hyper
    from tasks.train.registry import get_spec

    hyper = resolve_hyper(get_spec(curve.baseline), train)
    steps = max(1, math.ceil(curve.epochs * size / (hyper.batch_size * hyper.grad_accum)))
    return train.model_copy(update={"baselines": [curve.baseline], "max_steps": steps, "eval_batches": 0,
                                    "max_train_records": None, "cpu_threads": curve.threads,
                                    "save_every": max(steps, train.save_every),
                                    "output_dir": str(models_dir / f"n{size}")})


def train_point(size: int, ids: Sequence[str], records: dict[str, str], curve: LadderCurveParams,
                train: TrainParams, tracking: TrackingParams, models_dir: Path,
                on_step: Callable | None = None) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Q-LoRA on the subset ``ids`` (written as ``<models_dir>/n<size>/sft/train.jsonl``): the training report
    (deterministic), its run facts, and the trained model's folder."""
    from tasks.train.pipeline import plan_run, run

    sft = models_dir / f"n{size}" / "sft"
    sft.mkdir(parents=True, exist_ok=True)
    (sft / "train.jsonl").write_text("".join(records[i] for i in ids), encoding="utf-8")
    plan = plan_run(curve.baseline, train_params(train, curve, size, models_dir), sft_dir=sft)
    report = run(plan, tracking, on_step)
    facts = report.pop("run_facts")
    keep = ("steps", "tokens", "first_loss", "final_loss", "losses", "trainable_params")
    return ({k: report[k] for k in keep} | {"hyperparameters": plan.hyper.as_dict(),
                                            "records_sha256": plan.dataset["sha256"]},
            facts, plan.model_dir)


# ----------------------------------------------------------------------------------------------------------------
# Playing


def eval_params(curve: LadderCurveParams, rules: LadderMuEPParams, seed: int, model_path: str) -> EvalParams:
    """``muep.eval`` as the harness reads it for one point: the ``hf`` agent on ``model_path`` with the curve's
    action selection, dtype and threads; ladder-muep's protocol and stop rules."""
    hf = HFAgentParams(model_path=model_path, action_selection=curve.action_selection, dtype=curve.dtype,
                       threads=curve.threads)
    return EvalParams(agents=[AGENT], splits=list(rules.splits), protocol=rules.protocol, max_steps=rules.max_steps,
                      loop_stop=rules.loop_stop, max_invalid_streak=rules.max_invalid_streak, seed=seed, hf=hf)


def point_label(label: str, size: int) -> str:
    """The leaderboard label of a point: the ``hf`` agent's (model, how trained, selection) and the subset's size,
    so that no point shares a row with muep-real-eval's."""
    return f"{label} curve@{size}"


def play_point(ev: EvalParams, label: str, specs: Sequence[EpisodeSpec], metadata_dir: Path,
               alfworld_metadata_dir: Path, history_window: int,
               on_game: Callable[[EpisodeResult], None] | None = None
               ) -> tuple[list[EpisodeResult], list[EpisodeTiming]]:
    """Play ``specs`` with the ``hf`` agent of ``ev`` in this process, in ladder-muep's batches."""
    from tasks.muep.eval.agents.hf_models import release

    settings = EvalSettings(metadata_dir=str(metadata_dir), params=ev,
                            context=AgentContext(seed=ev.seed, history_window=history_window),
                            alfworld_metadata_dir=str(alfworld_metadata_dir))
    results: list[EpisodeResult] = []
    timings: list[EpisodeTiming] = []
    try:
        for batch in make_batches(list(specs), [(AGENT, label)], BATCH_SIZE):
            out = run_batch(batch, settings)
            results += out.results
            timings += out.timings
            for result in out.results:
                if on_game is not None:
                    on_game(result)
    finally:
        release(ev.hf.model_path)           # the next point retrains into the same folders
    return results, timings


# ----------------------------------------------------------------------------------------------------------------
# The whole curve


@dataclass
class Point:
    size: int
    label: str
    model: str
    ev: EvalParams
    training: dict[str, Any] | None
    results: list[EpisodeResult]
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class CurveRun:
    points: list[Point]
    subsets: dict[int, list[str]]
    report: dict[str, Any]
    facts: dict[str, Any]


def run_curve(curve: LadderCurveParams, rules: LadderMuEPParams, seed: int, train: TrainParams,
              tracking: TrackingParams, sft_train: Path, specs: Sequence[EpisodeSpec], games: dict[str, dict],
              metadata_dir: Path, alfworld_metadata_dir: Path, history_window: int, models_dir: Path = MODELS,
              on_point: Callable[[Point], None] | None = None) -> CurveRun:
    """Train and play every point of ``curve.sizes`` on ``specs``; the report (:func:`curve_report`) and the run
    facts. Everything is checked before the first step: the sizes against the records, the models' paths."""
    from tasks.train.registry import get_spec

    if not curve.sizes:
        raise ConfigError("ladder.curve.sizes is empty: the curve is off, nothing to train or play.")
    if not specs:
        raise DataError("the learning curve has no game to play (ladder.curve.games_per_split).")
    spec = get_spec(curve.baseline)
    if spec.method != "qlora":
        raise ConfigError(f"ladder.curve.baseline: {curve.baseline} is a {spec.method} baseline; the curve is "
                          "Q-LoRA's.", hint="Name a Q-LoRA baseline of the registry (smollm2-135m).")
    records = read_records(sft_train)
    subsets = nested_subsets(list(records), curve.sizes, curve.seed, paths.rel(sft_train))
    if 0 in curve.sizes:
        AGENTS.load(AGENT).preflight(eval_params(curve, rules, seed, curve.zero_shot))
    points: list[Point] = []
    for size in curve.sizes:
        facts: dict[str, Any] = {"records": size}
        training = None
        model = curve.zero_shot
        if size:
            cpu = time.process_time()
            training, train_facts, model_dir = train_point(size, subsets[size], records, curve, train, tracking,
                                                           models_dir)
            model = str(model_dir)
            facts |= {"train_s": train_facts["train_seconds"], "tokens_per_s": train_facts["tokens_per_s"],
                      "train_cpu_s": round(time.process_time() - cpu, 2),
                      "peak_memory_mb": train_facts["peak_memory_mb"], "train_run_id": train_facts["mlflow_run_id"]}
        ev = eval_params(curve, rules, seed, model)
        label = point_label(AGENTS.load(AGENT).describe(ev).label, size)
        clock, cpu = time.perf_counter(), time.process_time()
        results, timings = play_point(ev, label, specs, metadata_dir, alfworld_metadata_dir, history_window)
        steps = sum(t.steps for t in timings)
        facts |= {"play_s": round(time.perf_counter() - clock, 2), "play_cpu_s": round(time.process_time() - cpu, 2),
                  "games": len(results), "game_steps": steps,
                  "s_per_step": round(sum(t.agent_s for t in timings) / steps, 3) if steps else None}
        point = Point(size, label, model, ev, training, results, facts)
        points.append(point)
        if on_point is not None:
            on_point(point)
    report = curve_report(points, subsets, curve, rules, seed, train, specs, games, sft_train, len(records))
    return CurveRun(points, subsets, report, {f"n{p.size}": p.facts for p in points})


# ----------------------------------------------------------------------------------------------------------------
# Reports


def row(point: Point) -> dict[str, Any]:
    """One line of the curve: the size, its training (steps, tokens, losses) and its rates with 95 % intervals."""
    rates = metrics.report(point.results)
    overall = rates["overall"]
    training = point.training or {}
    return {"records": point.size, "label": point.label,
            "steps": training.get("steps", 0), "tokens": training.get("tokens", 0),
            "first_loss": training.get("first_loss"), "final_loss": training.get("final_loss"),
            "episodes": overall["episodes"], "sr": overall["sr"], "gcs": overall["gcs"], "pr": overall.get("pr"),
            "ci95": overall["ci95"], "by_split": rates["by_split"],
            "end_reasons": dict(sorted(Counter(r.end_reason for r in point.results).items()))}


def curve_report(points: Sequence[Point], subsets: dict[int, list[str]], curve: LadderCurveParams,
                 rules: LadderMuEPParams, seed: int, train: TrainParams, specs: Sequence[EpisodeSpec],
                 games: dict[str, dict], sft_train: Path, n_records: int) -> dict[str, Any]:
    """``reports/ladder/curve.json``: the design (baseline, rules, agent), the games, the subsets and one row per
    size. No time in it: the same inputs give the same bytes."""
    from tasks.train.data import file_digest

    trained = next((p.training for p in points if p.training), None)
    return {"design": {"baseline": curve.baseline, "zero_shot": curve.zero_shot, "sizes": list(curve.sizes),
                       "epochs": curve.epochs, "steps_rule": STEPS_RULE, "subset_rule": SUBSET_RULE,
                       "subset_seed": curve.seed, "train_seed": train.seed,
                       "hyperparameters": trained["hyperparameters"] if trained else None,
                       "agent": AGENT, "action_selection": curve.action_selection, "dtype": curve.dtype,
                       "threads": curve.threads, "protocol": rules.protocol, "max_steps": rules.max_steps,
                       "stop_rules": stop_rules(points[0].ev), "seed": seed},
            "games": {"rule": GAMES_RULE, "games_per_split": curve.games_per_split, "splits": games,
                      "episodes": {s: sorted(x.episode_id for x in specs if x.split == s) for s in games}},
            "training_records": {"file": paths.rel(sft_train), "sha256": file_digest([sft_train]),
                                 "records": n_records,
                                 "subsets": {str(n): ids for n, ids in sorted(subsets.items())},
                                 "subset_sha256": {str(p.size): p.training["records_sha256"]
                                                   for p in points if p.training}},
            "rows": [row(p) for p in points]}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _ci(pair: Sequence[float] | None) -> str:
    return "-" if not pair else f"[{100 * pair[0]:.1f}, {100 * pair[1]:.1f}]"


def table_md(report: dict[str, Any], facts: dict[str, Any] | None = None) -> str:
    """The curve as a Markdown table; with ``facts`` (run facts) also each point's training and playing time."""
    design, games = report["design"], report["games"]
    counts = ", ".join(f"{s}: {c['chosen']} of ladder-muep's {c['ladder_muep']}" for s, c in games["splits"].items())
    head = ["records", "train steps", "tokens", "loss first -> last", "episodes", "SR %", "SR 95% CI", "GCS %",
            "GCS 95% CI", "PR %", "PR 95% CI"]
    if facts is not None:
        head += ["training s (CPU s)", "tokens/s", "playing s (CPU s)", "agent s/step"]
    lines = [f"# Learning curve: {design['baseline']} (Q-LoRA) on MuEP's ALFWorld games", "",
             f"Zero-shot point: `{design['zero_shot']}`. Agent `{design['agent']}` [{design['action_selection']}], "
             f"{design['stop_rules']}. Games: {counts}. Subsets: nested, seed {design['subset_seed']}; "
             f"{design['steps_rule']} (epochs {design['epochs']}). Rows under 30 episodes are indicative (*).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["rows"]:
        star = " *" if r["ci95"].get("indicative") else ""
        loss = "-" if r["first_loss"] is None else f"{r['first_loss']:.3f} -> {r['final_loss']:.3f}"
        cells = [str(r["records"]), str(r["steps"]), str(r["tokens"]), loss, f"{r['episodes']}{star}", _pct(r["sr"]),
                 _ci(r["ci95"].get("sr")), _pct(r["gcs"]), _ci(r["ci95"].get("gcs")), _pct(r["pr"]),
                 _ci(r["ci95"].get("pr"))]
        if facts is not None:
            f = facts.get(f"n{r['records']}", {})
            cells += [f"{f.get('train_s', '-')} ({f.get('train_cpu_s', '-')})", str(f.get("tokens_per_s", "-")),
                      f"{f.get('play_s', '-')} ({f.get('play_cpu_s', '-')})", str(f.get("s_per_step", "-"))]
        lines.append("| " + " | ".join(cells) + " |")
    if facts is not None:
        lines += ["", "Times are this run's (run facts): they are not part of the DVC output reports/ladder/curve.md."]
    return "\n".join(lines) + "\n"


def off_report() -> dict[str, Any]:
    """The report when ``ladder.curve.sizes`` is empty (the default run): it says so and how to turn it on."""
    return {"enabled": False, "note": "ladder.curve.sizes is empty: the learning curve is off. The ladder profile "
            "(profiles/ladder.yaml) runs it; docs/ladder-muep.md."}
