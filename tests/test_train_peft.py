"""LoRA adapters in PEFT's own format: ``models/<baseline>/adapter`` holds ``adapter_config.json`` +
``adapter_model.safetensors`` and plain ``PeftModel.from_pretrained(base, adapter_dir)`` -- no code of ours -- gives
the trained model back, for a tiny Q-LoRA baseline and for the real SmolLM2-135M one (its recorded base is the Hub
id, so vLLM can serve the adapter as a LoRA module). Also: the trained policy's candidate scores equal one forward per
candidate, and its merged bfloat16 form (the 4-bit base dequantised before its first forward, the adapter merged)
scores like the form it trained in."""

from __future__ import annotations

import json

import pytest
import torch
from test_train_support import (  # noqa: F401
    make_sft,
    quick_params,
    restore_torch_threads,
    tracking_in,
)

from tasks.hf.hardware import pin_4bit_kernels
from tasks.hf.scoring import per_candidate_scores
from tasks.train.data import read_split
from tasks.train.pipeline import plan_run
from tasks.train.registry import load_for_inference
from tasks.train.session import TrainSession

pytestmark = pytest.mark.slow

CANDIDATES = ["go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1", "look", "inventory"]


def _nf4(compute=torch.float32):
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute)


def _check_peft_dir(adapter_dir, base_id: str) -> dict:
    files = {p.name for p in adapter_dir.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "adapter.json"} <= files
    assert "trainable.safetensors" not in files                       # one format, PEFT's
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["base_model_name_or_path"] == base_id
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                             "down_proj"}
    assert not config.get("modules_to_save")                          # nothing vLLM's LoRA loader cannot take
    from safetensors import safe_open

    with safe_open(str(adapter_dir / "adapter_model.safetensors"), "pt") as weights:
        assert all("lora_" in key for key in weights.keys())         # no embedding layer: none was trained
    # the same bytes for the same training: a sorted module list, the card naming the base as the config does
    assert config["target_modules"] == sorted(config["target_modules"])
    card = (adapter_dir / "README.md").read_text()
    assert f"base_model: {base_id}\n" in card and "/root/.cache" not in card
    return config


def test_a_tiny_qlora_adapter_reloads_with_plain_peft(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    sft = make_sft(tmp_path)
    plan = plan_run("llama2-7b", quick_params("llama2-7b", tmp_path / "m", max_steps=2), sft_dir=sft)
    session = TrainSession(plan, tracking_in(tmp_path))
    session.train()
    adapter = plan.model_dir / "adapter"
    _check_peft_dir(adapter, _rel(plan.model_dir / "base"))

    base = AutoModelForCausalLM.from_pretrained(plan.model_dir / "base", quantization_config=_nf4(),
                                                device_map={"": "cpu"}, dtype=torch.float32)
    pin_4bit_kernels(base)      # the kernel choice every stage makes (a no-op but on AVX-512-BF16 CPUs)
    plain = PeftModel.from_pretrained(base, str(adapter)).eval()
    policy = load_for_inference(plan.model_dir)
    example = read_split(sft / "train.jsonl")[1]
    prompt = policy.prompt_body(example.instruction, example.history, example.observation)
    inputs = policy.inputs(prompt)
    with torch.no_grad():
        reloaded, ours, trained = plain(**inputs).logits, policy.logits(prompt), session.model(**inputs).logits
    assert torch.equal(reloaded, ours)                      # our loader is plain PEFT on the same base
    lora = {k: v for k, v in session.model.state_dict().items() if "lora_" in k}
    again = {k: v for k, v in plain.state_dict().items() if "lora_" in k}
    assert lora.keys() == again.keys() and all(torch.equal(lora[k], again[k]) for k in lora)   # what trained
    # the tiny base is quantised to NF4 again when read back from disk (its absmax blocks differ in the last bits):
    # close, not equal
    assert torch.allclose(reloaded, trained, atol=5e-3, rtol=0)


def _rel(path) -> str:
    from tasks import paths

    return paths.rel(path)


def test_the_real_smollm2_adapter_records_its_hub_base_and_reloads_with_plain_peft(tmp_path, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from tasks.hf.hardware import effective_dtype
    from tasks.hf.local_models import ensure_export, get

    dt = effective_dtype("bfloat16")      # float32 on a CPU without native bfloat16 (tasks/hf/hardware.py)
    sft = make_sft(tmp_path)
    params = quick_params("smollm2-135m", tmp_path / "m", profile="full", max_steps=1, precision="bfloat16",
                          learning_rate=1e-3, max_seq_len=192)
    plan = plan_run("smollm2-135m", params, sft_dir=sft)
    session = TrainSession(plan, tracking_in(tmp_path))

    def no_hub(*args, **kwargs):
        raise AssertionError("saving the adapter looked the base model up on the Hub")

    monkeypatch.setattr("peft.utils.save_and_load.check_file_exists_on_hf_hub", no_hub)
    report = session.train()
    assert report["steps"] == 1 and report["run_facts"]["tokens_per_s"] > 0 and "tokens_per_s" not in report
    card = json.loads((plan.model_dir / "baseline.json").read_text())
    assert card["base_parts"] == {"model": "smollm2-135m-instruct"}       # a name, not a machine's cache path
    _check_peft_dir(plan.model_dir / "adapter", "HuggingFaceTB/SmolLM2-135M-Instruct")

    base = AutoModelForCausalLM.from_pretrained(ensure_export(get("smollm2-135m-instruct")),
                                                quantization_config=_nf4(getattr(torch, dt)), device_map={"": "cpu"},
                                                dtype=torch.float32)
    pin_4bit_kernels(base)
    plain = PeftModel.from_pretrained(base, str(plan.model_dir / "adapter")).eval()
    policy = load_for_inference(plan.model_dir)
    example = read_split(sft / "train.jsonl")[2]
    prompt = policy.prompt_body(example.instruction, example.history, example.observation)
    inputs = policy.inputs(prompt)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dt == "bfloat16"):
        reloaded, trained = plain(**inputs).logits, session.model(**inputs).logits
        ours = policy.logits(prompt)
    assert torch.equal(reloaded.float(), ours.float())            # our loader is plain PEFT on the same base
    lora = {k: v for k, v in session.model.state_dict().items() if "lora_" in k}
    again = {k: v for k, v in plain.state_dict().items() if "lora_" in k}
    assert lora.keys() == again.keys() and all(torch.equal(lora[k], again[k]) for k in lora)   # what trained
    assert any(k.endswith("lora_B.default.weight") and v.abs().sum() > 0 for k, v in again.items())  # it moved
    # the training model keeps its output layer in float32 (prepare_model_for_kbit_training), the reloaded one runs
    # it in bf16 under autocast: the same function up to bf16 rounding
    diff = (torch.log_softmax(reloaded.float(), -1) - torch.log_softmax(trained.float(), -1)).abs()
    agree = (reloaded.argmax(-1) == trained.argmax(-1)).float().mean().item()
    assert diff.mean().item() < 0.1 and agree >= 0.9

    # the policy's scores are the per-candidate log-likelihoods of the training targets
    sums, lengths = policy.score(prompt, CANDIDATES)
    cand = [policy.encoder.target_ids(c) for c in CANDIDATES]
    ids = policy.encoder.prompt_ids([prompt], policy.encoder.max_seq_len - max(map(len, cand)))
    with policy._precision():
        naive = per_candidate_scores(lambda seq: policy.model(input_ids=torch.tensor([seq])).logits, ids, cand)
    assert lengths == [len(c) for c in cand]
    # packed (one forward) vs one forward per candidate, both in bf16 autocast: the same sums up to bf16 rounding,
    # per token well under the gaps between candidates
    assert max(abs(a - b) / n for a, b, n in zip(sums, naive, lengths, strict=True)) < 0.05

    merged = load_for_inference(plan.model_dir, dtype="bfloat16")
    assert merged.form == f"merged {dt}" and not hasattr(merged.model, "peft_config")
    fast, _ = merged.score(prompt, CANDIDATES)
    means = [s / n for s, n in zip(sums, lengths, strict=True)]
    fast_means = [s / n for s, n in zip(fast, lengths, strict=True)]
    # bf16 weights (NF4 dequantised, LoRA merged) vs NF4 kernels with a float32 output layer: the same ranking of the
    # candidates, each mean within a fraction of a nat (measured: 0.1-0.4 on means of -1 to -12)
    assert sorted(range(len(means)), key=means.__getitem__) == sorted(range(len(fast_means)),
                                                                      key=fast_means.__getitem__)
    assert max(abs(a - b) for a, b in zip(means, fast_means, strict=True)) < 0.6
