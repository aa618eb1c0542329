"""A local fake of an OpenAI-compatible chat-completions endpoint, for tests.

This is NOT a real model. It is a small stdlib ``http.server.ThreadingHTTPServer`` that listens on 127.0.0.1 (a
free port chosen by the OS) in a background thread and speaks the OpenAI wire protocol for
``POST /v1/chat/completions``: the same request body the official ``openai`` client sends, and the same response
JSON shape (``id``, ``object: "chat.completion"``, ``created``, ``model``, ``choices[{index, message{role, content},
finish_reason}]``, ``usage{prompt_tokens, completion_tokens, total_tokens}``) and OpenAI-style error bodies
(``{"error": {"message", "type", "param", "code"}}``) with their HTTP status codes.

It is scriptable: :meth:`FakeOpenAIServer.plan` queues answers that are used one per request, in order (a 429 with a
``Retry-After`` header, a 500, a 400, a 200 with given content and ``finish_reason``...); once the queue is empty,
``default`` answers -- a function of the received request body (by default it echoes the last user message). It
counts calls, records every request body and its headers, and tracks the largest number of requests in flight at
once (each answer waits ``handler_delay_s`` first, so overlapping requests are observable).

Use :func:`running_server` as a context manager, or the :func:`openai_server` pytest fixture (import it into a test
module, or into a ``conftest.py``).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

HOST = "127.0.0.1"
CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One planned answer. ``status`` 200 -> a chat.completion with ``content``; anything else -> an error body."""

    status: int = 200
    content: str | None = "ok"
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    error_message: str = ""
    error_type: str = ""
    error_code: str | None = None
    delay_s: float | None = None
    """Wait this long before answering (overrides the server's ``handler_delay_s``), e.g. to provoke a time-out."""
    usage: dict[str, int] | None = None
    raw_body: bytes | None = None
    """Send these bytes verbatim instead of a JSON body built from the fields above."""


def ok(content: str, finish_reason: str = "stop", **kw: Any) -> Reply:
    return Reply(200, content=content, finish_reason=finish_reason, **kw)


def rate_limited(retry_after: float | str | None = 1, **kw: Any) -> Reply:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Reply(
        429, content=None, headers=headers,
        error_message="Rate limit reached for requests. Please try again later.",
        error_type="requests", error_code="rate_limit_exceeded", **kw,
    )


def server_error(status: int = 500, **kw: Any) -> Reply:
    return Reply(
        status, content=None, error_message="The server had an error while processing your request.",
        error_type="server_error", **kw,
    )


def bad_request(message: str = "Invalid value for 'temperature'.", **kw: Any) -> Reply:
    return Reply(
        400, content=None, error_message=message, error_type="invalid_request_error",
        error_code="invalid_value", **kw,
    )


def last_user_message(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def echo(body: dict[str, Any]) -> Reply:
    """The default answer: a text computed from the request, so distinct requests get distinct answers."""
    return ok(f"echo: {last_user_message(body)}")


def _approx_tokens(text: str) -> int:
    return max(1, len(text.split()))


@dataclass
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    path: str


class FakeOpenAIServer:
    """The fake endpoint. Start it with :meth:`start` (or :func:`running_server`), then point a client at
    :attr:`base_url`."""

    def __init__(
        self,
        default: Callable[[dict[str, Any]], Reply | str] = echo,
        handler_delay_s: float = 0.01,
    ):
        self.default = default
        self.handler_delay_s = handler_delay_s
        self._planned: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.calls = 0
        self.received: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------------------------------------------- scripting

    def plan(self, *replies: Reply | str) -> FakeOpenAIServer:
        """Queue answers for the next requests, in order; a plain string means ``ok(string)``."""
        with self._lock:
            self._planned.extend(ok(r) if isinstance(r, str) else r for r in replies)
        return self

    def always(self, reply: Reply | str) -> FakeOpenAIServer:
        """Answer every request after the planned ones with ``reply`` (e.g. a permanent 500 storm)."""
        fixed = ok(reply) if isinstance(reply, str) else reply
        self.default = lambda _body: fixed
        return self

    def reset_counters(self) -> None:
        with self._lock:
            self.calls = 0
            self.received.clear()
            self.max_in_flight = 0

    @property
    def bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.body for r in self.received]

    @property
    def pending_plan(self) -> int:
        with self._lock:
            return len(self._planned)

    # ---------------------------------------------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What goes into ``llm.base_url``: ``http://127.0.0.1:<port>/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = _QuietServer((HOST, 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ---------------------------------------------------------------------------------------------------- handling

    def _enter(self, received: Received) -> Reply:
        with self._lock:
            self.calls += 1
            self.received.append(received)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            planned = self._planned.popleft() if self._planned else None
        if planned is not None:
            return planned
        answer = self.default(received.body)
        return ok(answer) if isinstance(answer, str) else answer

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def render(self, reply: Reply, body: dict[str, Any]) -> bytes:
        if reply.raw_body is not None:
            return reply.raw_body
        if reply.status != 200:
            error = {"message": reply.error_message or f"HTTP {reply.status}", "type": reply.error_type or "error",
                     "param": None, "code": reply.error_code}
            return json.dumps({"error": error}).encode()
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        usage = reply.usage or {
            "prompt_tokens": _approx_tokens(prompt),
            "completion_tokens": _approx_tokens(reply.content or ""),
        }
        usage = dict(usage)
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        with self._lock:
            n = self.calls
        payload = {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "unknown"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage,
        }
        return json.dumps(payload).encode()


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (time-out test) closes the socket under a sleeping handler: not a test failure.
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: without this each answer waits ~40 ms

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._send(404, json.dumps({"error": {"message": "not found", "type": "invalid_request_error"}}).encode())

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?")[0] != CHAT_PATH:
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}",
                                                  "type": "invalid_request_error"}}).encode())
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, json.dumps({"error": {"message": "body is not JSON",
                                                  "type": "invalid_request_error"}}).encode())
            return
        fake = self.fake
        reply = fake._enter(Received(body=body, headers={k.lower(): v for k, v in self.headers.items()},
                                     path=self.path))
        try:
            delay = reply.delay_s if reply.delay_s is not None else fake.handler_delay_s
            if delay:
                time.sleep(delay)
            data = fake.render(reply, body)
        finally:
            # Counted out before the answer is written: a client slot cannot send its next request before it has
            # read this answer, so max_in_flight never over-counts (it may at most under-count by a hair).
            fake._leave()
        self._send(reply.status, data, reply.headers)


@contextmanager
def running_server(**kw: Any) -> Iterator[FakeOpenAIServer]:
    """Start a :class:`FakeOpenAIServer` on 127.0.0.1 for the duration of the ``with`` block."""
    server = FakeOpenAIServer(**kw).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """A fresh fake endpoint per test. Proxy settings are bypassed for loopback so nothing leaves the machine."""
    monkeypatch.setenv("NO_PROXY", f"{HOST},localhost")
    monkeypatch.setenv("no_proxy", f"{HOST},localhost")
    with running_server() as server:
        yield server
