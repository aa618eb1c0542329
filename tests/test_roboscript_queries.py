"""Task queries: the parser keeps one task per line and gives every other line a reason; the offline proposer
answers from the scene in the prompt; the stage function turns replies into typed records with provenance."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from robot.contract.catalog import load_catalog
from tasks.llm import build_client
from tasks.llm.base import ChatRequest
from tasks.params import LLMParams
from tasks.roboscript.params import QueriesParams, WorldsParams
from tasks.roboscript.queries import build_messages, generate_queries, parse_reply
from tasks.roboscript.scene_text import describe
from tasks.roboscript.worlds import sample_world

OBJECTS = ["table", "apple", "grey_bowl", "basket_with_fabric_liner", "cabinet", "cabinet.drawer_0",
           "cabinet.handle_0"]


def test_parser_keeps_tasks_and_rejects_the_rest_with_reasons():
    reply = "\n".join([
        "Sure! Here are some tasks:",
        "1. Place the apple into the grey bowl.",
        "2) **Put the apple in the basket**",
        "- Open the top drawer",
        "3. Water the teapot.",
        "4. Place the apple into the grey bowl.",
        "5. " + " ".join(["then move the apple"] * 12),
        "```",
        "pick(apple)",
        "```",
        "I hope these help!",
    ])
    kept, rejected = parse_reply(reply, "stop", OBJECTS, max_words=40)
    assert [text for _, _, text in kept] == ["Place the apple into the grey bowl.", "Put the apple in the basket.",
                                             "Open the top drawer."]
    reasons = {line_no: reason for line_no, _, reason, _ in rejected}
    assert reasons == {1: "not_a_task", 5: "no_known_object", 6: "duplicate", 7: "too_long", 8: "not_a_task",
                       9: "not_a_task", 10: "not_a_task", 11: "not_a_task"}
    # Nothing is lost: every non-empty line is kept or rejected.
    assert len(kept) + len(rejected) == len([line for line in reply.splitlines() if line.strip()])


def test_empty_and_truncated_replies():
    assert parse_reply("", "stop", OBJECTS, 40)[1][0][2] == "empty_response"
    kept, rejected = parse_reply("1. Place the apple into the grey bowl.\n2. Put the apple in", "length", OBJECTS, 40)
    assert len(kept) == 1 and rejected[0][2] == "truncated" and rejected[0][0] == 2


def _request(messages) -> ChatRequest:
    return ChatRequest.of(messages, temperature=0.7, seed=0)


def test_offline_proposer_reads_the_scene_from_the_prompt():
    from tasks.llm.offline import OfflineBackend

    world = sample_world(2, load_catalog(), WorldsParams())
    backend = OfflineBackend(LLMParams(offline={"noise": 0.0}))
    reply = backend.complete(_request(build_messages(describe(world), 6))).text
    kept, rejected = parse_reply(reply, "stop", world.object_names(), 40)
    assert len(kept) == 6 and rejected == []
    phrases = {m.phrase for m in world.models}
    for _, _, task in kept:
        assert any(p in task.lower() for p in phrases)

    # A different scene in the prompt gives tasks about that scene: the answer depends on the prompt only.
    other = sample_world(5, load_catalog(), WorldsParams())
    reply_other = backend.complete(_request(build_messages(describe(other), 6))).text
    assert reply_other != reply
    assert backend.complete(_request(build_messages(describe(world), 6))).text == reply


def test_offline_proposer_makes_realistic_mistakes_with_noise():
    from tasks.roboscript.offline_skill import TaskQueryProposer

    world = sample_world(0, load_catalog(), WorldsParams())
    messages = [(m["role"], m["content"]) for m in build_messages(describe(world), 20)]
    reasons = set()
    for seed in range(10):
        reply = TaskQueryProposer().respond(messages, random.Random(seed), noise=0.5)
        reasons |= {r[2] for r in parse_reply(reply, "stop", world.object_names(), 40)[1]}
    assert {"not_a_task", "no_known_object", "too_long"} <= reasons


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_generate_queries_records_and_report(noise, tmp_path):
    catalog = load_catalog()
    worlds = [sample_world(i, catalog, WorldsParams()) for i in range(4)]
    frame = pd.DataFrame([{"world_id": w.world_id, "object_names": w.object_names(), "scene_text": describe(w)}
                          for w in worlds])
    llm = LLMParams(offline={"noise": noise})
    client = build_client(llm, tmp_path / "cache")
    queries, rejects, report = generate_queries(frame, QueriesParams(per_world=5), llm, client)
    assert report["requests"] == 4 and report["queries"] == len(queries) and report["rejects"] == len(rejects)
    assert sum(report["rejects_by_reason"].values()) == len(rejects)
    assert all(q.query.startswith("objects = [table, ") and "\nTask: " in q.query for q in queries)
    assert len({q.query_id for q in queries}) == len(queries)
    assert all(q.backend == "offline" and len(q.prompt_hash) == 16 and q.response_key for q in queries)
    if noise == 0.0:
        assert len(queries) == 20 and not rejects
    # A rerun is answered from the cache.
    again = build_client(llm, tmp_path / "cache")
    queries2, _, report2 = generate_queries(frame, QueriesParams(per_world=5), llm, again)
    assert report2["llm_calls"] == 0 and report2["cache_hits"] == 4 and queries2 == queries
