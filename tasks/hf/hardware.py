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


def pin_4bit_kernels(model) -> int:
    """Keep bitsandbytes' 4-bit layers of ``model`` on the kernels every machine has, where a stage caps kernels at
    AVX2 (``core/cpu.py``). Returns how many layers were changed.

    On a CPU with AVX-512-BF16, bitsandbytes (0.49) repacks a ``Linear4bit``'s weight at its first forward in eval
    mode without gradients and from then on multiplies in bfloat16, the float32 input cast down, with its own native
    kernel -- a switch that no environment variable reaches (it asks the CPU itself). A held-out loss or an agent's
    scores then differ from those of any AVX2 machine (0.572 vs 0.568 nats for the smollm2-135m eval loss), while
    training, which never takes that path, gives the same weights. Turning the layer's flag off keeps inference on
    the dequantise-and-multiply path, the one training uses."""
    from core import cpu

    if cpu.level() != "avx2":
        return 0
    changed = 0
    for module in model.modules():
        if getattr(module, "support_avx512bf16_for_cpu", False):
            module.support_avx512bf16_for_cpu = False
            changed += 1
    return changed
