"""MuEP training: fine-tune baselines (Q-LoRA / projection / LLaMA-Adapter-v2) on the SFT export, log to MLflow."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import run_stage
from tasks import paths
from tasks.muep import layout
from tasks.params import TrackingParams, TrainParams, read_yaml, validate
from tasks.progress import StageLog
from tasks.train.pipeline import Plan, plan_run, run

STAGE = "muep-train"
REPORTS = layout.TRAIN_REPORTS


@task(name="train-baseline", cache_policy=NO_CACHE)
def train_baseline(plan: Plan, tracking: TrackingParams) -> dict:
    return run(plan, tracking)


def train_params(params_file: str | None, **overrides) -> tuple[TrainParams, TrackingParams]:
    """``train:`` of the params file with the flow's overrides (validated like the file itself)."""
    raw = read_yaml(Path(params_file) if params_file else paths.PARAMS_FILE)
    given = {k: v for k, v in overrides.items() if v is not None}
    raw["train"] = {**raw.get("train", {}), **given}
    params = validate(raw, source=f"{params_file or 'params.yaml'} + flow parameters {given}" if given else
                      (params_file or "params.yaml"))
    return params.train, params.tracking


@flow(name=STAGE)
def muep_train(params_file: str | None = None, baseline: str | None = None, profile: str | None = None,
               max_steps: int | None = None, base: str | None = None) -> dict:
    """MuEP training: fine-tune baselines on the SFT export and log to MLflow (one baseline, or train.baselines)."""
    train, tracking = train_params(params_file, profile=profile, max_steps=max_steps,
                                   baselines=[baseline] if baseline else None)
    # One baseline per DVC stage (muep-train-tiny@<name>): each keeps its own run facts, reports/timings/muep-train@<name>.json
    with StageLog(f"{STAGE}@{baseline}" if baseline else STAGE) as slog:
        plans = [plan_run(name, train, base=base) for name in train.baselines]   # every check before any compute
        for plan in plans:
            slog.read(plan.sft_dir / "train.jsonl", f"{plan.dataset['records']} records for {plan.spec.name}")
        reports, facts = {}, {}
        for plan in plans:
            report = train_baseline(plan, tracking)
            facts[plan.spec.name] = report.pop("run_facts")   # speed, memory, run id: not part of the output
            slog.wrote(plan.model_dir / "baseline.json")
            slog.write(REPORTS / f"{plan.spec.name}.json", report)
            reports[plan.spec.name] = report
        slog.run_facts(baselines=facts)
        return reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.muep_train", description=__doc__)
    parser.add_argument("--params", default=None, metavar="FILE", help="params file instead of params.yaml")
    parser.add_argument("--baseline", default=None, help="one registry name (default: train.baselines)")
    parser.add_argument("--profile", choices=["tiny", "full"], default=None, help="override train.profile")
    parser.add_argument("--max-steps", type=int, default=None, help="override train.max_steps")
    parser.add_argument("--base", default=None, help="full profile: a local folder or hub id replacing the "
                        "registry's base checkpoint")
    args = parser.parse_args(argv)
    options = {"baseline": args.baseline, "profile": args.profile, "max_steps": args.max_steps, "base": args.base}
    sys.exit(run_stage(STAGE, functools.partial(checked_then_train, **options), args.params))


def checked_then_train(params_file: str | None = None, **options) -> dict:
    """Every check of :func:`plan_run` before Prefect starts (a bad name, path or dataset costs no server start),
    then the flow (which plans again: deployments call it directly)."""
    train, _ = train_params(params_file, profile=options["profile"], max_steps=options["max_steps"],
                            baselines=[options["baseline"]] if options["baseline"] else None)
    for name in train.baselines:
        plan_run(name, train, base=options["base"])
    return muep_train(params_file=params_file, **options)


if __name__ == "__main__":
    main()
