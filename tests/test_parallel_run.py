"""`embp run`'s scheduler (flows/_parallel.py) on a small DVC repository of its own: independent stages really run
at the same time (a stage that waits for its sibling to start finishes only if both run at once), a stage waits for
its upstream stages, only what changed and what is downstream of it reruns, the first failure stops new starts while
what finished is recorded, and dvc.lock lists its stages in dvc.yaml's order whatever order they finished in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from flows import _parallel

pytestmark = pytest.mark.dvc

#: a stage that waits (at most $STEP_WAIT_S, 60 s) for a marker file, writes one of its own, then its output
STEP = textwrap.dedent("""\
    import os, pathlib, sys, time
    me, wait_for, out, fail = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4] == "fail"
    marks = pathlib.Path("marks"); marks.mkdir(exist_ok=True)
    (marks / (me + ".started")).write_text("")
    deadline = time.monotonic() + float(os.environ.get("STEP_WAIT_S", "60"))
    while wait_for != "-" and not (marks / (wait_for + ".started")).exists():
        if time.monotonic() > deadline:
            sys.exit(f"{me}: {wait_for} never started beside me")
        time.sleep(0.05)
    if fail:
        sys.exit(f"{me}: failing as asked")
    inputs = [pathlib.Path(p).read_text() for p in sys.argv[5:]]
    out.write_text(me + "(" + ",".join(inputs) + ")")
""")


def _pipeline(slow_waits_for: str = "fast", fast_fails: bool = False) -> dict:
    def stage(me, wait_for, out, deps, fail=False):
        return {"cmd": f"python step.py {me} {wait_for} {out} {'fail' if fail else 'ok'} {' '.join(deps)}".strip(),
                "deps": ["step.py", *deps], "outs": [out]}

    return {"stages": {
        "join": stage("join", "-", "join.txt", ["slow.txt", "fast.txt"]),   # first in dvc.yaml, last to run
        "slow": stage("slow", slow_waits_for, "slow.txt", ["seed.txt"]),
        "fast": stage("fast", "-", "fast.txt", ["seed.txt"], fail=fast_fails),
        "alone": stage("alone", "-", "alone.txt", ["other.txt"]),
    }}


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict]:
    root = tmp_path / "repo"
    root.mkdir()
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                        "DVC_NO_ANALYTICS": "1"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True, env=env)
    (root / "step.py").write_text(STEP)
    (root / "seed.txt").write_text("seed")
    (root / "other.txt").write_text("other")
    (root / ".gitignore").write_text("marks/\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(), sort_keys=False))
    return root, env


def _lock_stages(root: Path) -> list[str]:
    return list(yaml.safe_load((root / "dvc.lock").read_text())["stages"])


def test_siblings_run_at_once_and_the_lock_keeps_dvc_yaml_order(repo):
    root, env = repo
    plan = _parallel.plan(root)
    assert plan.order == ["join", "slow", "fast", "alone"]
    assert plan.upstream["join"] == {"slow", "fast"} and plan.upstream["alone"] == set()
    assert plan.pending == ["join", "slow", "fast", "alone"]
    lines: list[str] = []
    # slow waits until fast has started: it can only finish when the two run side by side
    assert _parallel.run(root, plan, jobs=2, env=env, echo=lines.append) == 0, "\n".join(lines)
    assert (root / "join.txt").read_text() == "join(slow(seed),fast(seed))"
    assert _lock_stages(root) == ["join", "slow", "fast", "alone"], "dvc.lock not in dvc.yaml's order"
    assert any(line.startswith("[slow] ") for line in lines)
    status = subprocess.run([sys.executable, "-m", "dvc", "status"], cwd=root, env=env, capture_output=True,
                            text=True, check=True)
    assert "up to date" in status.stdout, status.stdout
    assert _parallel.plan(root).pending == []


def test_one_job_runs_the_stages_one_after_another(repo):
    root, env = repo
    lines: list[str] = []
    code = _parallel.run(root, _parallel.plan(root), jobs=1, env=env | {"STEP_WAIT_S": "3"}, echo=lines.append)
    assert code != 0, "with one job, slow (which waits for fast to start) cannot have met fast"
    assert any("never started beside me" in line for line in lines)


def test_a_stage_that_takes_both_cores_runs_alone(repo):
    """`meta: {cores: 2}`: with 2 cores, slow (which needs fast beside it) cannot meet fast; alone is another
    matter: the single-core stages pair up."""
    root, env = repo
    pipeline = _pipeline()
    pipeline["stages"]["fast"]["meta"] = {"cores": 2}
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    plan = _parallel.plan(root)
    assert plan.cores == {"fast": 2}
    lines: list[str] = []
    code = _parallel.run(root, plan, jobs=2, env=env | {"STEP_WAIT_S": "3"}, echo=lines.append)
    assert code != 0 and any("never started beside me" in line for line in lines), "\n".join(lines)
    timeline = json.loads((root / "reports/timings/embp-run.json").read_text())["stages"]
    fast, slow = timeline.get("fast"), timeline["slow"]
    assert fast is None or fast["start_s"] >= slow["end_s"] or slow["start_s"] >= fast["end_s"], \
        "a 2-core stage shared the cores"
    # a stage wider than the machine still runs (alone)
    assert _parallel.run(root, _parallel.plan(root), jobs=1, env=env | {"STEP_WAIT_S": "3"},
                         echo=lambda _: None) != 0


def test_a_light_stage_runs_on_top_of_a_stage_that_takes_both_cores(repo):
    """`meta: {seconds: 1}` (light: at most LIGHT_S) lets slow start beside the 2-core fast, which it waits for."""
    root, env = repo
    pipeline = _pipeline()
    pipeline["stages"]["fast"]["meta"] = {"cores": 2}
    pipeline["stages"]["slow"]["meta"] = {"seconds": 1}
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    lines: list[str] = []
    assert _parallel.run(root, _parallel.plan(root), jobs=2, env=env | {"STEP_WAIT_S": "20"}, echo=lines.append) \
        == 0, "\n".join(lines)
    assert (root / "join.txt").read_text() == "join(slow(seed),fast(seed))"


def test_one_light_stage_at_a_time_on_top_of_full_cores():
    need = {"wide": 2, "tiny": 1, "tiny2": 1, "long": 1}.__getitem__
    duration = {"wide": 60.0, "tiny": 3.0, "tiny2": 2.0, "long": 40.0}.__getitem__
    assert _parallel.light_extra(["long", "tiny", "tiny2"], 0, need, duration) == "tiny"
    assert _parallel.light_extra(["long", "tiny2"], 1, need, duration) is None, "one at a time"
    assert _parallel.light_extra(["long", "wide"], 0, need, duration) is None, "neither is light"


def test_only_what_changed_and_its_downstream_reruns(repo):
    root, env = repo
    assert _parallel.run(root, _parallel.plan(root), jobs=2, env=env, echo=lambda _: None) == 0
    (root / "other.txt").write_text("changed")
    assert _parallel.plan(root).pending == ["alone"]
    assert _parallel.plan(root, targets=["join"]).pending == []
    (root / "seed.txt").write_text("changed too")
    assert _parallel.plan(root).pending == ["join", "slow", "fast", "alone"]
    assert _parallel.plan(root, targets=["fast"]).pending == ["fast"]
    assert _parallel.plan(root, targets=["join"]).pending == ["join", "slow", "fast"]
    assert _parallel.plan(root, targets=["alone"], force=False).pending == ["alone"]


def test_a_failure_stops_new_starts_and_keeps_what_finished(repo):
    root, env = repo
    (root / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(slow_waits_for="-", fast_fails=True), sort_keys=False))
    lines: list[str] = []
    code = _parallel.run(root, _parallel.plan(root), jobs=1, env=env, echo=lines.append)
    assert code != 0
    assert not (root / "join.txt").exists(), "a stage downstream of the failure ran"
    assert any("stage fast failed" in line for line in lines)
    recorded = set(_lock_stages(root)) if (root / "dvc.lock").exists() else set()
    assert "fast" not in recorded and "join" not in recorded
    assert recorded <= {"slow", "alone"}
    # the stages that ran before the failure are recorded: a rerun after the fix does only the rest
    (root / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(slow_waits_for="-"), sort_keys=False))
    assert set(_parallel.plan(root).pending) == {"join", "fast"} | ({"slow", "alone"} - recorded)


def test_the_lock_order_is_dvc_yaml_order_after_a_serial_run(repo):
    root, env = repo
    (root / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(slow_waits_for="-"), sort_keys=False))
    subprocess.run([sys.executable, "-m", "dvc", "repro", "-q"], cwd=root, env=env, check=True)
    serial = _lock_stages(root)
    before = yaml.safe_load((root / "dvc.lock").read_text())
    assert serial != ["join", "slow", "fast", "alone"], "DVC writes its stages in the order it ran them"
    assert _parallel.canonical_lock_order(root)
    assert _lock_stages(root) == ["join", "slow", "fast", "alone"]
    assert yaml.safe_load((root / "dvc.lock").read_text()) == before, "only the order may change"
    assert not _parallel.canonical_lock_order(root)


def test_priorities_put_the_longest_chain_first():
    plan = _parallel.Plan(order=["a", "b", "c", "d"], upstream={"a": set(), "b": set(), "c": {"a"}, "d": {"c"}},
                          pending=["a", "b", "c", "d"])
    rank = _parallel.priorities(plan, {"a": 5.0, "b": 30.0, "c": 20.0, "d": 10.0})
    assert rank == {"a": 35.0, "b": 30.0, "c": 30.0, "d": 10.0}
    assert _parallel.priorities(plan, {})["a"] == 3 * _parallel.DEFAULT_ESTIMATE_S
    plan.hints = {"b": 100.0, "a": 1.0}
    hinted = _parallel.priorities(plan, {"a": 5.0})   # a run's own timing beats the hint
    assert hinted["b"] == 100.0 and hinted["a"] == 5.0 + 2 * _parallel.DEFAULT_ESTIMATE_S


def test_hints_come_from_dvc_yaml_meta(repo):
    root, _ = repo
    pipeline = _pipeline()
    pipeline["stages"]["alone"]["meta"] = {"seconds": 42}
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    assert _parallel.plan(root).hints == {"alone": 42.0}


def test_a_stage_s_threads_param_gives_it_that_many_cores(repo):
    """`meta: {threads: KEY}`: the team size a params key sets (a profile giving a torch step two threads) is the
    cores the stage takes; one thread, a missing key or a non-number leave it at one, null (every core) is wide."""
    root, _ = repo
    pipeline = _pipeline()
    pipeline["stages"]["fast"]["meta"] = {"threads": "train.cpu_threads"}
    pipeline["stages"]["slow"]["meta"] = {"threads": ["llm.threads", "no.such.key"]}
    pipeline["stages"]["alone"]["meta"] = {"threads": "llm.name"}
    pipeline["stages"]["join"]["meta"] = {"threads": "serve.threads"}
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    (root / "params.yaml").write_text("train: {cpu_threads: 2}\nllm: {threads: 1, name: x}\nserve: {threads: null}\n")
    assert _parallel.plan(root).cores == {"fast": 2, "slow": 1, "alone": 1, "join": os.cpu_count()}
    (root / "params.yaml").write_text("train: {cpu_threads: 1}\n")
    assert _parallel.plan(root).cores["fast"] == 1


def test_no_stage_jumps_the_queue_of_a_wide_one():
    need = {"wide": 2, "n1": 1, "n2": 1}.__getitem__
    assert _parallel.admit(["wide", "n1", "n2"], busy=1, jobs=2, need=need) == [], "n1 would starve wide"
    assert _parallel.admit(["wide", "n1"], busy=0, jobs=2, need=need) == ["wide"]
    assert _parallel.admit(["n1", "wide", "n2"], busy=0, jobs=2, need=need) == ["n1"]
    assert _parallel.admit(["n1", "n2", "wide"], busy=0, jobs=2, need=need) == ["n1", "n2"]


def test_a_short_stage_fills_the_gap_before_a_wide_one_only_if_it_ends_in_time():
    """EASY backfilling: the blocked wide stage's cores are expected free when the running stage ends (t=100); a
    1-core stage expected to end by then starts now, a longer one waits, and none starts behind a running stage that
    is already past its estimate."""
    need = {"wide": 2, "short": 1, "long": 1, "other": 1, "perception": 1}.__getitem__
    duration = {"short": 15.0, "long": 40.0, "other": 10.0}.__getitem__
    args = dict(busy=1, jobs=2, need=need, duration=duration)
    assert _parallel.admit(["wide", "long", "short"], running_ends={"perception": 100.0}, now=70.0, **args) \
        == ["short"]
    assert _parallel.admit(["wide", "long", "short"], running_ends={"perception": 100.0}, now=50.0, **args) \
        == ["long"], "long ends at 90: in time"
    assert _parallel.admit(["wide", "short"], running_ends={"perception": 60.0}, now=70.0, **args) == [], \
        "perception overran its estimate: it may end any moment"
    assert _parallel.admit(["wide", "short", "other"], running_ends={"perception": 100.0}, now=80.0, **args) \
        == ["short"], "one free core: the second short one waits"
    # a stage admitted in the same round counts among the ones the wide stage waits for
    assert _parallel.admit(["other", "wide", "short"], busy=0, jobs=2, need=need, running_ends={}, now=0.0,
                           duration=duration) == ["other"], "short (15 s) would end after other (10 s)"


def test_estimates_read_each_stage_s_run_facts(tmp_path):
    """A foreach stage's flow writes its facts under its own name (muep-train@<baseline>); unread stages have none."""
    timings = tmp_path / "reports" / "timings"
    timings.mkdir(parents=True)
    (timings / "muep-train@opt-6.7b.json").write_text('{"process_s": 12.5}')
    (timings / "roboscript-eval.json").write_text('{"process_s": 30}')
    (timings / "broken.json").write_text("{")
    (timings / "roboscript-shapes.json").write_text('{"stage": "roboscript-shapes", "wall_s": 2.1}')  # in-process
    got = _parallel.estimates(tmp_path, ["muep-train-tiny@opt-6.7b", "roboscript-eval", "broken", "muep-card",
                                         "roboscript-shapes"])
    assert got == {"muep-train-tiny@opt-6.7b": 12.5, "roboscript-eval": 30.0}
