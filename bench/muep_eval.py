"""Benchmark of the MuEP evaluation (stage ``muep-eval``): agent-episodes per second, where an agent-episode's time
goes, and each worker's memory over the run.

    python bench/muep_eval.py                              # the default inputs' 30 test episodes, 1 and 2 workers
    python bench/muep_eval.py --inputs paper               # a paper-scale sample (~24 scene instances), 2 workers
    python bench/muep_eval.py --inputs paper --code /tmp/old,.          # A/B against another code tree
    python bench/muep_eval.py --inputs paper --batch-size 4,16,32
    python bench/muep_eval.py --inputs paper --scene-instances 400      # every scene instance: the whole test set
    python bench/muep_eval.py --from-run DIR     # the same tables from a finished run's facts (e.g. a kept
                                                 # `bench/pipeline.py --profile paper --keep DIR`): nothing is rerun

Each run is a fresh Python process with its own throw-away ``EMBP_ROOT`` (the repository's data/ is neither read nor
written), running the ``muep-eval`` flow as ``dvc repro`` runs it (one Prefect server shared with the worker
processes, MLflow runs into a sqlite store in that root) with the default agents ``oracle`` and ``random`` on the
demonstrations' test splits:

* the inputs: stages 1-3 once through their flows (``bench/muep_demos.py``'s ``_prepare_inputs``), then stage 4 for
  the test episodes to evaluate. ``--inputs paper`` uses ``profiles/paper.yaml`` and takes the test episodes
  (``seen_test`` and ``unseen_test``) of a paper-scale run's selection that belong to ``--scene-instances`` scene
  instances, chosen per (room type, split) so that the sample holds each of them in the paper-scale run's share
  (``bench/muep_demos.py``'s ``stratified_instances``); every test episode of a chosen instance is in, so the work
  done once per scene instance is shared as it is at paper scale. The note under the tables compares the two.
* the evaluation runs: per code tree (``--code``), worker count and batch size, the flow with
  ``muep.eval.{workers, batch_size}`` overridden, in a root with copies of the stage 4 outputs.

What a row measures:

* ``flow wall s``: the flow call, timed in the child after the stage's Prefect server has started and a warm-up
  flow has run: reading the episodes, starting the workers, every batch, the result files, reports and MLflow runs.
* ``ag-ep/s``: agent-episodes (episodes x agents) / flow wall. ``play ag-ep/s``: the same over the playing phase
  only (the stage's run facts, ``reports/timings/muep-eval.json``: from the first batch submitted to the last one
  collected).
* per agent-episode, from the run facts' batch timings: ``load`` (building and
  resetting the game on the worker's engine), ``game`` (TextWorld executing the actions, and the admissible
  commands), ``agent`` (the agent's reset and act), ``metrics`` (sub-goals and goal conditions after every state),
  ``other`` (the rest of the episode: observations, records). ``mlflow s``: logging the runs; ``write s``: the result
  files and reports.
* memory: the resident memory of every worker process, sampled from /proc every 0.5 s by the child: ``RSS MB`` the
  largest peak of a worker, ``RSS growth MB`` the largest rise of a worker from its first 10 % of the run to its end
  (flat memory: ~0).
* ``CPU-bound ag-ep/s``: workers / mean CPU seconds of an agent-episode in its worker (``cpu s/ep``): the rate the
  workers' own work allows when each has a core to itself -- what a loaded machine hides in the wall-clock columns.
  It leaves out the flow's own work (reading, writing, MLflow) and waiting between batches.
* ``paper min``: the projection to the paper-scale test set (``--inputs paper`` only): this run's fixed costs once,
  plus all of the paper-scale run's agent-episodes at this run's playing rate.

Code trees older than the timing files (``--code`` of an earlier commit) get the wall-clock columns only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import muep_demos  # noqa: E402 - the inputs, the sample and the run machinery of stage 4's benchmark

PARTS = ("load_s", "game_s", "agent_s", "metrics_s")
AGENTS = ["oracle", "random"]


# ----------------------------------------------------------------------------------------------------------------
# Child: one flow run in EMBP_ROOT (set by the parent), result as JSON on the last line of stdout.


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rss_mb(pid: int) -> tuple[str, float] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    rss = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return (cmdline, int(rss) / 1024) if rss is not None else None


class MemorySampler(threading.Thread):
    """The resident memory of this process's worker processes (Prefect's process pool, multiprocessing spawns),
    every ``every_s`` seconds: pid -> [(seconds since start, MB)]."""

    def __init__(self, every_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.every_s, self.series, self.stop = every_s, {}, threading.Event()
        self.start_time = time.perf_counter()

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            now = time.perf_counter() - self.start_time
            for pid in _descendants(os.getpid()):
                found = _rss_mb(pid)
                if found and "multiprocessing" in found[0] and "resource_tracker" not in found[0]:
                    self.series.setdefault(pid, []).append((round(now, 2), round(found[1], 1)))


def child() -> None:
    from prefect import flow

    from flows._runtime import configure_logging, shared_prefect_server
    from flows.muep_eval import muep_eval
    from tasks import paths
    from tasks.muep import layout
    from tasks.params import load_params

    @flow(name="bench-warm-up")
    def warm_up() -> None:
        """A first flow run, so the timed call below does not include Prefect's first-run costs."""

    configure_logging()
    with shared_prefect_server():
        warm_up()
        ev = load_params().muep.eval
        sampler = MemorySampler()
        sampler.start()
        start = time.perf_counter()
        muep_eval()
        wall = time.perf_counter() - start
        sampler.stop.set()
        sampler.join()
    # where the time went: the stage's run facts (reports/timings/muep-eval.json), never its DVC outputs
    facts_file = paths.REPORTS / "timings" / "muep-eval.json"
    run = json.loads(facts_file.read_text()) if facts_file.exists() else {}
    timings = list(run.pop("timings", {}).values())
    print(json.dumps({"wall": wall, "workers": ev.workers, "batch_size": ev.batch_size, "run": run,
                      "agents": by_agent(timings), "memory": {str(k): v for k, v in sampler.series.items()},
                      "agent_episodes": sum(1 for f in layout.EVAL.glob("*/*.jsonl") for _ in f.open())}))


def by_agent(timings: list[dict]) -> dict[str, dict]:
    """Per agent: agent-episodes, steps and the summed seconds of each part (the batches' episode timings)."""
    out: dict[str, dict] = {}
    for e in (e for t in timings for e in t["episodes"]):
        a = out.setdefault(e["agent"], {"n": 0, "steps": 0, **{p: 0.0 for p in (*PARTS, "total_s", "cpu_s")}})
        a["n"] += 1
        a["steps"] += e["steps"]
        for p in (*PARTS, "total_s", "cpu_s"):
            a[p] += e.get(p, 0.0)
    return out


def from_run(root: Path) -> dict:
    """A finished ``muep-eval`` run's result, read from its run facts (``reports/timings/muep-eval.json``): the stage's
    work as ``wall``, and as memory each worker's peak RSS after each of its batches, in batch order (what the
    batches report; no sampling)."""
    facts_file = root / "reports" / "timings" / "muep-eval.json"
    if not facts_file.exists():
        sys.exit(f"{facts_file} does not exist: run the muep-eval stage in {root} first.")
    run = json.loads(facts_file.read_text())
    batches = run.pop("timings", {})
    timings = [batches[k] for k in sorted(batches)]          # batch ids (b00000, ...) sort in batch order
    memory: dict[str, list] = {}
    for i, t in enumerate(timings):
        memory.setdefault(str(t["pid"]), []).append((i, t["max_rss_mb"]))
    return {"wall": run.get("wall_s", 0.0), "workers": run.get("workers"), "batch_size": run.get("batch_size"),
            "run": run, "agents": by_agent(timings), "memory": memory, "agent_episodes": run["agent_episodes"],
            "code": f"run {root.name}"}


# ----------------------------------------------------------------------------------------------------------------
# Parent


def _params(code: Path, workers: int, batch_size: int | None, profile: str | None) -> str:
    """The code tree's params.yaml, with ``profile`` applied and the evaluation's overrides (``dvc exp run -S``)."""
    import yaml

    from tasks.params import deep_merge, read_yaml

    params = read_yaml(code / "params.yaml")
    if profile:
        params = deep_merge(params, read_yaml(code / "profiles" / f"{profile}.yaml"))
    ev = {"agents": AGENTS, "splits": ["seen_test", "unseen_test"], "workers": workers, "task_runner": "processes"}
    params = deep_merge(params, {"muep": {"eval": ev | ({"batch_size": batch_size} if batch_size else {})},
                                 "tracking": {"uri": None}})
    return yaml.safe_dump(params, sort_keys=False)


def _evaluate(tmp: Path, demos_root: Path, code: Path, workers: int, batch_size: int | None,
              profile: str | None) -> dict:
    root = tmp / f"e{len(list(tmp.glob('e*')))}"
    for sub in ("metadata", "demos"):
        shutil.copytree(demos_root / "data" / "muep" / sub, root / "data" / "muep" / sub)
    (root / "params.yaml").write_text(_params(code, workers, batch_size, profile))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", "--code", str(code)], cwd=code,
                          env=muep_demos._env(root, root / "prefect-home"), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"evaluation with {workers} worker(s) of {code} failed (exit {proc.returncode}):\n"
                 f"{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall"] = time.perf_counter() - start
    result["code"] = muep_demos.code_label(code)
    return result


def _memory(r: dict) -> tuple[str, str]:
    peaks, growth = [], []
    for series in r["memory"].values():
        if len(series) < 4:
            continue
        values = [mb for _, mb in series]
        early = values[: max(1, len(values) // 10)]
        peaks.append(max(values))
        growth.append(values[-1] - max(early))
    return (f"{max(peaks):.0f}" if peaks else "?"), (f"{max(growth):+.0f}" if growth else "?")


def table(results: list[dict], paper_agent_episodes: int | None) -> str:
    headers = ["code", "workers", "batch", "ag-eps", "flow wall s", "ag-ep/s", "play ag-ep/s", "CPU-bound ag-ep/s",
               "prepare s", "write s", "mlflow s", "RSS MB", "RSS growth MB", "paper min"]
    rows = []
    for r in results:
        run, n = r["run"], r["agent_episodes"]
        rss, growth = _memory(r)
        play = run.get("play_s")
        rate = run["played"] / play if play else None
        proj = "?"
        if paper_agent_episodes and rate:
            fixed = run["prepare_s"] + run["mlflow_s"]
            proj = f"{(fixed + paper_agent_episodes / rate + run['write_s'] * paper_agent_episodes / n) / 60:.1f}"
        cpu = sum(a.get("cpu_s", 0.0) for a in r["agents"].values())
        timed = sum(a["n"] for a in r["agents"].values())
        bound = f"{r['workers'] * timed / cpu:.2f}" if cpu else "?"
        rows.append([r["code"], str(r["workers"]), str(r["batch_size"]), str(n), f"{r['wall']:.1f}",
                     f"{n / r['wall']:.2f}", "?" if rate is None else f"{rate:.2f}", bound,
                     *(("?" if play is None else f"{run[k]:.1f}") for k in ("prepare_s", "write_s", "mlflow_s")),
                     rss, growth, proj])
    return muep_demos._format(headers, rows)


def cost_table(results: list[dict]) -> str:
    headers = ["code", "workers", "agent", "ag-eps", "steps/ep", *(p.removesuffix("_s") + " s/ep" for p in PARTS),
               "other s/ep", "total s/ep", "cpu s/ep", "ms/step (game)"]
    rows = []
    for r in results:
        for agent, a in sorted(r["agents"].items()):
            n = a["n"]
            other = a["total_s"] - sum(a[p] for p in PARTS)
            rows.append([r["code"], str(r["workers"]), agent, str(n), f"{a['steps'] / n:.1f}",
                         *(f"{a[p] / n:.3f} ({100 * a[p] / a['total_s']:.0f}%)" for p in PARTS),
                         f"{other / n:.3f}", f"{a['total_s'] / n:.3f}", f"{a.get('cpu_s', 0.0) / n:.3f}",
                         f"{1000 * a['game_s'] / max(1, a['steps']):.1f}"])
    return muep_demos._format(headers, rows) if rows else "(no timing files: code older than the evaluation's timings)"


def test_sample(inputs: Path, n_instances: int) -> tuple[list[str], str, int]:
    """Task ids of the test episodes of about ``n_instances`` scene instances of the paper-scale selection, chosen
    per (room type, split); a note; the paper-scale run's test episodes."""
    selected, _ = muep_demos.paper_selection(inputs)
    tests = selected[selected.split != "train"].copy()
    picked = muep_demos.stratified_instances(tests, n_instances, ["room_type", "split"],
                                             muep_demos.receptacle_counts(inputs))
    sample = tests[tests.scene.isin(picked)]
    names = tests.scene.nunique()
    note = (f"sample: {len(picked)} of {names} scene instances with test episodes in the paper-scale selection, all "
            f"{len(sample)} of their test episodes ({len(sample) / len(picked):.1f} per instance; paper-scale run: "
            f"{len(tests):,}, {len(tests) / names:.1f} per instance); by room type: sample "
            f"{muep_demos.shares(sample, 'room_type')}; paper-scale {muep_demos.shares(tests, 'room_type')}; by split: "
            f"sample {muep_demos.shares(sample, 'split')}; paper-scale {muep_demos.shares(tests, 'split')}")
    return sorted(sample.task_id), note, len(tests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", default="default", choices=("default", "paper"))
    parser.add_argument("--scene-instances", type=int, default=24, help="scene instances of the paper-scale "
                        "selection whose test episodes are evaluated (paper inputs only)")
    parser.add_argument("--workers", default="", help="comma-separated worker counts (default: 1,2; paper: 2)")
    parser.add_argument("--batch-size", default="", help="comma-separated muep.eval.batch_size values, one run "
                        "each (default: the params' own)")
    parser.add_argument("--code", default=str(REPO), help="comma-separated code trees to evaluate with (A/B)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary roots")
    parser.add_argument("--json", default="", help="also write the raw results to this file")
    parser.add_argument("--from-run", type=Path, default=None, help="tabulate a finished run's muep-eval facts "
                        "(a root with reports/timings/muep-eval.json) instead of running anything")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.from_run:
        result = from_run(args.from_run.resolve())
        print(table([result], None))
        print()
        print("per agent-episode (mean over the run's agent-episodes, share of the episode's time)")
        print(cost_table([result]))
        print()
        print("flow wall s here = the stage's work (StageLog); RSS: each worker's peak after each of its batches")
        return
    if args.child:
        sys.path.insert(0, args.code)  # the flow of the code tree under test, not an installed one
        child()
        return
    sys.path.insert(0, str(REPO))
    paper = args.inputs == "paper"
    profile = "paper" if paper else None
    codes = [Path(c).resolve() for c in args.code.split(",") if c.strip()]
    workers = [int(w) for w in (args.workers or ("2" if paper else "1,2")).split(",")]
    sizes = [int(b) for b in args.batch_size.split(",") if b.strip()] or [None]
    tmp = Path(tempfile.mkdtemp(prefix="embp-bench-eval-"))
    load_start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    started = time.strftime("%Y-%m-%d %H:%M")
    try:
        print(f"running stages 1-3 once, {args.inputs} inputs ...", file=sys.stderr)
        inputs = muep_demos._prepare_inputs(tmp, profile)
        task_ids, note, paper_tests = None, "the default inputs' test episodes", None
        if paper:
            task_ids, note, paper_tests = test_sample(inputs, args.scene_instances)
        print(f"running stage 4 for {len(task_ids) if task_ids else 'the default'} episodes ...", file=sys.stderr)
        from tasks.params import load_params

        episodes = None if paper else load_params(REPO / "params.yaml").muep.demos.episodes
        demos = muep_demos._run(episodes, 2, "processes", tmp, inputs, task_ids, REPO, None, profile)
        results = []
        for w in workers:
            for size in sizes:
                for code in codes:
                    print(f"evaluating with {w} worker(s), batch size {size or 'of the params'}, code of {code} ...",
                          file=sys.stderr)
                    results.append(_evaluate(tmp, Path(demos["root"]), code, w, size, profile))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "note": note, "paper_tests": paper_tests}))
    print(table(results, paper_tests * len(AGENTS) if paper_tests else None))
    print()
    print("per agent-episode (mean over the run's agent-episodes, share of the episode's time)")
    print(cost_table(results))
    print()
    print(note)
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"agents {', '.join(AGENTS)}; {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {load_start} at the start, {load} at the end, started {started}")


if __name__ == "__main__":
    main()
