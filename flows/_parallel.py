"""``embp run``'s scheduler: DVC's pipeline with independent stages side by side.

``dvc repro`` runs one stage at a time (DVC has no parallel repro). On 2 cores that leaves a core idle through every
single-process stage (the metadata, the ALFWorld replay, the tiny trainings, the data stages) and in the gaps of the
stages whose worker processes wait on each other. DVC itself allows more: it releases its repository lock while a stage's command runs
and takes it again to record the stage, so several ``dvc --wait-for-lock repro --single-item STAGE`` processes can
work on one repository at once, each holding the lock only while it checks or records its stage.

This module decides which stage runs when; DVC still does everything else (what changed, running the command,
hashing, the run cache, ``dvc.lock``):

1. **Plan** (:func:`plan`): DVC's own stage graph and status (one ``Repo`` in this process). The stages to bring up
   to date are the changed ones and everything downstream of them (a downstream stage is still checked by DVC when
   its turn comes: unchanged inputs, no rerun), restricted to the targets and their upstream stages.
2. **Run** (:func:`run`): a stage starts once every planned stage upstream of it has finished and its cores are
   free: ``jobs`` cores (one per CPU by default), a stage taking the ``cores`` its dvc.yaml ``meta`` declares
   (default 1). Worker pools and robot runners are single-threaded processes, which the OS shares out well: two
   such stages side by side finish sooner than one after the other (each leaves gaps the other fills). A team of
   OpenMP threads does not share: its threads spin while they wait for each other, and a 2-thread torch stage
   beside a busy one ran 3.5x slower; such a stage declares ``cores: 2`` and gets them to itself (the default params
   run every torch step on one thread, so none does). Among the ready
   stages, the longest remaining chain goes first (estimated from the last run's ``reports/timings``, else from the
   stage's ``meta: {seconds: N}`` hint in dvc.yaml), and none jumps the queue of a wider one (:func:`admit`), so
   the critical path (metadata -> ... -> real-model training -> its evaluation) does not wait behind short side
   branches -- but a short stage expected to end before the wider one can have its cores runs in the gap
   (backfilling), and one light stage at a time (:data:`LIGHT_S`) runs on top of full cores. Each line a stage
   prints is prefixed with its name. The first failure stops new starts; the stages already running finish and are
   recorded, as a serial ``dvc repro`` keeps the stages before its failure. Ctrl-C reaches every stage (one process
   group) and the run ends when they have. When each stage started and ended goes to
   ``reports/timings/embp-run.json`` (run facts, not data).
3. **Order** (:func:`canonical_lock_order`): DVC appends a new stage to ``dvc.lock`` when it records it, so a run that
   creates the lock would write its stages in whatever order they happened to finish. The scheduler rewrites the
   lock's stages in ``dvc.yaml``'s order (under DVC's lock, with DVC's YAML writer): the same inputs give the same
   bytes, as a serial run does.

Outputs are the same as a serial ``dvc repro``: every stage is a pure function of its deps and params (its timings go
to metrics files), and the shared resources stages meet are guarded (the shared Prefect server's lease lock, MLflow's
store setup lock in tasks/tracking.py, the model export lock in tasks/hf/local_models.py, each robot pool's own ROS
master). ``embp run --jobs 1`` is the plain ``dvc repro``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ESTIMATE_S = 10.0
"""A stage's duration when no earlier run timed it (only the order of starts depends on it)."""
LIGHT_S = 6.0
"""A 1-core stage expected to take at most this long is light: besides the stages that fit the cores, one light stage
at a time may run on top of them (:func:`light_extra`). Without this, the few-second stages (the tiny trainings, the
dataset card, the code checks) queued behind the 2-core real-model steps and ran one after another at the end."""


@dataclass
class Plan:
    order: list[str]
    """Every stage of the repository, in dvc.yaml's order (foreach stages expanded)."""
    upstream: dict[str, set[str]]
    """Stage -> the stages it depends on directly (within the repository)."""
    pending: list[str] = field(default_factory=list)
    """The stages to bring up to date, in dvc.yaml's order."""
    hints: dict[str, float] = field(default_factory=dict)
    """Stage -> seconds from its ``meta: {seconds: N}`` in dvc.yaml (a scheduling hint only)."""
    cores: dict[str, int] = field(default_factory=dict)
    """Stage -> the cores it needs to itself, from its ``meta: {cores: N}`` in dvc.yaml (default 1)."""


def plan(root: Path, targets: list[str] | None = None, force: bool = False) -> Plan:
    """What a ``dvc repro [--force] [targets]`` would consider, from DVC's graph and status."""
    import networkx as nx
    from dvc.repo import Repo

    # DVC names stages relative to the working directory, as the `dvc repro` processes (run in root) will
    with contextlib.chdir(root), Repo(str(root), _wait_for_lock=True) as repo:
        graph = repo.index.graph                         # edges: stage -> a stage it depends on
        stages = {stage.addressing: stage for stage in repo.index.stages}
        order = list(stages)
        metas = {name: stage.meta if isinstance(stage.meta, dict) else {} for name, stage in stages.items()}
        hints = {name: float(meta["seconds"]) for name, meta in metas.items()
                 if isinstance(meta.get("seconds"), int | float)}
        cores = {name: max(1, int(meta["cores"])) for name, meta in metas.items() if isinstance(meta.get("cores"), int)}
        teams = {name: [meta["threads"]] if isinstance(meta.get("threads"), str) else meta.get("threads")
                 for name, meta in metas.items() if isinstance(meta.get("threads"), str | list)}
        if teams:
            params = _flat_params(root)
            for name, keys in teams.items():
                cores[name] = max([cores.get(name, 1)] + [_threads(params, str(key)) for key in keys])
        upstream = {name: {dep.addressing for dep in graph.successors(stage)} for name, stage in stages.items()}
        if targets:
            scope = set()
            for target in targets:
                for stage in repo.stage.collect(target):
                    scope |= {stage.addressing} | {s.addressing for s in nx.descendants(graph, stage)}
        else:
            scope = set(order)
        if force:
            stale = set(scope)
        else:
            changed = set(repo.status(targets=targets, with_deps=True) if targets else repo.status())
            stale = set()
            for name in changed & scope:
                stale |= {name} | {s.addressing for s in nx.ancestors(graph, stages[name])}
            stale &= scope
    return Plan(order, upstream, [name for name in order if name in stale], hints, cores)


def _flat_params(root: Path) -> dict:
    """The repository's params.yaml by dotted key (none without the file)."""
    from tasks.params import flatten, read_yaml

    file = root / "params.yaml"
    return flatten(read_yaml(file)) if file.exists() else {}


def _threads(params: dict, key: str) -> int:
    """The cores a stage's ``meta: {threads: KEY}`` asks for: the int at the dotted params key (a team of that many
    torch or llama.cpp threads); null (the library's default: every core) -> all of them; missing -> 1."""
    if key not in params:
        return 1
    value = params[key]
    if value is None:
        return os.cpu_count() or 1
    return max(1, int(value)) if isinstance(value, int) and not isinstance(value, bool) else 1


def facts_file(root: Path, stage: str) -> Path:
    """The run facts a stage's flow writes (``reports/timings/<name>.json``): a foreach stage's flow names itself
    ``muep-train@<baseline>`` (muep-train-tiny@opt-6.7b, muep-real-train@smollm2-135m)."""
    name = f"muep-train@{stage.split('@')[1]}" if "@" in stage else stage
    return root / "reports" / "timings" / f"{name}.json"


def estimates(root: Path, stages: list[str]) -> dict[str, float]:
    """Each stage's process time in the last run that timed it (its run facts). Facts without a process time were not
    written by a stage's own process (a flow called in-process, e.g. by a test) and say nothing of how long the stage
    takes: they are left out, so the stage keeps its dvc.yaml hint (a 0 would make it look light)."""
    out = {}
    for stage in stages:
        try:
            seconds = float(json.loads(facts_file(root, stage).read_text()).get("process_s") or 0.0)
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if seconds > 0:
            out[stage] = seconds
    return out


def _estimate(stage: str, known: dict[str, float], hints: dict[str, float]) -> float:
    """The last run's time of the stage, else its dvc.yaml hint, else :data:`DEFAULT_ESTIMATE_S`."""
    return known.get(stage, hints.get(stage, DEFAULT_ESTIMATE_S))


def priorities(the_plan: Plan, known: dict[str, float]) -> dict[str, float]:
    """Per pending stage: its estimated duration plus the longest chain of pending stages after it."""
    pending = set(the_plan.pending)
    downstream: dict[str, set[str]] = {name: set() for name in pending}
    for name in pending:
        for dep in the_plan.upstream[name] & pending:
            downstream[dep].add(name)
    memo: dict[str, float] = {}

    def chain(name: str) -> float:
        if name not in memo:
            memo[name] = _estimate(name, known, the_plan.hints) + max((chain(d) for d in downstream[name]), default=0.0)
        return memo[name]

    return {name: chain(name) for name in pending}


def admit(ready: list[str], busy: int, jobs: int, need: Callable[[str], int],
          running_ends: dict[str, float] | None = None, now: float = 0.0,
          duration: Callable[[str], float] | None = None) -> list[str]:
    """The stages to start now, from ``ready`` (best first) while ``busy`` of ``jobs`` cores are taken.

    No stage jumps the queue of the first one that cannot have its cores (else a 2-core stage on the critical path
    would wait for ever behind a stream of 1-core ones), with one exception, "EASY" backfilling as batch schedulers
    do it: given the expected end of each running stage (``running_ends``: name -> time) and each stage's expected
    ``duration``, the blocked stage gets a reservation at the time enough running stages will have ended, and a
    later stage may start now on the cores that are free if it is expected to end by then, so that it delays the
    reservation only when it overruns its estimate. A running stage already past its estimate is expected to end
    any moment: no backfilling behind it. Without ``running_ends`` and ``duration``: no backfilling."""
    out: list[str] = []
    shadow: float | None = None            # when the first blocked stage is expected to have its cores
    for name in ready:
        if busy + need(name) <= jobs and (shadow is None or now + duration(name) <= shadow):
            out.append(name)
            busy += need(name)
            continue
        if shadow is not None:
            continue
        if running_ends is None or duration is None:
            break
        ends = dict(running_ends) | {n: now + duration(n) for n in out}
        shadow = _reservation(need(name), jobs - busy, ends, now, need)
    return out


def light_extra(ready: list[str], extras_running: int, need: Callable[[str], int],
                duration: Callable[[str], float]) -> str | None:
    """The light stage (:data:`LIGHT_S`) to start on top of the full cores, from ``ready`` (best first, those
    :func:`admit` left); None while one already runs so."""
    if extras_running:
        return None
    return next((name for name in ready if need(name) == 1 and duration(name) <= LIGHT_S), None)


def _reservation(wanted: int, free: int, ends: dict[str, float], now: float, need: Callable[[str], int]) -> float:
    """The expected time at which ``wanted`` cores are free, the stages in ``ends`` ending at their expected ends
    (``now`` if one of those it waits for is already past its own)."""
    shadow = now
    for name, end in sorted(ends.items(), key=lambda item: item[1]):
        if free >= wanted:
            break
        free += need(name)
        shadow = max(end, now)
    return shadow


def _pump(name: str, stream, echo: Callable[[str], None]) -> None:
    tag = f"[{name}]"
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        echo(line if tag in line else f"{tag} {line}")
    stream.close()


def run(root: Path, the_plan: Plan, jobs: int, env: dict[str, str], force: bool = False,
        echo: Callable[[str], None] | None = None) -> int:
    """Bring ``the_plan.pending`` up to date, ``jobs`` stages at a time; the exit code of the first failure, else 0."""
    lock = threading.Lock()

    def _echo(line: str) -> None:
        with lock:
            (echo or (lambda text: print(text, flush=True)))(line)

    if not the_plan.pending:
        _echo("Data and pipelines are up to date.")
        return 0
    known = estimates(root, the_plan.pending)
    rank = priorities(the_plan, known)
    pending = list(the_plan.pending)
    waiting_on = {name: the_plan.upstream[name] & set(pending) for name in pending}
    done: set[str] = set()
    running: dict[str, subprocess.Popen] = {}
    extras: set[str] = set()               # light stages running on top of the full cores (light_extra)
    finished: queue.Queue[tuple[str, int]] = queue.Queue()
    failure = 0
    interrupted = False

    t0 = time.monotonic()
    timeline: dict[str, dict] = {}

    def need(name: str) -> int:  # a stage wider than the machine runs alone
        return min(the_plan.cores.get(name, 1), jobs)

    def duration(name: str) -> float:
        return _estimate(name, known, the_plan.hints)

    def _watch(name: str, proc: subprocess.Popen) -> None:
        _pump(name, proc.stdout, _echo)
        finished.put((name, proc.wait()))

    def _start(name: str) -> None:
        timeline[name] = {"start_s": round(time.monotonic() - t0, 2)}
        cmd = ["dvc", "--wait-for-lock", "repro", "--single-item", *(["--force"] if force else []), name]
        proc = subprocess.Popen(cmd, cwd=str(root), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        running[name] = proc
        threading.Thread(target=_watch, args=(name, proc), name=f"embp-run-{name}", daemon=True).start()

    previous = signal.getsignal(signal.SIGINT)

    def _interrupt(signum, _frame) -> None:  # the stages have the same Ctrl-C (one process group): let them end
        nonlocal interrupted
        interrupted = True

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        while pending or running:
            if not failure and not interrupted:
                ready = sorted((n for n in pending if not waiting_on[n] - done), key=lambda n: (-rank[n],
                                                                                                  pending.index(n)))
                ends = {n: timeline[n]["start_s"] + duration(n) for n in running if n not in extras}
                started = admit(ready, sum(need(n) for n in running if n not in extras), jobs, need, ends,
                                time.monotonic() - t0, duration)
                extra = light_extra([n for n in ready if n not in started], len(extras), need, duration)
                for name in started + ([extra] if extra else []):
                    pending.remove(name)
                    _start(name)
                if extra:
                    extras.add(extra)
            elif pending:
                pending.clear()
            if not running:
                break
            try:
                name, code = finished.get(timeout=0.5)
            except queue.Empty:
                continue
            running.pop(name)
            extras.discard(name)
            timeline[name] |= {"end_s": round(time.monotonic() - t0, 2), "exit": code}
            if code == 0:
                done.add(name)
            elif not failure:
                failure = code
                still = ", ".join(sorted(running)) or "none"
                _echo(f"stage {name} failed (exit {code}); no new stage starts (still running: {still})")
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    _write_timeline(root, jobs, round(time.monotonic() - t0, 2), timeline)
    if interrupted and not failure:
        return 130
    if not failure:
        canonical_lock_order(root)
    return failure


def _write_timeline(root: Path, jobs: int, wall_s: float, timeline: dict[str, dict]) -> None:
    """When each stage's ``dvc repro`` started and ended, in seconds from the run's start
    (``reports/timings/embp-run.json``, beside the stages' own run facts; bench/pipeline.py reads it)."""
    folder = root / "reports" / "timings"
    folder.mkdir(parents=True, exist_ok=True)
    record = {"jobs": jobs, "wall_s": wall_s, "stages": timeline}
    tmp = folder / ".embp-run.json.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, folder / "embp-run.json")


def canonical_lock_order(root: Path) -> bool:
    """Rewrite ``dvc.lock``'s stages in ``dvc.yaml``'s order (DVC's lock held, DVC's YAML writer); True if they were
    out of order. Only the order changes: every entry stays as DVC wrote it."""
    import yaml
    from dvc.repo import Repo
    from dvc.utils.serialize import modify_yaml

    path = root / "dvc.lock"
    if not path.exists():
        return False
    with contextlib.chdir(root), Repo(str(root), _wait_for_lock=True) as repo, repo.lock:
        order = [stage.addressing for stage in repo.index.stages]
        current = list((yaml.safe_load(path.read_text()) or {}).get("stages") or {})
        position = {name: k for k, name in enumerate(order)}
        wanted = sorted(current, key=lambda name: (position.get(name, len(order)), current.index(name)))
        if wanted == current:
            return False
        with modify_yaml(str(path)) as data:
            stages = data["stages"]
            entries = [(name, stages[name]) for name in wanted]
            for name in list(stages):
                del stages[name]
            for name, entry in entries:
                stages[name] = entry
    return True


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
