"""Training data: the SFT reader and its errors, prompt bodies against the export's reference rendering, templates,
label masking of the prompt, truncation that drops old history first, and the image checks before any compute."""

from __future__ import annotations

import json

import pytest
from test_train_support import make_sft, quick_params, restore_torch_threads  # noqa: F401

from core.errors import DataError
from tasks.train import tiny
from tasks.train.data import (
    IGNORE,
    TEMPLATES,
    Encoder,
    ImageStore,
    bodies,
    check_window,
    read_split,
    text_body,
    vision_body,
)
from tasks.train.pipeline import plan_run


@pytest.fixture(scope="module")
def sft(tmp_path_factory):
    return make_sft(tmp_path_factory.mktemp("sft"))


@pytest.fixture(scope="module")
def tok(sft):
    return tiny.build_tokenizer([ex.observation for ex in read_split(sft / "train.jsonl")])


def test_reader_takes_the_export_format_and_the_action_alias(sft, tmp_path):
    examples = read_split(sft / "train.jsonl")
    assert len(examples) == 7 and examples[1].action == "take apple 1 from countertop 1"
    assert examples[1].history == ((examples[0].observation, examples[0].action),)
    raw = json.loads((sft / "train.jsonl").read_text().splitlines()[0])
    raw["action"] = raw.pop("target_action")
    (tmp_path / "alias.jsonl").write_text(json.dumps(raw) + "\n")
    assert read_split(tmp_path / "alias.jsonl")[0].action == "go to countertop 1"


@pytest.mark.parametrize("content, message", [
    ("", "has no records"),
    ('{"instruction": "x"}\n', "record lacks history, observation, image, episode_id, step, target_action"),
    ("not json\n", "line 1: not valid JSON"),
])
def test_reader_errors_name_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "train.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_split(path)
    with pytest.raises(DataError, match="does not exist"):
        read_split(tmp_path / "missing.jsonl")


def test_text_body_is_the_exports_reference_prompt():
    from tasks.muep.sft import ImageRef, SFTRecord, render_prompt

    history = [("obs a", "go to desk 1"), ("obs b", "take book 2 from desk 1")]
    record = SFTRecord(id="e_s003", episode_id="e", step=3, split="train", scene="FloorPlan1", task_type="t",
                       instruction="Examine the book.", history=[_turn(o, a) for o, a in history],
                       observation="obs c", image=ImageRef("s.tar", "e_s002"), target_action="use desklamp 1",
                       grammar="alfworld-0.4", renderer="schematic")
    assert text_body("Examine the book.", history, "obs c", window=5) == render_prompt(record)
    assert vision_body("Examine the book.", history, window=1) == \
        "Task: Examine the book.\nAction: take book 2 from desk 1\nNext action:"


def _turn(observation, action):
    from tasks.muep.sft import HistoryTurn

    return HistoryTurn(observation, action)


def test_labels_cover_exactly_the_action_and_eos(sft, tok):
    example = read_split(sft / "train.jsonl")[3]
    image_id = tok.convert_tokens_to_ids(tiny.IMAGE)
    enc = Encoder(tok, TEMPLATES["llava-1.5"], n_image_tokens=16, image_token_id=image_id, add_bos=True,
                  max_seq_len=512)
    out = enc.encode(bodies(example, "vision", 2), example.action)
    target = [t for t in out["labels"] if t != IGNORE]
    assert tok.decode(target[:-1]).strip() == example.action and target[-1] == tok.eos_token_id
    n_prompt = out["labels"].index(target[0])
    assert all(t == IGNORE for t in out["labels"][:n_prompt]) and len(out["input_ids"]) == len(out["labels"])
    assert out["input_ids"][0] == tok.bos_token_id and out["input_ids"].count(image_id) == 16
    assert tok.decode(out["input_ids"][1:n_prompt]).startswith("USER: ")
    assert tok.decode(out["input_ids"][:n_prompt]).endswith("ASSISTANT:")


def test_long_prompts_drop_the_oldest_history_then_cut_the_middle(sft, tok):
    example = read_split(sft / "train.jsonl")[3]                  # three turns of history
    enc = Encoder(tok, TEMPLATES["plain-bos"], n_image_tokens=0, image_token_id=None, add_bos=True, max_seq_len=10**4)
    sizes = [len(enc.encode([b], example.action)["input_ids"]) for b in bodies(example, "text", 3)]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 4
    enc.max_seq_len = sizes[1]                                     # room for two turns, not three
    out = enc.encode(bodies(example, "text", 3), example.action)
    assert len(out["input_ids"]) == sizes[1]
    assert tok.decode(out["input_ids"]).count("Action:") == 2
    enc.max_seq_len = sizes[3] - 5                                 # not even the bare observation fits
    out = enc.encode(bodies(example, "text", 3), example.action)
    text = tok.decode(out["input_ids"])
    assert len(out["input_ids"]) <= enc.max_seq_len and text.startswith("<s>Task: Put a clean apple")
    assert text.rstrip().endswith("Next action: clean apple 1 with sinkbasin 1</s>")


def test_asking_for_more_history_than_the_export_kept_is_an_error(sft):
    examples = read_split(sft / "train.jsonl")
    check_window(examples, 3, "train.jsonl")
    trimmed = [ex.__class__(**{**ex.__dict__, "history": ex.history[-1:]}) for ex in examples]
    with pytest.raises(DataError, match="carries 1 history turns but train.history_window is 3"):
        check_window(trimmed, 3, "train.jsonl")


def test_missing_images_stop_a_vision_baseline_before_compute(tmp_path):
    sft = make_sft(tmp_path, with_images=False)
    assert ImageStore(tmp_path).missing(read_split(sft / "train.jsonl"))
    with pytest.raises(DataError, match=r"llava is a vision baseline but 9 of 9 records have no image"):
        plan_run("llava", quick_params("llava", tmp_path / "m", max_train_records=None), sft_dir=sft)
    plan = plan_run("bloomz-3b", quick_params("bloomz-3b", tmp_path / "m"), sft_dir=sft)   # text: no images needed
    assert plan.dataset["records"] == 2 and len(plan.dataset["sha256"]) == 64


def test_an_empty_split_stops_the_run_before_compute(tmp_path):
    sft = make_sft(tmp_path)
    (sft / "train.jsonl").write_text("")
    with pytest.raises(DataError, match="has no records"):
        plan_run("opt-6.7b", quick_params("opt-6.7b", tmp_path / "m"), sft_dir=sft)


@pytest.mark.dvc
def test_the_default_pipelines_sft_export_reads(default_data):
    examples = read_split(default_data / "data/muep/sft/train.jsonl")
    assert examples and all(ex.action and ex.instruction and ex.image_key for ex in examples)
    assert not ImageStore(default_data).missing(examples)
