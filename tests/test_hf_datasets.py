"""Data tests of the Hugging Face `datasets` loading path: the fixture's real demonstration shards and the SFT export
made from them load as `DatasetDict`s with image, text state, action, task and split; the SFT one-liner the docs
print works with `datasets` alone."""

from __future__ import annotations

import json

import pytest
from test_eval_support import build_dataset

pytestmark = pytest.mark.textworld


@pytest.fixture(scope="module")
def data():
    return build_dataset()


def test_demos_load_with_images_text_actions_task_and_split(data, tmp_path):
    from PIL import Image

    from tasks.muep.demo_reader import read_shard, read_splits
    from tasks.muep.hf_datasets import load_demos

    ds = load_demos(data.demos_dir, cache_dir=str(tmp_path / "hf"))
    shards = read_splits(data.demos_dir)
    assert set(ds) == {s for s, files in shards.items() if files}
    for split, rows in ds.items():
        expected = [s for shard in shards[split] for s in read_shard(shard, images=True)]
        assert len(rows) == len(expected) and set(rows["split"]) == {split}
        first = rows[0]
        assert isinstance(first["image"], Image.Image) and first["image"].size[0] > 0
        assert first["step"] == 0 and first["action"] is None and first["text_state"] == expected[0].text_state
        assert first["task_type"] == expected[0].task_type and first["instruction"] == expected[0].instruction
        assert json.loads(rows[1]["world_state"]) == expected[1].world_state
        assert rows[1]["action"] == expected[1].action


def test_an_unknown_split_is_named(data):
    from core.errors import DataError
    from tasks.muep.hf_datasets import load_demos

    with pytest.raises(DataError, match="no split 'validation'"):
        load_demos(data.demos_dir, splits=["validation"])


def test_the_sft_export_loads_with_the_documented_one_liner(data, tmp_path, monkeypatch):
    from datasets import load_dataset  # noqa: F401 - the one-liner's name

    from tasks.muep.hf_datasets import SFT_ONE_LINER, load_sft
    from tasks.muep.sft import export_sft

    export_sft(data.demos_dir, tmp_path / "data/muep/sft", 2, data.root)
    monkeypatch.chdir(tmp_path)
    ds = eval(SFT_ONE_LINER)  # noqa: S307 - the exact line docs/muep-stages.md and the dataset card print
    records = [json.loads(line) for line in (tmp_path / "data/muep/sft/seen_test.jsonl").open()]
    assert len(ds["seen_test"]) == len(records) > 0
    row = ds["seen_test"][0]
    assert row["target_action"] == records[0]["target_action"] and row["task_type"] == records[0]["task_type"]
    assert row["observation"] == records[0]["observation"] and row["image"] == records[0]["image"]
    assert set(load_sft(tmp_path / "data/muep/sft", cache_dir=str(tmp_path / "hf"))) == {
        s for s in ("train", "seen_test", "unseen_test") if (tmp_path / f"data/muep/sft/{s}.jsonl").stat().st_size}
