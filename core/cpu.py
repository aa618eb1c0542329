"""One instruction-set level for every float kernel a pipeline stage runs, so that the same inputs give the same bytes
on every x86-64 machine with AVX2, not only on the kind of CPU that produced the committed ``dvc.lock``.

numpy, torch (its ATen kernels, MKL, oneDNN) and OpenBLAS pick their kernels at run time by the CPU's instruction
set. An AVX-512 kernel sums a vector of 16 floats where an AVX2 kernel sums 8, so the two round differently and a
float computed on an AVX-512 server is not, bit for bit, the one computed on an AVX2-only one: a trained adapter, a
sampled token or a simulated pose then changes the md5 of a DVC output. Each library has a switch that caps the level
it dispatches to; :func:`pin` sets them all to AVX2 (x86-64-v3), the highest level common to the machines this
project runs on, before any of them is imported (``flows/__init__.py``: every stage is ``python -m flows.<stage>``, and
its worker, runner and sandbox processes inherit the environment).

``EMBP_CPU_LEVEL`` chooses: ``avx2`` (the default where the CPU has AVX2 and FMA) or ``native`` (each library's own
choice: faster on AVX-512 / AMX machines -- bfloat16 included, see ``tasks/hf/hardware.py`` -- but the outputs may
then differ from ``dvc.lock``). A variable the user set already is left as it is. On a CPU without AVX2 (or not x86)
nothing is pinned and :func:`level` says ``native``.

What this cannot pin: compiled code without run-time dispatch is the same everywhere already (PyBullet, the project's
own Python); libraries may still differ between CPU vendors at one level (MKL's conditional numerical
reproducibility is specified for Intel processors). docs/architecture.md, "Same inputs, same bytes", lists what is
known to depend on the machine.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping

ENV = "EMBP_CPU_LEVEL"
LEVELS = ("avx2", "native")

#: What caps each library at AVX2. Read by each library when it loads (so: set before importing it).
AVX2_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",          # torch's vectorised ATen kernels (default, avx2, avx512)
    "MKL_CBWR": "AVX2",                     # MKL, torch's BLAS: conditional numerical reproducibility at AVX2
    "ONEDNN_MAX_CPU_ISA": "AVX2",            # oneDNN (torch's mkldnn: bfloat16 and some float32 kernels)
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",   # numpy's dispatched kernels above x86-64-v3
    "OPENBLAS_CORETYPE": "Haswell",         # OpenBLAS as numpy and scipy bundle it (kernels chosen per core type)
}


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (flags, vendor_id, model name, ...); empty where unreadable."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                key, sep, value = line.partition(":")
                if not sep and fields:
                    break                               # the blank line after the first processor
                if sep:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo); empty where they cannot be read."""
    return set(_cpuinfo().get("flags", "").split())


def can_pin(machine: str | None = None, flags: set[str] | None = None) -> bool:
    """Whether this CPU runs AVX2 kernels (x86-64 with AVX2 and FMA): the level :func:`pin` caps at."""
    machine = (machine or platform.machine()).lower()
    flags = cpu_flags() if flags is None else flags
    return machine in ("x86_64", "amd64") and {"avx2", "fma"} <= flags


def requested(environ: MutableMapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    value = environ.get(ENV, "avx2").strip().lower() or "avx2"
    if value not in LEVELS:
        raise ValueError(f"{ENV}={environ.get(ENV)!r}: expected one of {', '.join(LEVELS)}")
    return value


#: One thread per process in every math library that would otherwise start one per core (OpenMP: torch's intra-op
#: pool, Open3D's TSDF fusion and normals; OpenBLAS; MKL). A stage's parallelism is its processes (workers, robot
#: runners) and ``embp run``'s stages side by side; a library's own pool on top of them oversubscribes the cores, and
#: OpenMP threads spin while they wait: a 2-thread torch stage beside another busy stage ran 3.5x slower (bench/README).
#: It also keeps a reduction from being split by the machine's core count. A step that wants more threads says so
#: itself (``torch.set_num_threads`` from its params: ``real_model.llm.hf.threads``, ``train.cpu_threads``, ...).
THREAD_PINS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def single_threaded(environ: MutableMapping[str, str] | None = None) -> None:
    """:data:`THREAD_PINS` in ``environ`` (``os.environ``), before the libraries load; variables already set are
    kept (``OMP_NUM_THREADS=4 dvc repro`` gives a stage four)."""
    environ = os.environ if environ is None else environ
    for name, value in THREAD_PINS.items():
        environ.setdefault(name, value)


def pin(environ: MutableMapping[str, str] | None = None, machine: str | None = None,
        flags: set[str] | None = None) -> str:
    """Cap every library's kernels at AVX2 in ``environ`` (``os.environ``) unless ``EMBP_CPU_LEVEL=native`` or the
    CPU cannot run them; variables already set are kept. Returns the level in force ("avx2" or "native") and records
    it in ``EMBP_CPU_LEVEL`` for child processes."""
    environ = os.environ if environ is None else environ
    if requested(environ) == "native" or not can_pin(machine, flags):
        environ[ENV] = "native"
        return "native"
    for name, value in AVX2_PINS.items():
        environ.setdefault(name, value)
    environ[ENV] = "avx2"
    return "avx2"


def level(environ: MutableMapping[str, str] | None = None) -> str:
    """The level this process's kernels run at: "avx2" when :func:`pin` capped them (or the user set the same
    caps), else "native"."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV, "").strip().lower() == "avx2":
        return "avx2"
    return "avx2" if environ.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2" else "native"


def machine_kind() -> dict[str, str]:
    """What decides which kernels a library picks, so which bytes a stage writes: the architecture, the CPU vendor
    and its highest vector level (amx, avx512, avx2 or other). .dvc/lock-machine.json records it for dvc.lock."""
    fields = _cpuinfo()
    flags = set(fields.get("flags", "").split())
    vector = next((name for name, flag in (("amx", "amx_bf16"), ("avx512", "avx512f"), ("avx2", "avx2"))
                   if flag in flags), "other")
    return {"machine": platform.machine(), "vendor": fields.get("vendor_id", ""), "vector_level": vector}
