"""LLM requests, completions, the on-disk response cache and the client that ties them to a backend.

A backend only turns one :class:`ChatRequest` into one :class:`Completion`. :class:`LLMClient` adds what every
caller needs: a cache keyed by the hash of (backend, model, messages, sampling parameters), so a rerun with the same
inputs makes zero calls; bounded concurrency; and a call counter.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.io import write_json

log = logging.getLogger("embp.llm")


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[tuple[str, str], ...]
    """(role, content) pairs, in order."""
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int = 0

    @classmethod
    def of(cls, messages: Sequence[dict[str, str]], **sampling: Any) -> ChatRequest:
        return cls(messages=tuple((m["role"], m["content"]) for m in messages), **sampling)

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens, "seed": self.seed}

    def cache_key(self, backend: str, model: str) -> str:
        payload = {"backend": backend, "model": model, "messages": self.messages, "sampling": self.sampling()}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def prompt_hash(self) -> str:
        """Hash of the messages alone: the provenance of a generated item, independent of backend and sampling."""
        blob = json.dumps(self.messages, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass
class Completion:
    text: str
    finish_reason: str
    backend: str
    model: str
    key: str = ""
    prompt_hash: str = ""
    cached: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass(frozen=True)
class Provenance:
    """Which backend and model wrote a generated item, from which prompt (``prompt_hash``) and cached answer
    (``response_key``, the file name under the LLM cache). Every record made from a completion carries these."""

    backend: str
    model: str
    prompt_hash: str
    response_key: str

    @staticmethod
    def of(completion: Completion) -> dict[str, str]:
        return {"backend": completion.backend, "model": completion.model, "prompt_hash": completion.prompt_hash,
                "response_key": completion.key}


class Backend(Protocol):
    """What a registered LLM backend provides. ``name`` and ``model`` enter the cache key."""

    name: str
    model: str

    def complete(self, request: ChatRequest) -> Completion: ...


class ResponseCache:
    """One JSON file per response under ``root/<first two hex digits>/<key>.json``, written atomically.

    A file that cannot be read back (a crash from an older version, a disk error, a hand edit) is moved aside as
    ``<key>.json.corrupt`` and treated as a miss, so the request is simply made again.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("text"), str):
                raise ValueError("record does not match its key")
            return record
        except (ValueError, OSError) as exc:
            aside = path.with_suffix(".json.corrupt")
            try:
                os.replace(path, aside)
            except FileNotFoundError:  # another thread moved it aside first
                pass
            log.warning("LLM cache file %s is unreadable (%s); moved to %s and asking again", path, exc, aside.name)
            return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        write_json(self._path(key), record)


class LLMClient:
    """A backend behind the response cache, with bounded concurrency."""

    def __init__(self, backend: Backend, cache: ResponseCache | None, concurrency: int = 1):
        self.backend = backend
        self.cache = cache
        self.concurrency = max(1, concurrency)
        self.calls = 0
        self.cache_hits = 0
        self._count_lock = threading.Lock()

    def complete(self, request: ChatRequest) -> Completion:
        key = request.cache_key(self.backend.name, self.backend.model)
        if self.cache is not None:
            record = self.cache.get(key)
            if record is not None:
                with self._count_lock:
                    self.cache_hits += 1
                return Completion(
                    text=record["text"],
                    finish_reason=record.get("finish_reason", "stop"),
                    backend=record.get("backend", self.backend.name),
                    model=record.get("model", self.backend.model),
                    key=key,
                    prompt_hash=request.prompt_hash(),
                    cached=True,
                    usage=record.get("usage", {}),
                )
        start = time.perf_counter()
        with self._count_lock:
            self.calls += 1
        completion = self.backend.complete(request)
        completion.key = key
        completion.prompt_hash = request.prompt_hash()
        completion.latency_s = time.perf_counter() - start
        # An empty answer is not cached: it is most often a transient server fault, and a rerun should ask again.
        if self.cache is not None and completion.text.strip():
            record = asdict(completion) | {"request": {"messages": request.message_dicts(), **request.sampling()}}
            for volatile in ("cached", "latency_s"):  # the cache is a DVC output: the same answer, the same bytes
                record.pop(volatile)
            self.cache.put(key, record)
        return completion

    def complete_many(
        self, requests: Sequence[ChatRequest], on_done: Callable[[int, Completion], None] | None = None
    ) -> list[Completion]:
        """Complete every request, at most ``concurrency`` at a time, in input order.

        Each finished response is cached the moment it arrives; if one request fails for good, the ones still queued
        are cancelled and the error is raised, so a rerun resumes from the cache without losing finished work.
        """
        results: list[Completion | None] = [None] * len(requests)

        def run(index: int) -> None:
            completion = self.complete(requests[index])
            results[index] = completion
            if on_done is not None:
                on_done(index, completion)

        if self.concurrency == 1 or len(requests) <= 1:
            for i in range(len(requests)):
                run(i)
        else:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="llm") as pool:
                futures = [pool.submit(run, i) for i in range(len(requests))]
                done, pending = wait(futures, return_when=FIRST_EXCEPTION)
                for future in pending:
                    future.cancel()
                for future in futures:
                    if future.done() and not future.cancelled() and future.exception() is not None:
                        raise future.exception()  # type: ignore[misc]
        return [r for r in results if r is not None]
