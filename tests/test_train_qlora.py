"""Q-LoRA really is 4-bit: a 64-wide tiny LLaMA loads every targeted linear layer as a bitsandbytes Linear4bit with
NF4 double-quantised weights and LoRA on top, trains, and generates after a reload."""

from __future__ import annotations

import pytest
import torch
from test_train_support import (  # noqa: F401
    make_sft,
    quick_params,
    restore_torch_threads,
    tracking_in,
)

from tasks.train.models import linear4bit_modules
from tasks.train.pipeline import plan_run
from tasks.train.registry import get_spec, load_for_inference
from tasks.train.session import TrainSession

pytestmark = pytest.mark.slow


def test_qlora_quantises_to_nf4_and_trains_lora_on_top(tmp_path):
    sft = make_sft(tmp_path)
    spec = get_spec("llama2-7b")
    plan = plan_run("llama2-7b", quick_params("llama2-7b", tmp_path / "m", max_steps=3), sft_dir=sft)
    assert plan.hyper.quantize_4bit
    session = TrainSession(plan, tracking_in(tmp_path))
    quantised = linear4bit_modules(session.model)
    layers = session.model.base_model.model.config.num_hidden_layers
    assert len(quantised) == layers * len(spec.lora_targets)               # every targeted layer, nothing else
    for module in quantised:
        weight = module.weight
        assert weight.dtype == torch.uint8 and not weight.requires_grad
        assert weight.quant_state.quant_type == "nf4" and weight.quant_state.nested      # double quantisation
        assert weight.numel() * 2 == module.in_features * module.out_features          # two 4-bit values a byte
    lora = [m for m in session.model.modules() if type(m).__name__ == "Linear4bit" and hasattr(m, "lora_A")]
    assert len(lora) == len(quantised)
    assert session.model.base_model.model.lm_head.weight.dtype == torch.float32       # the head stays unquantised

    report = session.train()
    assert report["losses"][-1] < report["losses"][0]
    policy = load_for_inference(plan.model_dir)
    assert len(linear4bit_modules(policy.model)) == len(quantised)
    assert policy.generate("Task: Put a clean apple in the fridge.\nObservation: You see a fridge 1.\nNext action:")
