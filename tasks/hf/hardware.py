"""Whether this machine computes bfloat16 natively, and the dtype a bfloat16 request then really gets.

bfloat16 pays off on a CPU only where torch's oneDNN kernels take it (AVX-512 cores, AMX, AVX-512-BF16): there it is
1.3x (Q-LoRA training) to 3x (prompt processing) faster than float32. On any other CPU (an AVX2-only x86 server,
for one) torch falls back to its scalar reference kernel for every bfloat16 matrix product: measured on a 2-core
AVX2 EPYC, SmolLM2-135M's Q-LoRA training ran at about 2 tokens/s against about 100 in float32. So a ``bfloat16``
setting (``train.precision``, ``llm.hf.dtype``, ``real_model.eval.dtype``) means "bfloat16 where the hardware does
it, else float32": :func:`effective_dtype` says which, the LLM cache key and the provenance name that one (answers
of the two dtypes differ), and a warning says when a request was changed.

A pipeline stage caps every kernel at AVX2 (``core/cpu.py``, for the same bytes on every machine), and there no CPU
has native bfloat16: a ``bfloat16`` request computes in float32 unless ``EMBP_CPU_LEVEL=native``. Then a DVC output
computed in bfloat16 on a bf16 machine is not the bytes of the same stage run elsewhere; docs/architecture.md lists
this with the other hardware-dependent outputs.
"""

from __future__ import annotations

import functools
import logging

log = logging.getLogger("embp")


@functools.cache
def native_bf16(device: str = "cpu") -> bool:
    """Whether bfloat16 matrix products run on fast kernels on ``device`` ("cpu" or "cuda")."""
    import torch

    if device == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return True          # let the backend decide (mps, xpu ...)
    from core import cpu

    if cpu.level() == "avx2":   # kernels capped at AVX2 for reproducible bytes (core/cpu.py): oneDNN has no bf16
        return False
    try:      # the exact condition under which torch's CPU matmul hands bfloat16 to oneDNN
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return bool(cpu.cpu_flags() & {"avx512_bf16", "amx_bf16", "avx512bw"})


@functools.cache
def effective_dtype(dtype: str, device: str = "cpu") -> str:
    """``dtype`` ("bfloat16" / "float32" / "auto" ...), except "bfloat16" on a device without native bfloat16, which
    becomes "float32" (with a warning, once per process)."""
    if dtype != "bfloat16" or native_bf16(device):
        return dtype
    log.warning("bfloat16 requested on a %s without native bfloat16 arithmetic (no AVX-512 / AMX, or kernels capped "
                "at AVX2 by EMBP_CPU_LEVEL): using float32 instead (torch would emulate bfloat16 about 50x slower).",
                device.upper())
    return "float32"
