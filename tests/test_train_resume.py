"""A run killed between checkpoints resumes from the last one -- same base, optimizer, schedule, data order and MLflow
run -- and ends with exactly the adapter an uninterrupted run produces."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from test_train_support import (  # noqa: F401
    make_sft,
    quick_params,
    restore_torch_threads,
    tracking_in,
)

from tasks.train.pipeline import plan_run, run

pytestmark = pytest.mark.slow


class Killed(Exception):
    pass


def test_killed_run_resumes_and_matches_an_uninterrupted_one(tmp_path):
    sft, tracking = make_sft(tmp_path), tracking_in(tmp_path)

    def plan(out):
        # 4 records in batches of 2: the order changes every epoch, so a wrong resume position shows
        return plan_run("opt-6.7b", quick_params("opt-6.7b", out, max_steps=6, save_every=2, max_train_records=4,
                                                 learning_rate=5e-3), sft_dir=sft)

    whole = run(plan(tmp_path / "a"), tracking)

    def kill_at_5(step, loss):
        if step == 5:
            raise Killed                     # after step 5, whose checkpoint (every 2) was never written

    interrupted = plan(tmp_path / "b")
    with pytest.raises(Killed):
        run(interrupted, tracking, on_step=kill_at_5)
    ckpts = interrupted.model_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-000002", "step-000004"]
    assert not (interrupted.model_dir / "baseline.json").exists()
    run_id = json.loads((ckpts / "step-000004" / "state.json").read_text())["mlflow_run_id"]

    resumed = run(plan(tmp_path / "b"), tracking)
    assert resumed["resumed_from_step"] == 4 and resumed["steps"] == 6
    assert resumed["run_facts"]["mlflow_run_id"] == run_id and not ckpts.exists()
    assert resumed["losses"] == pytest.approx(whole["losses"], abs=1e-6)
    a = load_file(str(tmp_path / "a/opt-6.7b/adapter/adapter_model.safetensors"))
    b = load_file(str(tmp_path / "b/opt-6.7b/adapter/adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_of_another_configuration_is_not_resumed(tmp_path):
    sft, tracking = make_sft(tmp_path), tracking_in(tmp_path)
    first = plan_run("bloomz-3b", quick_params("bloomz-3b", tmp_path / "m", max_steps=4, save_every=1), sft_dir=sft)

    def kill_at_2(step, loss):
        if step == 2:
            raise Killed

    with pytest.raises(Killed):
        run(first, tracking, on_step=kill_at_2)
    changed = plan_run("bloomz-3b", quick_params("bloomz-3b", tmp_path / "m", max_steps=4, save_every=1,
                                                 learning_rate=1e-3), sft_dir=sft)
    assert run(changed, tracking)["resumed_from_step"] == 0
