"""The offline "LLM" skill for MuEP task generation, on real prompts for real scenes: deterministic, answers what it is
asked, stays inside the prompt's object dictionary without noise, and makes the mistakes the parser and filter exist
for with noise."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from core.errors import LLMError
from tasks.llm import build_client, request_from_params
from tasks.llm.base import ChatRequest
from tasks.llm.offline import OfflineBackend
from tasks.muep.filter import filter_tasks, scene_facts
from tasks.muep.generate import PromptJob, records_from
from tasks.muep.metadata import (
    InstanceRecord,
    ObjectTypeRecord,
    SceneMetadata,
    SceneRecord,
    collect_scene,
)
from tasks.muep.parser import parse_response
from tasks.muep.prompts import DICTIONARY_HEADER, ROOM_TASK_TYPES, build_messages
from tasks.muep.vocab import TASK_TYPES
from tasks.params import LLMParams, MetadataParams, OfflineParams, SceneParams
from tasks.records import to_frame

#: One scene per room type: a kitchen, a living room, a bedroom, a bathroom.
FLOORPLANS = (1, 201, 301, 401)
N_TASKS = 12


@pytest.fixture(scope="module")
def scenes() -> dict[int, SceneMetadata]:
    return {fp: collect_scene(fp, SceneParams(floorplans=[fp]), MetadataParams()) for fp in FLOORPLANS}


def type_counts(meta: SceneMetadata) -> dict[str, int]:
    return {row.object_type: row.count for row in meta.object_types}


def messages(meta: SceneMetadata, request: int = 0, n_requests: int = 3, n_tasks: int = N_TASKS,
             n_examples: int = 30) -> list[dict[str, str]]:
    return build_messages(meta.scene.scene, meta.scene.room_type, type_counts(meta), n_tasks, n_examples, request,
                          n_requests)


def llm(noise: float) -> LLMParams:
    return LLMParams(offline=OfflineParams(noise=noise))


def answer(msgs: list[dict[str, str]], noise: float):
    params = llm(noise)
    return build_client(params, cache_dir=None).complete(request_from_params(msgs, params))


def prompt_dictionary(msgs: list[dict[str, str]]) -> dict[str, int]:
    """type -> count, read back from the object dictionary section of the user prompt (what the model sees)."""
    user = msgs[-1]["content"]
    section = user.split(DICTIONARY_HEADER, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^- (\w+) \((\d+)\):", section, re.MULTILINE)}


def numbered_lines(text: str) -> dict[int, str]:
    return {no: line for no, line in enumerate(text.splitlines(), start=1) if re.match(r"^\d+\. ", line)}


def facts_of(meta: SceneMetadata):
    return scene_facts(to_frame([meta.scene], SceneRecord), to_frame(meta.object_types, ObjectTypeRecord),
                       to_frame(meta.instances, InstanceRecord))


def generate_and_filter(meta: SceneMetadata, noise: float, requests: int = 3):
    """The real path of stages 2 and 3 for one scene: prompts -> offline answers -> task records -> filter."""
    tasks, parse_rejects = [], []
    for r in range(requests):
        msgs = messages(meta, request=r, n_requests=requests)
        job = PromptJob(meta.scene.scene, meta.scene.floorplan, meta.scene.room_type, meta.scene.split, r, msgs)
        t, rej = records_from(job, answer(msgs, noise))
        tasks.extend(t)
        parse_rejects.extend(rej)
    accepted, rejected, report = filter_tasks(tasks, facts_of(meta))
    return tasks, parse_rejects, accepted, rejected, report


# --------------------------------------------------------------------------------------------------------------------
# Determinism


@pytest.mark.parametrize("noise", [0.0, 0.2, 1.0])
def test_same_prompt_gives_the_same_text(scenes, noise):
    for meta in scenes.values():
        msgs = messages(meta)
        first = answer(msgs, noise)
        again = answer(msgs, noise)  # a fresh client and backend: nothing is remembered between them
        assert first.text == again.text
        assert first.finish_reason == "stop" and first.backend == "offline"
        direct = OfflineBackend(llm(noise)).complete(request_from_params(msgs, llm(noise)))
        assert direct.text == first.text


def test_another_request_index_gives_another_text(scenes):
    for meta in scenes.values():
        texts = {answer(messages(meta, request=r), 0.2).text for r in range(3)}
        assert len(texts) == 3


def test_another_scene_or_seed_gives_another_text(scenes):
    texts = {answer(messages(meta), 0.2).text for meta in scenes.values()}
    assert len(texts) == len(scenes)
    msgs = messages(scenes[1])
    seeded = LLMParams(seed=1, offline=OfflineParams(noise=0.2))
    other_seed = build_client(seeded, cache_dir=None).complete(request_from_params(msgs, seeded))
    assert other_seed.text != answer(msgs, 0.2).text


# --------------------------------------------------------------------------------------------------------------------
# What it answers


@pytest.mark.parametrize("noise", [0.0, 1.0])
@pytest.mark.parametrize("n_tasks", [1, 5, 12, 30])
def test_answers_the_number_of_tasks_asked_for(scenes, noise, n_tasks):
    for meta in scenes.values():
        completion = answer(messages(meta, n_tasks=n_tasks), noise)
        numbered = numbered_lines(completion.text)
        assert sorted(int(line.split(".")[0]) for line in numbered.values()) == list(range(1, n_tasks + 1))
        tasks, rejects = parse_response(completion.text, completion.finish_reason)
        # every numbered line is a task or a reject; whatever else there is (chatter) is rejected as no task
        by_line = Counter(r.line_no for r in [*tasks, *rejects])
        assert all(by_line[no] == 1 for no in numbered)
        extra = [r for r in rejects if r.line_no not in numbered]
        assert all(r.reason == "not_a_task" for r in extra)
        assert len(tasks) + len(rejects) == len([ln for ln in completion.text.splitlines() if ln.strip()])
        if noise == 0.0:
            assert len(tasks) == n_tasks and not rejects


def test_without_noise_every_line_parses_and_stays_inside_the_prompt(scenes):
    for meta in scenes.values():
        room = meta.scene.room_type
        for r in range(3):
            msgs = messages(meta, request=r)
            dictionary = prompt_dictionary(msgs)
            assert dictionary and dictionary == {t: n for t, n in type_counts(meta).items() if n > 0}
            completion = answer(msgs, 0.0)
            assert not completion.text.startswith("Here are")
            tasks, rejects = parse_response(completion.text, completion.finish_reason)
            assert rejects == []
            assert len(tasks) == N_TASKS
            for task in tasks:
                spec = TASK_TYPES[task.task_type]
                assert task.task_type in ROOM_TASK_TYPES[room], (room, task.raw_line)
                assert task.object_name == task.object_type, task.raw_line  # dictionary names, verbatim
                assert task.object_type in dictionary, task.raw_line
                target = task.receptacle_type if spec.needs_receptacle else task.light_type
                assert target in dictionary, task.raw_line
                if spec.n_objects > 1:
                    assert dictionary[task.object_type] >= spec.n_objects, task.raw_line
                if spec.object_attribute:
                    assert spec.object_attribute in msgs[-1]["content"].split(f"- {task.object_type} (", 1)[1] \
                        .splitlines()[0], task.raw_line


def test_without_noise_the_sentence_alone_says_the_same_as_the_fields(scenes):
    """The instruction written for a task, parsed as free text, gives back its type and items."""
    for meta in scenes.values():
        for r in range(2):
            tasks, _ = parse_response(answer(messages(meta, request=r), 0.0).text)
            for task in tasks:
                again, rejects = parse_response(task.instruction)
                assert not rejects and len(again) == 1, task.instruction
                for name in ("task_type", "object_type", "receptacle_type", "light_type"):
                    assert getattr(again[0], name) == getattr(task, name), (name, task.instruction)


def test_without_noise_the_filter_finds_no_invented_items_or_impossible_rooms(scenes):
    for meta in scenes.values():
        tasks, parse_rejects, accepted, rejected, report = generate_and_filter(meta, 0.0)
        assert parse_rejects == []
        assert len(tasks) == 3 * N_TASKS
        reasons = Counter(r.reason for r in rejected)
        assert reasons["invalid_item"] == 0 and reasons["room_incompatible"] == 0, (meta.scene.scene, reasons)
        assert accepted, meta.scene.scene
        assert report["proposed"] == len(tasks)


def test_with_full_noise_mistakes_appear_and_the_filter_catches_them(scenes):
    parse_reasons: Counter[str] = Counter()
    filter_reasons: Counter[str] = Counter()
    accepted_clean = accepted_noisy = 0
    for meta in scenes.values():
        _, parse_rejects, accepted, rejected, _ = generate_and_filter(meta, 1.0)
        parse_reasons.update(r.reason for r in parse_rejects)
        filter_reasons.update(r.reason for r in rejected)
        accepted_noisy += len(accepted)
        accepted_clean += len(generate_and_filter(meta, 0.0)[2])
        # the chatty model: a preamble and a sign-off around every answer, both rejected
        text = answer(messages(meta), 1.0).text.splitlines()
        assert text[0].startswith("Here are") and text[-1] == "I hope these help!"
    assert parse_reasons["not_a_task"] > 0  # chatter
    assert parse_reasons["unknown_task_type"] > 0  # sloppy lines: they name objects but no task type
    assert set(parse_reasons) == {"not_a_task", "unknown_task_type"}
    # an item that is not in the room, a non-receptacle as target, a task type the room cannot host
    for reason in ("invalid_item", "inadequate_attributes", "room_incompatible"):
        assert filter_reasons[reason] > 0, filter_reasons
    assert accepted_noisy < accepted_clean


def test_with_full_noise_invented_items_are_kept_for_the_filter(scenes):
    """An item that is not in the scene (or no AI2-THOR type at all) is parsed, not rejected by the parser."""
    meta = scenes[201]
    tasks, _, _, rejected, _ = generate_and_filter(meta, 1.0)
    dictionary = prompt_dictionary(messages(meta))
    invented = [t for t in tasks if t.object_type not in dictionary]
    assert invented
    assert any(t.object_type is None for t in invented)  # "Banana", "Teapot": no AI2-THOR type, object_type None
    flagged = {r.task_id for r in rejected if r.reason == "invalid_item"}
    assert {t.task_id for t in invented} <= flagged


# --------------------------------------------------------------------------------------------------------------------
# Unknown prompts


def test_a_prompt_no_skill_recognises_raises_llm_error():
    request = ChatRequest.of([{"role": "system", "content": "You are helpful."},
                              {"role": "user", "content": "What is the capital of France?"}])
    with pytest.raises(LLMError, match="no skill for this prompt"):
        OfflineBackend(LLMParams()).complete(request)
    with pytest.raises(LLMError):
        build_client(LLMParams(), cache_dir=None).complete(request)


def test_a_dictionary_without_the_task_count_is_not_recognised_either(scenes):
    msgs = messages(scenes[1])
    user = msgs[-1]["content"].replace("Number of tasks:", "Tasks wanted:")
    with pytest.raises(LLMError):
        OfflineBackend(LLMParams()).complete(ChatRequest.of([msgs[0], {"role": "user", "content": user}]))
