"""Benchmark of the whole pipeline as a user runs it: `dvc repro` of a fresh copy, per-stage work and orchestration.

    python bench/pipeline.py                    # the default pipeline in a fresh copy (outputs regenerated)
    python bench/pipeline.py --profile paper    # a profile (`embp run --profile paper`), same table
    python bench/pipeline.py --keep DIR         # keep the copy in DIR (to look at its outputs)
    python bench/pipeline.py --jobs 1           # one stage at a time (a plain `dvc repro` under `embp run`)
    python bench/pipeline.py --profile paper muep-leaderboard   # only these stages and what they depend on

The copy is the tests' (tests/repo_copy.py): the repository's tracked and untracked-but-not-ignored files, minus
data/, models/, reports/ and dvc.lock but with the committed files of persisted outputs (as a fresh clone has them),
committed to a fresh git repository, so every stage runs. The clock is the wall time of the whole
`embp run` (DVC, every stage process, the shared Prefect server's start). Per stage, from the run facts each stage
writes (``reports/timings/<stage>.json``, see flows/_runtime.record_overhead):

* ``work s``: the stage's own work (``StageLog`` from enter to exit: reads, compute, writes);
* ``process s``: the stage's process from interpreter start to the end of its flow;
* ``startup s``: interpreter start, imports, params check and the lease on the shared Prefect server (its start
  included for the first stage, or after the server's idle exit);
* ``overhead s`` = process - work: what orchestration adds to the stage (imports, Prefect's run bookkeeping).

``from s`` / ``to s``: when the stage's ``dvc repro`` started and ended, from the start of the run (``embp run``
runs independent stages side by side: ``reports/timings/embp-run.json``). With one stage at a time (``embp run
--jobs 1``), ``dvc + rest`` is the whole run's wall time minus the sum of the stage processes: DVC's own hashing and
lock writing, interpreter exits, and the server start where no stage waited for it.

The last line is the CPU time of every process the run waited for (stages, workers, runners, DVC, the shared
Prefect server): divided by the cores, the shortest the run could take if it kept every core busy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from repo_copy import copy_repo  # noqa: E402 - the tests' copy of a fresh clone, so the bench runs what CI runs

from flows._parallel import facts_file  # noqa: E402


def run_pipeline(work: Path, profile: str | None, targets: list[str], jobs: int | None = None
                 ) -> tuple[float, str, tuple[float, float]]:
    """The run's wall time, its output, and the CPU seconds (user, system) of every process it waited for: the
    stages, their workers and robot runners, the DVC processes and the shared Prefect server."""
    bin_dir = str(Path(sys.executable).parent)
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "EMBP_ROOT": str(work),
                        "DVC_NO_ANALYTICS": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        "PREFECT_HOME": str(work / ".prefect-home")}
    for key in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI"):
        env.pop(key, None)
    cmd = ([str(Path(bin_dir) / "embp"), "run"] + (["--profile", profile] if profile else [])
           + (["--jobs", str(jobs)] if jobs else []) + targets)
    log = work / "bench-pipeline.log"      # the run's output as it goes (`tail -f` it on a long run)
    # after setup, as a user runs it: `make setup` has created Prefect's database (not timed)
    subprocess.run([str(Path(bin_dir) / "prefect"), "server", "database", "upgrade", "-y"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
    output = log.read_text()
    if proc.returncode != 0 or "Running stage '" not in output:
        sys.exit(f"`{' '.join(cmd[1:])}` failed (exit {proc.returncode}):\n{output[-6000:]}")
    return wall, output, cpu


def stage_rows(work: Path, output: str) -> list[dict]:
    """One row per stage that ran, in the order they started; with ``embp run``'s timeline
    (``reports/timings/embp-run.json``), when each stage's ``dvc repro`` started and ended."""
    order = [line.split("Running stage '")[1].split("'")[0] for line in output.splitlines()
             if "Running stage '" in line]
    timeline_file = work / "reports/timings/embp-run.json"
    timeline = json.loads(timeline_file.read_text())["stages"] if timeline_file.exists() else {}
    rows = []
    for stage in order:
        path = facts_file(work, stage)   # a foreach stage's facts carry its flow's name (muep-train@opt-6.7b)
        facts = json.loads(path.read_text()) if path.exists() else {}
        rows.append({"stage": stage, "work_s": facts.get("wall_s"), "process_s": facts.get("process_s"),
                     "startup_s": facts.get("startup_s"), "overhead_s": facts.get("overhead_s"),
                     "start_s": timeline.get(stage, {}).get("start_s"), "end_s": timeline.get(stage, {}).get("end_s")})
    return rows


def _f(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_table(rows: list[dict], wall: float, profile: str | None, targets: list[str],
                cpu: tuple[float, float]) -> None:
    print(f"pipeline: {'default' if not profile else 'profile ' + profile}"
          f"{'; targets ' + ' '.join(targets) if targets else ''}; {os.cpu_count()} cores; "
          f"python {platform.python_version()}; {time.strftime('%Y-%m-%d')}")
    print(f"{'stage':34s} {'work s':>8s} {'process s':>10s} {'startup s':>10s} {'overhead s':>11s} "
          f"{'from s':>7s} {'to s':>7s}")
    for r in rows:
        print(f"{r['stage']:34s} {_f(r['work_s']):>8s} {_f(r['process_s']):>10s} {_f(r['startup_s']):>10s} "
              f"{_f(r['overhead_s']):>11s} {_f(r['start_s']):>7s} {_f(r['end_s']):>7s}")
    measured = [r for r in rows if r["process_s"] is not None]
    processes = sum(r["process_s"] for r in measured)
    overheads = sorted(r["overhead_s"] for r in measured)
    print(f"{'all stages':34s} {_f(sum(r['work_s'] or 0 for r in rows)):>8s} {_f(processes):>10s}")
    if overheads:
        median = overheads[len(overheads) // 2]
        print(f"overhead per stage: median {median:.2f} s, max {overheads[-1]:.2f} s over {len(overheads)} stages")
    if any(r["start_s"] is not None for r in rows):   # stages side by side: the processes sum past the wall time
        print(f"stages side by side: {processes:.1f} s of stage processes in {wall:.1f} s of run "
              f"({processes / wall:.2f} at once on average)")
        print(f"whole run: {wall:.1f} s ({wall / 60:.1f} min)")
    else:
        print(f"dvc + rest: {wall - processes:.1f} s; whole run: {wall:.1f} s ({wall / 60:.1f} min)")
    user, system = cpu
    total, cores = user + system, os.cpu_count() or 1
    print(f"CPU: {user:.1f} s user + {system:.1f} s system = {total:.1f} s, {total / wall:.2f} of {cores} cores on "
          f"average; on {cores} fully used cores this work alone takes {total / cores:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None, help="a profile name (profiles/<name>.yaml), as `embp run`")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder (created) and keep it")
    parser.add_argument("--jobs", type=int, default=None, help="stages at once (`embp run --jobs`; default: one per core)")
    parser.add_argument("targets", nargs="*", help="stages to run with what they depend on (default: all)")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=False)
        work, cleanup = args.keep.resolve(), None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="embp-bench-pipeline-")
        work = Path(cleanup.name)
    try:
        copy_repo(work)
        wall, output, cpu = run_pipeline(work, args.profile, args.targets, args.jobs)
        print_table(stage_rows(work, output), wall, args.profile, args.targets, cpu)
    finally:
        if cleanup is not None:
            cleanup.cleanup()


if __name__ == "__main__":
    main()
