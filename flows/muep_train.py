"""MuEP training: fine-tune baselines (Q-LoRA / projection / LLaMA-Adapter-v2) on the SFT export, log to MLflow."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.errors import ConfigError
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


#: The params blocks a training run can read (same schema): the tiny baselines of ``dvc repro`` and the GPU workers,
#: and the real-model run (docs/real-model.md).
SECTIONS = ("train", "real_model.train")


def _section(data: dict, dotted: str) -> dict:
    for part in dotted.split("."):
        data = data.setdefault(part, {})
    return data


def train_params(params_file: str | None, section: str = "train", **overrides) -> tuple[TrainParams, TrackingParams]:
    """The ``section`` block (``train`` or ``real_model.train``) of the params file with the flow's overrides
    (validated like the file itself)."""
    if section not in SECTIONS:
        raise ConfigError(f"unknown training section {section!r}; known: {', '.join(SECTIONS)}.")
    raw = read_yaml(Path(params_file) if params_file else paths.PARAMS_FILE)
    given = {k: v for k, v in overrides.items() if v is not None}
    _section(raw, section).update(given)
    params = validate(raw, source=f"{params_file or 'params.yaml'} + flow parameters {given}" if given else
                      (params_file or "params.yaml"))
    return (params.train if section == "train" else params.real_model.train), params.tracking


@flow(name=STAGE)
def muep_train(params_file: str | None = None, baseline: str | None = None, profile: str | None = None,
               max_steps: int | None = None, base: str | None = None, section: str = "train") -> dict:
    """MuEP training: fine-tune baselines on the SFT export and log to MLflow (one baseline, or the section's
    baselines)."""
    train, tracking = train_params(params_file, section, profile=profile, max_steps=max_steps,
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
    parser.add_argument("--section", choices=SECTIONS, default="train",
                        help="params block to read: train (default) or real_model.train (the real-model run)")
    args = parser.parse_args(argv)
    options = {"baseline": args.baseline, "profile": args.profile, "max_steps": args.max_steps, "base": args.base,
               "section": args.section}
    sys.exit(run_stage(STAGE, functools.partial(checked_then_train, **options), args.params))


def checked_then_train(params_file: str | None = None, **options) -> dict:
    """Every check of :func:`plan_run` before Prefect starts (a bad name, path or dataset costs no server start),
    then the flow (which plans again: deployments call it directly)."""
    train, _ = train_params(params_file, options.get("section", "train"), profile=options["profile"],
                            max_steps=options["max_steps"],
                            baselines=[options["baseline"]] if options["baseline"] else None)
    for name in train.baselines:
        plan_run(name, train, base=options["base"])
    return muep_train(params_file=params_file, **options)


if __name__ == "__main__":
    main()
