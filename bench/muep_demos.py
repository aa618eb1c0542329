"""Benchmark of MuEP stage 4 (expert demonstrations): where an episode's time goes, and what orchestration costs.

    python bench/muep_demos.py                       # 48 episodes, 1 and 2 workers (process pool)
    python bench/muep_demos.py --episodes 96 --workers 1,2,4
    python bench/muep_demos.py --task-runner dask    # the same through Dask's local cluster
    python bench/muep_demos.py --inputs paper        # a sample of the paper-scale run: 24 whole scene instances
    python bench/muep_demos.py --inputs paper --workers 2 --against DIR   # ... checked against a kept full run

Each run is a fresh Python process with its own throw-away ``EMBP_ROOT``: the repository's ``params.yaml`` with
``muep.demos.{episodes, workers, task_runner}`` overridden (what ``dvc exp run -S`` would do), and copies of
``data/muep/metadata``, ``data/muep/filter`` and ``data/muep/alfworld/metadata`` made once per invocation by running
stages 1-3 through their flows (and the ALFWorld stage's metadata step) in a root of their own (so they always match
the current code). The repository's data/ is neither read nor written. Every run selects the same episodes (same
seed). The flow runs as ``dvc repro`` runs it (``python -m flows.muep_demos``): on the run's shared Prefect server
(``flows/_prefect_server.py``), which the worker processes use too.

``--inputs paper`` runs stages 1-3 with ``profiles/paper.yaml`` (3 instances per floorplan, ~19.6k accepted tasks),
takes the 15,000 episodes a paper-scale run selects, and keeps those of ``--scene-instances`` scene instances spread
over all floorplans, *all* their episodes (``episodes: null``): each scene instance has as many episodes as in the
paper-scale run, so the work done once per scene instance (its Fast Downward translation) is shared as it would be
there. The demos runs then use the paper profile's params too (its ``batch_size``). The note under the table
compares episodes per scene instance in the sample and in the paper-scale run.

What a row measures:

* ``flow wall``: the ``muep-demos`` flow call, timed in the child after the stage's Prefect server has started and
  a warm-up flow has run -- so it includes reading the inputs, starting the worker processes (and their imports, planner
  and renderer), all batches, and writing the index, but not Python's start-up or the Prefect server's.
* ``costs``: the per-episode timings the stage records in ``episodes.parquet`` (plan, TextWorld load, TextWorld
  steps, render, and the batch's shard write divided over its episodes), summed over every attempted episode.
* ``overhead = flow wall x workers / sum of costs``. 1.00 means every worker spent the whole wall time on episode
  work; the rest is orchestration (worker start-up, Prefect task bookkeeping, result transfer) and load imbalance
  (workers idle while the last batch runs). Goal: <= 1.25.
* ``ideal ovh``: the overhead of a perfect pool on these batches (their recorded costs, assigned in submission
  order to whichever of the ``workers`` frees first): the share of overhead that batch granularity alone explains.
  The flow hands a worker a run of a few consecutive batches per task (``tasks.muep.demos.scene_runs``), so on a
  small sample its granularity, and its overhead, can be above this.
* ``in-task s``: the task runs' time (Prefect's start to end, in the worker) minus the episode costs inside
  them: the per-batch work outside the timed parts (announcing the scene goals, writing the index part) and
  Prefect's own bookkeeping of the task run. The rest of ``steady ovh`` is between task runs (dispatch, transfer).
* ``batch``: ``muep.demos.batch_size`` (``--batch-size``).
* ``startup s`` / ``teardown s``: from the flow call to the first batch's start, and from the last batch's end to
  the flow's return, by the task-run times Prefect's API recorded: spawning the worker processes and their imports,
  and the index writing.
* ``process s``: the whole child process -- Python and Prefect start-up, the warm-up flow, the timed flow.
* ``steady ovh``: the overhead between the first batch's start and the last batch's end (fixed start-up and
  teardown left out): what the overhead tends to as runs get longer.
* ``paper h``: 15,000 episodes at the run's episodes / flow wall rate (hours), as if start-up were paid per this
  many episodes; ``paper h steady``: at the rate between the first batch's start and the last batch's end;
  ``paper h proj``: the honest projection, this run's start-up and teardown once plus 15,000 episodes at the
  steady rate. Only ``--inputs paper`` samples episodes the way a paper-scale run has them.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAPER_EPISODES = 15_000
COSTS = ("plan_s", "load_s", "steps_s", "render_s", "write_s")


# ----------------------------------------------------------------------------------------------------------------
# Child: one flow run in EMBP_ROOT (set by the parent), result as JSON on the last line of stdout.


def child() -> None:
    import pandas as pd
    from prefect import flow

    from flows._runtime import configure_logging, shared_prefect_server
    from flows.muep_demos import muep_demos
    from tasks import paths
    from tasks.muep import layout
    from tasks.params import load_params

    @flow(name="bench-warm-up")
    def warm_up() -> None:
        """A first flow run, so the timed call below does not include Prefect's first-run costs."""

    configure_logging()
    with shared_prefect_server():  # what `python -m flows.muep_demos` (and so `dvc repro`) does
        warm_up()
        demos = load_params().muep.demos
        start, clock = time.perf_counter(), time.time()
        report = muep_demos()
        wall = time.perf_counter() - start
        spans = _batch_spans()
    index = pd.read_parquet(layout.EPISODES)
    # per-episode costs are the stage's run facts (reports/timings/, no DVC output: the data files hold no timings)
    batches = json.loads((paths.REPORTS / "timings" / "muep-demos.json").read_text())["batches"]
    per_batch = {b: sum(e[c] for e in eps.values() for c in COSTS) for b, eps in batches.items()}
    costs = {c: sum(e[c] for eps in batches.values() for e in eps.values()) for c in COSTS}
    print(json.dumps({
        "wall": wall, "workers": demos.workers, "task_runner": demos.task_runner, "batch_size": demos.batch_size,
        "attempted": int(len(index)), "ok": int(report["episodes"]),
        "costs": costs,
        "episode_costs": episode_costs(batches),
        "batch_costs": [float(per_batch[b]) for b in _submission_order() if b in per_batch],
        "in_task": sum(b - a for a, b in spans) - float(sum(costs.values())),
        "startup": min((a for a, _ in spans), default=clock) - clock if spans else None,
        "teardown": clock + wall - max(b for _, b in spans) if spans else None,
    }))


def episode_costs(batches: dict) -> dict[str, float]:
    """Timed seconds per episode from stage 4's run facts (``batches``: batch -> episode -> cost name -> s)."""
    return {eid: sum(e[c] for c in COSTS) for eps in batches.values() for eid, e in eps.items()}


def _submission_order() -> list[str]:
    """Batch ids in the order the flow submits them, by the code under test's own selection and batching."""
    from tasks.muep import layout
    from tasks.muep.demos import make_batches, select_episodes
    from tasks.muep.generate import TaskRecord
    from tasks.muep.metadata import SceneRecord
    from tasks.params import load_params
    from tasks.records import read_table

    demos = load_params().muep.demos
    selected = select_episodes(read_table(layout.ACCEPTED, TaskRecord),
                               read_table(layout.SCENES, SceneRecord), demos.episodes, demos.seed)
    return [b.batch_id for b in make_batches(selected, demos.batch_size)]


def _batch_spans() -> list[tuple[float, float]]:
    """(start, end) epoch seconds of every rollout-batch task run, as Prefect's API recorded them."""
    from prefect.client.orchestration import get_client

    runs, page = [], 200  # the server answers at most PREFECT_SERVER_API_DEFAULT_LIMIT (200) runs per request
    with get_client(sync_client=True) as client:
        while True:
            more = client.read_task_runs(limit=page, offset=len(runs))
            runs += more
            if len(more) < page:
                break
    return [(r.start_time.timestamp(), r.end_time.timestamp()) for r in runs
            if r.name.startswith("rollout-batch") and r.start_time and r.end_time]


# ----------------------------------------------------------------------------------------------------------------
# Parent


def _params(episodes: int | None, workers: int, runner: str, profile: str | None = None,
            batch_size: int | None = None) -> str:
    import yaml

    from tasks.params import deep_merge, read_yaml, validate

    params = read_yaml(REPO / "params.yaml")
    if profile:
        params = deep_merge(params, read_yaml(REPO / "profiles" / f"{profile}.yaml"))
    overlay = {"muep": {"demos": {"episodes": episodes, "workers": workers, "task_runner": runner}
                        | ({"batch_size": batch_size} if batch_size else {})}}
    params = deep_merge(params, overlay)
    validate(params, source=f"params.yaml + {profile or 'no profile'} + {overlay}")
    return yaml.safe_dump(params, sort_keys=False)


def _env(root: Path, prefect_home: Path) -> dict[str, str]:
    return os.environ | {"EMBP_ROOT": str(root), "PREFECT_HOME": str(prefect_home),
                         "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
                         "EMBP_LOG_LEVEL": "WARNING"}


def _prepare_inputs(tmp: Path, profile: str | None) -> Path:
    """Stages 1-3 through their flows, in one process (one Prefect server), in a root of their own."""
    base = tmp / "inputs"
    base.mkdir()
    (base / "params.yaml").write_text(_params(1, 1, "sequential", profile))
    # and ALFWorld's evaluation states (muep-alfworld's metadata tables, without playing its games): stage 4 reads
    # them to report that no training state equals one
    code = ("from flows.muep_metadata import muep_metadata; from flows.muep_generate import muep_generate; "
            "from flows.muep_filter import muep_filter; muep_metadata(); muep_generate(); muep_filter(); "
            "from tasks.muep import alfworld_games, layout; from tasks.muep.metadata import write_tables; "
            "from tasks.muep.alfworld_splits import game_metadata, select_games; from tasks.params import load_params; "
            "games = alfworld_games.read_games(alfworld_games.VALID_ARCHIVE); "
            "write_tables([game_metadata(g) for g in select_games(games, load_params().muep.alfworld.games)], "
            "layout.ALFWORLD_METADATA)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(base, tmp / "prefect-inputs"),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"stages 1-3 failed in {base} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return base / "data" / "muep"


def floorplan_order(scene: str) -> tuple[int, int, str]:
    """Sort key of a scene instance name, ``FloorPlan<n>`` or ``FloorPlan<n>-<k>``: floorplan number, then instance."""
    stem, _, instance = scene.partition("-")
    number = stem.removeprefix("FloorPlan")
    return (int(number) if number.isdigit() else -1, int(instance) if instance.isdigit() else 0, scene)


def stratified_instances(episodes, n_instances: int, strata: list[str], size: dict[str, float] | None = None
                         ) -> list[str]:
    """About ``n_instances`` scene instances whose episodes (rows of ``episodes``) hold each stratum (the values of
    the ``strata`` columns, e.g. room type) in the same share as all of ``episodes``. Per stratum, instances are
    taken evenly spread (centred) over its names ordered by ``size`` (a per-instance cost proxy; ties and no
    ``size``: floorplan order, ``FloorPlan7-2`` after ``FloorPlan7-1``, before ``FloorPlan8``), as many as bring its
    episode count closest to its share of the sample (mean episodes per instance x ``n_instances``); every stratum
    gets at least one. This is systematic sampling over the proxy: floorplans of one room type differ up to fivefold
    in cost per episode (kitchens), and the instances of one floorplan cost alike, so picks spread in name order
    alone came out up to 35 % off the full run's mean cost (issue #19 item 3; bench/README.md)."""
    per_scene = episodes.groupby("scene").size()
    target = n_instances * len(episodes) / len(per_scene)
    picked: list[str] = []
    for _, group in episodes.groupby(strata, sort=True):
        names = sorted(group.scene.unique(), key=lambda name: ((size or {}).get(name, 0.0), floorplan_order(name)))
        want = target * len(group) / len(episodes)
        best: tuple[float, list[str]] = (float("inf"), names[:1])
        for m in range(1, len(names) + 1):
            chosen = [names[(2 * i + 1) * len(names) // (2 * m)] for i in range(m)]  # centred: not always the first
            gap = abs(sum(per_scene[c] for c in chosen) - want)
            if gap < best[0]:
                best = (gap, chosen)
        picked += best[1]
    return sorted(dict.fromkeys(picked))


def shares(frame, column: str) -> str:
    counts = frame[column].value_counts(normalize=True).sort_index()
    return ", ".join(f"{k} {100 * v:.0f}%" for k, v in counts.items())


def paper_selection(inputs: Path):
    """The episodes a paper-scale run selects (stage 4's own selection, with their splits)."""
    from tasks.muep.demos import select_episodes
    from tasks.muep.generate import TaskRecord
    from tasks.muep.metadata import SceneRecord
    from tasks.params import load_params
    from tasks.records import read_table

    demos = load_params(inputs.parent.parent / "params.yaml").muep.demos
    accepted = read_table(inputs / "filter" / "accepted.parquet", TaskRecord)
    scenes = read_table(inputs / "metadata" / "scenes.parquet", SceneRecord)
    return select_episodes(accepted, scenes, PAPER_EPISODES, demos.seed), len(accepted)


def receptacle_counts(inputs: Path) -> dict[str, float]:
    """Receptacles per scene instance (stage 1's metadata): the best proxy of an episode's cost known before running
    (correlation 0.77-0.91 with the full run's per-instance cost within each room type; objects 0.3-0.4)."""
    import pandas as pd

    scenes = pd.read_parquet(inputs / "metadata" / "scenes.parquet", columns=["scene", "n_receptacles"])
    return dict(zip(scenes.scene, scenes.n_receptacles.astype(float), strict=True))


def paper_sample(inputs: Path, n_instances: int) -> tuple[list[str], str]:
    """The task ids of a paper-scale run's selection that belong to about ``n_instances`` scene instances, chosen per
    room type so that the sample holds each room type's share of the episodes (a kitchen episode costs about twice
    another room's), and a note comparing the sample with the paper-scale run."""
    selected, accepted = paper_selection(inputs)
    picked = stratified_instances(selected, n_instances, ["room_type"], receptacle_counts(inputs))
    sample = selected[selected.scene.isin(picked)]
    n, names = len(picked), selected.scene.nunique()
    note = (f"sample: {n} of {names} scene instances of the paper-scale selection ({len(selected):,} of "
            f"{accepted:,} accepted tasks), all {len(sample)} of their episodes: {len(sample) / n:.1f} episodes per "
            f"scene instance (paper-scale run: {len(selected) / names:.1f}); episodes by room type: sample "
            f"{shares(sample, 'room_type')}; paper-scale run {shares(selected, 'room_type')}")
    return sorted(sample.task_id), note


def _write_inputs(inputs: Path, root: Path, task_ids: list[str] | None) -> None:
    import pandas as pd

    for sub in ("metadata", "filter", "alfworld/metadata"):
        shutil.copytree(inputs / sub, root / "data" / "muep" / sub)
    if task_ids is not None:
        accepted = root / "data" / "muep" / "filter" / "accepted.parquet"
        frame = pd.read_parquet(accepted)
        frame[frame.task_id.isin(task_ids)].reset_index(drop=True).to_parquet(accepted, index=False)


def code_label(code: Path) -> str:
    """The commit a code tree is at (``+`` when it has changes), or its directory name (e.g. a ``git archive``)."""
    proc = subprocess.run(["git", "-C", str(code), "describe", "--always", "--dirty=+"], capture_output=True,
                          text=True)
    return proc.stdout.strip() if proc.returncode == 0 and (code / ".git").exists() else code.name


def _run(episodes: int | None, workers: int, runner: str, tmp: Path, inputs: Path, task_ids: list[str] | None,
         code: Path, batch_size: int | None = None, profile: str | None = None) -> dict:
    """One flow run in a fresh process whose ``flows`` and ``tasks`` come from ``code`` (and so do its workers':
    the process pool starts them with the parent's ``sys.path``)."""
    root = tmp / f"w{workers}-{len(list(tmp.glob('w*')))}"
    _write_inputs(inputs, root, task_ids)
    (root / "params.yaml").write_text(_params(episodes, workers, runner, profile, batch_size))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", "--code", str(code)], cwd=code,
                          env=_env(root, root / "prefect-home"), capture_output=True, text=True)
    process_wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"run with {workers} worker(s) of {code} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall"] = process_wall
    result["code"] = code_label(code)
    result["root"] = str(root)
    return result


def ideal_wall(batch_costs: list[float], workers: int) -> float:
    """Makespan of the batches assigned in order to the first free worker (what a zero-overhead pool achieves)."""
    free = [0.0] * workers
    for cost in batch_costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def _s(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _format(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _busy(r: dict) -> float | None:
    """Seconds between the first batch's start and the last batch's end."""
    if r["startup"] is None or r["teardown"] is None:
        return None
    busy = r["wall"] - r["startup"] - r["teardown"]
    return busy if busy > 0 else None


def projections(r: dict) -> dict[str, float | None]:
    """Paper-scale hours: naive (this run's rate), steady (no fixed costs), and projected (fixed costs once)."""
    busy = _busy(r)
    steady = None if busy is None else PAPER_EPISODES * busy / r["attempted"]
    return {"naive": PAPER_EPISODES * r["wall"] / r["attempted"] / 3600,
            "steady": None if steady is None else steady / 3600,
            "proj": None if steady is None else (steady + r["startup"] + r["teardown"]) / 3600}


def _h(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def table(results: list[dict]) -> str:
    headers = ["code", "workers", "runner", "batch", "episodes", "ok", "flow wall s", "ep/s", "sum costs s",
               "overhead", "steady ovh", "ideal ovh", "in-task s", "startup s", "teardown s", "process s", "paper h",
               "paper h steady", "paper h proj"]
    rows = []
    for r in results:
        total = sum(r["costs"].values())
        ideal = ideal_wall(r["batch_costs"], r["workers"])
        busy = _busy(r)
        hours = projections(r)
        rows.append([r["code"], str(r["workers"]), r["task_runner"], str(r["batch_size"]), str(r["attempted"]),
                     str(r["ok"]), f"{r['wall']:.1f}", f"{r['attempted'] / r['wall']:.2f}", f"{total:.1f}",
                     f"{r['wall'] * r['workers'] / total:.2f}", "?" if busy is None else f"{busy * r['workers'] / total:.2f}",
                     f"{ideal * r['workers'] / total:.2f}", f"{r['in_task']:.1f}", _s(r["startup"]), _s(r["teardown"]),
                     f"{r['process_wall']:.1f}", _h(hours["naive"]), _h(hours["steady"]), _h(hours["proj"])])
    return _format(headers, rows)


def cost_table(results: list[dict]) -> str:
    headers = ["code", "workers", "runner", *(f"{c.removesuffix('_s')} s/ep" for c in COSTS), "total s/ep"]
    rows = []
    for r in results:
        n, total = r["attempted"], sum(r["costs"].values())
        rows.append([r["code"], str(r["workers"]), r["task_runner"],
                     *(f"{r['costs'][c] / n:.3f} ({100 * r['costs'][c] / total:.0f}%)" for c in COSTS),
                     f"{total / n:.3f}"])
    return _format(headers, rows)


def full_run_costs(run: Path):
    """Per-episode timed cost (s) and room type of a kept paper-profile run (``bench/pipeline.py --profile paper
    --keep DIR``): its stage-4 run facts joined with its episode index."""
    import pandas as pd

    facts = run / "reports" / "timings" / "muep-demos.json"
    index = run / "data" / "muep" / "demos" / "episodes.parquet"
    for path in (facts, index):
        if not path.exists():
            sys.exit(f"--against {run}: {path} does not exist (a kept run of muep-demos is needed)")
    batches = json.loads(facts.read_text())["batches"]
    cost = pd.Series(episode_costs(batches), name="cost")
    rooms = pd.read_parquet(index, columns=["episode_id", "room_type"]).set_index("episode_id").room_type
    return pd.concat([cost, rooms], axis=1, join="inner")


def against_table(results: list[dict], run: Path) -> str:
    """The sample's per-episode cost against the full run's (issue #19 item 3), split into the two sources of error:
    the sample's choice of episodes (the full run's own costs of the sample's episodes against all of its episodes)
    and this machine and moment (this run's costs against the full run's on the same episodes)."""
    full = full_run_costs(run)
    kitchen = lambda frame: f"{100 * (frame.room_type == 'kitchen').mean():.0f}%"  # noqa: E731
    headers = ["episodes of", "episodes", "kitchens", "timed s/ep", "vs full run"]
    everything = full.cost.mean()
    rows = [["full run, all", f"{len(full):,}", kitchen(full), f"{everything:.3f}", ""]]
    lines = []
    for r in results:
        mine = {eid: c for eid, c in r["episode_costs"].items() if eid in full.index}
        same = full.loc[list(mine)]
        here = sum(mine.values()) / len(mine)
        selection, machine = same.cost.mean() / everything - 1, here / same.cost.mean() - 1
        total = here / everything - 1
        rows.append([f"full run, sample's ({r['workers']} w)", f"{len(same):,}", kitchen(same),
                     f"{same.cost.mean():.3f}", f"{100 * selection:+.1f}%"])
        rows.append([f"this run ({r['workers']} w)", f"{len(mine):,}", kitchen(same), f"{here:.3f}",
                     f"{100 * total:+.1f}%"])
        lines.append(f"{r['workers']} worker(s): the sample's projection is off by {100 * total:+.1f}% "
                     f"({'within' if abs(total) <= 0.2 else 'outside'} the 20% asked): "
                     f"{100 * selection:+.1f}% from which episodes it holds, {100 * machine:+.1f}% from this machine "
                     f"and moment against the full run's on the same episodes")
        if len(mine) < len(r["episode_costs"]):
            lines.append(f"  ({len(r['episode_costs']) - len(mine)} of the sample's episodes are not in the full run)")
    return _format(headers, rows) + "\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", default="default", choices=("default", "paper"),
                        help="stages 1-3 with params.yaml (default) or with profiles/paper.yaml, sampled (paper)")
    parser.add_argument("--episodes", type=int, default=48, help="episodes per run (muep.demos.episodes; default "
                        "inputs only)")
    parser.add_argument("--scene-instances", type=int, default=24, help="scene instances of the paper-scale "
                        "selection to run, all their episodes (paper inputs only)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts, one run each")
    parser.add_argument("--task-runner", default="processes", choices=("processes", "dask", "sequential"))
    parser.add_argument("--batch-size", default="", help="comma-separated muep.demos.batch_size values, one run "
                        "each (default: params.yaml's)")
    parser.add_argument("--code", default=str(REPO), help="comma-separated code trees to run the flow from, each "
                        "with every worker count, in one invocation (A/B against e.g. a `git archive` of an older "
                        "commit); default: this checkout")
    parser.add_argument("--keep", action="store_true", help="keep the temporary roots")
    parser.add_argument("--against", type=Path, default=None, help="a kept paper-profile run (bench/pipeline.py "
                        "--profile paper --keep DIR): compare the sample's per-episode cost with the full run's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.against and args.inputs != "paper":
        parser.error("--against compares a paper-scale sample: give --inputs paper")
    if args.child:
        # A script's sys.path starts with its own directory, not the checkout: without this the flow would import
        # whatever `tasks` the environment has installed (an editable install may point at another checkout).
        sys.path.insert(0, args.code)
        child()
        return
    sys.path.insert(0, str(REPO))
    codes = [Path(c).resolve() for c in args.code.split(",") if c.strip()]
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="embp-bench-demos-"))
    paper = args.inputs == "paper"
    load_start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    note = f"{args.episodes} episodes of the default inputs (round-robin over split x task type)"
    try:
        print(f"running stages 1-3 (metadata, generate, filter) once, {args.inputs} inputs ...", file=sys.stderr)
        inputs = _prepare_inputs(tmp, "paper" if paper else None)
        task_ids = None
        if paper:
            task_ids, note = paper_sample(inputs, args.scene_instances)
        results = []
        sizes = [int(b) for b in args.batch_size.split(",") if b.strip()] or [None]
        for w in workers:
            for size in sizes:
                for code in codes:
                    print(f"running {len(task_ids) if paper else args.episodes} episodes with {w} worker(s) "
                          f"({args.task_runner}, batch size {size or 'of params.yaml'}), code of {code} ...",
                          file=sys.stderr)
                    results.append(_run(None if paper else args.episodes, w, args.task_runner, tmp, inputs,
                                        task_ids, code, size, "paper" if paper else None))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(table(results))
    print()
    print("per-episode cost (mean over attempted episodes, share of the total)")
    print(cost_table(results))
    print()
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(note)
    if args.against:
        print()
        print(f"against the full run in {args.against} (issue #19 item 3)")
        print(against_table(results, args.against))
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load_start} at the start, {load} at the end, {time.strftime('%Y-%m-%d %H:%M')}; overhead = flow wall x "
          f"workers / sum of per-episode costs (goal <= 1.25); paper h proj = start-up + teardown once + "
          f"{PAPER_EPISODES:,} episodes at the steady rate")


if __name__ == "__main__":
    main()
