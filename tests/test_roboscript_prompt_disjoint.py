"""The code-generation prompts are disjoint from the benchmark: every prompt the code generator sends for the eight
benchmark tasks (main agent and every sub-agent request, with and without the offline coder's noise) is built, and
none of them may carry a benchmark instruction (or a near copy of one as an example task), or half or more of a
benchmark world's objects -- outside the final user turn, which is the query being asked."""

from __future__ import annotations

import re

import pytest

from tasks.params import load_params
from tasks.roboscript.code_prompts import load_examples, main_messages, sub_messages
from tasks.roboscript.eval.evaluation import eval_llm

OBJECT_SHARE_LIMIT = 0.5
SIMILAR_TASK_LIMIT = 0.6
"""Word-set overlap (Jaccard) of an example's task sentence with a benchmark instruction at which it counts as a copy."""


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def world_objects(task) -> set[str]:
    """The objects a benchmark world is made of: its loose objects and containers (table and cabinet aside -- every
    world and many examples have those)."""
    return {m.name for m in task.world.models if m.kind in ("object", "container")}


def contamination(context: str, tasks) -> list[str]:
    """Everything in ``context`` (a prompt without its final user turn) that comes from the benchmark."""
    found = []
    text = " ".join(_words(context))
    sentences = [line.split("Task:", 1)[1] for line in context.splitlines() if "Task:" in line]
    for task in tasks:
        for sentence in {task.instruction, task.prompt_instruction, *([task.hint] if task.hint else [])}:
            if " ".join(_words(sentence)) in text:
                found.append(f"{task.id}: its text {sentence!r} appears")
        wanted = set(_words(task.instruction))
        for sentence in sentences:
            words = set(_words(sentence))
            similarity = len(words & wanted) / len(words | wanted)
            if similarity >= SIMILAR_TASK_LIMIT:
                found.append(f"{task.id}: example task {sentence.strip()!r} is {similarity:.0%} its instruction")
        objects = world_objects(task)
        present = {name for name in objects if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])",
                                                          context)}
        if len(present) / len(objects) >= OBJECT_SHARE_LIMIT:
            found.append(f"{task.id}: {len(present)} of its world's {len(objects)} objects appear: {sorted(present)}")
    return found


def _context(messages: list[dict[str, str]] | tuple) -> str:
    """A prompt without its final user turn (the query being asked, which names its own task by design)."""
    pairs = [(m["role"], m["content"]) if isinstance(m, dict) else m for m in messages]
    assert pairs[-1][0] == "user"
    return "\n".join(content for _, content in pairs[:-1])


@pytest.fixture(scope="module")
def sent_prompts(tasks, tmp_path_factory):
    """Every prompt the generator sends for the benchmark, as the evaluation builds it (offline backend: its
    requests are made for real), once without and once with the offline coder's mistakes (more helper requests)."""
    from tasks.llm import build_client
    from tasks.roboscript.code_prompts import task_query
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator

    base = load_params(None)
    prompts = []
    for noise in (None, 0.6):
        ep = base.roboscript.eval.model_copy(update={"offline_noise": noise})
        params = base.model_copy(update={"roboscript": base.roboscript.model_copy(update={"eval": ep})})
        llm = eval_llm(params)
        client = build_client(llm, None)
        real = client.complete

        def recording(request, real=real):
            prompts.append(request.messages)
            return real(request)

        client.complete = recording
        jobs = [CodeJob(t.id, t.id, t.prompt_instruction, task_query(t.world.object_names(), t.prompt_instruction))
                for t in tasks.values()]
        HierarchicalGenerator(client, llm, params.roboscript.codegen).generate(jobs)
    return prompts


def test_the_generator_asks_main_and_sub_agents_for_every_benchmark_task(sent_prompts, tasks):
    mains = [p for p in sent_prompts if p[-1][1].startswith("objects = [")]
    assert len(mains) == 2 * len(tasks)
    assert len(sent_prompts) > len(mains)  # sub-agent requests too


def test_no_prompt_the_generator_sends_carries_a_benchmark_task_or_world(sent_prompts, tasks):
    problems = {finding for prompt in sent_prompts for finding in contamination(_context(prompt), tasks.values())}
    assert not problems, sorted(problems)


def test_the_prompts_at_any_example_count_are_clean(tasks):
    """The main prompt with every possible number of examples and the sub-agent's fixed part."""
    for n in range(0, 11):
        assert not contamination(_context(main_messages("objects = [table]\nTask: x", n)), tasks.values())
    assert not contamination(_context(sub_messages("some_helper", "some_helper()")), tasks.values())


def test_the_examples_are_the_public_style_and_cover_drawers_doors_and_containers():
    examples = load_examples()
    assert len(examples) == 10
    text = "\n".join(e.query + e.code for e in examples)
    for needle in ("object_A", "container_B", "cabinet.drawer_0", "cabinet.door_0", "knife", "toy_car",
                   "approach_direction=", "get_object_joint_info(object_name=", "# Detailed planning:"):
        assert needle in text, needle


def test_the_check_finds_a_copied_task_and_a_copied_world(tasks):
    """The test can fail: an example copying a benchmark task, one paraphrasing it, one reusing its objects."""
    simple_0, hard_2 = tasks["Simple_0"], tasks["Hard_2"]
    copied = f"objects = [table, apple, footed_bowl]\nTask: {simple_0.instruction}\ngrasp(...)"
    assert any("its text" in f for f in contamination(copied, [simple_0]))
    paraphrase = "objects = [table, pear, bowl]\nTask: Clear the table by moving all table objects into the box."
    assert any("example task" in f for f in contamination(paraphrase, [hard_2]))
    reused = "objects = [table, orange, toy_bus]\nTask: Stack them."
    assert any("2 of its world's 3 objects" in f for f in contamination(reused, [hard_2]))
    assert not contamination("objects = [table, toy_bus]\nTask: Lift it.", [hard_2])  # 1 of 3: under half
