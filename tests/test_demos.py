"""Demonstration tests: the STRIPS twin's FF plans replay to a win in the real TextWorld game for all six task types,
impossible or slow problems become recorded rejects, the guard keeps plans honest, batches resume after an
interruption with the same episodes, and shards read back with the webdataset reader."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import webdataset as wds
from muep_tasks import make_task as _task

from core.errors import DataError
from tasks.muep.demos import (
    Batch,
    DemoSettings,
    collect_index,
    commands_from_plan,
    done_batches,
    make_batches,
    prepare_output,
    run_batch,
    run_episode,
    scene_context,
    select_episodes,
)
from tasks.muep.filter import filter_tasks, scene_facts
from tasks.muep.generate import TaskRecord
from tasks.muep.metadata import (
    InstanceRecord,
    ObjectTypeRecord,
    ReceptacleRecord,
    SceneRecord,
    collect_scene,
)
from tasks.muep.pddl import Problem
from tasks.muep.planner import PlannerWorker
from tasks.muep.render import build_renderer
from tasks.muep.textworld_env import load_game
from tasks.muep.vocab import TASK_TYPES, catalog
from tasks.params import MetadataParams, SceneParams
from tasks.records import write_records

pytestmark = pytest.mark.textworld

FLOORPLANS = [1, 2, 201, 301]


@pytest.fixture(scope="module")
def metadata_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("metadata")
    metas = [collect_scene(n, SceneParams(floorplans=FLOORPLANS), MetadataParams()) for n in FLOORPLANS]
    write_records(out / "scenes.parquet", [m.scene for m in metas], SceneRecord)
    write_records(out / "object_types.parquet", [r for m in metas for r in m.object_types], ObjectTypeRecord)
    write_records(out / "receptacles.parquet", [r for m in metas for r in m.receptacles], ReceptacleRecord)
    write_records(out / "instances.parquet", [r for m in metas for r in m.instances], InstanceRecord)
    return out


@pytest.fixture(scope="module")
def planner():
    with PlannerWorker() as worker:
        yield worker


@pytest.fixture(scope="module")
def renderer():
    r = build_renderer("schematic", size=160)
    yield r
    r.close()


def find_task(metadata_dir: Path, task_type: str, prefer_satisfied_target: bool = False) -> dict:
    """A task of this type that the filter accepts, searched in the fixture's scenes (deterministic order)."""
    scenes = pd.read_parquet(metadata_dir / "scenes.parquet")
    types = pd.read_parquet(metadata_dir / "object_types.parquet")
    insts = pd.read_parquet(metadata_dir / "instances.parquet")
    facts = scene_facts(scenes, types, insts)
    cat = catalog()
    spec = TASK_TYPES[task_type]
    for row in scenes.itertuples():
        present = facts[row.scene].counts
        objs = sorted(t for t in present if t in cat.pickupable)
        targets = sorted(t for t in present if (t in ("DeskLamp", "FloorLamp")) != spec.needs_receptacle)
        for obj in objs:
            for target in targets:
                task = _task(row.scene, row.floorplan, row.room_type, task_type, obj, target,
                             f"t-{task_type}-{row.scene}-{obj}-{target}")
                accepted, _, _ = filter_tasks([task], facts)
                if not accepted:
                    continue
                starts_there = any(p.in_type(target) for p in facts[row.scene].placements.get(obj, []))
                if prefer_satisfied_target and not starts_there:
                    continue
                return task.__dict__ | {"split": "train"}
    pytest.fail(f"no {task_type} task in floorplans {FLOORPLANS}")


def settings(metadata_dir: Path, out: Path, **kw) -> DemoSettings:
    base = dict(grammar="alfworld-0.4", search="gbf", plan_timeout_s=20.0, max_plan_length=40,
                renderer="schematic", render_size=160, metadata_dir=str(metadata_dir), out_dir=str(out))
    return DemoSettings(**(base | kw))


@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_each_task_type_plans_and_replays_to_a_win(task_type, metadata_dir, planner, renderer, tmp_path):
    task = find_task(metadata_dir, task_type)
    record, samples, _ = run_episode(task, settings(metadata_dir, tmp_path), planner, renderer, "b")
    assert record.status == "ok", record.detail
    assert record.plan_length == len(record.actions) > 0
    assert len(samples) == record.plan_length + 1  # the initial state, then the state after every action
    assert samples[0].meta["action"] is None and samples[-1].meta["action"] == record.actions[-1]
    assert all(s.meta["renderer"] == "schematic" and s.meta["grammar"] == "alfworld-0.4" for s in samples)
    assert samples[0].image[:8] == b"\x89PNG\r\n\x1a\n"
    for s in samples:  # the agent faces the receptacle it went to, also where several share one location
        if (s.meta["action"] or "").startswith("go to "):
            assert s.meta["world_state"]["agent_at"] == s.meta["action"][len("go to "):]


def test_muep_grammar_uses_put_in_on(metadata_dir, planner, renderer, tmp_path):
    task = find_task(metadata_dir, "pick_and_place_simple")
    record, samples, _ = run_episode(task, settings(metadata_dir, tmp_path, grammar="muep"), planner, renderer, "b")
    assert record.status == "ok", record.detail
    puts = [a for a in record.actions if a.startswith(("put ", "move "))]
    assert puts and all(" in/on " in a for a in puts)
    assert samples[-1].meta["grammar"] == "muep"


def test_the_guard_makes_a_heat_plan_heat_the_object_it_places(metadata_dir, planner, tmp_path):
    """Even where an object of the target type already sits in the target receptacle, the plan must heat one and
    put *that* one there: the game's final facts say so."""
    task = find_task(metadata_dir, "pick_heat_then_place_in_recep", prefer_satisfied_target=True)
    ctx = scene_context(str(metadata_dir), task["scene"])
    problem = Problem("guard", ctx.receptacles, ctx.instances, task["task_type"], task["object_type"],
                      task["receptacle_type"])
    plan = planner.solve(problem.strips())
    assert plan.status == "solved"
    assert any(op == "heat" for op, *_ in plan.steps)
    commands = commands_from_plan(plan.steps, problem.names, "alfworld-0.4",
                                  {r.name: r.location for r in ctx.receptacles})
    game = load_game(problem, task["instruction"])
    game.reset()
    for i, command in enumerate(commands, 1):
        step = game.step(command, i)
        assert step.valid, (command, step.observation)
    assert game.won()
    final = step.state
    heated = [o for o in final.hot if o.startswith(task["object_type"].lower())]
    assert heated and any(ctx.layout.receptacle(final.placements[o]).receptacle_type == task["receptacle_type"]
                          for o in heated)


def test_impossible_task_is_rejected_quickly(metadata_dir, planner, renderer, tmp_path):
    task = find_task(metadata_dir, "pick_and_place_simple")
    task = task | {"object_type": "Apple", "receptacle_type": "CoffeeMachine", "task_id": "impossible"}
    start = time.perf_counter()
    record, samples, _ = run_episode(task, settings(metadata_dir, tmp_path, plan_timeout_s=5), planner, renderer, "b")
    assert record.status in ("unsolvable", "not_posable"), record
    assert not samples and time.perf_counter() - start < 5


def test_planner_timeout_is_a_recorded_reject_and_the_worker_recovers(metadata_dir, planner, renderer, tmp_path):
    task = find_task(metadata_dir, "pick_two_obj_and_place")
    start = time.perf_counter()
    record, _, _ = run_episode(task, settings(metadata_dir, tmp_path, plan_timeout_s=0.001), planner, renderer, "b")
    assert record.status == "plan_timeout" and "0.001" in record.detail
    assert time.perf_counter() - start < 5
    record, _, _ = run_episode(task, settings(metadata_dir, tmp_path), planner, renderer, "b")
    assert record.status == "ok", record.detail  # a fresh worker process took over


def test_vanished_goal_object_is_not_posable(metadata_dir, planner, renderer, tmp_path):
    task = find_task(metadata_dir, "pick_and_place_simple") | {"object_type": "Television", "task_id": "gone"}
    record, _, _ = run_episode(task, settings(metadata_dir, tmp_path), planner, renderer, "b")
    assert record.status == "not_posable" and "Television" in record.detail


def _tasks_for_batches(metadata_dir: Path) -> pd.DataFrame:
    rows = [find_task(metadata_dir, t) for t in ("pick_and_place_simple", "pick_clean_then_place_in_recep",
                                                  "pick_cool_then_place_in_recep", "look_at_obj_in_light")]
    return pd.DataFrame(rows)


def _run_all(batches: list[Batch], s: DemoSettings, skip: set[str] = frozenset()) -> None:
    for b in batches:
        if b.batch_id not in skip:
            run_batch(b, s)


def _samples(out: Path) -> dict[str, dict]:
    shards = sorted(str(p) for p in (out / "shards").glob("*.tar"))
    data = {}
    for sample in wds.WebDataset(shards, shardshuffle=False):
        meta = json.loads(sample["json"])
        data[sample["__key__"]] = {"meta": meta, "png": sample["png"]}
    return data


def test_resume_after_interruption_gives_the_same_episodes_and_shards_read_back(metadata_dir, tmp_path):
    selected = _tasks_for_batches(metadata_dir)
    batches = make_batches(selected, batch_size=1)
    assert len(batches) == 4

    full = tmp_path / "full"
    prepare_output(full, "fp")
    _run_all(batches, settings(metadata_dir, full))

    resumed = tmp_path / "resumed"
    prepare_output(resumed, "fp")
    run_batch(batches[0], settings(metadata_dir, resumed))
    # What a kill -9 in the middle of batch 2 leaves: a temporary file and a shard without its index part.
    (resumed / "shards" / ".train-00001.tar.abc.tmp").write_bytes(b"partial")
    (resumed / "shards" / "train-00001.tar").write_bytes(b"garbage from an interrupted write")
    prepare_output(resumed, "fp")  # same inputs: finished batches are kept
    assert done_batches(resumed) == {batches[0].batch_id}
    assert not (resumed / "shards" / ".train-00001.tar.abc.tmp").exists()  # stray temporary files are swept
    _run_all(batches, settings(metadata_dir, resumed), skip=done_batches(resumed))

    a, b = collect_index(full), collect_index(resumed)
    cols = ["episode_id", "status", "actions", "plan_length", "n_samples", "batch"]
    pd.testing.assert_frame_equal(a[cols].sort_values("episode_id").reset_index(drop=True),
                                  b[cols].sort_values("episode_id").reset_index(drop=True))
    sa, sb = _samples(full), _samples(resumed)
    assert sa.keys() == sb.keys() and len(sa) == int(a.n_samples.sum()) > 0
    for key in sa:
        assert sa[key]["png"] == sb[key]["png"]
        assert sa[key]["meta"] == sb[key]["meta"]
    assert {m["meta"]["split"] for m in sa.values()} == {"train"}
    # Same inputs, same bytes: a shard written later (a resumed run) is the shard written in one go, byte for byte
    # (no member mtime, owner or other trace of when or by whom it was written).
    for shard in sorted((full / "shards").glob("*.tar")):
        assert shard.read_bytes() == (resumed / "shards" / shard.name).read_bytes(), shard.name


def test_changed_inputs_discard_old_batches(tmp_path):
    out = tmp_path / "demos"
    prepare_output(out, "one")
    (out / "parts" / "train-00000.parquet").write_bytes(b"x")
    prepare_output(out, "one")
    assert done_batches(out) == {"train-00000"}
    prepare_output(out, "two")
    assert done_batches(out) == set()


def test_selection_covers_every_split_and_type(metadata_dir):
    scenes = pd.read_parquet(metadata_dir / "scenes.parquet")
    scenes = scenes.assign(state_split=["train", "seen_test", "unseen_test", "train"][:len(scenes)])
    tasks = pd.DataFrame([find_task(metadata_dir, t) for t in sorted(TASK_TYPES)] * 3)
    tasks["task_id"] = [f"t{i}" for i in range(len(tasks))]
    picked = select_episodes(tasks.drop(columns="split"), scenes, episodes=6, seed=0)
    assert len(picked) == 6
    assert select_episodes(tasks.drop(columns="split"), scenes, 6, 0).equals(picked)  # deterministic
    split_of = dict(zip(scenes.scene, scenes.state_split, strict=True))
    state_of = dict(zip(scenes.scene, scenes.initial_state, strict=True))
    # the split is the scene instance's: episodes of one initial state never land in two splits
    assert all(row.split == split_of[row.scene] and row.initial_state == state_of[row.scene]
               for row in picked.itertuples())


def test_split_leakage_is_refused():
    """The stage's check fails on shared initial states and on test floorplans the splits do not allow."""
    from tasks.muep.demos import split_leakage

    def frame(*rows):
        return pd.DataFrame(rows, columns=["scene", "floorplan", "state_split", "initial_state"])

    good = frame(("a", 1, "train", "s1"), ("b", 1, "seen_test", "s2"), ("c", 9, "unseen_test", "s3"))
    alf = frame(("v1", 1, "alfworld_seen", "s4"), ("v2", 10, "alfworld_unseen", "s5"), ("v3", 2, "alfworld_seen", "s6"))
    report = split_leakage(good, alf)
    assert report["initial_states"] == {"alfworld_seen": 2, "alfworld_unseen": 1, "seen_test": 1, "train": 1,
                                        "unseen_test": 1}
    assert report["alfworld_seen_floorplans_without_training_states"] == 1  # floorplan 2 has no training state
    with pytest.raises(DataError, match="initial state.*s1 in seen_test and train"):
        split_leakage(frame(("a", 1, "train", "s1"), ("b", 1, "seen_test", "s1")))
    with pytest.raises(DataError, match="initial state.*alfworld_seen and train"):
        split_leakage(good, frame(("v", 1, "alfworld_seen", "s1")))
    with pytest.raises(DataError, match=r"seen_test floorplans without training states: \[2\]"):
        split_leakage(frame(("a", 1, "train", "s1"), ("b", 2, "seen_test", "s2")))
    with pytest.raises(DataError, match=r"unseen floorplans \[10\] also have training states"):
        split_leakage(good.assign(floorplan=[10, 10, 9]), alf)


def test_kill_9_mid_run_then_rerun_finishes_only_the_rest(metadata_dir, tmp_path):
    """The real flow in a subprocess, killed with SIGKILL after its first batch; the rerun completes the others."""
    import os
    import signal
    import subprocess

    root, cmd, env = _flow_root(metadata_dir, tmp_path, episodes=None, batch_size=1, task_runner="sequential")
    repo = Path(__file__).resolve().parent.parent
    parts = root / "data/muep/demos/parts"

    log = tmp_path / "first-run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 600
        while (time.time() < deadline and proc.poll() is None
               and not (parts.exists() and list(parts.glob("*.parquet")))):
            time.sleep(0.2)
        exited = proc.poll()
        if exited is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert exited is None, f"the first run ended by itself (exit {exited}):\n{log.read_text()[-3000:]}"
    first = {p.stem for p in parts.glob("*.parquet")}
    assert 1 <= len(first) < 4, (first, log.read_text()[-3000:])

    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 already done" in done.stderr or f"{len(first)} already done" in done.stderr
    index = pd.read_parquet(root / "data/muep/demos/episodes.parquet")
    assert len(index) == 4 and set(index.status) == {"ok"}
    assert not list((root / "data/muep/demos/shards").glob(".*.tmp"))
    report = json.loads((root / "reports/muep/demos.json").read_text())
    assert report["episodes"] == 4 and report["image_text_pairs"] == int(index.n_samples.sum())


def _flow_root(metadata_dir: Path, tmp_path: Path, **demos) -> tuple[Path, list[str], dict]:
    import os
    import shutil
    import sys

    import yaml

    root = tmp_path / "root"
    shutil.copytree(metadata_dir, root / "data/muep/metadata")
    _alfworld_scenes(root / "data/muep/alfworld/metadata")
    write_records(root / "data/muep/filter/accepted.parquet",
                  [TaskRecord(**(t | {"split": "seen"}))
                   for t in _tasks_for_batches(metadata_dir).to_dict("records")], TaskRecord)
    repo = Path(__file__).resolve().parent.parent
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["muep"]["demos"].update(render_size=160, **demos)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    env = os.environ | {"EMBP_ROOT": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return root, [sys.executable, "-m", "flows.muep_demos", "--params", str(root / "params.yaml")], env


def _alfworld_scenes(out: Path) -> None:
    """The scene tables of two ALFWorld evaluation games: the demonstrations stage checks no training state is one."""
    from tasks.muep.alfworld_games import VALID_ARCHIVE, read_games
    from tasks.muep.alfworld_splits import game_metadata, select_games
    from tasks.muep.metadata import write_tables

    write_tables([game_metadata(g) for g in select_games(read_games(VALID_ARCHIVE), 1)], out)


def test_rollouts_on_a_dask_cluster(metadata_dir, tmp_path):
    """task_runner: dask with no address starts a local Dask cluster (one thread per worker process)."""
    import subprocess

    root, cmd, env = _flow_root(metadata_dir, tmp_path, episodes=2, batch_size=1, task_runner="dask", workers=1)
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on dask x1" in done.stderr
    index = pd.read_parquet(root / "data/muep/demos/episodes.parquet")
    assert len(index) == 2 and set(index.status) == {"ok"}


def test_a_run_of_batches_reports_a_failed_batch_and_plays_the_next(monkeypatch):
    """One worker task plays a run of batches (``demos.scene_runs``); a batch that fails is reported by id, and
    the batches after it in the run are still played."""
    from types import SimpleNamespace

    import flows.muep_demos as stage
    from tasks.muep.demos import Batch

    played = []

    def run_batch(batch, settings):
        played.append(batch.batch_id)
        if batch.batch_id == "train-00001":
            raise RuntimeError("the planner died")
        return [SimpleNamespace(status="ok")] * len(batch.tasks), {t["task_id"]: {"plan_s": 0.1} for t in batch.tasks}

    monkeypatch.setattr(stage, "run_batch", run_batch)
    batches = [Batch(f"train-{i:05d}", "train", [{"scene": "S", "task_id": f"t{i}"}]) for i in range(3)]
    out = stage.rollout_batches.fn(batches, None)
    assert played == ["train-00000", "train-00001", "train-00002"]
    assert sorted(out["done"]) == ["train-00000", "train-00002"]
    assert out["done"]["train-00002"] == {"episodes": 1, "ok": 1, "costs": {"t2": {"plan_s": 0.1}}}
    assert out["failures"] == ["train-00001: RuntimeError: the planner died"]
