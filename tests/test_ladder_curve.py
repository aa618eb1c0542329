"""SmolLM2-135M's learning curve (tasks/ladder_curve.py, stage ladder-curve).

Unit tests of the nested subsets (a seeded hash order, every subset holds every smaller one, a size the records cannot
fill is refused) and of the sizes' validation; then the stage's task function end to end on a tiny configuration:
the training tests' tiny Q-LoRA LLaMA (random 64-wide base, NF4) on the training fixture's SFT records, the real
SmolLM2-135M-Instruct as the zero-shot point, the evaluation fixture's ALFWorld-format games. It checks the table's
shape, that the subsets are nested, and that a second run writes the same bytes (report, table, adapters)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from test_train_support import make_sft, restore_torch_threads, tracking_in  # noqa: F401

from core.errors import ConfigError
from tasks.ladder_curve import curve_games, nested_subsets, read_records, run_curve, subset_order, table_md
from tasks.params import LadderCurveParams, LadderMuEPParams, TrainParams

# ----------------------------------------------------------------------------------------------------------------
# Which records


def test_subsets_are_nested_prefixes_of_one_seeded_order_whatever_the_file_order():
    ids = [f"ep{e}_s{s:03d}" for e in range(10) for s in range(1, 6)]
    subsets = nested_subsets(ids, [0, 5, 20, 50], seed=0)
    assert [len(v) for v in subsets.values()] == [0, 5, 20, 50]
    assert subsets[5] == subsets[20][:5] and subsets[20] == subsets[50][:20]
    assert sorted(subsets[50]) == sorted(ids)
    assert nested_subsets(list(reversed(ids)), [0, 5, 20, 50], seed=0) == subsets      # the file's order is irrelevant
    assert subset_order(ids, 1) != subset_order(ids, 0)                                 # the seed chooses the order
    assert subsets[20] != ids[:20]                                                      # not the file's first records


def test_a_size_larger_than_the_records_is_refused_naming_the_setting():
    with pytest.raises(ConfigError, match=r"ladder.curve.sizes asks for 8 training records but x.jsonl has 3"):
        nested_subsets(["a", "b", "c"], [0, 2, 8], seed=0, source="x.jsonl")


def test_sizes_must_increase():
    with pytest.raises(ValidationError, match="strictly increasing"):
        LadderCurveParams(sizes=[0, 8, 8])
    with pytest.raises(ValidationError):
        LadderCurveParams(sizes=[-1, 4])
    assert LadderCurveParams().sizes == []                                              # off by default


def test_records_without_an_id_are_refused_with_the_line(tmp_path):
    from core.errors import DataError

    sft = make_sft(tmp_path, with_images=False)
    lines = (sft / "train.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["id"]
    (sft / "train.jsonl").write_text("\n".join([lines[0], json.dumps(broken)]) + "\n")
    with pytest.raises(DataError, match=r"train.jsonl, line 2: the record has no 'id'"):
        read_records(sft / "train.jsonl")


# ----------------------------------------------------------------------------------------------------------------
# The task function on a tiny configuration


def _tiny_train(out) -> TrainParams:
    return TrainParams(profile="tiny", baselines=["smollm2-135m"], batch_size=2, grad_accum=1, learning_rate=1e-2,
                       max_seq_len=160, history_window=1, save_every=50, eval_batches=0, cpu_threads=1,
                       output_dir=str(out))


def _run(tmp_path, sft, games):
    from test_eval_support import build_dataset

    data = build_dataset()
    rules = LadderMuEPParams(games_per_split=None, max_steps=3)
    curve = LadderCurveParams(sizes=[0, 2, 5], games_per_split=1, threads=1)
    specs, counts = curve_games(games, rules, curve.games_per_split)
    alfworld_meta = tmp_path / "root/data/muep/alfworld/metadata"
    return run_curve(curve, rules, 0, _tiny_train(tmp_path / "unused"), tracking_in(tmp_path), sft / "train.jsonl",
                     specs, counts, data.metadata_dir, alfworld_meta, 1, models_dir=tmp_path / "models"), specs


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.slow
@pytest.mark.textworld
def test_the_curve_trains_nested_subsets_plays_the_same_games_and_reruns_to_the_same_bytes(tmp_path):
    from test_eval_support import add_alfworld_games, build_dataset, timing_keys

    sft = make_sft(tmp_path, with_images=False)
    games = add_alfworld_games(tmp_path / "root", build_dataset())
    first, specs = _run(tmp_path, sft, games)
    report = first.report
    assert len(specs) == 2 and {s.split for s in specs} == {"alfworld_seen", "alfworld_unseen"}

    rows = report["rows"]                                         # the table's shape: one row per size
    assert [r["records"] for r in rows] == [0, 2, 5]
    assert [r["steps"] for r in rows] == [0, 1, 3]                # ceil(records / batch of 2), one epoch
    assert rows[0]["tokens"] == 0 and rows[0]["first_loss"] is None and "zero-shot" in rows[0]["label"]
    assert all(r["tokens"] > 0 and r["final_loss"] is not None for r in rows[1:])
    assert rows[1]["tokens"] < rows[2]["tokens"]
    assert [r["label"].rsplit(" ", 1)[1] for r in rows] == ["curve@0", "curve@2", "curve@5"]
    for r in rows:                                                # every point plays the same two games
        assert r["episodes"] == 2 and sum(r["end_reasons"].values()) == 2
        assert len(r["ci95"]["sr"]) == 2 and len(r["ci95"]["gcs"]) == 2 and r["ci95"]["indicative"] is True
        assert 0.0 <= r["ci95"]["sr"][0] <= r["sr"] <= r["ci95"]["sr"][1] <= 1.0
    played = [sorted(x.episode_id for x in p.results) for p in first.points]
    assert played[0] == played[1] == played[2] == sorted(s.episode_id for s in specs)
    table = table_md(report)
    assert [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()] == \
        ["| 0", "| 2", "| 5"]
    header = next(line for line in table.splitlines() if line.startswith("| records"))
    assert header.endswith("| PR %  | PR 95% CI |".replace("  ", " "))   # every rate with its interval, PR's too
    for r, line in zip(rows, [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]):
        cells = line.strip("| ").split(" | ")
        assert len(cells) == header.count("|") - 1
        lo, hi = r["ci95"]["pr"]
        assert cells[-1] == f"[{100 * lo:.1f}, {100 * hi:.1f}]"

    subsets = report["training_records"]["subsets"]               # nested: every subset holds every smaller one
    assert [len(subsets[k]) for k in ("0", "2", "5")] == [0, 2, 5] and subsets["5"][:2] == subsets["2"]
    written = {n: (tmp_path / f"models/n{n}/sft/train.jsonl").read_text().splitlines() for n in (2, 5)}
    assert set(written[2]) < set(written[5])
    assert [json.loads(line)["id"] for line in written[5]] == subsets["5"]
    assert not (tmp_path / "models/n0").exists()                  # zero-shot: nothing trained
    assert (tmp_path / "models/n5/smollm2-135m/adapter/adapter_config.json").exists()     # PEFT's own format
    card = json.loads((tmp_path / "models/n5/smollm2-135m/baseline.json").read_text())
    assert card["trained_steps"] == 3 and card["dataset"]["records"] == 5
    assert set(first.facts) == {"n0", "n2", "n5"} and first.facts["n5"]["train_s"] > 0
    assert not timing_keys(report), timing_keys(report)           # a DVC metric: no time in it

    text, adapters = json.dumps(report, sort_keys=True), _files(tmp_path / "models")
    second, _ = _run(tmp_path, sft, games)                        # the same inputs: the same bytes
    assert json.dumps(second.report, sort_keys=True) == text
    assert table_md(second.report) == table
    assert _files(tmp_path / "models") == adapters
