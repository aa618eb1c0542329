"""How the LMM baselines start (issue #16, item 8): LLaMA-Adapter-v2 trains only the biases of its adapter layers, as
MuEP's fine-tuning did; MiniGPT-4's projection starts from a given pre-trained checkpoint (train.projection_init)
instead of random init; and every run says what it cannot reproduce of the paper's baseline."""

from __future__ import annotations

import json
import re

import pytest
import torch
from test_train_support import (  # noqa: F401
    make_sft,
    quick_params,
    restore_torch_threads,
    tracking_in,
)

from core.errors import ConfigError
from tasks.train.baselines import reproduction_notes
from tasks.train.models import trainable_names
from tasks.train.pipeline import plan_run
from tasks.train.registry import get_spec
from tasks.train.session import TrainSession

pytestmark = pytest.mark.slow


def test_llama_adapter_v2_trains_only_the_biases_of_its_adapter_layers(tmp_path):
    sft = make_sft(tmp_path)
    params = quick_params("llama-adapter-v2", tmp_path / "m", max_steps=2)
    session = TrainSession(plan_run("llama-adapter-v2", params, sft_dir=sft), tracking_in(tmp_path))
    names = trainable_names(session.model)
    layers = session.model.language_model.config.num_hidden_layers
    adapted = {int(m.group(1)) for n in names if (m := re.match(r"language_model\.model\.layers\.(\d+)\.", n))}
    assert names and all(n.endswith(".v2_bias") for n in names)
    assert adapted == set(range(layers - session.plan.hyper.adapter_layers, layers))     # the adapter layers only
    frozen = [n for n, p in session.model.named_parameters() if not p.requires_grad]
    for part in ("adaption_prompt", "adaption_gate", "v2_scale", "layernorm", "visual_proj"):
        assert any(part in n for n in frozen), part
    report = session.train()
    assert report["losses"][-1] < report["losses"][0]
    assert any("image does not reach the model" in n for n in report["cannot_reproduce"])


def test_minigpt4_starts_from_a_given_projection_and_says_so(tmp_path):
    from safetensors.torch import save_file

    sft = make_sft(tmp_path)
    plain = TrainSession(plan_run("minigpt4", quick_params("minigpt4", tmp_path / "a"), sft_dir=sft),
                         tracking_in(tmp_path))
    proj = plain.model.llama_proj
    given = {"llama_proj.weight": torch.full_like(proj.weight, 0.25), "llama_proj.bias": torch.full_like(proj.bias,
                                                                                                         -0.5)}
    save_file({k: v.contiguous() for k, v in given.items()}, str(tmp_path / "minigpt4_proj.safetensors"))
    params = quick_params("minigpt4", tmp_path / "b", projection_init=str(tmp_path / "minigpt4_proj.safetensors"),
                          max_steps=1)
    session = TrainSession(plan_run("minigpt4", params, sft_dir=sft), tracking_in(tmp_path))
    assert torch.equal(session.model.llama_proj.weight, given["llama_proj.weight"])
    assert torch.equal(session.model.llama_proj.bias, given["llama_proj.bias"])
    report = session.train()
    card = json.loads((session.plan.model_dir / "baseline.json").read_text())
    assert card["base_parts"]["projection"].endswith("minigpt4_proj.safetensors")
    assert not any("llama_proj starts from random init" in n for n in report["cannot_reproduce"])
    assert any("llama_proj starts from random init" in n for n in reproduction_notes(get_spec("minigpt4"), "full"))

    save_file({"llama_proj.weight": torch.zeros(3, 3), "llama_proj.bias": torch.zeros(3)},
              str(tmp_path / "wrong.safetensors"))
    wrong = quick_params("minigpt4", tmp_path / "c", projection_init=str(tmp_path / "wrong.safetensors"))
    with pytest.raises(ConfigError, match=r"train\.projection_init: .*wrong\.safetensors has no llama_proj\.weight "
                                          r"of shape"):
        TrainSession(plan_run("minigpt4", wrong, sft_dir=sft), tracking_in(tmp_path))


def test_a_projection_for_another_baseline_or_a_missing_file_stops_before_compute(tmp_path):
    sft = make_sft(tmp_path)
    with pytest.raises(ConfigError, match="train.projection_init is for minigpt4 .*not llava"):
        plan_run("llava", quick_params("llava", tmp_path / "m", projection_init=str(sft / "train.jsonl")), sft_dir=sft)
    with pytest.raises(ConfigError, match=r"train\.projection_init: .*nowhere\.pth is not a file"):
        plan_run("minigpt4", quick_params("minigpt4", tmp_path / "m", projection_init=str(tmp_path / "nowhere.pth")),
                 sft_dir=sft)
