"""The ``openai`` LLM backend, tested end to end over HTTP.

These tests do NOT talk to a real model or to the internet. They run the real ``openai`` client inside
:class:`~tasks.llm.openai_backend.OpenAIBackend` against a local HTTP server on 127.0.0.1 that speaks the OpenAI
chat-completions protocol (``tests/openai_server.py``) and answers with scripted replies: texts, 429 / 500 / 400
errors, ``finish_reason: length``. What is checked is our side: the request we send, the retry/backoff loop, the
response cache, bounded concurrency, configuration errors and the generation stage's parsing and provenance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from openai_server import (
    FakeOpenAIServer,
    Reply,
    bad_request,
    echo,
    last_user_message,
    ok,
    rate_limited,
    running_server,
    server_error,
)

from core.errors import ConfigError, LLMError
from tasks.llm import build_client, request_from_params
from tasks.llm.base import ChatRequest, LLMClient, ResponseCache
from tasks.llm.openai_backend import OpenAIBackend
from tasks.params import LLMParams

pytestmark = pytest.mark.network

MODEL = "test-model"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with running_server() as srv:
        yield srv


def llm_params(srv: FakeOpenAIServer, **kw) -> LLMParams:
    base = dict(backend="openai", base_url=srv.base_url, model=MODEL, temperature=0.3, top_p=0.9, max_tokens=256,
                seed=7, timeout_s=5.0, max_retries=3, backoff_s=0.0, max_backoff_s=0.0, concurrency=1)
    return LLMParams(**(base | kw))


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def client_with_sleep(params: LLMParams, cache_dir: Path | None) -> tuple[LLMClient, RecordingSleep]:
    sleep = RecordingSleep()
    backend = OpenAIBackend(params, sleep=sleep)
    cache = ResponseCache(cache_dir) if cache_dir is not None else None
    return LLMClient(backend, cache, concurrency=params.concurrency), sleep


def user(text: str, params: LLMParams) -> ChatRequest:
    return request_from_params([{"role": "system", "content": "You write household tasks."},
                                {"role": "user", "content": text}], params)


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.rglob("*.json"))


# -------------------------------------------------------------------------------------------------------- 1. basics


def test_plain_completion_returns_text_finish_reason_usage_and_sends_sampling(server, tmp_path):
    server.plan(ok("1. type: pick_and_place_simple | instruction: Put the apple in the fridge.", usage={
        "prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}))
    params = llm_params(server)
    client = build_client(params, cache_dir=tmp_path)
    request = user("Kitchen, three tasks please.", params)

    completion = client.complete(request)

    assert completion.text == "1. type: pick_and_place_simple | instruction: Put the apple in the fridge."
    assert completion.finish_reason == "stop"
    assert completion.truncated is False
    assert completion.usage == {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}
    assert completion.backend == "openai" and completion.model == MODEL
    assert completion.cached is False
    assert completion.key == request.cache_key("openai", MODEL)
    assert completion.prompt_hash == request.prompt_hash()
    assert client.calls == 1 and client.cache_hits == 0

    assert server.calls == 1
    received = server.received[0]
    assert received.path == "/v1/chat/completions"
    body = received.body
    assert body["model"] == MODEL
    assert body["messages"] == [{"role": "system", "content": "You write household tasks."},
                                {"role": "user", "content": "Kitchen, three tasks please."}]
    assert body["temperature"] == 0.3
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 256
    assert body["seed"] == 7
    assert body.get("stream") in (None, False)
    # The placeholder key for a local server without one.
    assert received.headers["authorization"] == "Bearer no-key-needed"

    # The finished response is on disk, readable, and carries the request it answers.
    (path,) = cache_files(tmp_path)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["key"] == completion.key
    assert record["text"] == completion.text
    assert record["request"]["messages"] == body["messages"]
    assert record["request"]["temperature"] == 0.3


# -------------------------------------------------------------------------------------------------------- 2-4. retries


def test_429_twice_then_200_sleeps_for_retry_after(server, tmp_path):
    server.plan(rate_limited(retry_after=2), rate_limited(retry_after=2), ok("finally"))
    params = llm_params(server, max_retries=3, backoff_s=0.5, max_backoff_s=30.0)
    client, sleep = client_with_sleep(params, tmp_path)

    completion = client.complete(user("hello", params))

    assert completion.text == "finally"
    assert server.calls == 3
    assert sleep.delays == [2.0, 2.0]
    assert client.calls == 1  # one logical call, retried inside the backend


def test_retry_after_is_capped_by_max_backoff(server, tmp_path):
    server.plan(rate_limited(retry_after=120), ok("done"))
    params = llm_params(server, max_retries=2, backoff_s=0.5, max_backoff_s=5.0)
    client, sleep = client_with_sleep(params, tmp_path)

    assert client.complete(user("hello", params)).text == "done"
    assert server.calls == 2
    assert sleep.delays == [5.0]


def test_500_then_200_succeeds_with_exponential_backoff(server, tmp_path):
    server.plan(server_error(500), server_error(503), ok("recovered"))
    params = llm_params(server, max_retries=3, backoff_s=0.5, max_backoff_s=30.0)
    client, sleep = client_with_sleep(params, tmp_path)

    assert client.complete(user("hello", params)).text == "recovered"
    assert server.calls == 3
    # No Retry-After: backoff_s * 2**attempt, with up to +25 % jitter.
    assert len(sleep.delays) == 2
    assert 0.5 <= sleep.delays[0] <= 0.5 * 1.25
    assert 1.0 <= sleep.delays[1] <= 1.0 * 1.25


def test_500_storm_gives_up_after_max_retries_plus_one_attempts(server, tmp_path):
    server.always(server_error(500))
    params = llm_params(server, max_retries=2)
    client, sleep = client_with_sleep(params, tmp_path)

    with pytest.raises(LLMError, match=r"gave up after 3 attempts") as info:
        client.complete(user("hello", params))

    assert "HTTP 500" in str(info.value)
    assert server.calls == 3  # the openai client's own retries are off (max_retries=0): only our loop retries
    assert len(sleep.delays) == 2  # no sleep after the last attempt
    assert cache_files(tmp_path) == []  # a failure is never cached


def test_429_storm_gives_up_too(server, tmp_path):
    server.always(rate_limited(retry_after=0))
    params = llm_params(server, max_retries=1)
    client, _sleep = client_with_sleep(params, tmp_path)

    with pytest.raises(LLMError, match=r"gave up after 2 attempts.*HTTP 429"):
        client.complete(user("hello", params))
    assert server.calls == 2


def test_400_is_not_retried(server, tmp_path):
    server.plan(bad_request("Invalid value for 'seed'."), ok("never sent"))
    params = llm_params(server, max_retries=5)
    client, sleep = client_with_sleep(params, tmp_path)

    with pytest.raises(LLMError) as info:
        client.complete(user("hello", params))

    message = str(info.value)
    assert "HTTP 400" in message
    assert "Invalid value for 'seed'." in message  # the server's own words reach the user
    assert MODEL in message
    assert server.calls == 1
    assert sleep.delays == []
    assert server.pending_plan == 1


def test_dropped_connection_is_retried_then_gives_up(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with running_server() as srv:
        dead_url = srv.base_url  # a loopback port that will have nothing listening once the server stops
    params = LLMParams(backend="openai", base_url=dead_url, model=MODEL, timeout_s=2.0, max_retries=1,
                       backoff_s=0.0, max_backoff_s=0.0)
    client, sleep = client_with_sleep(params, tmp_path)

    with pytest.raises(LLMError, match=r"gave up after 2 attempts.*APIConnectionError"):
        client.complete(user("hello", params))
    assert len(sleep.delays) == 1


def test_timeout_is_retried(server, tmp_path):
    server.plan(Reply(200, content="too late", delay_s=1.5), ok("in time"))
    params = llm_params(server, timeout_s=0.3, max_retries=2)
    client, sleep = client_with_sleep(params, tmp_path)

    assert client.complete(user("hello", params)).text == "in time"
    assert server.calls == 2
    assert len(sleep.delays) == 1


# -------------------------------------------------------------------------------------------------------- 5-7. cache


def test_rerun_is_served_from_cache_with_zero_server_calls(server, tmp_path):
    params = llm_params(server, concurrency=2)
    requests = [user(f"scene {i}", params) for i in range(5)]

    first = build_client(params, cache_dir=tmp_path)
    answers = first.complete_many(requests)
    assert [a.text for a in answers] == [f"echo: scene {i}" for i in range(5)]  # input order kept
    assert first.calls == 5 and first.cache_hits == 0
    assert server.calls == 5
    assert len(cache_files(tmp_path)) == 5

    # A new client over the same cache; the server would now answer differently, so identical texts prove the cache.
    server.always("a different answer")
    server.reset_counters()
    second = build_client(params, cache_dir=tmp_path)
    again = second.complete_many(requests)

    assert server.calls == 0
    assert second.calls == 0 and second.cache_hits == 5
    assert [a.text for a in again] == [a.text for a in answers]
    assert [a.finish_reason for a in again] == [a.finish_reason for a in answers]
    assert [a.key for a in again] == [a.key for a in answers]
    assert [a.usage for a in again] == [a.usage for a in answers]
    assert all(a.cached for a in again)

    # Another temperature is another request: a miss.
    warmer = llm_params(server, concurrency=2, temperature=0.9)
    third = build_client(warmer, cache_dir=tmp_path)
    changed = third.complete(user("scene 0", warmer))
    assert changed.text == "a different answer" and not changed.cached
    assert third.calls == 1 and third.cache_hits == 0
    assert server.calls == 1
    assert server.bodies[0]["temperature"] == 0.9


def test_other_model_is_a_cache_miss(server, tmp_path):
    params = llm_params(server)
    build_client(params, cache_dir=tmp_path).complete(user("scene", params))
    other = llm_params(server, model="other-model")
    client = build_client(other, cache_dir=tmp_path)
    client.complete(user("scene", other))
    assert client.calls == 1 and server.calls == 2
    assert server.bodies[1]["model"] == "other-model"


def test_resume_after_crash_only_asks_for_the_missing_requests(server, tmp_path):
    server.plan(ok("answer 0"), ok("answer 1")).always(server_error(500))
    params = llm_params(server, concurrency=1, max_retries=2)
    requests = [user(f"scene {i}", params) for i in range(5)]
    done: list[int] = []

    crashing = build_client(params, cache_dir=tmp_path)
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        crashing.complete_many(requests, on_done=lambda i, _c: done.append(i))

    assert done == [0, 1]
    assert server.calls == 2 + 3  # two answers, then one request tried three times; the rest never sent
    cache = ResponseCache(tmp_path)
    assert cache.get(requests[0].cache_key("openai", MODEL))["text"] == "answer 0"
    assert cache.get(requests[1].cache_key("openai", MODEL))["text"] == "answer 1"
    assert len(cache_files(tmp_path)) == 2

    # The server is healthy again; a rerun asks only for requests 2, 3, 4.
    server.default = echo
    server.reset_counters()
    rerun = build_client(params, cache_dir=tmp_path)
    answers = rerun.complete_many(requests)

    assert [a.text for a in answers] == ["answer 0", "answer 1", "echo: scene 2", "echo: scene 3", "echo: scene 4"]
    assert rerun.calls == 3 and rerun.cache_hits == 2
    assert server.calls == 3
    assert [last_user_message(b) for b in server.bodies] == ["scene 2", "scene 3", "scene 4"]
    assert len(cache_files(tmp_path)) == 5


def test_resume_after_crash_with_concurrency_keeps_finished_work(server, tmp_path):
    # With several workers the failing request is not the only one in flight; whatever finished must be cached.
    server.plan(ok("answer 0"), ok("answer 1")).always(server_error(500))
    params = llm_params(server, concurrency=3, max_retries=0)
    requests = [user(f"scene {i}", params) for i in range(8)]
    crashing = build_client(params, cache_dir=tmp_path)
    with pytest.raises(LLMError):
        crashing.complete_many(requests)
    n_cached = len(cache_files(tmp_path))
    assert n_cached == 2

    server.default = echo
    server.reset_counters()
    rerun = build_client(params, cache_dir=tmp_path)
    answers = rerun.complete_many(requests)
    assert len(answers) == 8
    assert rerun.cache_hits == n_cached and rerun.calls == 8 - n_cached == server.calls
    assert sorted(a.text for a in answers if a.cached) == ["answer 0", "answer 1"]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="truncated-json"),
        pytest.param(lambda text: "", id="empty-file"),
        pytest.param(lambda text: "[]\n", id="json-list"),
        pytest.param(lambda text: "null\n", id="json-null"),
        pytest.param(lambda text: text.replace('"key"', '"kee"'), id="no-key"),
    ],
)
def test_corrupt_cache_file_is_a_miss_and_moved_aside(server, tmp_path, damage):
    params = llm_params(server)
    request = user("scene 0", params)
    build_client(params, cache_dir=tmp_path).complete(request)
    (path,) = cache_files(tmp_path)
    path.write_text(damage(path.read_text(encoding="utf-8")), encoding="utf-8")
    server.always("fresh answer")

    client = build_client(params, cache_dir=tmp_path)
    completion = client.complete(request)

    assert completion.text == "fresh answer" and not completion.cached
    assert client.calls == 1 and client.cache_hits == 0
    assert server.calls == 2
    aside = path.with_name(path.name + ".corrupt")
    assert aside.name.endswith(".json.corrupt")
    assert aside.exists()
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["key"] == request.cache_key("openai", MODEL)
    assert record["text"] == "fresh answer"

    # And the rewritten record is a hit from now on.
    third = build_client(params, cache_dir=tmp_path)
    assert third.complete(request).cached and third.calls == 0


def test_no_temp_files_left_in_cache(server, tmp_path):
    params = llm_params(server, concurrency=4)
    build_client(params, cache_dir=tmp_path).complete_many([user(f"s{i}", params) for i in range(6)])
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".json")]
    assert leftovers == []


# -------------------------------------------------------------------------------------------------------- 8. concurrency


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_concurrency_is_bounded_and_real(server, tmp_path, concurrency):
    server.handler_delay_s = 0.1
    params = llm_params(server, concurrency=concurrency)
    requests = [user(f"scene {i}", params) for i in range(8)]
    client = build_client(params, cache_dir=tmp_path)

    answers = client.complete_many(requests)

    assert server.calls == 8 and client.calls == 8
    assert server.max_in_flight <= concurrency
    assert server.max_in_flight == concurrency  # requests really overlap up to the bound
    assert [a.text for a in answers] == [f"echo: scene {i}" for i in range(8)]


def test_identical_requests_in_flight_are_asked_once(server, tmp_path):
    """Duplicates in one batch: one server call each distinct prompt, the rest cache hits, whatever the timing --
    so the stage's call and hit counts are the same on every run."""
    server.handler_delay_s = 0.1
    params = llm_params(server, concurrency=4)
    requests = [user(f"scene {i % 3}", params) for i in range(9)]
    client = build_client(params, cache_dir=tmp_path)

    answers = client.complete_many(requests)

    assert server.calls == 3 and client.calls == 3 and client.cache_hits == 6
    assert [a.text for a in answers] == [f"echo: scene {i % 3}" for i in range(9)]


# -------------------------------------------------------------------------------------------------------- 9. the key


def test_missing_key_without_base_url_is_a_config_error(monkeypatch):
    monkeypatch.delenv("EMBP_TEST_LLM_KEY", raising=False)
    params = LLMParams(backend="openai", model=MODEL, base_url=None, api_key_env="EMBP_TEST_LLM_KEY")
    with pytest.raises(ConfigError, match="EMBP_TEST_LLM_KEY"):
        build_client(params, cache_dir=None)


def test_missing_key_with_base_url_uses_a_placeholder(server, monkeypatch):
    monkeypatch.delenv("EMBP_TEST_LLM_KEY", raising=False)
    params = llm_params(server, api_key_env="EMBP_TEST_LLM_KEY")
    client = build_client(params, cache_dir=None)
    assert client.complete(user("hi", params)).text == "echo: hi"
    assert server.received[0].headers["authorization"] == "Bearer no-key-needed"


def test_key_from_the_named_env_var_is_sent(server, monkeypatch):
    monkeypatch.setenv("EMBP_TEST_LLM_KEY", "sk-test-123")
    params = llm_params(server, api_key_env="EMBP_TEST_LLM_KEY")
    build_client(params, cache_dir=None).complete(user("hi", params))
    assert server.received[0].headers["authorization"] == "Bearer sk-test-123"
    assert "EMBP_TEST_LLM_KEY" in os.environ  # untouched


# -------------------------------------------------------------------------------------------------------- 10. length


def test_finish_reason_length_is_truncated_and_last_line_rejected(server, tmp_path):
    from tasks.muep.parser import parse_response

    text = ("1. type: pick_and_place_simple | instruction: Put the apple in the fridge. | object: Apple | "
            "receptacle: Fridge\n2. type: pick_heat_then_place_in_recep | instruction: Heat the mug and put it")
    server.plan(ok(text, finish_reason="length"))
    params = llm_params(server)
    completion = build_client(params, cache_dir=tmp_path).complete(user("hi", params))

    assert completion.finish_reason == "length"
    assert completion.truncated is True
    tasks, rejects = parse_response(completion.text, completion.finish_reason)
    assert [t.object_type for t in tasks] == ["Apple"]
    assert [(r.line_no, r.reason) for r in rejects] == [(2, "truncated")]

    # The finish reason survives the cache.
    again = build_client(params, cache_dir=tmp_path).complete(user("hi", params))
    assert again.cached and again.truncated


def test_null_content_becomes_empty_text(server):
    server.plan(Reply(200, content=None, finish_reason="content_filter"))
    params = llm_params(server)
    completion = build_client(params, cache_dir=None).complete(user("hi", params))
    assert completion.text == "" and completion.finish_reason == "content_filter"


# -------------------------------------------------------------------------------------------------------- 11. the stage

MESSY_ANSWER = """Sure! Here are {n} household tasks for this room:

1. type: pick_heat_then_place_in_recep | instruction: Heat an apple in the microwave and put it on the countertop. | object: Apple | receptacle: CounterTop
2. **type: pick_cool_then_place_in_recep | instruction: Chill a tomato and place it in a cabinet. | object: Tomato | receptacle: Cabinet**
3) type: Clean | instruction: Rinse the mug and put it in the coffee machine | object: Mug | receptacle: CoffeeMachine
"""


def test_generate_stage_end_to_end_over_http(server, tmp_path):
    from tasks.muep.generate import ParseRejectRecord, TaskRecord, generate, prompt_jobs
    from tasks.muep.metadata import ObjectTypeRecord, SceneRecord, collect_scene
    from tasks.params import GenerateParams, MetadataParams, SceneParams
    from tasks.records import to_frame

    meta = collect_scene(1, SceneParams(floorplans=[1]), MetadataParams())
    scenes = to_frame([meta.scene], SceneRecord)
    object_types = to_frame(meta.object_types, ObjectTypeRecord)
    gen = GenerateParams(tasks_per_request=3, requests_per_scene=2, n_examples=2)
    params = llm_params(server, concurrency=2)
    server.default = lambda body: ok(MESSY_ANSWER.format(n=3))

    client = build_client(params, cache_dir=tmp_path)
    tasks, rejects, report = generate(scenes, object_types, gen, params, client)

    jobs = prompt_jobs(scenes, object_types, gen)
    assert len(jobs) == 2
    assert server.calls == 2
    assert sorted(json.dumps(b["messages"], sort_keys=True) for b in server.bodies) == sorted(
        json.dumps(j.messages, sort_keys=True) for j in jobs)
    assert all(b["model"] == MODEL and b["temperature"] == 0.3 and b["seed"] == 7 for b in server.bodies)

    assert all(isinstance(t, TaskRecord) for t in tasks)
    assert len(tasks) == 6
    assert sorted({t.task_type for t in tasks}) == ["pick_clean_then_place_in_recep", "pick_cool_then_place_in_recep",
                                                    "pick_heat_then_place_in_recep"]
    hashes = {j.request_index: request_from_params(j.messages, params).prompt_hash() for j in jobs}
    keys = {j.request_index: request_from_params(j.messages, params).cache_key("openai", MODEL) for j in jobs}
    for t in tasks:
        assert t.backend == "openai"
        assert t.model == MODEL
        assert t.prompt_hash == hashes[t.request_index]
        assert t.response_key == keys[t.request_index]
        assert t.scene == "FloorPlan1" and t.room_type == "kitchen" and t.split == "seen"
        assert t.finish_reason == "stop"
    assert hashes[0] != hashes[1]
    assert len({t.task_id for t in tasks}) == 6

    # The chatty preamble is a reject, once per response, with the same provenance.
    assert all(isinstance(r, ParseRejectRecord) for r in rejects)
    assert [(r.request_index, r.line_no, r.reason) for r in sorted(rejects, key=lambda r: r.request_index)] == [
        (0, 1, "not_a_task"), (1, 1, "not_a_task")]
    assert all(r.raw_line.startswith("Sure! Here are") for r in rejects)
    assert all(r.backend == "openai" and r.model == MODEL and r.prompt_hash == hashes[r.request_index]
               for r in rejects)

    assert report["llm_calls"] == 2 and report["cache_hits"] == 0
    assert report["tasks_parsed"] == 6 and report["lines_rejected"] == 2
    assert report["rejected_by_reason"] == {"not_a_task": 2}
    assert report["backend"] == "openai" and report["model"] == MODEL

    # Rerunning the stage is free and gives the same tasks.
    server.reset_counters()
    tasks2, rejects2, report2 = generate(scenes, object_types, gen, params, build_client(params, cache_dir=tmp_path))
    assert server.calls == 0
    assert report2["llm_calls"] == 0 and report2["cache_hits"] == 2
    assert [t.task_id for t in tasks2] == [t.task_id for t in tasks]
    assert rejects2 == rejects
