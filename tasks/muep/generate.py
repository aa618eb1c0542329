"""Stage 2, task generation: one in-context prompt per (scene, request) -> LLM -> parsed tasks and parse rejects."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from tasks.llm import request_from_params
from tasks.llm.base import Completion, LLMClient, Provenance
from tasks.muep.parser import ParsedTask, ParseReject, parse_response
from tasks.muep.prompts import build_messages
from tasks.params import GenerateParams, LLMParams
from tasks.progress import Progress


@dataclass(frozen=True)
class TaskRecord(Provenance):
    task_id: str
    scene: str
    floorplan: int
    room_type: str
    split: str
    task_type: str
    instruction: str
    object_name: str
    object_type: str | None
    receptacle_name: str | None
    receptacle_type: str | None
    light_name: str | None
    light_type: str | None
    goal_conditions: list[str]
    n_goal_conditions: int
    request_index: int
    line_no: int
    raw_line: str
    finish_reason: str


@dataclass(frozen=True)
class ParseRejectRecord(Provenance):
    scene: str
    floorplan: int
    room_type: str
    split: str
    request_index: int
    line_no: int
    raw_line: str
    reason: str
    detail: str


@dataclass(frozen=True)
class PromptJob:
    scene: str
    floorplan: int
    room_type: str
    split: str
    request_index: int
    messages: list[dict[str, str]]


def prompt_jobs(scenes: pd.DataFrame, object_types: pd.DataFrame, params: GenerateParams) -> list[PromptJob]:
    counts: dict[str, dict[str, int]] = {}
    for row in object_types.itertuples(index=False):
        counts.setdefault(row.scene, {})[row.object_type] = int(row.count)
    jobs = []
    for row in scenes.sort_values("floorplan").itertuples(index=False):
        for r in range(params.requests_per_scene):
            messages = build_messages(row.scene, row.room_type, counts.get(row.scene, {}), params.tasks_per_request,
                                      params.n_examples, r, params.requests_per_scene)
            jobs.append(PromptJob(row.scene, int(row.floorplan), row.room_type, row.split, r, messages))
    return jobs


def _task_id(job: PromptJob, completion: Completion, position: int) -> str:
    """Unique per task: the response it came from and its position among the tasks parsed from it."""
    blob = f"{job.scene}:{job.request_index}:{completion.key}:{position}"
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def records_from(job: PromptJob, completion: Completion) -> tuple[list[TaskRecord], list[ParseRejectRecord]]:
    parsed, rejected = parse_response(completion.text, completion.finish_reason)
    common = dict(scene=job.scene, floorplan=job.floorplan, room_type=job.room_type, split=job.split,
                  request_index=job.request_index)
    provenance = Provenance.of(completion)
    tasks = [
        TaskRecord(task_id=_task_id(job, completion, position), **common, task_type=t.task_type,
                   instruction=t.instruction, object_name=t.object_name, object_type=t.object_type,
                   receptacle_name=t.receptacle_name, receptacle_type=t.receptacle_type, light_name=t.light_name,
                   light_type=t.light_type, goal_conditions=t.goal_conditions,
                   n_goal_conditions=len(t.goal_conditions), line_no=t.line_no, raw_line=t.raw_line,
                   finish_reason=completion.finish_reason, **provenance)
        for position, t in enumerate(parsed)
        if isinstance(t, ParsedTask)
    ]
    rejects = [
        ParseRejectRecord(**common, line_no=r.line_no, raw_line=r.raw_line, reason=r.reason, detail=r.detail,
                          **provenance)
        for r in rejected
        if isinstance(r, ParseReject)
    ]
    return tasks, rejects


def generate(
    scenes: pd.DataFrame, object_types: pd.DataFrame, gen: GenerateParams, llm: LLMParams, client: LLMClient
) -> tuple[list[TaskRecord], list[ParseRejectRecord], dict]:
    jobs = prompt_jobs(scenes, object_types, gen)
    requests = [request_from_params(job.messages, llm) for job in jobs]
    with Progress(len(requests), "muep-generate: LLM requests", unit="requests") as progress:
        completions = client.complete_many(requests, on_done=lambda _i, _c: progress.advance())
    tasks: list[TaskRecord] = []
    rejects: list[ParseRejectRecord] = []
    for job, completion in zip(jobs, completions, strict=True):
        t, r = records_from(job, completion)
        tasks.extend(t)
        rejects.extend(r)
    report = {
        "scenes": int(scenes.shape[0]),
        "requests": len(requests),
        "llm_calls": client.calls,
        "cache_hits": client.cache_hits,
        "truncated_responses": sum(c.truncated for c in completions),
        "tasks_parsed": len(tasks),
        "lines_rejected": len(rejects),
        "rejected_by_reason": dict(sorted(Counter(r.reason for r in rejects).items())),
        "parsed_by_type": dict(sorted(Counter(t.task_type for t in tasks).items())),
        "backend": client.backend.name,
        "model": client.backend.model,
    }
    return tasks, rejects, report

