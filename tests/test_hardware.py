"""A bfloat16 request on a CPU without native bfloat16 computes float32 (tasks/hf/hardware.py), everywhere a dtype
is chosen, and the LLM cache key names the dtype really used."""

from __future__ import annotations

import logging

import pytest
import torch

from tasks.hf import hardware


@pytest.fixture
def bf16(monkeypatch):
    """Pretend this CPU has (True) or lacks (False) native bfloat16."""
    def set_native(value: bool) -> None:
        monkeypatch.setattr(hardware, "native_bf16", lambda device="cpu": value)
        hardware.effective_dtype.cache_clear()
    yield set_native
    hardware.effective_dtype.cache_clear()


def test_bfloat16_falls_back_to_float32_without_native_support(bf16, caplog):
    bf16(False)
    with caplog.at_level(logging.WARNING, logger="embp"):
        assert hardware.effective_dtype("bfloat16") == "float32"
    assert "without native bfloat16" in caplog.text
    assert hardware.effective_dtype("float32") == "float32"
    assert hardware.effective_dtype("auto") == "auto"


def test_bfloat16_kept_where_native(bf16):
    bf16(True)
    assert hardware.effective_dtype("bfloat16") == "bfloat16"


def test_every_dtype_choice_follows_it(bf16):
    from tasks.hf.runtime import model_identity
    from tasks.muep.eval.agents.hf_models import _device_and_dtype
    from tasks.train.build import compute_dtype
    from tasks.train.trainer import _mixed_precision

    bf16(False)
    assert model_identity("smollm2-135m-instruct", "bfloat16").endswith(":fp32")   # the LLM cache key
    assert compute_dtype("cpu", "bfloat16") is torch.float32
    assert _mixed_precision("cpu", "bfloat16") == "no"
    if not torch.cuda.is_available():
        assert _device_and_dtype("bfloat16") == ("cpu", torch.float32)
    bf16(True)
    assert model_identity("smollm2-135m-instruct", "bfloat16").endswith(":bf16")
    assert compute_dtype("cpu", "bfloat16") is torch.bfloat16
    assert _mixed_precision("cpu", "bfloat16") == "bf16"


def test_detection_matches_torch_at_the_native_level(monkeypatch):
    monkeypatch.setenv("EMBP_CPU_LEVEL", "native")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    hardware.native_bf16.cache_clear()
    try:
        expected = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        assert hardware.native_bf16("cpu") is expected
    finally:
        hardware.native_bf16.cache_clear()


def test_no_native_bfloat16_when_kernels_are_capped_at_avx2(monkeypatch):
    """A stage caps its kernels at AVX2 (core/cpu.py): oneDNN then has no bfloat16 kernel on any CPU."""
    monkeypatch.setenv("EMBP_CPU_LEVEL", "avx2")
    hardware.native_bf16.cache_clear()
    hardware.effective_dtype.cache_clear()
    try:
        assert hardware.native_bf16("cpu") is False
        assert hardware.effective_dtype("bfloat16") == "float32"
    finally:
        hardware.native_bf16.cache_clear()
        hardware.effective_dtype.cache_clear()
