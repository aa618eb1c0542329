"""Every float kernel of a stage at one instruction-set level (core/cpu.py), so the same inputs give the same bytes
on any x86-64 machine with AVX2."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from core import cpu

AVX2_CPU = {"sse2", "avx", "avx2", "fma"}
AVX512_CPU = AVX2_CPU | {"avx512f", "avx512bw", "amx_bf16"}


@pytest.mark.parametrize("flags", [AVX2_CPU, AVX512_CPU])
def test_an_avx2_capable_cpu_is_capped_at_avx2(flags):
    env: dict[str, str] = {}
    assert cpu.pin(env, machine="x86_64", flags=flags) == "avx2"
    assert env == cpu.AVX2_PINS | {"EMBP_CPU_LEVEL": "avx2"}
    assert cpu.level(env) == "avx2"


def test_what_the_user_set_is_kept():
    env = {"OPENBLAS_CORETYPE": "SkylakeX", "MKL_CBWR": "COMPATIBLE"}
    cpu.pin(env, machine="x86_64", flags=AVX2_CPU)
    assert env["OPENBLAS_CORETYPE"] == "SkylakeX" and env["MKL_CBWR"] == "COMPATIBLE"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"


@pytest.mark.parametrize("machine, flags, environ", [
    ("x86_64", AVX512_CPU, {"EMBP_CPU_LEVEL": "native"}),          # opted out
    ("x86_64", {"sse2", "avx"}, {}),                                # no AVX2 to cap at
    ("aarch64", {"asimd", "sve"}, {}),                              # not x86
])
def test_nothing_is_pinned_where_asked_or_impossible(machine, flags, environ):
    env = dict(environ)
    assert cpu.pin(env, machine=machine, flags=flags) == "native"
    assert env == {"EMBP_CPU_LEVEL": "native"}
    assert cpu.level(env) == "native"


def test_an_unknown_level_is_a_clear_error():
    with pytest.raises(ValueError, match="EMBP_CPU_LEVEL='avx9'"):
        cpu.pin({"EMBP_CPU_LEVEL": "avx9"}, machine="x86_64", flags=AVX2_CPU)


def _stage_process(extra_env: dict[str, str]) -> dict:
    """What a stage process (`python -m flows.<stage>` imports flows first) and its children see."""
    code = ("import flows, json, os, subprocess, sys, torch\n"
            "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\"ATEN_CPU_CAPABILITY\"))'],"
            " capture_output=True, text=True).stdout.strip()\n"
            "print(json.dumps({'level': os.environ['EMBP_CPU_LEVEL'], 'torch': torch.backends.cpu.get_cpu_capability(),"
            " 'child_aten': child}))\n")
    env = {k: v for k, v in os.environ.items() if k not in cpu.AVX2_PINS and k != cpu.ENV} | extra_env
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.allowed_skip(reason="needs an x86-64 CPU with AVX2")
@pytest.mark.skipif(not cpu.can_pin(), reason="needs an x86-64 CPU with AVX2")
def test_a_stage_process_and_its_children_run_torch_at_avx2():
    seen = _stage_process({})
    assert seen == {"level": "avx2", "torch": "AVX2", "child_aten": "avx2"}


@pytest.mark.allowed_skip(reason="needs an x86-64 CPU with AVX2")
@pytest.mark.skipif(not cpu.can_pin(), reason="needs an x86-64 CPU with AVX2")
def test_native_leaves_the_libraries_their_choice():
    seen = _stage_process({"EMBP_CPU_LEVEL": "native"})
    assert seen["level"] == "native" and seen["child_aten"] == "None"
    assert seen["torch"] in ("AVX2", "AVX512", "DEFAULT")


def test_a_stage_process_runs_its_math_libraries_on_one_thread():
    """Stages run side by side (`embp run`): torch's, Open3D's and OpenBLAS's own thread pools would oversubscribe
    the cores (OpenMP threads spin on a busy core), so a stage process and its children start with one thread each,
    unless the user set a count; a step that wants more asks torch itself."""
    code = ("import flows, json, os, subprocess, sys, torch\n"
            "child = subprocess.run([sys.executable, '-c', 'import torch; print(torch.get_num_threads())'],"
            " capture_output=True, text=True).stdout.strip()\n"
            "print(json.dumps({'torch': torch.get_num_threads(), 'child': child,"
            " 'env': {k: os.environ.get(k) for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')}}))\n")
    base = {k: v for k, v in os.environ.items() if k not in cpu.THREAD_PINS}
    out = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {"torch": 1, "child": "1", "env": cpu.THREAD_PINS}
    out = subprocess.run([sys.executable, "-c", code], env=base | {"OMP_NUM_THREADS": "2"}, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1])["env"]["OMP_NUM_THREADS"] == "2", "a count the user set is kept"


def test_generated_code_gets_the_caps_and_nothing_else_of_the_host(monkeypatch):
    """The sandbox starts generated code with an empty environment but for one BLAS thread and the caps: its numpy
    must compute what the stage's computes."""
    from robot.sandbox.host import _sandbox_env

    monkeypatch.setenv("EMBP_TEST_SECRET", "do-not-pass")
    env = {}
    cpu.pin(env, machine="x86_64", flags=AVX2_CPU)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _sandbox_env() == {"OPENBLAS_NUM_THREADS": "1"} | env


def test_the_machine_kind_names_architecture_vendor_and_vector_level(monkeypatch):
    """.dvc/lock-machine.json is compared with it: the same keys, and a level read from the flags."""
    kind = cpu.machine_kind()
    assert set(kind) == {"machine", "vendor", "vector_level"}
    assert kind["vector_level"] in ("amx", "avx512", "avx2", "other")
    info = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 fma avx512f\n\nprocessor\t: 1\nflags\t: x\n"
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: io.StringIO(info) if path == "/proc/cpuinfo"
                        else real_open(path, *a, **k))
    assert cpu.cpu_flags() == {"fpu", "avx2", "fma", "avx512f"}                 # the first processor's
    assert cpu.machine_kind()["vendor"] == "GenuineIntel" and cpu.machine_kind()["vector_level"] == "avx512"


def test_4bit_layers_stay_off_the_avx512_bf16_inference_kernel(monkeypatch):
    """bitsandbytes repacks a 4-bit layer for a bfloat16 kernel at its first no-grad eval forward on an AVX-512-BF16
    CPU; under the AVX2 cap that switch is turned off, so inference multiplies as training does, in float32."""
    torch = pytest.importorskip("torch")
    bnb = pytest.importorskip("bitsandbytes")
    from tasks.hf.hardware import pin_4bit_kernels

    torch.manual_seed(0)
    layer = bnb.nn.Linear4bit(128, 128, bias=False, compute_dtype=torch.float32, quant_type="nf4")
    layer.load_state_dict({"weight": torch.randn(128, 128)})
    layer = layer.to("cpu")                       # quantises
    model = torch.nn.Sequential(layer)
    layer.support_avx512bf16_for_cpu = True       # as bitsandbytes sets it on such a CPU
    monkeypatch.setenv(cpu.ENV, "native")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert pin_4bit_kernels(model) == 0 and layer.support_avx512bf16_for_cpu   # native: the library's choice
    monkeypatch.setenv(cpu.ENV, "avx2")
    assert pin_4bit_kernels(model) == 1 and not layer.support_avx512bf16_for_cpu
    x = torch.randn(3, 128)
    with torch.no_grad():
        trained_path = layer.train()(x)
        eval_path = layer.eval()(x)
    assert not getattr(layer.weight.quant_state, "packing_format_for_cpu", False)
    assert torch.equal(trained_path, eval_path)
