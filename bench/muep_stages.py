"""Benchmark of the MuEP stages 1-3: wall time and peak memory (max RSS) of each stage, at default and paper scale.

    python bench/muep_stages.py                      # both scales, work only (no Prefect), one run each
    python bench/muep_stages.py --scale paper --repeat 3
    python bench/muep_stages.py --prefect            # also run each stage as its Prefect flow (orchestration cost)

Every measurement runs in a fresh Python process whose ``EMBP_ROOT`` is a throw-away directory holding only a
``params.yaml`` (the repository's, merged with ``profiles/paper.yaml`` at paper scale), so all outputs -- data/,
reports/ and the LLM cache data/cache/llm -- go there and the repository's own data/ is never touched.

What one row measures:

* ``work`` mode (default): the stage's work through the functions its flow calls -- ``collect_all`` and
  ``write_tables`` for metadata; ``read_table``, ``build_client``, ``generate`` and ``write_records`` for generate;
  ``read_table``/``read_records``, ``scene_facts``, ``filter_tasks`` and ``write_records`` for filter -- reading its
  inputs and writing its outputs included. The clock starts after the imports (pandas, pyarrow, the project).
  ``muep-generate`` is measured twice per repetition: *cold* (empty LLM cache) and *warm* (same inputs again: every
  response is a cache hit).
* ``prefect`` mode (``--prefect``): the stage's Prefect flow called in-process. The clock starts before
  ``import flows.<stage>``, so the row includes importing Prefect, starting its temporary local server and the run
  bookkeeping; ``overhead`` is that wall time minus the same stage's ``work`` wall time. The Prefect server runs in
  a process of its own, whose memory is not in ``peak RSS``.

``peak RSS`` is the measuring process's own ``ru_maxrss`` (imports included); ``start RSS`` is its resident size
just before the clock starts, so ``peak - start`` is roughly what the stage itself adds. With ``--repeat N`` the wall
time is the median of N runs and peak RSS the largest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ("muep-metadata", "muep-generate", "muep-filter")
ITEM_UNITS = {"muep-metadata": "scenes", "muep-generate": "proposals", "muep-filter": "accepted"}


# ----------------------------------------------------------------------------------------------------------------
# Child side: one stage, one measurement, result as JSON on the last line of stdout.


def _rss_now_mib() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _maxrss_mib(who: int) -> float:
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    value = resource.getrusage(who).ru_maxrss
    return value / (1024 * 1024) if sys.platform == "darwin" else value / 1024


def _work_metadata() -> dict:
    from tasks.muep import layout
    from tasks.muep.metadata import collect_all, write_tables
    from tasks.params import load_params

    params = load_params().muep
    metas = collect_all(params.scenes, params.metadata)
    write_tables(metas, layout.METADATA)  # the same function the flow calls
    return {"items": len(metas), "detail": f"{sum(len(m.instances) for m in metas)} instances"}


def _work_generate() -> dict:
    from core.io import write_json
    from tasks.llm import build_client
    from tasks.muep import layout
    from tasks.muep.generate import ParseRejectRecord, TaskRecord, generate
    from tasks.muep.metadata import ObjectTypeRecord, SceneRecord
    from tasks.params import load_params
    from tasks.records import read_table, write_records

    params = load_params()
    scenes = read_table(layout.SCENES, SceneRecord)
    object_types = read_table(layout.OBJECT_TYPES, ObjectTypeRecord)
    client = build_client(params.llm, layout.LLM_CACHE)
    tasks, rejects, report = generate(scenes, object_types, params.muep.generate, params.llm, client)
    write_records(layout.TASKS, tasks, TaskRecord)
    write_records(layout.PARSE_REJECTS, rejects, ParseRejectRecord)
    write_json(layout.REPORTS / "generate.json", report)
    return {"items": len(tasks), "requests": report["requests"], "llm_calls": report["llm_calls"],
            "cache_hits": report["cache_hits"],
            "detail": f"{report['requests']} req, {report['llm_calls']} calls, {report['cache_hits']} hits"}


def _work_filter() -> dict:
    from core.io import write_json
    from tasks.muep import layout
    from tasks.muep.filter import RejectedTask, filter_tasks, scene_facts
    from tasks.muep.generate import TaskRecord
    from tasks.muep.metadata import InstanceRecord, ObjectTypeRecord, SceneRecord
    from tasks.params import load_params
    from tasks.records import read_records, read_table, write_records

    params = load_params().muep.filter
    meta = layout.METADATA
    facts = scene_facts(read_table(meta / "scenes.parquet", SceneRecord),
                        read_table(meta / "object_types.parquet", ObjectTypeRecord),
                        read_table(meta / "instances.parquet", InstanceRecord))
    tasks = read_records(layout.TASKS, TaskRecord)
    accepted, rejected, report = filter_tasks(tasks, facts, drop_duplicates=params.drop_duplicates)
    write_records(layout.ACCEPTED, accepted, TaskRecord)
    write_records(layout.REJECTED, rejected, RejectedTask)
    write_json(layout.REPORTS / "filter.json", report)
    return {"items": len(accepted), "detail": f"{len(tasks)} proposed, {report['rejected_by_reason']['duplicate']} dup"}


WORK = {"muep-metadata": _work_metadata, "muep-generate": _work_generate, "muep-filter": _work_filter}


def _prefect_flow(stage: str) -> dict:
    import importlib

    t0 = time.perf_counter()
    module = importlib.import_module(f"flows.{stage.replace('-', '_')}")
    import_s = time.perf_counter() - t0
    report = getattr(module, stage.replace("-", "_"))()
    items = {"muep-metadata": "scenes", "muep-generate": "tasks_parsed", "muep-filter": "accepted"}[stage]
    out = {"items": int(report[items]), "import_s": import_s}
    if stage == "muep-metadata":
        out["detail"] = f"{report['object_instances']} instances"
    elif stage == "muep-generate":
        out.update(requests=report["requests"], llm_calls=report["llm_calls"], cache_hits=report["cache_hits"])
        out["detail"] = f"{report['requests']} req, {report['llm_calls']} calls, {report['cache_hits']} hits"
    else:
        out["detail"] = f"{report['proposed']} proposed, {report['rejected_by_reason']['duplicate']} dup"
    return out


def child_main(stage: str, mode: str) -> None:
    # Everything the work needs is imported before the clock starts, Prefect excepted (see the module docstring).
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import core.io  # noqa: F401
    import tasks.llm  # noqa: F401
    import tasks.llm.offline  # noqa: F401
    import tasks.muep.filter  # noqa: F401
    import tasks.muep.generate  # noqa: F401
    import tasks.muep.metadata  # noqa: F401
    import tasks.muep.offline_proposer  # noqa: F401
    import tasks.records  # noqa: F401
    from tasks import paths

    assert str(paths.ROOT) == os.environ["EMBP_ROOT"], "EMBP_ROOT was not honoured"
    code = Path(tasks.__file__).resolve().parent.parent
    assert code == REPO, f"the project is imported from {code}, not from {REPO} where this script lives"
    start_rss = _rss_now_mib()
    t0 = time.perf_counter()
    result = WORK[stage]() if mode == "work" else _prefect_flow(stage)
    wall = time.perf_counter() - t0
    result.update(wall_s=wall, start_rss_mib=start_rss, peak_rss_mib=_maxrss_mib(resource.RUSAGE_SELF))
    sys.stdout.flush()
    print("BENCH-RESULT " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Parent side: temp roots, subprocesses, the table.


@dataclass
class Row:
    scale: str
    stage: str
    mode: str
    runs: list[dict] = field(default_factory=list)
    baseline_wall: float | None = None  # work-mode wall of the same stage, for the Prefect overhead

    @property
    def wall(self) -> float:
        return statistics.median(r["wall_s"] for r in self.runs)

    @property
    def peak(self) -> float:
        return max(r["peak_rss_mib"] for r in self.runs)

    @property
    def start(self) -> float:
        return statistics.median(r["start_rss_mib"] for r in self.runs)

    @property
    def items(self) -> int:
        return self.runs[-1]["items"]

    @property
    def notes(self) -> str:
        last = self.runs[-1]
        if "requests" in last:  # generate: was the cache used as it should be?
            text = f"{last['llm_calls']} calls, {last['cache_hits']}/{last['requests']} cache hits"
            warm = self.stage.endswith("warm")
            if (warm and last["llm_calls"]) or (not warm and last["cache_hits"]):
                text += " (!)"
            return text
        return last.get("detail", "")


def make_root(scale: str, base: Path) -> Path:
    sys.path.insert(0, str(REPO))
    from tasks.params import deep_merge, read_yaml, validate

    data = read_yaml(REPO / "params.yaml")
    if scale == "paper":
        data = deep_merge(data, read_yaml(REPO / "profiles" / "paper.yaml"))
    validate(data, source=f"params.yaml{' + profiles/paper.yaml' if scale == 'paper' else ''}")
    root = base / scale
    root.mkdir(parents=True)
    import yaml

    (root / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return root


def run_child(stage: str, mode: str, root: Path, env: dict[str, str], timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", stage, "--_mode", mode]
    proc = subprocess.run(cmd, cwd=root, env=env | {"EMBP_ROOT": str(root)}, capture_output=True, text=True,
                          timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{stage} ({mode}) failed with exit code {proc.returncode} in {root}")
    return json.loads(lines[-1].removeprefix("BENCH-RESULT "))


def clear_cache(root: Path) -> None:
    from tasks import (
        paths,  # the cache's place relative to the root, as the stages compute it
    )
    from tasks.muep import layout

    shutil.rmtree(root / layout.LLM_CACHE.relative_to(paths.ROOT), ignore_errors=True)


def bench_scale(scale: str, base: Path, env: dict[str, str], args: argparse.Namespace) -> list[Row]:
    root = make_root(scale, base)
    rows = {key: Row(scale, *key) for key in [
        ("muep-metadata", "work"), ("muep-generate cold", "work"), ("muep-generate warm", "work"),
        ("muep-filter", "work")]}

    def note(label: str, mode: str, res: dict) -> None:
        print(f"  {scale:7s} {label:20s} {mode:7s} {res['wall_s']:8.2f} s  {res['peak_rss_mib']:7.1f} MiB  "
              f"{res['items']} {res.get('detail', '')}"
              + (f" (import of the flow module: {res['import_s']:.1f} s)" if "import_s" in res else ""),
              file=sys.stderr, flush=True)

    for rep in range(args.repeat):
        print(f"[{scale}] repetition {rep + 1}/{args.repeat}", file=sys.stderr, flush=True)
        res = run_child("muep-metadata", "work", root, env, args.timeout)
        rows[("muep-metadata", "work")].runs.append(res)
        note("muep-metadata", "work", res)

        clear_cache(root)
        res = run_child("muep-generate", "work", root, env, args.timeout)
        if res["cache_hits"] != 0:
            raise SystemExit(f"cold generate run had {res['cache_hits']} cache hits: the cache was not emptied")
        rows[("muep-generate cold", "work")].runs.append(res)
        note("muep-generate cold", "work", res)

        res = run_child("muep-generate", "work", root, env, args.timeout)
        if res["llm_calls"] != 0:
            print(f"  warning: warm generate run made {res['llm_calls']} LLM calls (expected 0)", file=sys.stderr)
        if res["cache_hits"] != res["requests"]:
            print(f"  warning: warm generate run reports {res['cache_hits']} cache hits for {res['requests']} "
                  "requests", file=sys.stderr)
        rows[("muep-generate warm", "work")].runs.append(res)
        note("muep-generate warm", "work", res)

        res = run_child("muep-filter", "work", root, env, args.timeout)
        rows[("muep-filter", "work")].runs.append(res)
        note("muep-filter", "work", res)

    if args.prefect:
        if WARMUP.get("wall_s") is None:
            # A new PREFECT_HOME makes the first flow run create and migrate Prefect's database (~10 s on 2 cores):
            # a one-off cost, measured here once and left out of the table.
            print("[prefect] warm-up run (new PREFECT_HOME: database created and migrated)", file=sys.stderr)
            WARMUP.update(run_child("muep-metadata", "prefect", root, env, args.timeout))
            note("warm-up metadata", "prefect", WARMUP)
        pref = {key: Row(scale, *key) for key in [
            ("muep-metadata", "prefect"), ("muep-generate cold", "prefect"), ("muep-generate warm", "prefect"),
            ("muep-filter", "prefect")]}
        for rep in range(args.repeat):
            print(f"[{scale}] prefect repetition {rep + 1}/{args.repeat}", file=sys.stderr, flush=True)
            for label in ("muep-metadata", "muep-generate cold", "muep-generate warm", "muep-filter"):
                stage = label.split()[0]
                if label.endswith("cold"):
                    clear_cache(root)
                res = run_child(stage, "prefect", root, env, args.timeout)
                pref[(label, "prefect")].runs.append(res)
                note(label, "prefect", res)
        for (label, _), row in pref.items():
            row.baseline_wall = rows[(label, "work")].wall
        rows.update(pref)

    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return list(rows.values())


WARMUP: dict = {}


def render(rows: list[Row], repeat: int, with_prefect: bool) -> str:
    headers = ["scale", "stage", "mode", "wall s", "peak RSS MiB", "start RSS MiB", "items", "unit", "rate /s"]
    if with_prefect:
        headers.append("overhead s")
    headers.append("notes")
    right = {"wall s", "peak RSS MiB", "start RSS MiB", "items", "rate /s", "overhead s"}
    table = []
    for row in rows:
        stage = row.stage.split()[0]
        cells = [row.scale, row.stage, row.mode, f"{row.wall:.2f}", f"{row.peak:.0f}", f"{row.start:.0f}",
                 str(row.items), ITEM_UNITS[stage], f"{row.items / row.wall:,.0f}" if row.wall > 0 else "-"]
        if with_prefect:
            cells.append(f"{row.wall - row.baseline_wall:+.2f}" if row.baseline_wall is not None else "")
        cells.append(row.notes)
        table.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if h in right else c.ljust(w) for c, w, h in zip(cells, widths, headers)).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    previous = None
    for row, cells in zip(rows, table):
        if previous is not None and row.scale != previous:
            lines.append("")
        previous = row.scale
        lines.append(fmt(cells))
    runs = f"median of {repeat} runs" if repeat > 1 else "1 run"
    lines.append("")
    lines.append(f"wall: {runs}; peak RSS: max ru_maxrss of the stage process; "
                 f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
                 f"{time.strftime('%Y-%m-%d')}")
    if with_prefect:
        imports = [r["import_s"] for row in rows if row.mode == "prefect" for r in row.runs]
        lines.append(f"prefect: overhead = prefect wall - work wall (import of Prefect, median "
                     f"{statistics.median(imports):.1f} s, + temporary server + run bookkeeping); the first run on a "
                     f"new PREFECT_HOME ({WARMUP['wall_s']:.1f} s, database migrations) is an untimed warm-up")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=("default", "paper", "both"), default="both")
    parser.add_argument("--prefect", action="store_true",
                        help="also run each stage as its Prefect flow and show the orchestration overhead")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per measurement; median wall time")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before one stage run is given up")
    parser.add_argument("--keep", action="store_true", help="keep the temporary roots (their paths are printed)")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    parser.add_argument("--_mode", default="work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._child:
        child_main(args._child, args._mode)
        return
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    base = Path(tempfile.mkdtemp(prefix="embp-bench-"))
    env = dict(os.environ)
    env.update(
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DVC_NO_ANALYTICS="1",
        PREFECT_HOME=str(base / "prefect-home"),
        PREFECT_LOGGING_LEVEL=env.get("PREFECT_LOGGING_LEVEL", "WARNING"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        PYTHONHASHSEED="0",
    )
    env.pop("PREFECT_API_URL", None)  # always the temporary local server, never a real one
    scales = ("default", "paper") if args.scale == "both" else (args.scale,)
    rows: list[Row] = []
    try:
        for scale in scales:
            rows.extend(bench_scale(scale, base, env, args))
    finally:
        if args.keep:
            print(f"temporary roots kept under {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(render(rows, args.repeat, args.prefect))


if __name__ == "__main__":
    main()
