"""The sandbox's second round (issue #33), one class at a time: attributes decided by the receiver's real type, one
text cleaner, a check that cannot be crashed, statuses that cannot be laundered, one wire schema for both ends
(property-based), and signatures of builtins, numpy functions and methods taken from the objects.

The hostile snippets of each class are in tests/sandbox_corpus.py (kinds ``str-subclass``, ``checker``,
``laundering``, ``wire``, ``output``) and run in tests/test_robot_sandbox_hostile.py; this file checks the mechanisms
themselves, with more than one example each.
"""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
import sandbox_corpus as corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot import sandbox
from robot.contract import signatures
from robot.contract.code_policy import DEFAULT_POLICY, check_snippet
from robot.contract.restricted import PlainValues, SafeFormat, SandboxViolation
from robot.contract.tool_api import VALUE_CLASSES, Point, Pose, Quaternion
from robot.errors import ToolArgumentError
from robot.sandbox import Limits, child, run_code, wire
from tasks.roboscript.codegen import definitions_only

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::RuntimeWarning")
LIMITS = Limits(timeout_s=3.0, memory_mb=256)
FAR = "move_to_pose(parse_place_pose('apple', position=np.array([2.0, 0.0, 1.0])))"


@pytest.fixture(scope="module")
def host():
    return sandbox.host_for()


def _guarded(code: str) -> list[str]:
    """Run ``code`` in-process with the guards (no sandbox): what it printed."""
    printed: list[str] = []
    namespace = DEFAULT_POLICY.runtime_globals({}, print_fn=lambda *a, **k: printed.append(" ".join(map(str, a))))
    exec(DEFAULT_POLICY.compile(code), namespace)  # noqa: S102 - restricted code object, guarded globals
    return printed


# ------------------------------------------------------------------------- 1. attributes by the real type


@pytest.mark.parametrize("make", [
    lambda: np.array(["{0.real}"])[0],  # numpy's str_
    lambda: np.str_("{0[0]}"),
    lambda: np.array(["{0:{1.real}}"])[0],
])
def test_every_str_like_receiver_gets_the_safe_format(make):
    value = make()
    assert isinstance(value, str) and type(value) is not str
    plain = PlainValues(DEFAULT_POLICY.methods | DEFAULT_POLICY.attributes, frozenset())
    assert plain.allows(type(value), "format") is True
    namespace = DEFAULT_POLICY.runtime_globals({})
    fmt = namespace["_getattr_"](value, "format")
    assert type(fmt) is SafeFormat
    with pytest.raises(ValueError, match="attribute and index lookups"):
        fmt(1.0, 2.0)


def test_a_subclass_exposes_only_its_plain_kinds_own_attributes():
    names = DEFAULT_POLICY.methods | DEFAULT_POLICY.attributes
    plain = PlainValues(names, frozenset())

    class Inherits(list):
        pass

    class Overrides(str):
        def upper(self):  # a subclass's own method is not the one the policy listed
            return "x"

    assert plain.allows(Inherits, "append") is True
    assert plain.allows(Overrides, "upper") is False and plain.allows(Overrides, "lower") is True
    assert plain.allows(type(lambda: 0), "append") is None and plain.allows(type, "mro") is None
    assert plain.allows(np.float64, "item") and plain.allows(np.float64, "real")  # generic's and float's own
    assert plain.allows(np.str_, "split") and plain.allows(np.str_, "tolist")
    assert plain.allows(str, "format_map") is False and plain.allows(np.str_, "format_map") is False
    for cls in (np.float64, np.int64, np.bool_, np.str_, np.ndarray, str, bytes, dict, list, type({}.items())):
        for name in dir(cls):
            if plain.allows(cls, name):
                assert name in names, (cls, name)  # no allowed value exposes a name the policy did not list


def test_str_like_values_still_work_like_python():
    assert _guarded("s = np.array(['apple bowl'])[0]\nprint(s.split(), s.upper(), s[0], '{}!'.format(s))\n"
                    "print(f'{s:>12}|', '%s-%d' % (s, 2), np.array([b'ab'])[0].upper())") == [
        "['apple', 'bowl'] APPLE BOWL a apple bowl!", "  apple bowl| apple bowl-2 b'AB'"]
    with pytest.raises(SandboxViolation, match="attributes of a"):
        _guarded("d = np.array(['x']).dtype\nt = d.type")


# ------------------------------------------------------------------------------------ 2. one text cleaner


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=15, max_value=300))
def test_the_cleaner_gives_valid_capped_printable_text(text, limit):
    out = wire.clip(text, limit)
    assert len(out) <= limit
    out.encode("utf-8")
    assert json.loads(json.dumps(out, ensure_ascii=False)) == out
    assert all((c.isprintable() and c not in wire._BIDI) or c in "\n\t" for c in out)
    if len(text) <= limit and all(c.isprintable() and c not in wire._BIDI or c in "\n\t" for c in text):
        assert out == text


def test_the_cleaner_escapes_what_terminals_and_encoders_trip_on():
    assert wire.clip("a\udc80b\x1b[2J\x00\r\u202e\u2066\x7f\x85") == \
        "a\\udc80b\\x1b[2J\\x00\\x0d\\u202e\\u2066\\x7f\\x85"
    assert wire.clip("line\n\ttab") == "line\n\ttab"
    clipped = wire.clip("\x00" * 1000, 50)
    assert clipped.endswith(wire.CLIPPED) and len(clipped) <= 50 and "\\x00\\x0" not in clipped[-20:-14]


def test_everything_a_snippet_makes_the_runner_store_is_clean_and_round_trips(host):
    for code, field, expected in (
            ("print('a\\udc80b\\x1b[2J\\x00\\r\\u202e')\n", "stdout", "a\\udc80b\\x1b[2J\\x00\\x0d\\u202e\n"),
            ("print('\\udc80' * 5000)\n", "stdout", None),
            ("raise ValueError('\\udcff\\x1b]0;x\\x07')\n", "error", "ValueError: \\udcff\\x1b]0;x\\x07 (line 1)"),
            ("raise KeyError('\\u202e')\n", "error", "KeyError: '\\u202e' (line 1)"),
            ("get_object_center_position('\\x1b[31m\\udc80')\n", "error", "\\x1b[31m\\udc80")):
        outcome = run_code(code, corpus.FakeRobot(), LIMITS, host=host)
        text = getattr(outcome, field)
        if expected is not None:
            assert expected in text, (code, text)
        stored = json.dumps(outcome.as_dict(), ensure_ascii=False).encode("utf-8")  # what the result store writes
        assert json.loads(stored) == outcome.as_dict()
        assert len(outcome.stdout) <= wire.MAX_STDOUT and len(outcome.error or "") <= wire.MAX_TEXT


def test_tool_argument_echoes_in_the_step_records_are_clean(host):
    steps: list[dict] = []
    run_code("try:\n    get_object_center_position('\\udc80\\x1b')\nexcept Exception:\n    pass\n",
             corpus.FakeRobot(), LIMITS, on_step=steps.append, host=host)
    assert "\\udc80\\x1b" in steps[0]["error"]
    json.dumps(steps).encode("utf-8")


# ----------------------------------------------------------------------------- 3. a check that cannot crash

NASTY = [
    "x = " + "(" * 1000 + ")" * 1000, "x = " + "[" * 99 + "]" * 99, "x = {" * 200, "x = " + "1*" * 60_000 + "1",
    "f = " + "lambda: " * 2000 + "0", "x = " + "not " * 3000 + "1", "x = " + "a." * 5000 + "b",
    "x = " + "a[0]" * 3000, "x = " + "f(" * 90 + ")" * 90, "x = 1\n" * 40_000, "x = '\x00'", "\x00",
    "if 1:\n" + "".join(" " * i + "if 1:\n" for i in range(1, 200)), "x = '" + "a" * 99_000 + "'",
    "def f(a, " + ", ".join(f"a{i}" for i in range(5000)) + "):\n    pass", "x = (" + "1, " * 30_000 + ")",
    "\ufeffx = 1", "x = 1 if " * 500 + "1" + " else 1" * 500, "print(" + "'a' " * 15000 + ")",
]


@pytest.mark.parametrize("code", NASTY, ids=range(len(NASTY)))
def test_the_check_refuses_instead_of_crashing(code):
    verdict = check_snippet(code)
    if not verdict.ok:
        assert verdict.codes[0] in ("too_complex", "syntax_error", "not_code", "restricted", "undefined_name"), \
            verdict.messages()
    DEFAULT_POLICY.undefined_calls(code)
    DEFAULT_POLICY.defined_functions(code)
    definitions_only(code)  # code generation's own parse of a sub-agent's answer


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["(", ")", "[", "]", "lambda: ", "not ", "-", "x", "1", "+", ",", ":", "\n", " ",
                                 "if ", "else ", "f(", "'", "{", "}", ".a", "\\", "\x00", "def f():\n "]),
                max_size=400))
def test_the_check_never_raises_on_any_token_soup(parts):
    code = "".join(parts) * 50
    verdict = check_snippet(code)
    assert verdict.ok or verdict.codes


def test_the_runner_refuses_what_the_check_cannot_finish(host):
    outcome = run_code("x = " + "[" * 500 + "]" * 500, corpus.FakeRobot(), LIMITS, host=host)
    assert outcome.status == "refused" and outcome.reasons == ["too_complex"]


# ------------------------------------------------------------------------------- 4. statuses not laundered


@pytest.mark.parametrize("code, status", [
    (f"{FAR}\n", "robot_error"),
    (f"def go():\n    {FAR}\ngo()\n", "robot_error"),  # through a function of the snippet: still the answer
    (f"try:\n    {FAR}\nfinally:\n    open_gripper()\n", "robot_error"),  # finally handles nothing
    (f"try:\n    {FAR}\nexcept ValueError:\n    pass\n", "robot_error"),  # a handler that did not match
    (f"try:\n    {FAR}\nexcept Exception as e:\n    err = e\nopen_gripper()\nraise err\n", "code_error"),
    (f"try:\n    {FAR}\nexcept Exception:\n    raise\n", "code_error"),
    (f"try:\n    {FAR}\nexcept Exception as e:\n    raise e from None\n", "code_error"),
    (f"errs = []\ntry:\n    {FAR}\nexcept Exception as e:\n    errs.append(e)\nfor e in errs:\n    raise e\n",
     "code_error"),
    (f"try:\n    {FAR}\nexcept Exception as e:\n    pass\n{FAR}\n", "robot_error"),  # a new answer, uncaught
])
def test_robot_error_only_when_the_answer_itself_ended_the_code(code, status, host):
    outcome = run_code(code, corpus.FakeRobot(), LIMITS, host=host)
    assert outcome.status == status, (outcome.status, outcome.error)
    assert "WorkspaceError" in outcome.error


# ---------------------------------------------------------------------------------------- 5. one schema

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.floats(), st.text(max_size=8),
    st.integers(-5, 5).map(np.int64), st.floats(width=32).map(np.float64), st.booleans().map(np.bool_),
    st.text(max_size=4).map(np.str_), st.integers(0, 2 ** 64 - 1).map(np.uint64), st.floats().map(np.float32),
    st.sampled_from([np.float16(1.5), np.complex128(1j), np.datetime64("2020-01-01"), b"x", 1j, len, Ellipsis]))
_keys = st.one_of(_scalars.filter(lambda v: _hashes(v)), st.tuples(st.integers(), st.text(max_size=3)),
                  st.frozensets(st.integers(), max_size=3))
_arrays = st.one_of(
    st.lists(st.floats(), max_size=6).map(np.array),
    st.lists(st.integers(-(2 ** 62), 2 ** 62), max_size=6).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.text(max_size=3), max_size=4).map(np.array),
    st.sampled_from([np.zeros((2, 0, 3)), np.zeros((0, 600_000)), np.zeros((1,) * 9), np.array([object()]),
                     np.array([1 + 2j]), np.array(np.uint64(2 ** 64 - 1))]))
_values = st.recursive(
    st.one_of(_scalars, _arrays, st.builds(Point, st.floats(), st.floats(), st.floats()),
              st.builds(Pose)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(_keys, inner, max_size=3), st.sets(_keys, max_size=3),
                            st.frozensets(_keys, max_size=3)),
    max_leaves=12)


def _hashes(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


class _Channel:
    """The child's end of the channel, for a Harness outside a sandbox: records what would be sent, answers each
    call with its own (decoded) arguments."""

    def __init__(self):
        self.sent: list[bytes] = []

    def send(self, message: dict) -> None:
        self.sent.append(wire.dumps(message))

    def receive(self) -> dict:
        call = wire.loads(self.sent[-1].rstrip(b"\n"), "child")
        return {"t": "result", "id": call["id"], "value": None}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_what_the_child_sends_the_runner_accepts_and_the_rest_is_a_catchable_tool_argument_error(value):
    harness = child.Harness(_Channel(), 100)
    runner_codec = wire.Codec(VALUE_CLASSES)
    try:
        harness.call("detect_objects", (value,), {"object_list": value})
    except ToolArgumentError as exc:  # refused in the child: what the snippet's `except Exception` catches
        assert str(exc).startswith("detect_objects: ") and len(str(exc)) <= 500
        assert not harness.channel.sent
        return
    message = wire.loads(harness.channel.sent[-1].rstrip(b"\n"), "child")  # the runner's schema check
    args = [runner_codec.decode(a) for a in message["args"]]
    kwargs = {k: runner_codec.decode(v) for k, v in message["kwargs"].items()}
    assert _same(args[0], value) and _same(kwargs["object_list"], value)


def _same(back, value) -> bool:
    """Equal as data (a NaN equals a NaN; numpy values by dtype kind and content)."""
    if isinstance(value, np.ndarray):
        return isinstance(back, np.ndarray) and back.shape == value.shape and \
            np.array_equal(back.astype(object), value.astype(object)) or \
            (back.dtype.kind == "f" and np.array_equal(back, value, equal_nan=True))
    if isinstance(value, float) and math.isnan(value):
        return isinstance(back, float) and math.isnan(back)
    if isinstance(value, (list, tuple)):
        return type(back) is type(value) and len(back) == len(value) and all(map(_same, back, value))
    if isinstance(value, dict):
        return type(back) is dict and len(back) == len(value)
    if isinstance(value, (set, frozenset)):
        return type(back) is type(value) and len(back) == len(value)
    return bool(back == value) or repr(back) == repr(value) or (_nan(back) and _nan(value))


def _nan(v) -> bool:
    try:
        return bool(np.isnan(v))
    except TypeError:
        return False


def test_the_values_that_once_crashed_the_runner_now_cross(host):
    codec = wire.Codec(VALUE_CLASSES)
    for value in ({np.int64(1): "a"}, {np.str_("k"): 1}, {frozenset({1}): 2}, {(np.float64(1.5), 2): None},
                  {frozenset({1, 2})}, np.zeros((2, 0))):
        back = codec.decode(json.loads(wire.dumps({"v": codec.encode(value)}))["v"])
        assert type(back) is type(value)
    for value in (np.zeros((0, 600_000)), np.zeros((1,) * 9), {np.array([1]).tobytes(): 1}):
        with pytest.raises(wire.ProtocolError):
            codec.encode(value)


# ----------------------------------------------------------------------------------------- 6. signatures

ACCEPTED = [
    "it = [1, 2]\nx = next((v for v in it if v > 1), None)", "x = sorted([3, 1], key=lambda v: -v, reverse=True)",
    "x = round(1.234, 2)", "x = min(1, 2, key=abs)", "x = max([1, 2], default=0)", "d = {}\nx = d.get('k', 0)",
    "x = 'a b c'.split(' ', 1)", "x = 'a b'.split(sep=' ', maxsplit=1)", "x = range(1, 10, 2)",
    "x = enumerate([1], start=1)", "x = int('11', base=2)", "x = zip([1], [2], strict=True)", "x = dict(a=1)",
    "x = list(map(abs, [1], ))", "x = sum([1.0], 0.0)", "x = isinstance(1, (int, float))", "e = ValueError('x', 1)",
    "x = np.array([1.0, 2.0]).reshape(1, 2)", "x = np.array([1.0]).reshape((1, 1))",
    "x = np.linalg.norm([1, 2], ord=2)",
    "x = np.clip([1.0], 0.0, 0.5)", "x = np.round(1.234, 2)", "x = np.cos(0.5)", "x = np.arctan2(1.0, 2.0)",
    "x = np.linspace(0, 1, num=5)", "x = np.concatenate([[1], [2]], axis=0)", "x = np.array([1, 2]).mean(axis=0)",
    "x = [3, 1]\nx.sort(key=abs, reverse=True)", "x = [1]\ny = x.pop()", "x = {'a': 1}\ny = x.pop('a', None)",
    "x = 'ab'.strip('a')", "x = ','.join(['a'])", "x = 'x'.replace('x', 'y', 1)", "p = Pose()\nq = p.copy()"
    if "copy" in DEFAULT_POLICY.value_methods else "p = Pose()",
    "x = print('a', 'b', sep='-', end='')", "q = Pose(Point(1.0, 2.0, 3.0), Quaternion(0, 0, 0, 1))",
]
REFUSED = [
    ("x = len([1], [2])", "wrong_arity"), ("x = abs()", "wrong_arity"), ("x = sorted([1], lambda v: v)", "wrong_arity"),
    ("x = round(1.0, ndigit=2)", "unknown_keyword"), ("x = next()", "wrong_arity"),
    ("x = np.linalg.norm([1], order=2)", "unknown_keyword"), ("x = np.cos(1.0, 2.0, 3.0)", "wrong_arity"),
    ("x = [1]\nx.append(1, 2)", "wrong_arity"), ("x = 'a'.split(separator=' ')", "unknown_keyword"),
]


@pytest.mark.parametrize("code", ACCEPTED)
def test_calls_python_accepts_pass_the_check_and_run(code):
    assert check_snippet(code).ok, check_snippet(code).messages()
    _guarded(code)


@pytest.mark.parametrize("code, reason", REFUSED)
def test_calls_python_refuses_are_refused_for_the_right_reason(code, reason):
    assert check_snippet(code).codes == (reason,), check_snippet(code).messages()
    with pytest.raises(TypeError):
        _guarded(code)


#: per fallback stub: calls Python accepts, and calls it refuses for their arity or keywords
STUB_CALLS = {
    "next": ([(iter([1]),), (iter([]), 0)], [(), (iter([1]), 0, 1)]),
    "iter": ([([1],), (lambda: 1, 1)], [(), ([1], 1, 2)]),
    "min": ([([1],), (1, 2), (1, 2, 3)], []), "max": ([([1],), (1, 2)], []),
    "range": ([(3,), (1, 3), (1, 3, 1)], [(), (1, 2, 3, 4)]),
    "dict": ([(), ({},), ([("a", 1)],)], [({}, {})]),
    "zip": ([(), ([1],), ([1], [2], [3])], []), "map": ([(abs, [1]), (pow, [1], [2])], [(abs,)]),
    "filter": ([(None, [1]),], [(None,), (None, [1], [2])]), "int": ([(), ("1",), ("11", 2)], [("1", 2, 3)]),
    "str": ([(), (1,), (b"a", "utf-8"), (b"a", "utf-8", "strict")], [(b"a", "utf-8", "strict", 1)]),
    "set": ([(), ([1],)], [([1], [2])]), "bool": ([(), (1,)], [(1, 2)]),
}
STUB_KEYWORDS = {"min": ({"key": abs}, {"default": 0}), "max": ({"key": abs}, {"default": 0}),
                 "zip": ({"strict": True},), "int": ({"base": 2},), "dict": ({"a": 1},)}


@pytest.mark.parametrize("name", sorted(signatures.FALLBACK))
def test_each_fallback_stub_agrees_with_the_builtin(name):
    import builtins

    real = getattr(builtins, name)
    with pytest.raises(ValueError):
        inspect.signature(real)  # the table is only for builtins inspect cannot read
    stub = inspect.signature(signatures.FALLBACK[name])
    accepted, refused = STUB_CALLS[name]
    for args in accepted:
        real(*args)
        stub.bind(*args)
    for args in refused:
        with pytest.raises(TypeError):
            real(*args)
        with pytest.raises(TypeError):
            stub.bind(*args)
    for kwargs in STUB_KEYWORDS.get(name, ()):
        args = ("11",) if name == "int" else ([1],) if name in ("min", "max") else ()
        real(*args, **kwargs)
        stub.bind(*args, **kwargs)
    with pytest.raises(TypeError):
        stub.bind(bogus_keyword=1) if name not in ("dict",) else stub.bind({}, {}, {})


def test_every_allowed_callable_has_a_signature_or_is_left_unchecked_on_purpose():
    sigs = DEFAULT_POLICY.call_signatures
    for name in DEFAULT_POLICY.builtins:
        assert name in sigs, f"builtin {name} has no signature (inspect or FALLBACK)"
    for dotted in DEFAULT_POLICY.modules["np"]:
        assert f"np.{dotted}" in sigs or dotted in ("pi", "inf"), dotted
    checked = DEFAULT_POLICY.method_signatures
    assert {"append", "extend", "get", "reshape", "tolist", "sort", "item"} <= set(checked)
    receivers = (*signatures._RECEIVERS, np.zeros(1), np.float64(0), np.int64(0), np.bool_(False), np.str_(""))
    for name in (DEFAULT_POLICY.methods | DEFAULT_POLICY.value_methods) - set(checked):
        # left unchecked only because some receiver's method has no signature Python can tell
        assert any(signatures.signature_of(getattr(r, name)) is None for r in receivers if hasattr(r, name)), name
