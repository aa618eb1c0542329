"""The SFT export and the dataset card, on demonstrations written the way stage 4 writes them.

Most tests use synthetic shards (webdataset.TarWriter, the documented sample fields) so that every expectation is
known in advance; one test (marked ``textworld``) rolls out real episodes with ``tasks.muep.demos.run_batch`` and
runs both stages on them.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
import webdataset as wds
from PIL import Image

from core.errors import DataError
from tasks.muep.card import FIGURES, action_template, build_card, compute_stats
from tasks.muep.demos import SPLITS, EpisodeRecord
from tasks.muep.sft import export_sft, render_prompt
from tasks.records import to_frame

# (episode id, split, task type, actions); a rejected episode (in the index, not in the shards) is added below.
EPISODES = [
    ("ep_long", "train", "pick_clean_then_place_in_recep",
     ["go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1", "go to sinkbasin 1",
      "clean mug 1 with sinkbasin 1", "go to fridge 1", "open fridge 1", "move mug 1 to fridge 1"]),
    ("ep_short", "train", "pick_and_place_simple", ["go to countertop 1", "take apple 2 from countertop 1",
                                                     "go to diningtable 1", "move apple 2 to diningtable 1"]),
    ("ep_seen", "seen_test", "look_at_obj_in_light", ["go to desk 1", "take book 1 from desk 1", "use desklamp 1"]),
    ("ep_unseen", "unseen_test", "pick_heat_then_place_in_recep",
     ["go to countertop 2", "take potato 1 from countertop 2", "go to microwave 1", "heat potato 1 with microwave 1",
      "go to diningtable 1", "move potato 1 to diningtable 1"]),
]
SCENES = {"ep_long": "FloorPlan1", "ep_short": "FloorPlan2", "ep_seen": "FloorPlan301", "ep_unseen": "FloorPlan10"}


def text_state(eid: str, step: int) -> str:
    return f"state {step} of {eid}: " + ("You are in the middle of a room." if step == 0 else f"after action {step}.")


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def sample_meta(eid: str, split: str, task_type: str, step: int, action: str | None) -> dict:
    return {"scene": SCENES[eid], "instruction": f"do the {task_type} task", "task_type": task_type,
            "episode_id": eid, "split": split, "grammar": "alfworld-0.4", "renderer": "schematic",
            "renderer_version": "1", "step": step, "action": action, "text_state": text_state(eid, step),
            "world_state": {"agent_at": None, "holding": None, "placements": {}}}


def episode_record(eid: str, split: str, task_type: str, actions: list[str], status: str = "ok") -> EpisodeRecord:
    return EpisodeRecord(
        episode_id=eid, task_id=eid, scene=SCENES.get(eid, "FloorPlan3"), initial_state=f"state-{eid}", floorplan=1,
        room_type="kitchen",
        split=split, task_type=task_type, instruction=f"do the {task_type} task", object_type="Mug",
        target_type="Fridge", status=status, detail="" if status == "ok" else "step 2: refused",
        plan_length=len(actions), n_samples=len(actions) + 1 if status == "ok" else 0, batch=f"{split}-00000",
        grammar="alfworld-0.4", renderer="schematic", search="gbf", actions=actions)


def write_demos(demos: Path, episodes=EPISODES, mutate=None) -> Path:
    """Shards, episodes.parquet and splits.json as stage 4 writes them. ``mutate(meta)`` may alter sample JSON."""
    (demos / "shards").mkdir(parents=True)
    for split in SPLITS:
        with wds.TarWriter(str(demos / "shards" / f"{split}-00000.tar")) as writer:
            for eid, ep_split, task_type, actions in episodes:
                if ep_split != split:
                    continue
                for step, action in enumerate([None, *actions]):
                    meta = sample_meta(eid, split, task_type, step, action)
                    if mutate:
                        mutate(meta)
                    writer.write({"__key__": f"{eid}_s{step:03d}", "png": png((40 * step % 256, 90, 160)),
                                  "json": json.dumps(meta).encode()})
    records = [episode_record(*e) for e in episodes]
    records.append(episode_record("ep_refused", "train", "pick_heat_then_place_in_recep", ["go to fridge 1"],
                                  status="textworld_refused"))
    to_frame(records, EpisodeRecord).to_parquet(demos / "episodes.parquet", index=False)
    (demos / "splits.json").write_text(json.dumps({s: [f"shards/{s}-00000.tar"] for s in SPLITS}))
    return demos


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def shard_keys(path: Path) -> set[str]:
    with tarfile.open(path) as tar:
        return {m.name.rsplit(".", 1)[0] for m in tar.getmembers()}


# --------------------------------------------------------------------------------------------------------------------
# SFT export


@pytest.mark.parametrize("window", [0, 2, 5, 50])
def test_sft_one_record_per_action_with_history_window(tmp_path, window):
    demos = write_demos(tmp_path / "data" / "muep" / "demos")
    report = export_sft(demos, tmp_path / "sft", window, ref_root=tmp_path)
    actions = {eid: acts for eid, _, _, acts in EPISODES}
    for split in SPLITS:
        records = read_jsonl(tmp_path / "sft" / f"{split}.jsonl")
        expected = sum(len(acts) for _, s, _, acts in EPISODES if s == split)
        assert len(records) == expected == report["records_by_split"][split]
        for rec in records:
            eid, t = rec["episode_id"], rec["step"]
            assert t >= 1 and rec["split"] == split
            assert rec["target_action"] == actions[eid][t - 1]               # the episode's next action
            assert rec["observation"] == text_state(eid, t - 1)              # the state before it
            assert len(rec["history"]) == min(window, t - 1)
            first = t - len(rec["history"])
            assert [h["action"] for h in rec["history"]] == actions[eid][first - 1:t - 1]
            assert [h["observation"] for h in rec["history"]] == [text_state(eid, k - 1) for k in range(first, t)]
            assert rec["image"] == {"shard": f"data/muep/demos/shards/{split}-00000.tar", "key": f"{eid}_s{t - 1:03d}"}
            assert rec["image"]["key"] in shard_keys(tmp_path / rec["image"]["shard"])
            assert (rec["grammar"], rec["renderer"], rec["scene"]) == ("alfworld-0.4", "schematic", SCENES[eid])
    assert report["history_window"] == window
    assert report["records"] == sum(len(a) for *_, a in EPISODES)
    assert "ep_refused" not in (tmp_path / "sft" / "train.jsonl").read_text()


def test_sft_prompt_rendering_and_report_lengths(tmp_path):
    demos = write_demos(tmp_path / "demos")
    short = export_sft(demos, tmp_path / "w0", 0, ref_root=tmp_path)
    long = export_sft(demos, tmp_path / "w5", 5, ref_root=tmp_path)
    assert long["mean_prompt_chars"] > short["mean_prompt_chars"] > 0
    from tasks.muep.demo_reader import episodes, read_shard
    from tasks.muep.sft import records_for_episode

    episode = next(episodes(read_shard(demos / "shards" / "train-00000.tar")))
    record = records_for_episode(episode, "x.tar", 2)[4]  # step 5
    prompt = render_prompt(record)
    assert prompt.startswith("Task: do the pick_clean_then_place_in_recep task\n")
    assert prompt.endswith(f"Observation: {text_state('ep_long', 4)}\nNext action:")
    assert prompt.count("Action: ") == 2 and "Action: go to sinkbasin 1" in prompt
    assert record.target_action not in prompt  # the answer is not in the question


def test_sft_rejects_shards_that_disagree_with_the_index(tmp_path):
    demos = write_demos(tmp_path / "demos")
    index = pd.read_parquet(demos / "episodes.parquet")
    index.at[0, "actions"] = ["go to cabinet 1"]
    index.to_parquet(demos / "episodes.parquet", index=False)
    with pytest.raises(DataError, match=r"ep_long.*'actions' of .*episodes\.parquet"):
        export_sft(demos, tmp_path / "sft", 5, ref_root=tmp_path)
    assert not (tmp_path / "sft" / "train.jsonl").exists()  # atomic: nothing half-written


def test_sft_names_the_shard_and_field_of_a_malformed_sample(tmp_path):
    demos = write_demos(tmp_path / "demos", mutate=lambda meta: meta.pop("text_state"))
    with pytest.raises(DataError, match=r"train-00000\.tar: sample ep_long_s000: the json field lacks 'text_state'"):
        export_sft(demos, tmp_path / "sft", 5, ref_root=tmp_path)


@pytest.mark.parametrize("keep", [0.5, 0.93])
def test_a_truncated_shard_is_named(tmp_path, keep):
    """Cut inside a member, tarfile fails; cut at a member boundary, the tar ends early and the sample check (no
    png) or the cross-check with episodes.parquet notices. Either way the shard is named and nothing is written."""
    demos = write_demos(tmp_path / "demos")
    shard = demos / "shards" / "train-00000.tar"
    data = shard.read_bytes()
    shard.write_bytes(data[: int(len(data) * keep)])
    pattern = r"shards/train-00000\.tar( is not a readable webdataset shard|: (sample|episode) ep_)"
    with pytest.raises(DataError, match=pattern):
        export_sft(demos, tmp_path / "sft", 5, ref_root=tmp_path)
    assert not (tmp_path / "sft" / "train.jsonl").exists()
    with pytest.raises(DataError, match=pattern):
        build_card(demos, tmp_path / "reports", ref_root=tmp_path)


def test_sft_notices_an_ok_episode_missing_from_the_shards(tmp_path):
    demos = write_demos(tmp_path / "demos", episodes=EPISODES[1:])
    index = pd.read_parquet(demos / "episodes.parquet")
    extra = to_frame([episode_record(*EPISODES[0])], EpisodeRecord)
    pd.concat([index, extra], ignore_index=True).to_parquet(demos / "episodes.parquet", index=False)
    with pytest.raises(DataError, match=r"'ok' episodes of split 'train' .* in none of its shards \(ep_long\)"):
        export_sft(demos, tmp_path / "sft", 5, ref_root=tmp_path)


# --------------------------------------------------------------------------------------------------------------------
# Dataset card


def test_action_templates_abstract_the_names():
    assert action_template("take mug 2 from countertop 1") == "take <x> from <y>"
    assert action_template("go to sinkbasin 1") == "go to <x>"
    assert action_template("use desklamp 1") == "use <x>"


def test_card_statistics_table_and_figures(tmp_path):
    demos = write_demos(tmp_path / "data" / "muep" / "demos")
    reports = tmp_path / "reports" / "muep"
    out = build_card(demos, reports, ref_root=tmp_path)
    stats = out["stats"]
    assert (stats.total.episodes, stats.total.pairs) == (4, 4 + sum(len(a) for *_, a in EPISODES))
    assert stats.by_split["train"].episodes == 2 and stats.by_split["train"].max_plan_length == 8
    assert (stats.seen_scenes, stats.unseen_scenes, stats.episodes_attempted) == (3, 1, 5)
    assert stats.rejects["textworld_refused"] == 1 and sum(stats.rejects.values()) == 1
    assert out["example"] in {"ep_long", "ep_short"}  # from the train split

    card = (reports / "dataset_card.md").read_text(encoding="utf-8")
    header = "|  | episodes | image-text pairs | pairs / episode | scenes | mean plan length | max plan length |"
    assert header in card
    assert "| train | 2 | 14 | 7.00 | 2 | 6.00 | 8 |" in card
    assert "| **all** | 4 | 25 | 6.25 | 4 | 5.25 | 8 |" in card
    assert "| `textworld_refused` | 1 |" in card
    assert re.search(r"paper's figures.*14,927.*15,247.*176,593 image-text pairs and 108 scenes", card)
    assert "scenes: seen (train + seen test) / unseen | 3 / 1" in card
    assert "dvc repro muep-card" in card
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", card)
    assert sorted(links) == sorted(f"figures/{name}" for name in FIGURES.values())
    for link in links:
        assert not Path(link).is_absolute()
        with Image.open(reports / link) as image:  # a PNG that PIL opens, of a readable size
            image.verify()
        with Image.open(reports / link) as image:
            assert image.format == "PNG" and image.width >= 600 and image.height >= 300


def test_card_explains_episode_length_against_alfworlds_walkthroughs(tmp_path):
    """The episode-length section puts this run's pairs and actions per episode next to the paper's ratio and to
    ALFWorld's walkthroughs per task type (from muep-alfworld's train_games.parquet)."""
    demos = write_demos(tmp_path / "demos")
    walk = tmp_path / "train_games.parquet"
    pd.DataFrame({"task_type": ["pick_and_place_simple"] * 3 + ["pick_clean_then_place_in_recep"],
                  "plan_length": [4, 4, 5, 7]}).to_parquet(walk)
    out = build_card(demos, tmp_path / "reports", ref_root=tmp_path, walkthroughs=walk)
    lengths = out["lengths"]
    assert (lengths.actions, lengths.pairs) == (5.25, 6.25)  # the four ok episodes: 8, 4, 3 and 6 actions
    assert lengths.walkthrough_mean == 5.0 and lengths.walkthrough_by_type["pick_and_place_simple"] == 13 / 3
    assert lengths.weighted == 0.75 * 4 + 0.25 * 8  # our per-type means in ALFWorld's type mix (3:1)
    assert lengths.opens == 0.5 and lengths.gotos == 2.25  # 2 opens and 3 + 2 + 1 + 3 "go to" in 4 episodes
    card = (tmp_path / "reports" / "dataset_card.md").read_text(encoding="utf-8")
    assert "**6.25 image-text pairs per episode** (5.25 actions plus the initial state): 47% below the paper's " \
           "11.83" in card
    assert "| pick & place | 4.00 | 4.33 |" in card and "5.25 per episode here: fewer, not more" in card
    assert "cannot be settled from what MuEP released" in card and "two pairs per action; nothing released" in card


def test_card_is_deterministic(tmp_path):
    demos = write_demos(tmp_path / "demos")
    build_card(demos, tmp_path / "a", ref_root=tmp_path)
    build_card(demos, tmp_path / "b", ref_root=tmp_path)
    for name in ["dataset_card.md", *(f"figures/{f}" for f in FIGURES.values())]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_card_refuses_unknown_status_values(tmp_path):
    demos = write_demos(tmp_path / "demos")
    index = pd.read_parquet(demos / "episodes.parquet")
    index.loc[index.episode_id == "ep_refused", "status"] = "exploded"
    with pytest.raises(DataError, match="'status'.*exploded"):
        compute_stats(index)


# --------------------------------------------------------------------------------------------------------------------
# Real rollouts (TextWorld)


def _accepted_tasks(meta, n: int) -> list[dict]:
    """Pick-and-place tasks of a real scene that the stage-3 filter accepts, as stage 4 receives them."""
    from tasks.muep.filter import filter_tasks, scene_facts
    from tasks.muep.generate import TaskRecord
    from tasks.muep.metadata import InstanceRecord, ObjectTypeRecord, SceneRecord
    from tasks.muep.vocab import TASK_TYPES

    facts = scene_facts(to_frame([meta.scene], SceneRecord), to_frame(meta.object_types, ObjectTypeRecord),
                        to_frame(meta.instances, InstanceRecord))
    spec = TASK_TYPES["pick_and_place_simple"]
    candidates = []
    for obj in sorted({i.object_type for i in meta.instances if i.pickupable}):
        for rec in sorted({r.receptacle_type for r in meta.receptacles}):
            goals = spec.goal_conditions(obj, rec, None)
            candidates.append(TaskRecord(
                task_id=f"tw_{obj}_{rec}".lower(), scene=meta.scene.scene, floorplan=meta.scene.floorplan,
                room_type=meta.scene.room_type, split="seen", task_type=spec.name,
                instruction=f"Put a {obj.lower()} in the {rec.lower()}.", object_name=obj, object_type=obj,
                receptacle_name=rec, receptacle_type=rec, light_name=None, light_type=None, goal_conditions=goals,
                n_goal_conditions=len(goals), request_index=0, line_no=1, raw_line="", backend="test", model="test",
                prompt_hash="h", response_key="k", finish_reason="stop"))
    accepted, _, _ = filter_tasks(candidates, facts)
    return [asdict(t) | {"split": "train"} for t in accepted[:: max(1, len(accepted) // n)][:n]]


@pytest.mark.textworld
def test_real_rollouts_give_sft_records_and_a_card(tmp_path):
    from tasks.muep import demos as demos_mod
    from tasks.muep.metadata import (
        InstanceRecord,
        ReceptacleRecord,
        SceneRecord,
        collect_scene,
    )
    from tasks.params import MetadataParams, SceneParams
    from tasks.records import write_records

    meta = collect_scene(1, SceneParams(floorplans=[1]), MetadataParams())
    meta_dir, out = tmp_path / "metadata", tmp_path / "data" / "muep" / "demos"
    write_records(meta_dir / "scenes.parquet", [meta.scene], SceneRecord)
    write_records(meta_dir / "receptacles.parquet", meta.receptacles, ReceptacleRecord)
    write_records(meta_dir / "instances.parquet", meta.instances, InstanceRecord)
    tasks = _accepted_tasks(meta, 3)
    assert len(tasks) == 3
    settings = demos_mod.DemoSettings(grammar="alfworld-0.4", search="gbf", plan_timeout_s=30, max_plan_length=40,
                                      renderer="schematic", render_size=160, metadata_dir=str(meta_dir),
                                      out_dir=str(out))
    try:
        records, _ = demos_mod.run_batch(demos_mod.Batch("train-00000", "train", tasks), settings)
    finally:
        planner = demos_mod._WORKER.pop("planner", None)
        if planner is not None:
            planner.close()
    ok = [r for r in records if r.status == "ok"]
    assert ok, [(r.status, r.detail) for r in records]
    demos_mod.collect_index(out).to_parquet(out / "episodes.parquet", index=False)
    (out / "splits.json").write_text(json.dumps({"train": ["shards/train-00000.tar"], "seen_test": [],
                                                 "unseen_test": []}))

    report = export_sft(out, tmp_path / "sft", 5, ref_root=tmp_path)
    rows = read_jsonl(tmp_path / "sft" / "train.jsonl")
    assert report["records_by_split"] == {"train": sum(r.plan_length for r in ok), "seen_test": 0, "unseen_test": 0}
    keys = shard_keys(out / "shards" / "train-00000.tar")
    by_episode = {r.episode_id: r for r in ok}
    for row in rows:
        assert row["target_action"] == by_episode[row["episode_id"]].actions[row["step"] - 1]
        assert row["image"]["key"] in keys and row["image"]["shard"] == "data/muep/demos/shards/train-00000.tar"
        assert len(row["history"]) == min(5, row["step"] - 1)
    assert (tmp_path / "sft" / "seen_test.jsonl").read_text() == ""

    card = build_card(out, tmp_path / "reports", ref_root=tmp_path)
    assert card["stats"].total.episodes == len(ok)
    assert f"| **all** | {len(ok)} |" in card["card"].read_text(encoding="utf-8")
    for figure in card["figures"].values():
        with Image.open(figure) as image:
            image.verify()
