"""llama.cpp's OpenAI-compatible server for a local model (tasks/models/llama_server.py), with the real SmolLM2-135M
GGUF: the project's `openai` backend talks to it unchanged, the same request gets the same bytes whatever came
before it and after a restart, and every way it can fail to start names its log. CI needs no other model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import ConfigError, LLMError
from tasks.llm import build_client, request_from_params
from tasks.models import llama_server
from tasks.models.llama_server import LlamaServer, serving
from tasks.params import LLMParams, ServeParams

pytestmark = pytest.mark.network

MODEL = "smollm2-135m-instruct"
SETTINGS = ServeParams(threads=1, n_ctx=1024, startup_timeout_s=120)


def _ask(base_url: str, messages: list[dict], max_tokens: int = 24) -> str:
    params = LLMParams(backend="openai", model=MODEL, base_url=base_url, temperature=0.0, max_tokens=max_tokens,
                       max_retries=0)
    client = build_client(params, None)
    return client.backend.complete(request_from_params(messages, params)).text


QUESTION = [{"role": "system", "content": "You are a robot that writes Python code for a tabletop arm."},
            {"role": "user", "content": "Pick up the apple and put it in the bowl. Write the code."}]
OTHER = [QUESTION[0], {"role": "user", "content": "Open the top drawer of the cabinet."}]


def test_the_openai_backend_gets_the_same_answer_whatever_came_before_and_after_a_restart(tmp_path):
    with serving(MODEL, SETTINGS, tmp_path / "a.log") as server:
        assert server.ready() and server.base_url.startswith("http://127.0.0.1:")
        cold = _ask(server.base_url, QUESTION)
        _ask(server.base_url, OTHER)                   # shares the system prompt: a prefix the library would reuse
        after_other = _ask(server.base_url, QUESTION)
        pid = server.process.pid
    assert cold and cold == after_other
    with pytest.raises(ProcessLookupError):              # stopped with its block
        os.kill(pid, 0)
    with serving(MODEL, SETTINGS, tmp_path / "b.log") as server:
        assert _ask(server.base_url, QUESTION) == cold
    assert "uvicorn" in (tmp_path / "b.log").read_text().lower() or (tmp_path / "b.log").stat().st_size > 0


def test_small_batches_reuse_a_long_shared_prefix_and_answer_as_cold_requests(tmp_path):
    """The ladder serves with small batches (serve.n_batch) so that an agent's next prompt reuses whole batches of its
    system prompt: here a prefix of several 32-token batches is shared, and every answer is the one a fresh server
    gives."""
    rules = " ".join(f"Rule {i}: move slowly and check the gripper before each grasp." for i in range(12))
    first = [{"role": "system", "content": f"You are a robot that writes Python code. {rules}"},
             {"role": "user", "content": "Pick up the apple and put it in the bowl."}]
    second = [first[0], {"role": "user", "content": "Open the top drawer of the cabinet."}]
    small = SETTINGS.model_copy(update={"n_batch": 32})
    with serving(MODEL, small, tmp_path / "warm.log") as server:
        warm = [_ask(server.base_url, m) for m in (first, second, first)]
    cold = []
    for i, messages in enumerate((first, second)):
        with serving(MODEL, small, tmp_path / f"cold{i}.log") as server:
            cold.append(_ask(server.base_url, messages))
    assert warm == [cold[0], cold[1], cold[0]] and cold[0] != cold[1]


def test_a_server_that_dies_at_start_names_its_log(tmp_path, monkeypatch):
    garbage = tmp_path / "not-a-model.gguf"
    garbage.write_bytes(b"this is no GGUF file" * 10)
    monkeypatch.setattr(llama_server.files, "gguf_path", lambda spec, key: garbage)
    log = tmp_path / "server.log"
    with pytest.raises(LLMError) as info:
        LlamaServer(MODEL, SETTINGS, log).start()
    assert "exited with code" in str(info.value) and str(log) in str(info.value)


def test_a_server_that_does_not_answer_in_time_is_stopped_and_names_its_log(tmp_path):
    server = LlamaServer(MODEL, SETTINGS.model_copy(update={"startup_timeout_s": 0.05}), tmp_path / "slow.log")
    with pytest.raises(LLMError, match=r"did not answer .* within 0 s \(serve\.startup_timeout_s\)"):
        server.start()
    assert server.process is None


def test_without_llama_cpp_installed_the_error_says_how_to_build_it(tmp_path, monkeypatch):
    real = llama_server.importlib.util.find_spec
    monkeypatch.setattr(llama_server.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(ConfigError, match="make llama-cpp"):
        LlamaServer(MODEL, SETTINGS, tmp_path / "x.log").start()


def test_the_library_is_built_with_its_kernels_pinned_at_avx2():
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in info and "AVX512" not in info and "AMX" not in info, info


def test_embp_models_serve_runs_until_ctrl_c_and_takes_its_server_with_it(tmp_path):
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    command = [str(Path(sys.executable).with_name("embp")), "models", "serve", MODEL, "--threads", "1", "--n-ctx",
               "512"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert "serving at http://127.0.0.1:" in line, line
        base_url = line.split("serving at ")[1].split(" ")[0]
        assert _ask(base_url, QUESTION, max_tokens=16)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert children
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "stopped" in out
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(Path(f"/proc/{pid}").exists() for pid in children)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_reusing_whole_batches_of_a_prefix_gives_the_numbers_of_an_empty_context():
    """The server's patch (tasks/models/llama_serve.py): a request after another that shares its system prompt
    reuses whole batches of that prefix, and its log-probabilities are bit for bit those of a cold request."""
    import llama_cpp

    from tasks.models import files
    from tasks.models.llama_serve import _generate_with_aligned_reuse

    path = str(files.gguf_path(files.get(MODEL)))
    system = {"role": "system", "content": "You write Python for a robot arm with the tools detect_objects(), "
                                           "grasp(obj), move_to(pose), open_gripper(), close_gripper(). " * 8}
    question = [system, {"role": "user", "content": "Put the apple in the bowl."}]
    other = [system, {"role": "user", "content": "Open the drawer."}]
    original = llama_cpp.Llama.generate
    patched = _generate_with_aligned_reuse(original)

    def model():
        return llama_cpp.Llama(model_path=path, n_ctx=2048, n_threads=1, n_batch=64, n_ubatch=64, seed=0,
                               verbose=False, logits_all=True)

    def ask(llm, messages):
        out = llm.create_chat_completion(messages=messages, temperature=0, max_tokens=24, logprobs=True,
                                         top_logprobs=1)
        return out["choices"][0]["message"]["content"], [t["logprob"] for t in out["choices"][0]["logprobs"]["content"]]

    try:
        llama_cpp.Llama.generate = patched
        cold = ask(model(), question)
        warm_model = model()
        ask(warm_model, other)
        kept = []
        remove = warm_model._ctx.kv_cache_seq_rm
        warm_model._ctx.kv_cache_seq_rm = lambda seq, start, end: kept.append(start) or remove(seq, start, end)
        warm = ask(warm_model, question)
        # an agent's next turn repeats the answer, which was decoded a token at a time: only the prompt's batches
        # may be reused, never positions of the answer
        follow = question + [{"role": "assistant", "content": warm[0]}, {"role": "user", "content": "And then?"}]
        next_warm = ask(warm_model, follow)
        next_cold = ask(model(), follow)
    finally:
        llama_cpp.Llama.generate = original
    assert kept and kept[0] > 0 and kept[0] % 64 == 0          # whole batches of the shared prefix were reused
    assert warm == cold and next_warm == next_cold


def test_a_server_whose_owner_is_killed_does_not_outlive_it(tmp_path):
    """SIGKILL leaves no cleanup to its victim: the server notices its parent is gone and exits."""
    script = tmp_path / "owner.py"
    script.write_text(
        "import sys, time\n"
        "from tasks.models.llama_server import LlamaServer\n"
        "from tasks.params import ServeParams\n"
        f"server = LlamaServer({MODEL!r}, ServeParams(threads=1, n_ctx=512), None)\n"
        "server.start()\n"
        "print(server.process.pid, flush=True)\n"
        "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parent.parent)
    try:
        server_pid = int(owner.stdout.readline())
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 15
        while Path(f"/proc/{server_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = Path(f"/proc/{server_pid}").exists()
        if alive:
            os.kill(server_pid, signal.SIGKILL)
        assert not alive
    finally:
        if owner.poll() is None:
            owner.kill()
