"""llama.cpp's OpenAI-compatible server for a catalogued model: the local inference engine of the model ladder.

:class:`LlamaServer` starts ``llama_cpp.server`` (llama-cpp-python's server: the llama.cpp library behind an
OpenAI-compatible HTTP API) on the model's verified GGUF file as a child process, waits until it answers, and stops it
with the block that started it (or on Ctrl-C / SIGTERM of its owner). Clients reach it exactly as they reach vLLM or
any OpenAI endpoint: ``llm.backend: openai`` with ``llm.base_url`` at :attr:`LlamaServer.base_url`, the served name
being the catalogue name. Nothing of the server's own is trusted for correctness: a model that answers garbage is
scored on its garbage.

Same inputs, same bytes: the server runs with a fixed number of threads, batch size, context size and seed; requests
are greedy unless a stage asks for seeded sampling; and the llama.cpp library is built with its CPU kernels pinned at
AVX2 (``make llama-cpp``: the Makefile's ``LLAMA_CMAKE_ARGS``), as :mod:`core.cpu` pins torch and numpy. Every request is
evaluated from an empty context (:mod:`tasks.models.llama_serve`), so an answer never depends on which request came
before it. docs/ladder.md says what was checked.

Every failure names the server's log file: a missing ``llama_cpp`` package, a server that exits during start-up, one
that does not answer within ``startup_timeout_s``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from core.errors import ConfigError, LLMError
from tasks.models import files
from tasks.params import ServeParams

INSTALL_HINT = ("llama.cpp's Python server is not installed: `make llama-cpp` builds llama-cpp-python[server]==0.3.36 "
                "(about 6 minutes on 2 cores, once per machine) with its kernels pinned at AVX2.")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


class LlamaServer:
    """One llama.cpp server process for ``model`` (a catalogue name). Use as a context manager, or :meth:`start` /
    :meth:`stop`. ``log`` is where the server's output goes (default: a file under the model cache)."""

    def __init__(self, model: str, settings: ServeParams, log: Path | None = None):
        self.spec = files.get(model)
        self.settings = settings
        self.port = settings.port or free_port(settings.host)
        self.log = log or files.paths.MODEL_CACHE / self.spec.name / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.host}:{self.port}/v1"

    def command(self, gguf: Path) -> list[str]:
        s = self.settings
        return [sys.executable, "-m", "tasks.models.llama_serve", "--model", str(gguf), "--model_alias", self.spec.name,
                "--host", s.host, "--port", str(self.port), "--n_ctx", str(s.n_ctx), "--n_batch", str(s.n_batch),
                "--n_ubatch", str(s.n_batch), "--n_threads", str(s.threads), "--n_threads_batch", str(s.threads),
                "--seed", str(s.seed), "--verbose", "false"] + (["--chat_format", fmt] if (fmt := self.chat_format())
                                                               else [])

    def chat_format(self) -> str | None:
        """None: the GGUF's own chat template (SmolLM2, both Qwen models). Gemma 3's base model ships none: it gets
        Gemma's published ``<start_of_turn>`` format with the system message in the first user turn
        (``gemma-system``, :mod:`tasks.models.llama_serve`), the one its instruction-tuned sibling was trained on.
        Chosen by architecture, never per prompt or tuned per model."""
        return "gemma-system" if self.spec.architecture == "gemma3" else None

    def start(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(INSTALL_HINT)
        gguf = files.gguf_path(self.spec, f"serving {self.spec.name}")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.process = subprocess.Popen(self.command(gguf), stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._wait_ready()
        return self.base_url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise LLMError(f"llama.cpp's server for {self.spec.name} exited with code {code} while starting; "
                               f"its log is {self.log}:\n{_tail(self.log)}")
            if self.ready():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise LLMError(f"llama.cpp's server for {self.spec.name} did not answer {self.base_url}/models within "
                               f"{self.settings.startup_timeout_s:.0f} s (serve.startup_timeout_s); its log is "
                               f"{self.log}:\n{_tail(self.log)}")
            time.sleep(0.2)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                served = json.load(answer)
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return any(entry.get("id") == self.spec.name for entry in served.get("data", []))

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def ensure_started(self) -> str:
        """Start the server unless it runs: for clients whose answers may all come from their cache."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        return self.base_url

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OnDemandBackend:
    """An LLM backend (``tasks.llm``) that starts ``server`` at its first request: behind the response cache, a
    rerun whose answers are all cached never loads the model. Everything else is the wrapped backend's."""

    def __init__(self, backend, server: LlamaServer):
        self._backend = backend
        self.server = server
        self.name = backend.name
        self.model = backend.model

    def complete(self, request):
        self.server.ensure_started()
        return self._backend.complete(request)


@contextlib.contextmanager
def serving(model: str, settings: ServeParams, log: Path | None = None) -> Iterator[LlamaServer]:
    """Serve ``model`` for the block, stopping the server on the way out, on SIGTERM too (a stage killed by its
    runner takes its server with it)."""
    server = LlamaServer(model, settings, log)
    previous = signal.getsignal(signal.SIGTERM)
    is_main = _in_main_thread()

    def terminate(signum, frame):   # SIGTERM -> KeyboardInterrupt-like exit through the finally below
        raise SystemExit(128 + signum)

    if is_main:
        signal.signal(signal.SIGTERM, terminate)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        if is_main:
            signal.signal(signal.SIGTERM, previous)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
