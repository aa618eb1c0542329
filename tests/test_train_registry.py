"""The baseline registry and the checks that stop a run before it computes: unknown names (with the valid list),
4-bit requests the hardware or the method cannot serve, base checkpoints that do not exist, bad params."""

from __future__ import annotations

import pytest
import yaml
from test_train_support import make_sft, quick_params, restore_torch_threads  # noqa: F401

from core.errors import ConfigError
from tasks.params import TrainParams, validate
from tasks.train import tiny
from tasks.train.data import TEMPLATES
from tasks.train.families import FAMILIES
from tasks.train.pipeline import check_base, plan_run, resolve_hyper
from tasks.train.registry import get_spec, load_for_inference, names

PAPER = {"LLaMA-2-7B", "OPT-6.7B", "Bloomz-3B", "BLIP2", "InstructBLIP", "MiniGPT-4", "LLaVA", "LLaMA-Adapter-v2"}


def test_eight_baselines_as_in_the_paper():
    specs = [get_spec(n) for n in names() if get_spec(n).paper_name]      # smollm2-135m: ours, not the paper's
    assert {s.paper_name for s in specs} == PAPER and len(specs) == 8
    for spec in specs:
        assert spec.template in TEMPLATES and spec.family in FAMILIES and spec.trainable
        assert FAMILIES[spec.family].kind == spec.kind
        assert all("/" in part for part in spec.checkpoints.values())
    text = [s for s in specs if s.kind == "text"]
    assert len(text) == 3 and all(s.method == "qlora" and s.defaults.quantize_4bit and s.lora_targets for s in text)
    assert {s.method for s in specs if s.kind == "vision"} == {"projection", "llama_adapter_v2"}


def test_unknown_baseline_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown baseline 'gpt-5'; registered: blip2, bloomz-3b, instructblip"):
        get_spec("gpt-5")
    with pytest.raises(ConfigError, match=r"train.baselines: unknown baseline 'llama3'; registered: .*opt-6.7b"):
        validate({"train": {"baselines": ["llama3"]}})


def test_params_file_has_a_valid_train_block(repo_root):
    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    train = validate(raw).train
    assert train.profile == "tiny" and set(train.baselines) <= set(names())
    with pytest.raises(ConfigError, match="train.max_seq_len"):
        validate({"train": {"max_seq_len": 8}})


def test_hyper_parameters_come_from_the_registry_unless_overridden():
    spec = get_spec("llama2-7b")
    full = resolve_hyper(spec, TrainParams(profile="full"))
    assert (full.learning_rate, full.lora_r, full.lora_alpha, full.quantize_4bit) == (2e-4, 64, 16, True)
    mine = resolve_hyper(spec, TrainParams(profile="full", learning_rate=1e-5, lora_r=8, quantize_4bit=False))
    assert (mine.learning_rate, mine.lora_r, mine.quantize_4bit) == (1e-5, 8, False)


def test_4bit_for_a_projection_baseline_is_refused(tmp_path):
    sft = make_sft(tmp_path)
    with pytest.raises(ConfigError, match="quantize_4bit is for the Q-LoRA baselines, not blip2"):
        plan_run("blip2", quick_params("blip2", tmp_path / "m", quantize_4bit=True), sft_dir=sft)


def test_4bit_on_cpu_refuses_layers_narrower_than_64(tmp_path, monkeypatch):
    sft = make_sft(tmp_path)
    plan_run("llama2-7b", quick_params("llama2-7b", tmp_path / "m"), sft_dir=sft)      # 64 wide: fine
    monkeypatch.setattr(tiny, "TEXT_WIDTH", 32)
    with pytest.raises(ConfigError, match=r"4-bit on CPU needs every quantised linear layer to be >= 64 wide"):
        plan_run("llama2-7b", quick_params("llama2-7b", tmp_path / "m"), sft_dir=sft)
    plan_run("llama2-7b", quick_params("llama2-7b", tmp_path / "m", quantize_4bit=False), sft_dir=sft)


def test_a_missing_gpu_or_base_checkpoint_is_an_error_before_compute(tmp_path):
    import torch

    sft = make_sft(tmp_path)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="train.device is cuda but no CUDA device"):
            plan_run("opt-6.7b", quick_params("opt-6.7b", tmp_path / "m", device="cuda"), sft_dir=sft)
    with pytest.raises(ConfigError, match="does not exist"):
        check_base(str(tmp_path / "no-such-checkpoint"))
    with pytest.raises(ConfigError, match="does not exist"):
        check_base("./weights/llama")
    assert check_base("facebook/opt-6.7b") == "facebook/opt-6.7b"
    assert check_base(str(tmp_path)) == str(tmp_path.resolve())
    with pytest.raises(ConfigError, match="applies to the full profile only"):
        plan_run("opt-6.7b", quick_params("opt-6.7b", tmp_path / "m"), sft_dir=sft, base=str(tmp_path))


def test_load_for_inference_names_what_is_missing(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_for_inference(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="has no baseline.json"):
        load_for_inference(tmp_path)
