"""Task queries (RoboScript appendix VI-D, step 2): the scene text goes to the LLM, which suggests tasks that can be
done in the world; one task per line is parsed, every other line becomes a reject with its reason.

A kept line is one imperative sentence (numbering, bullets and markdown removed) that names at least one object
of the world. Reasons for rejects: ``empty_response``, ``truncated`` (the last line of a reply cut off by the token
limit), ``not_a_task`` (preamble, sign-off, heading, code), ``no_known_object`` (names nothing in the world),
``too_long`` (more than ``max_words`` words: several tasks or an essay), ``duplicate`` (same task twice for a world).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from tasks.llm import request_from_params
from tasks.llm.base import Completion, LLMClient, Provenance
from tasks.params import LLMParams
from tasks.progress import Progress
from tasks.roboscript.code_prompts import task_query
from tasks.roboscript.params import QueriesParams

QUERY_MARK = "You suggest tabletop manipulation tasks for a robot arm with a parallel gripper."
SCENE_HEADER = "Scene:"
COUNT_PREFIX = "Number of tasks:"
REJECT_REASONS = ("empty_response", "truncated", "not_a_task", "no_known_object", "too_long", "duplicate")

SYSTEM_PROMPT = f"""{QUERY_MARK}
You are shown a scene: the names of the objects on the table and where each one is. Suggest tasks a person could
ask of the robot in this scene: picking objects and placing them in, on or next to others, taking objects out of
containers, opening drawers or doors and putting things inside, swapping the places of two objects, sorting
objects by category or colour.

Rules:
- One task per line, numbered "1.", "2.", ...; nothing else in the answer.
- Each task is one imperative sentence, e.g. "Place the apple into the grey bowl."
- Use only the objects of the scene, named as in the sentences (spaces instead of underscores); a drawer may be
  named by its position ("the second top drawer").
- Every task must be possible from the scene as described, and the tasks should differ from each other."""

_LEAD = re.compile(r"^\s*(?:[-*+•]|\d{1,3}\s*[.):\]]|\(\d{1,3}\)|task\s*\d{1,3}\s*[:.)-])\s*", re.IGNORECASE)
_CHATTER = re.compile(r"^(?:here\b|sure\b|certainly\b|of course\b|okay\b|ok\b|great\b|note\b|i\b|i'|these\b|"
                      r"below\b|hope\b|feel free\b|let me\b|the following\b|in this scene\b|scene\b|tasks?\b\s*:)",
                      re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_STOP = {"the", "a", "an", "and", "of", "with", "into", "in", "on", "to", "table", "all", "it", "by"}
_COLOURS = {"white", "black", "grey", "gray", "red", "green", "blue", "yellow", "orange", "brown", "purple", "pink",
            "beige", "silver"}


@dataclass(frozen=True)
class QueryRecord(Provenance):
    query_id: str
    world_id: str
    line_no: int
    instruction: str
    query: str
    """What the code generator gets: the world's objects line, then ``Task: <instruction>``."""
    raw_line: str
    finish_reason: str


@dataclass(frozen=True)
class QueryRejectRecord(Provenance):
    world_id: str
    line_no: int
    raw_line: str
    reason: str
    detail: str


def build_messages(scene_text: str, n_tasks: int) -> list[dict[str, str]]:
    user = f"{SCENE_HEADER}\n{scene_text}\n\n{COUNT_PREFIX} {n_tasks}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def object_words(objects: list[str] | tuple[str, ...]) -> set[str]:
    """Words by which a line can name an object of the world: full phrases and the distinctive words of names."""
    words: set[str] = set()
    for name in objects:
        if name == "table":
            continue
        phrase = name.replace("_", " ").replace(".", " ")
        words.add(phrase)
        words.update(w for w in phrase.split() if len(w) >= 3 and w not in _STOP and w not in _COLOURS
                     and not w.isdigit())
    if any(".drawer_" in o for o in objects):
        words.add("drawer")
    if any(".door_" in o for o in objects):
        words.add("door")
    return words


def clean_line(line: str) -> str:
    line = line.replace("**", "").replace("__", "").replace("`", "").strip()
    previous = None
    while previous != line:
        previous = line
        line = _LEAD.sub("", line, count=1).strip()
    return line.strip('"').strip()


def parse_reply(text: str, finish_reason: str, objects: list[str] | tuple[str, ...], max_words: int
                ) -> tuple[list[tuple[int, str, str]], list[tuple[int, str, str, str]]]:
    """(kept: line_no, raw, instruction), (rejected: line_no, raw, reason, detail)."""
    kept: list[tuple[int, str, str]] = []
    rejected: list[tuple[int, str, str, str]] = []
    lines = text.splitlines()
    if not text.strip():
        return [], [(0, "", "empty_response", "the reply is empty")]
    last = max((i for i, line in enumerate(lines, 1) if line.strip()), default=0)
    vocabulary = object_words(objects)
    seen: set[str] = set()
    in_fence = False
    for line_no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if _FENCE.match(raw):
            in_fence = not in_fence
            rejected.append((line_no, raw, "not_a_task", "a code fence"))
            continue
        sentence = clean_line(raw)
        lowered = " " + re.sub(r"\.(?=\s|$)|[^a-z0-9._ ]+", " ", sentence.lower()) + " "
        if finish_reason == "length" and line_no == last:
            rejected.append((line_no, raw, "truncated", "the reply was cut off by the token limit in this line"))
        elif in_fence or not sentence or sentence.endswith(":") or _CHATTER.match(sentence) or sentence.startswith("#"):
            rejected.append((line_no, raw, "not_a_task", "a preamble, sign-off, heading or code, not a task"))
        elif len(sentence.split()) > max_words:
            rejected.append((line_no, raw, "too_long", f"{len(sentence.split())} words (limit {max_words})"))
        elif not any(f" {w} " in lowered or f" {w}s " in lowered for w in vocabulary):
            rejected.append((line_no, raw, "no_known_object", "names no object of this world"))
        elif sentence.lower() in seen:
            rejected.append((line_no, raw, "duplicate", "the same task was suggested before for this world"))
        else:
            seen.add(sentence.lower())
            kept.append((line_no, raw, sentence if sentence.endswith((".", "!")) else sentence + "."))
    return kept, rejected


def records_from(world_id: str, objects: list[str], completion: Completion, max_words: int
                 ) -> tuple[list[QueryRecord], list[QueryRejectRecord]]:
    kept, rejected = parse_reply(completion.text, completion.finish_reason, objects, max_words)
    provenance = Provenance.of(completion)
    queries = [QueryRecord(query_id=hashlib.sha256(f"{world_id}:{completion.key}:{n}".encode()).hexdigest()[:16],
                           world_id=world_id, line_no=n, instruction=text, query=task_query(objects, text),
                           raw_line=raw, finish_reason=completion.finish_reason, **provenance)
               for n, raw, text in kept]
    rejects = [QueryRejectRecord(world_id=world_id, line_no=n, raw_line=raw, reason=reason, detail=detail,
                                 **provenance) for n, raw, reason, detail in rejected]
    return queries, rejects


def generate_queries(worlds: pd.DataFrame, params: QueriesParams, llm: LLMParams, client: LLMClient
                     ) -> tuple[list[QueryRecord], list[QueryRejectRecord], dict]:
    """One prompt per world (a row of ``worlds.parquet``: ``world_id``, ``object_names``, ``scene_text``)."""
    rows = list(worlds.sort_values("world_id").itertuples(index=False))
    requests = [request_from_params(build_messages(row.scene_text, params.per_world), llm) for row in rows]
    with Progress(len(requests), "roboscript-queries: LLM requests", unit="requests") as progress:
        completions = client.complete_many(requests, on_done=lambda _i, _c: progress.advance())
    queries: list[QueryRecord] = []
    rejects: list[QueryRejectRecord] = []
    for row, completion in zip(rows, completions, strict=True):
        q, r = records_from(row.world_id, list(row.object_names), completion, params.max_words)
        queries += q
        rejects += r
    report = {
        "worlds": len(rows),
        "requests": len(requests),
        "llm_calls": client.calls,
        "cache_hits": client.cache_hits,
        "queries": len(queries),
        "rejects": len(rejects),
        "rejects_by_reason": dict(sorted(Counter(r.reason for r in rejects).items())),
        "backend": client.backend.name,
        "model": client.backend.model,
    }
    return queries, rejects, report
