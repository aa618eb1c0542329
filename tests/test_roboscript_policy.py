"""Tool API and code policy: the tool specs and the prompt's tool docs come from ToolAPI alone; the checker accepts
the ten few-shot examples and rejects a corpus of bad snippets, each for the right reason and line."""

from __future__ import annotations

import inspect

import pytest

from robot.contract.code_policy import (
    DEFAULT_POLICY,
    REASON_CODES,
    CodePolicy,
    Reason,
    check_snippet,
)
from robot.contract.tool_api import TOOL_SPECS, ToolAPI, tool_docs
from tasks.roboscript.code_prompts import (
    load_examples,
    main_system_prompt,
    sub_system_prompt,
)

PAPER_TOOLS = {
    "get_object_name_list", "get_object_center_position", "get_object_pose", "get_3d_bbox",
    "parse_adaptive_shape_grasp_pose", "parse_central_lift_grasp_pose", "parse_horizontal_grasp_pose",
    "detect_objects", "get_object_joint_info", "get_plane_normal", "attach_object", "detach_object", "open_gripper",
    "close_gripper", "move_to_pose", "move_in_direction", "generate_arc_path_around_joint", "follow_path",
    "get_gripper_pose", "grasp", "parse_place_pose", "reset_to_default_pose",
}


def test_tool_specs_are_derived_from_the_abstract_api():
    assert set(TOOL_SPECS) == PAPER_TOOLS
    abstract = {name for name in ToolAPI.__abstractmethods__}
    assert abstract == set(TOOL_SPECS)
    for name, spec in TOOL_SPECS.items():
        params = list(inspect.signature(getattr(ToolAPI, name)).parameters)[1:]
        assert list(spec.param_names) == params
        assert spec.doc and spec.group in ("perception", "motion")
    assert TOOL_SPECS["get_object_joint_info"].n_required == 2
    assert TOOL_SPECS["parse_place_pose"].param_names == ("object_name", "receptacle_name", "position")
    with pytest.raises(TypeError):
        ToolAPI()  # abstract: a robot backend must implement every tool


def test_prompts_document_every_tool_from_the_single_source():
    docs = tool_docs()
    for spec in TOOL_SPECS.values():
        assert f"def {spec.signature()}:" in docs
        assert spec.doc.splitlines()[0] in docs
    assert docs in main_system_prompt() and docs in sub_system_prompt()


def test_a_backend_implementing_every_tool_can_run_in_the_sandbox_namespace():
    calls = []

    class Recorder(ToolAPI):
        pass

    for name in TOOL_SPECS:
        setattr(Recorder, name, lambda self, *a, _n=name, **k: calls.append(_n))
    Recorder.__abstractmethods__ = frozenset()
    namespace = DEFAULT_POLICY.namespace(Recorder())
    assert set(namespace["__builtins__"]) == set(DEFAULT_POLICY.builtins)
    code = load_examples()[0].assembled()
    assert check_snippet(code).ok
    exec(compile(code, "<snippet>", "exec"), namespace)  # noqa: S102 - checked snippet, recording backend
    assert calls[0] == "detect_objects" and "grasp" in calls and calls[-1] == "reset_to_default_pose"
    with pytest.raises(NameError):
        exec("open('/etc/passwd')", DEFAULT_POLICY.namespace(Recorder()))  # noqa: S102 - the sandbox has no open
    # np is the allow-listed view of numpy, the same list the static check uses.
    np_view = namespace["np"]
    allowed = DEFAULT_POLICY.modules["np"]
    assert {n.partition(".")[0] for n in allowed} == set(vars(np_view))
    assert all(getattr(np_view, n.partition(".")[0]) is not None for n in allowed)
    assert not hasattr(np_view, "load") and not hasattr(np_view, "fromfile")
    assert not check_snippet("np.load('x')").ok


@pytest.mark.parametrize("index", range(10))
def test_the_ten_few_shot_examples_pass(index):
    examples = load_examples()
    assert len(examples) == 10
    verdict = check_snippet(examples[index].assembled())
    assert verdict.ok, verdict.messages()


BAD = [
    # hallucinated tools
    ("pick_up('apple')", "unknown_function", 1, "'pick_up' is neither a tool"),
    ("detect_objects()\ngrasp_pose = parse_top_grasp_pose('apple')", "unknown_function", 2, "parse_top_grasp_pose"),
    ("arm = get_gripper_pose()\narm.grasp(arm)", "unknown_method", 2, "tools are plain functions"),
    # signatures
    ("grasp()", "wrong_arity", 1, "missing required argument(s) grasp_pose"),
    ("move_in_direction(np.array([0, 0, 1]), 0.1, 0.5)", "wrong_arity", 1, "at most 2 positional"),
    ("open_gripper(1)", "wrong_arity", 1, "at most 0 positional"),
    ("parse_place_pose(object_name='apple', receptacle='bowl')", "unknown_keyword", 1, "no parameter 'receptacle'"),
    ("get_3d_bbox('a', object_name='a')", "wrong_arity", 1, "two values for argument 'object_name'"),
    ("args = ['a']\nget_3d_bbox(*args)", "unverifiable_call", 2, "unpacking"),
    ("def helper(a, b):\n    return a\nhelper(1)", "wrong_arity", 3, "function helper is missing"),
    # imports and escapes
    ("import os\nos.system('ls')", "forbidden_import", 1, "import of os"),
    ("from subprocess import run", "forbidden_import", 1, "import of run"),
    ("exec('print(1)')", "forbidden_name", 1, "'exec'"),
    ("x = eval('1 + 1')", "forbidden_name", 1, "'eval'"),
    ("f = open('/etc/passwd')", "forbidden_name", 1, "'open'"),
    ("m = __import__('os')", "forbidden_name", 1, "'__import__'"),
    ("g = getattr(np, 'load')", "forbidden_name", 1, "'getattr'"),
    ("x = ().__class__.__bases__[0].__subclasses__()", "dunder_access", 1, "__class__"),
    ("names = get_object_name_list()\nnames.__len__()", "dunder_access", 2, "__len__"),
    ("s = '{0.__class__}'.format(1)", "dunder_access", 1, "format string"),
    ("x = np._core", "private_access", 1, "_core"),
    ("y = np.random.rand(3)", "unknown_module_attribute", 1, "np.random.rand"),
    ("class Robot:\n    pass", "forbidden_statement", 1, "ClassDef"),
    ("def f():\n    global x\n    x = 1", "forbidden_statement", 2, "Global"),
    ("def f():\n    yield 1", "forbidden_statement", 2, "Yield"),
    ("(lambda: 1)()", "dynamic_call", 1, "Lambda"),
    ("def grasp(pose):\n    return pose", "shadows_tool", 1, "grasp"),
    ("np = None", "shadows_tool", 1, "'np'"),
    ("while True:\n    open_gripper()", "unbounded_loop", 1, "never ends"),
    ("print(target_position)", "undefined_name", 1, "'target_position'"),
    # what only the restricted compiler (the one the sandbox runs) refuses
    ("def helper(n):\n    return n\n@helper\ndef f():\n    pass", "restricted", 4, "Decorators"),
    ("_tmp = 1", "restricted", 1, "starts with \"_\""),
    ("g = (x for x in [1])\nframe = g.gi_frame", "restricted", 2, "gi_frame"),
    ("t = (x for x in [1]).gi_code", "restricted", 1, "gi_code"),
    ("with get_gripper_pose() as p:\n    pass", "restricted", 1, "with statements"),
    # not code at all
    ("I would detect the apple first.\nThen I grasp it and put it in the bowl.", "not_code", None, "prose"),
    ("def f(:\n    pass", "syntax_error", 1, ""),
    ("return 3", "syntax_error", 1, "outside function"),
    ("# only a comment\n", "empty", None, "only comments"),
    ("x = " + "(" * 60 + "1" + ")" * 60, "too_complex", None, "nested more than"),
    ("", "empty", None, "empty"),
]


@pytest.mark.parametrize(("code", "reason", "line", "words"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_snippets_are_rejected_for_the_right_reason(code, reason, line, words):
    verdict = check_snippet(code)
    assert not verdict.ok
    assert verdict.codes[0] == reason, verdict.messages()
    first = verdict.reasons[0]
    assert first.line == line and words in first.message
    assert str(first).startswith(reason)


def test_every_reason_code_is_exercised_by_the_corpus():
    used = {reason for _, reason, _, _ in BAD}
    assert used == set(REASON_CODES)


def test_a_snippet_with_several_problems_reports_all_of_them():
    verdict = check_snippet("import os\ngrasp()\npick_up('x')\nx = y.__dict__")
    assert set(verdict.codes) == {"forbidden_import", "wrong_arity", "unknown_function", "dunder_access",
                                  "undefined_name"}
    assert [r.line for r in verdict.reasons] == sorted(r.line for r in verdict.reasons)


def test_good_snippets_using_the_allowed_language_pass():
    code = """
items = sorted(get_object_name_list(), key=lambda n: len(n))
boxes = {name: get_3d_bbox(name).tolist() for name in items if name.endswith('bowl')}
for name, box in boxes.items():
    centre = np.array([(box[0] + box[3]) / 2, (box[1] + box[4]) / 2, box[5]])
    if np.linalg.norm(centre - get_object_center_position(name)) > 0.5:
        raise ValueError('perception disagrees')
try:
    pose = get_gripper_pose()
except RuntimeError as error:
    print(error)
count = 0
while True:
    count += 1
    if count > 3:
        break
"""
    verdict = check_snippet(code)
    assert verdict.ok, verdict.messages()


def test_policy_is_one_object_with_consistent_lists():
    assert isinstance(DEFAULT_POLICY, CodePolicy)
    assert not DEFAULT_POLICY.builtins & DEFAULT_POLICY.forbidden_names
    with pytest.raises(ValueError, match="both as allowed"):
        CodePolicy(builtins=DEFAULT_POLICY.builtins | {"eval"})
    with pytest.raises(ValueError, match="unknown reason code"):
        Reason("made_up", "x")
