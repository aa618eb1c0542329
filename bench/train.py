"""Training throughput and peak memory of every baseline family, on the tiny profile on CPU (the default) -- and,
through ``bench/train_gpu.py``, of the real checkpoints on a GPU.

    python bench/train.py                                  # all eight, tiny, CPU, 10 steps each
    python bench/train.py --baselines opt-6.7b llava --steps 20 --threads 2
    python bench/train.py --json reports/bench_train.json

Every baseline is measured in a fresh Python process (so ``ru_maxrss`` is that baseline's own peak) which builds the
model exactly as the training flow does (``plan_run`` + ``TrainSession``: tokenizer, base saved and reloaded, 4-bit
where the registry says so, adapters) and runs ``tasks.train.trainer.fit`` on the SFT export (default
``data/muep/sft``; ``--synthetic`` uses the tests' small export instead). The first step is a warm-up: ``tokens/s``
is non-padding tokens (visual tokens included) per second over the remaining steps. No MLflow, no Prefect.

Columns: ``tokens/s``; ``s/step``; ``peak MiB`` -- on CPU the process's max RSS (imports included), on CUDA
``torch.cuda.max_memory_allocated`` during training; ``start MiB`` -- on CPU the RSS after the imports, before the
model is built; ``load s`` -- building/loading the model; ``trainable``/``total`` parameters; ``loss`` first -> last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COLUMNS = ("baseline", "method", "4bit", "tokens/s", "s/step", "peak MiB", "start MiB", "load s", "trainable",
           "total", "loss")


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(name: str, profile: str, device: str, steps: int, batch_size: int | None, seq_len: int,
            sft_dir: Path, threads: int | None) -> dict:
    """One baseline in this process: build as the flow does, train ``steps`` steps, measure."""
    import resource

    import torch

    sys.path.insert(0, str(REPO))
    from tasks.params import TrackingParams, TrainParams
    from tasks.train.pipeline import plan_run
    from tasks.train.session import TrainSession
    from tasks.train.trainer import fit

    start_rss = _rss_mib()
    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    params = TrainParams(profile=profile, baselines=[name], max_steps=steps, batch_size=batch_size, grad_accum=1,
                         max_seq_len=seq_len, device=device, cpu_threads=threads, output_dir=str(work),
                         save_every=steps, eval_batches=0, warmup_steps=0)
    t0 = time.perf_counter()
    plan = plan_run(name, params, sft_dir=sft_dir)
    session = TrainSession(plan, TrackingParams(uri=f"sqlite:///{work / 'mlflow.db'}"))
    load_s = time.perf_counter() - t0
    if plan.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = fit(session.model, session.batcher(plan.train), plan.hyper, device=plan.device,
                 ckpt_dir=work / "ckpt", fingerprint="bench")
    timed = result.extra["timings"][1:] or result.extra["timings"]
    tokens, seconds = sum(t for t, _ in timed), sum(s for _, s in timed)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if plan.device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"baseline": name, "method": plan.spec.method, "4bit": plan.hyper.quantize_4bit, "device": plan.device,
            "tokens/s": tokens / seconds, "s/step": seconds / len(timed), "peak MiB": peak,
            "start MiB": start_rss if plan.device == "cpu" else float("nan"), "load s": load_s,
            "trainable": session.n_trainable, "total": session.n_total,
            "loss": f"{result.losses[0][1]:.3f} -> {result.losses[-1][1]:.3f}", "batch": plan.hyper.batch_size,
            "seq_len": seq_len, "steps": steps}


def run_children(names: list[str], args: argparse.Namespace, profile: str, device: str) -> list[dict]:
    rows = []
    for name in names:
        cmd = [sys.executable, __file__, "--child", name, "--profile", profile, "--device", device,
               "--steps", str(args.steps), "--seq-len", str(args.seq_len), "--sft", str(args.sft)]
        if args.batch_size:
            cmd += ["--batch-size", str(args.batch_size)]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                              env=os.environ | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            rows.append({"baseline": name, "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]})
        else:
            rows.append(json.loads(lines[-1]))
        print(f"  {name}: {'error' if 'error' in rows[-1] else 'done'}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    def cell(row, col):
        value = row.get(col, "")
        if isinstance(value, float):
            return f"{value:,.1f}" if col != "s/step" else f"{value:.3f}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}"
        return str(value)

    body = [[cell(r, c) for c in COLUMNS] if "error" not in r else [r["baseline"], "error: " + r["error"]]
            for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body if len(b) > i)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def parser(description: str = __doc__) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description.splitlines()[0])
    p.add_argument("--baselines", nargs="*", default=None, help="registry names (default: all eight)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=None, help="default: the profile's batch size")
    p.add_argument("--seq-len", type=int, default=384)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--sft", type=Path, default=REPO / "data/muep/sft")
    p.add_argument("--synthetic", action="store_true", help="use the tests' small SFT export instead of --sft")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--profile", choices=["tiny", "full"], default=None, help="default: tiny here, full on a GPU")
    p.add_argument("--device", default=None, help=argparse.SUPPRESS)
    return p


def prepare_sft(args: argparse.Namespace) -> None:
    if args.synthetic:
        sys.path.insert(0, str(REPO / "tests"))
        from test_train_support import make_sft

        args.sft = make_sft(Path(tempfile.mkdtemp(prefix="bench-sft-")))
    if not (args.sft / "train.jsonl").exists():
        sys.exit(f"no SFT export at {args.sft}: run `dvc repro muep-sft`, or pass --synthetic")


def main(argv: list[str] | None = None, profile: str = "tiny", device: str = "cpu",
         description: str = __doc__) -> list[dict]:
    args = parser(description).parse_args(argv)
    profile, device = args.profile or profile, args.device or device
    if args.child:
        print(json.dumps(measure(args.child, profile, device, args.steps, args.batch_size, args.seq_len, args.sft,
                                 args.threads)))
        return []
    sys.path.insert(0, str(REPO))
    from tasks.train.registry import names

    prepare_sft(args)
    started = time.perf_counter()
    rows = run_children(args.baselines or names(), args, profile, device)
    print(f"\n{profile} profile on {device}, {args.steps} steps, seq_len {args.seq_len}, SFT {args.sft} "
          f"({time.perf_counter() - started:.0f} s)\n")
    print(table(rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
