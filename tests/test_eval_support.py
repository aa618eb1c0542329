"""Shared data for the evaluation tests (no tests here): a small but real MuEP dataset -- scene metadata of a few
floorplans, one accepted task per task type, expert demonstrations rolled out by the demonstrations stage's own
code -- built once per test process in a temporary repository root (``build_dataset``)."""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
from muep_tasks import make_task as _task

FLOORPLANS = [1, 2, 201, 301]
TEST_SPLIT = {"pick_and_place_simple": "seen_test", "pick_two_obj_and_place": "seen_test",
              "pick_heat_then_place_in_recep": "seen_test", "look_at_obj_in_light": "unseen_test",
              "pick_clean_then_place_in_recep": "unseen_test", "pick_cool_then_place_in_recep": "unseen_test"}


@dataclass(frozen=True)
class Dataset:
    root: Path               # a repository root: data/muep/{metadata,demos}
    metadata_dir: Path
    demos_dir: Path
    index: pd.DataFrame      # episodes.parquet


def _find_tasks(metadata_dir: Path, task_type: str, n: int) -> list[dict]:
    """The first ``n`` tasks of this type the filter accepts in the fixture's scenes (deterministic order)."""
    from tasks.muep.filter import filter_tasks, scene_facts
    from tasks.muep.vocab import TASK_TYPES, catalog

    scenes = pd.read_parquet(metadata_dir / "scenes.parquet")
    facts = scene_facts(scenes, pd.read_parquet(metadata_dir / "object_types.parquet"),
                        pd.read_parquet(metadata_dir / "instances.parquet"))
    spec, found = TASK_TYPES[task_type], []
    for row in scenes.itertuples():
        present = facts[row.scene].counts
        objs = sorted(t for t in present if t in catalog().pickupable)
        targets = sorted(t for t in present if (t in ("DeskLamp", "FloorLamp")) != spec.needs_receptacle)
        for obj in objs:
            for target in targets:
                task = _task(row.scene, row.floorplan, row.room_type, task_type, obj, target,
                             f"t-{task_type[:14]}-{row.scene}-{obj}-{target}")
                if filter_tasks([task], facts)[0]:
                    found.append(task.__dict__)
                    if len(found) == n:
                        return found
    raise AssertionError(f"no {task_type} task in floorplans {FLOORPLANS}")


@cache
def build_dataset() -> Dataset:
    """Metadata, then the demonstrations of 6 test episodes (one per task type, seen and unseen test splits) and 1
    train episode (a few-shot example), through ``tasks.muep.demos.run_batch`` -- the pipeline's own code."""
    from tasks.muep.demos import (
        Batch,
        DemoSettings,
        collect_index,
        prepare_output,
        run_batch,
    )
    from tasks.muep.metadata import (
        InstanceRecord,
        ObjectTypeRecord,
        ReceptacleRecord,
        SceneRecord,
        collect_scene,
    )
    from tasks.params import MetadataParams, SceneParams
    from tasks.records import write_records

    root = Path(tempfile.mkdtemp(prefix="embp-eval-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    meta = root / "data/muep/metadata"
    metas = [collect_scene(n, SceneParams(floorplans=FLOORPLANS), MetadataParams()) for n in FLOORPLANS]
    write_records(meta / "scenes.parquet", [m.scene for m in metas], SceneRecord)
    write_records(meta / "object_types.parquet", [r for m in metas for r in m.object_types], ObjectTypeRecord)
    write_records(meta / "receptacles.parquet", [r for m in metas for r in m.receptacles], ReceptacleRecord)
    write_records(meta / "instances.parquet", [r for m in metas for r in m.instances], InstanceRecord)

    batches: dict[str, list[dict]] = {}
    for task_type, split in TEST_SPLIT.items():
        tasks = _find_tasks(meta, task_type, 2 if task_type == "pick_heat_then_place_in_recep" else 1)
        batches.setdefault(split, []).append(tasks[0] | {"split": split})
        if len(tasks) > 1:
            batches.setdefault("train", []).append(tasks[1] | {"split": "train"})
    demos = root / "data/muep/demos"
    prepare_output(demos, "eval-tests")
    settings = DemoSettings(grammar="alfworld-0.4", search="gbf", plan_timeout_s=30.0, max_plan_length=40,
                            renderer="schematic", render_size=160, metadata_dir=str(meta), out_dir=str(demos))
    for split, tasks in batches.items():
        run_batch(Batch(f"{split}-00000", split, tasks), settings)
    index = collect_index(demos)
    assert set(index.status) == {"ok"}, index[["task_id", "status", "detail"]].to_string()
    index.to_parquet(demos / "episodes.parquet", index=False)
    (demos / "splits.json").write_text(json.dumps({s: [f"shards/{s}-00000.tar"] if s in batches else []
                                                   for s in ("train", "seen_test", "unseen_test")}))
    return Dataset(root, meta, demos, index)


def add_alfworld_games(root: Path, data: Dataset | None = None) -> pd.DataFrame:
    """Under ``root``, what the ``muep-alfworld`` stage writes (``tasks.muep.layout.ALFWORLD``), made from the
    fixture's test episodes: their scene metadata as ``data/muep/alfworld/metadata`` and their rows, relabelled
    ``alfworld_seen`` / ``alfworld_unseen`` with ids of their own and an ``initial_state`` column, as
    ``data/muep/alfworld/episodes.parquet``. Returns that table."""
    data = data or build_dataset()
    target = root / "data/muep/alfworld"
    shutil.copytree(data.metadata_dir, target / "metadata", dirs_exist_ok=True)
    games = data.index[data.index.split.isin(["seen_test", "unseen_test"])].copy()
    games["split"] = games.split.map({"seen_test": "alfworld_seen", "unseen_test": "alfworld_unseen"})
    games["episode_id"] = "alfworld-" + games.episode_id
    games["task_id"] = games.episode_id
    games["initial_state"] = [f"valid/{e}/initial_state.pddl" for e in games.episode_id]
    games = games.reset_index(drop=True)
    games.to_parquet(target / "episodes.parquet", index=False)
    return games


#: Keys that say when, how long, or where a run happened: none may be in a DVC output of the evaluation.
_TIMING = re.compile(r"(^|_|/)(s|ms|seconds|secs|time|timestamp|started|ended|wall|pid|host|hostname|rss|rss_mb|"
                     r"duration|elapsed|cpu|cpu_s)$|(^|_|/)time(_|/)|_at$")


def timing_keys(value, where: str = "") -> list[str]:
    """The paths of keys in ``value`` (nested JSON) that name a time, a duration, a process or a host."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if _TIMING.search(str(key).lower()):
                found.append(path)
            found += timing_keys(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += timing_keys(item, f"{where}[{i}]")
    return found
