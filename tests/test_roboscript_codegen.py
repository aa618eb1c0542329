"""Hierarchical code generation (Algorithm 1) and the check of every snippet.

The offline baseline must write code that passes the same checks as a real model's (and fails them for the
mistakes it makes on purpose). The sub-agent recursion is exercised against the local OpenAI-protocol server of
tests/openai_server.py -- NOT a real model: it answers the main-agent and sub-agent prompts with scripted code, so
what is tested is our side: which functions go to the sub-agent, with what context, how deep, what is assembled,
what the checker says, and that a rerun is answered from the cache.
"""

from __future__ import annotations

import re

import pytest
from openai_server import FakeOpenAIServer, last_user_message, ok, running_server

from robot.contract.catalog import load_catalog
from tasks.llm import build_client
from tasks.params import LLMParams
from tasks.roboscript.benchmark import load_benchmark
from tasks.roboscript.code_prompts import (
    SUB_MARK,
    main_messages,
    sub_messages,
    task_query,
)
from tasks.roboscript.codegen import (
    CodeJob,
    HierarchicalGenerator,
    extract_code,
    to_records,
)
from tasks.roboscript.params import CodegenParams, WorldsParams


def _jobs(pairs: list[tuple[list[str], str]]) -> list[CodeJob]:
    return [CodeJob(f"q{i}", "w", instruction, task_query(objects, instruction))
            for i, (objects, instruction) in enumerate(pairs)]


def _generator(llm: LLMParams, cache=None, **codegen) -> HierarchicalGenerator:
    return HierarchicalGenerator(build_client(llm, cache), llm, CodegenParams(**codegen))


# --------------------------------------------------------------------------------------------------------- offline


def test_offline_baseline_solves_the_eight_benchmark_tasks_with_passing_code():
    tasks = load_benchmark(load_catalog(), WorldsParams())
    llm = LLMParams(offline={"noise": 0.0})
    snippets = _generator(llm).generate(_jobs([(t.world.object_names(), t.instruction) for t in tasks]))
    for task, snippet in zip(tasks, snippets, strict=True):
        assert snippet.verdict.ok, (task.id, snippet.verdict.messages(), snippet.notes)
    helpers = {t.id: {h.name for h in s.helpers} for t, s in zip(tasks, snippets, strict=True)}
    assert helpers["Simple_0"] == set()  # a plain pick and place is written inline
    assert {"open_drawer", "is_box", "pick_and_place", "is_receptacle"} == helpers["Moderate_0"]
    assert max(s.max_depth for s in snippets) == 2  # is_box -> is_receptacle
    assert "cabinet.drawer_1" in snippets[tasks.index(next(t for t in tasks if t.id == "Moderate_2"))].main_code


def test_offline_noise_gives_failures_with_reasons_and_passing_code_otherwise():
    catalog = load_catalog()
    from tasks.roboscript.worlds import sample_world

    pairs = []
    for i in range(6):
        world = sample_world(i, catalog, WorldsParams())
        objects = world.object_names()
        loose = [m.name for m in world.models if m.kind == "object" and m.parent == "table"]
        target = next(m.name for m in world.models if m.kind == "container")
        pairs += [(objects, f"Place the {o.replace('_', ' ')} into the {target.replace('_', ' ')}.") for o in loose]
    snippets = _generator(LLMParams(offline={"noise": 0.5})).generate(_jobs(pairs))
    rows, _ = to_records(snippets)
    failing = [r for r in rows if not r.ok]
    assert failing and len(failing) < len(rows)
    assert {c for r in failing for c in r.reason_codes} <= {"unknown_keyword", "wrong_arity", "forbidden_import",
                                                              "not_code", "unknown_function"}
    assert all(r.reasons for r in failing)


def test_instruction_naming_an_object_that_is_not_there_gets_a_prose_reply_and_fails():
    llm = LLMParams(offline={"noise": 0.0})
    job = (["table", "apple", "grey_bowl"], "Put the teapot into the grey bowl.")
    snippet = _generator(llm).generate(_jobs([job]))[0]
    assert not snippet.verdict.ok and snippet.verdict.codes == ("not_code",)
    assert "teapot" in snippet.main.text and snippet.helpers == []


def test_extract_code_takes_fenced_blocks_or_everything():
    assert extract_code("Here:\n```python\nx = 1\n```\nand\n```\ny = 2\n```") == "x = 1\n\ny = 2"
    assert extract_code("x = 1\ny = 2\n") == "x = 1\ny = 2"
    assert extract_code("```py\nx = 1") == "x = 1"  # an unclosed fence (a reply cut off)


def test_sub_agent_example_calls_are_dropped_from_helper_code():
    from tasks.roboscript.codegen import definitions_only

    code, dropped = definitions_only("def f(x):\n    # double it\n    return 2 * x\n\n# Example:\nprint(f(2))\n"
                                     "y = f(3)\n")
    assert code == "def f(x):\n    # double it\n    return 2 * x" and dropped == 2
    assert definitions_only("no code here") == ("no code here", 0)


def test_prompts_follow_the_papers_three_sections():
    messages = main_messages("objects = [table, apple]\nTask: Pick up the apple.", n_examples=10)
    assert messages[0]["role"] == "system" and "def grasp(grasp_pose: Pose) -> bool:" in messages[0]["content"]
    assert [m["role"] for m in messages[1:21]] == ["user", "assistant"] * 10
    assert messages[-1]["content"].endswith("Task: Pick up the apple.")
    assert len(main_messages("q", n_examples=3)) == 1 + 6 + 1
    sub = sub_messages("is_fruit", "fruits = [n for n in names if is_fruit(n)]")
    assert sub[0]["content"].startswith(SUB_MARK)
    assert sub[-1]["content"].endswith("    fruits = [n for n in names if is_fruit(n)]")


# --------------------------------------------------------------------------------------------------------- server

MAIN_CODE = """# Count the fruits first, then move each one.
detect_objects()
for name in get_object_name_list():
    if is_fruit(name):
        place_on_plate(name, 'white_plate')
"""
DEFINITIONS = {
    "is_fruit": "def is_fruit(name):\n    return name.split('_')[-1] in ['apple', 'banana']",
    "place_on_plate": ("```python\ndef place_on_plate(object_name, plate_name):\n    open_gripper()\n"
                       "    grasp(parse_adaptive_shape_grasp_pose(object_name=object_name))\n    close_gripper()\n"
                       "    attach_object(object_name)\n    lift_a_little()\n"
                       "    move_to_pose(parse_place_pose(object_name=object_name, receptacle_name=plate_name))\n"
                       "    open_gripper()\n    detach_object(object_name)\n```"),
    "lift_a_little": ("def lift_a_little():\n    move_in_direction(np.array([0.0, 0.0, 1.0]), distance=0.05)\n\n"
                      "# Example usage:\nlift_a_little()"),
}
_WANTED = re.compile(r"Define the function `(\w+)`")


def _answer_from(definitions: dict[str, str], main: str):
    def answer(body):
        user = last_user_message(body)
        wanted = _WANTED.search(user)
        if wanted is None:
            return ok(main)
        return ok(definitions.get(wanted.group(1), f"I cannot define {wanted.group(1)}."))
    return answer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with running_server(handler_delay_s=0.0) as srv:
        yield srv


def _llm(server: FakeOpenAIServer) -> LLMParams:
    return LLMParams(backend="openai", model="test-model", base_url=server.base_url, max_retries=0, concurrency=2)


JOB = (["table", "apple", "banana", "white_plate"], "Put all fruits onto the white plate.")


@pytest.mark.network
def test_sub_agent_fills_in_undefined_helpers_recursively(server, tmp_path):
    server.default = _answer_from(DEFINITIONS, MAIN_CODE)
    snippet = _generator(_llm(server), tmp_path / "cache").generate(_jobs([JOB]))[0]
    assert snippet.verdict.ok, snippet.verdict.messages()
    assert [(h.name, h.depth) for h in snippet.helpers] == [("is_fruit", 1), ("place_on_plate", 1),
                                                          ("lift_a_little", 2)]
    code = snippet.assembled()
    assert code.index("def lift_a_little") < code.index("def is_fruit") < code.index("detect_objects()")
    assert "Example usage" not in code and code.count("lift_a_little()") == 2  # def + the real call, no example
    assert snippet.notes == [("subagent_extra_statements", "answer for 'lift_a_little': 1 top-level statement(s) "
                                                            "dropped")]
    # What the sub-agent was sent: its own system prompt, the name and the calling line as context.
    bodies = server.bodies
    assert len(bodies) == 4
    sub_bodies = [b for b in bodies if b["messages"][0]["content"].startswith(SUB_MARK)]
    assert len(sub_bodies) == 3
    asked = {_WANTED.search(last_user_message(b)).group(1): last_user_message(b) for b in sub_bodies}
    assert "        place_on_plate(name, 'white_plate')".strip() in asked["place_on_plate"]
    assert "lift_a_little()" in asked["lift_a_little"]
    rows, helpers = to_records([snippet])
    assert rows[0].helper_names == ["is_fruit", "place_on_plate", "lift_a_little"]
    assert rows[0].helper_depths == [1, 1, 2] and rows[0].max_helper_depth == 2 and rows[0].backend == "openai"


@pytest.mark.network
def test_rerun_hits_the_cache(server, tmp_path):
    server.default = _answer_from(DEFINITIONS, MAIN_CODE)
    first = _generator(_llm(server), tmp_path / "cache").generate(_jobs([JOB]))[0]
    calls = server.calls
    generator = _generator(_llm(server), tmp_path / "cache")
    again = generator.generate(_jobs([JOB]))[0]
    assert server.calls == calls == 4
    assert generator.client.calls == 0 and generator.client.cache_hits == 4
    assert again.assembled() == first.assembled() and again.verdict == first.verdict


@pytest.mark.network
def test_endless_chain_of_undefined_helpers_stops_at_the_depth_bound(server, tmp_path):
    def delegate(body):
        wanted = _WANTED.search(last_user_message(body))
        if wanted is None:
            return ok("# Do it.\nstep_1()")
        depth = int(wanted.group(1).split("_")[1])
        return ok(f"def step_{depth}():\n    step_{depth + 1}()")

    server.default = delegate
    snippet = _generator(_llm(server), tmp_path / "cache", max_depth=3).generate(_jobs([JOB]))[0]
    assert server.calls == 1 + 3
    assert [h.name for h in snippet.helpers] == ["step_1", "step_2", "step_3"]
    assert not snippet.verdict.ok and snippet.verdict.codes == ("unknown_function",)
    assert "'step_4'" in snippet.verdict.reasons[0].message
    assert snippet.notes == [("helper_depth_exceeded", "'step_4' would be at depth 4, the bound is 3")]


@pytest.mark.network
def test_helper_budget_bounds_the_requests(server, tmp_path):
    main = "\n".join(f"helper_{i}()" for i in range(6))
    server.default = _answer_from({f"helper_{i}": f"def helper_{i}():\n    open_gripper()" for i in range(6)}, main)
    snippet = _generator(_llm(server), tmp_path / "cache", max_helpers=4).generate(_jobs([JOB]))[0]
    assert server.calls == 1 + 4
    assert [code for code, _ in snippet.notes] == ["helper_budget_exceeded"] * 2
    assert not snippet.verdict.ok and snippet.verdict.codes == ("unknown_function",)


@pytest.mark.network
def test_prose_hallucinated_tool_and_missing_definition(server, tmp_path):
    replies = {
        "Explain": "I would first look at the table, then pick up each fruit and put it on the plate.",
        "Hallucinate": "detect_objects()\nteleport_object('apple', 'white_plate')",
        "Mismatch": "detect_objects()\nsort_fruits()",
    }

    def answer(body):
        user = last_user_message(body)
        wanted = _WANTED.search(user)
        if wanted is None:
            return ok(next(v for k, v in replies.items() if k in user))
        if wanted.group(1) == "teleport_object":
            return ok("Teleporting is not something a robot arm can do.")
        return ok("def sort_items():\n    pass")

    server.default = answer
    jobs = _jobs([(JOB[0], "Explain the task."), (JOB[0], "Hallucinate the task."), (JOB[0], "Mismatch the task.")])
    prose, tool, mismatch = _generator(_llm(server), tmp_path / "cache").generate(jobs)
    assert prose.verdict.codes == ("not_code",) and prose.helpers == []
    assert tool.verdict.codes == ("unknown_function",) and "teleport_object" in tool.verdict.reasons[0].message
    assert tool.notes[0][0] == "subagent_not_code"
    assert mismatch.verdict.codes == ("unknown_function",)
    assert mismatch.notes[0][0] == "subagent_missing_definition" and "sort_items" in mismatch.notes[0][1]
    assert "def sort_items" not in mismatch.assembled()  # an answer that does not define the helper is left out
