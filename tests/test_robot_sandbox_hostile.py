"""The sandbox against hostile code (issue #14): a corpus of escapes, each refused by the static check or, if it runs,
ended by a guard or a limit with nothing outside the sandbox changed, no secret leaked, the runner alive and the right
status; unrestricted code in a confined child (what an escaped snippet could still do); children that forge protocol
messages; and the legitimate side -- the few-shot examples and generated-code styles behave exactly as plain Python.

Runs in the isolation the run's header names (conftest.py): bubblewrap where it works, else ``none``; the probes
state what each mode must show, so neither mode skips anything.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import sandbox_corpus as corpus

from robot import sandbox
from robot.contract.code_policy import DEFAULT_POLICY, CodePolicy
from robot.contract.restricted import SandboxViolation, compile_snippet
from robot.contract.tool_api import TOOL_SPECS, VALUE_CLASSES, Pose, value_fields
from robot.sandbox import Limits, SandboxHost, run_code, run_probe, wire
from tasks.roboscript.code_prompts import load_examples

REPO = Path(__file__).resolve().parent.parent
LIMITS = Limits(timeout_s=3.0, memory_mb=256)


@pytest.fixture(scope="module")
def paths():
    """A world-writable folder with a world-readable secret and a world-writable file: only the sandbox's layers,
    not file permissions, keep the code from them."""
    folder = Path(tempfile.mkdtemp(prefix="embp-sandbox-test-"))
    folder.chmod(0o777)
    secret, sentinel = folder / "secret.txt", folder / "sentinel.txt"
    secret.write_text(corpus.SECRET_TEXT)
    secret.chmod(0o644)
    os.environ[corpus.SECRET_ENV[0]] = corpus.SECRET_ENV[1]
    yield {"secret": str(secret), "sentinel": str(sentinel), "pwned": str(folder / "pwned"), "repo": str(REPO)}
    os.environ.pop(corpus.SECRET_ENV[0], None)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def untouched(paths):
    sentinel, pwned = Path(paths["sentinel"]), Path(paths["pwned"])
    sentinel.write_text(corpus.SENTINEL_TEXT)
    sentinel.chmod(0o666)
    pwned.unlink(missing_ok=True)
    yield
    assert sentinel.read_text() == corpus.SENTINEL_TEXT and (sentinel.stat().st_mode & 0o777) == 0o666, \
        "a host file was changed"
    assert not pwned.exists(), "a host file was created"
    assert Path(paths["secret"]).read_text() == corpus.SECRET_TEXT


@pytest.fixture(scope="module")
def host():
    return sandbox.host_for()


@pytest.fixture(scope="module")
def probe_host():
    h = SandboxHost(sandbox.default_mode(), allow_probe=True)
    h.start()
    yield h
    h.close()


def _no_leak(outcome) -> None:
    text = f"{outcome.stdout} {outcome.error} {outcome.reasons}"
    assert corpus.SECRET_TEXT not in text and corpus.SECRET_ENV[1] not in text
    assert len(outcome.error or "") <= wire.MAX_TEXT and len(outcome.stdout) <= wire.MAX_STDOUT


def _runner_alive(host: SandboxHost) -> None:
    again = run_code("x = 1", corpus.FakeRobot(), LIMITS, host=host)
    assert again.status == "ok", again


# ---------------------------------------------------------------------------------------------------- hostile


@pytest.mark.parametrize("case", corpus.HOSTILE, ids=[c.id for c in corpus.HOSTILE])
def test_hostile_snippet(case, host, paths):
    robot = corpus.FakeRobot()
    outcome = run_code(corpus.fill(case.code, **paths), robot, Limits(timeout_s=case.timeout_s, memory_mb=256),
                       host=host)
    assert outcome.status in case.expect, (outcome.status, outcome.error, outcome.reasons)
    assert outcome.isolation == sandbox.default_mode()
    if case.words:
        assert case.words in f"{outcome.error} {outcome.reasons}", outcome.error
    if outcome.status == "refused":
        assert robot.calls == []
    _no_leak(outcome)
    _runner_alive(host)


def test_the_corpus_covers_every_class_of_attack():
    kinds = {c.kind for c in corpus.HOSTILE}
    assert {"frames", "rebinding", "format", "classes", "decorators", "comprehensions", "walrus", "recursion",
            "bombs", "output", "files", "env", "protocol", "str-subclass", "checker", "laundering", "wire"} <= kinds
    assert len(corpus.HOSTILE) >= 30 and len(corpus.PROBES) >= 15 and len(corpus.FORGERY) >= 9


def test_the_escape_that_worked_before_passes_no_layer(host, paths):
    """The full frame-walk escape: refused statically; compiled by plain Python and run with the guards, the first
    generator attribute ends it."""
    code = corpus.fill(corpus.HOSTILE[0].code, **paths)
    assert "restricted" in DEFAULT_POLICY.check(code).codes
    assert compile_snippet(code)[0] is None
    namespace = DEFAULT_POLICY.runtime_globals({})
    with pytest.raises(SandboxViolation, match="attributes of a generator"):
        exec(compile(code.replace("g.gi_frame", "_getattr_(g, 'gi_frame')"), "<x>", "exec"), namespace)  # noqa: S102


# ------------------------------------------------------------------------------- what an escaped snippet can do


@pytest.mark.parametrize("name", list(corpus.PROBES))
def test_the_process_layer_confines_unrestricted_code(name, probe_host, paths):
    code, in_bwrap, in_none = corpus.PROBES[name]
    outcome = run_probe(corpus.fill(corpus.PROBE_HELPERS + code, **paths), probe_host)
    expected = in_bwrap if probe_host.mode == "bwrap" else in_none
    if name == "uid-is-nobody" and os.geteuid() != 0:
        expected = f"uid {os.getuid()} {os.getuid()}"  # not root: the child keeps the user's uid
    assert expected in outcome.stdout, (outcome.status, outcome.stdout, outcome.error)
    _no_leak(outcome)


@pytest.mark.parametrize("name", list(corpus.FORGERY))
def test_forged_protocol_messages_cannot_set_the_outcome(name, probe_host, paths):
    code, status, words = corpus.FORGERY[name]
    started = time.monotonic()
    outcome = run_probe(corpus.fill("import os\n" + code, **paths), probe_host, Limits(timeout_s=8))
    assert outcome.status == status, (outcome.status, outcome.error)
    assert words in (outcome.error or ""), outcome.error
    assert time.monotonic() - started < 4, "a violation must end the repeat at once, not at the time limit"
    _no_leak(outcome)
    assert run_code("x = 1", corpus.FakeRobot(), LIMITS, host=probe_host).status == "ok"


# --------------------------------------------------------------------------------------------- the legit side


def _plain(code: str) -> tuple[corpus.FakeRobot, str]:
    """What ``code`` does as plain Python against the fake robot: its calls and its printed output."""
    robot = corpus.FakeRobot()
    namespace = {"np": np, **{name: getattr(robot, name) for name in TOOL_SPECS}}
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(code, "<plain>", "exec"), namespace)  # noqa: S102 - trusted test code, fake robot
    return robot, out.getvalue()


@pytest.mark.parametrize("index", range(10))
def test_few_shot_examples_run_exactly_as_plain_python(index, host):
    code = load_examples()[index].assembled()
    plain, printed = _plain(code)
    boxed = corpus.FakeRobot()
    outcome = run_code(code, boxed, Limits(timeout_s=20), host=host)
    assert outcome.status == "ok", (outcome.error, outcome.reasons)
    assert boxed.calls == plain.calls and outcome.steps == len(plain.calls)
    assert outcome.stdout == printed


@pytest.mark.parametrize("name", list(corpus.LEGIT_STYLE))
def test_generated_code_styles_run_exactly_as_plain_python(name, host):
    code, expected = corpus.LEGIT_STYLE[name]
    plain, printed = _plain(code)
    boxed = corpus.FakeRobot()
    outcome = run_code(code, boxed, LIMITS, host=host)
    assert outcome.status == "ok", (outcome.error, outcome.reasons)
    assert boxed.calls == plain.calls and outcome.stdout == printed
    if expected is not None:
        assert outcome.stdout == expected


def test_every_allowed_numpy_name_is_exercised_by_the_styles():
    code = corpus.LEGIT_STYLE["every-allowed-numpy-name"][0]
    assert all(f"np.{name}" in code for name in DEFAULT_POLICY.modules["np"])


def test_statuses_are_decided_as_before(host):
    robot = corpus.FakeRobot()
    bad = run_code("p = get_object_center_position('unicorn')", robot, LIMITS, host=host)
    assert bad.status == "code_error" and "ToolArgumentError" in bad.error and "line 1" in bad.error
    crash = run_code("x = [1, 2][5]", robot, LIMITS, host=host)
    assert crash.status == "code_error" and "IndexError" in crash.error
    far = "move_to_pose(parse_place_pose('apple', position=np.array([2.0, 0.0, 1.0])))"
    out = run_code(far, robot, LIMITS, host=host)
    assert out.status == "robot_error" and not out.grammatical and "WorkspaceError" in out.error and "line 1" in out.error
    caught = run_code(f"try:\n    {far}\nexcept Exception:\n    print('handled')", robot, LIMITS, host=host)
    assert caught.status == "ok" and caught.stdout == "handled\n"
    rethrown = run_code(f"try:\n    {far}\nexcept Exception as e:\n    err = e\nopen_gripper()\nraise err", robot,
                        LIMITS, host=host)
    assert rethrown.status == "code_error" and "WorkspaceError" in rethrown.error  # caught, went on: laundered
    wrapped = run_code(f"try:\n    {far}\nexcept Exception as e:\n    raise ValueError('mine')", robot, LIMITS,
                       host=host)
    assert wrapped.status == "code_error" and "ValueError: mine" in wrapped.error


def test_a_tool_that_crashes_on_the_robot_side_is_a_robot_error_and_the_code_goes_on(host):
    class Broken(corpus.FakeRobot):
        def get_gripper_pose(self):
            raise ZeroDivisionError("inside the planner")

    outcome = run_code("try:\n    get_gripper_pose()\nexcept Exception as e:\n    print(str(e)[:24])\nopen_gripper()",
                       Broken(), LIMITS, host=host)
    assert outcome.status == "ok" and outcome.stdout == "get_gripper_pose failed \n" and outcome.steps == 2


# ------------------------------------------------------------------------------------------- the wire format


@dataclasses.dataclass
class GeoPoint:
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0


@dataclasses.dataclass
class GeoQuaternion:
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    w: float = 1.0


@dataclasses.dataclass
class StampedPose:
    """A geometry_msgs-like value type, as the tool API may come to return."""

    position: GeoPoint = dataclasses.field(default_factory=GeoPoint)
    orientation: GeoQuaternion = dataclasses.field(default_factory=GeoQuaternion)

    def as_list(self) -> list[float]:
        return [self.position.x, self.position.y, self.position.z]


def test_values_round_trip_and_nothing_else_crosses():
    codec = wire.Codec((*VALUE_CLASSES, GeoPoint, GeoQuaternion, StampedPose))
    value = {"a": [1, 2.5, None, True, "x"], 3: (1, 2), ("k", 1): np.array([[1.0, np.nan], [np.inf, 2]]),
             "p": Pose((0.1, 0.2, 0.3)), "i": np.array([1, 2]), "b": np.array([True]), "s": np.float64(2.5),
             "names": np.array(["apple", "bowl"]), "set": {"a", 1}, "nested": StampedPose(GeoPoint(1, 2, 3)),
             "n": float("nan"), "i8": np.int64(7)}
    back = codec.decode(codec.encode(value))
    assert back["a"] == value["a"] and back[3] == (1, 2) and back["p"] == value["p"] and back["s"] == 2.5
    assert type(back["s"]) is np.float64 and type(back["i8"]) is np.int64 and back["set"] == {"a", 1}
    assert np.array_equal(back[("k", 1)], value[("k", 1)], equal_nan=True) and back["i"].dtype == np.int64
    assert back["names"].tolist() == ["apple", "bowl"] and back["nested"] == value["nested"]
    assert np.isnan(back["n"])
    for bad in (lambda: 0, object(), np.array([object()]), 10 ** 30, np.array([1 + 2j]), Exception("x")):
        with pytest.raises(wire.ProtocolError):
            codec.encode(bad)
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(wire.ProtocolError):
        codec.encode(deep)
    for data in ({"$py": "os.system"}, {"a": 1}, {"$nd": ["O", [1], [0]]}, {"$nd": ["f8", [2], [1.0]]},
                 {"$f": "1e999"}, {"$d": [[[1], 2]]}, {"$v": ["Pose", {"position": {"$t": [0, 0, 0]}}]},
                 {"$v": ["Popen", {"args": "id"}]}, {"$v": ["GeoPoint", {"x": 1, "y": 2, "z": 3, "w": 4}]},
                 {"$nd": ["f8", [100001, 100000], []]}):
        with pytest.raises(wire.ProtocolError):
            codec.decode(data)
    with pytest.raises(TypeError, match="must declare its fields"):
        wire.Codec((dict,))


def test_every_value_type_of_the_tool_api_crosses_the_boundary_and_is_readable(host):
    codec = wire.Codec(VALUE_CLASSES)
    for cls in VALUE_CLASSES:
        assert value_fields(cls), f"{cls.__name__} declares no fields (tool_api.VALUE_TYPES)"
        example = cls()
        assert codec.decode(codec.encode(example)) == example
    readable = value_fields(Pose)
    code = "pose = get_gripper_pose()\n" + "".join(f"print(pose.{name})\n" for name in readable)
    outcome = run_code(code, corpus.FakeRobot(), LIMITS, host=host)
    assert outcome.status == "ok" and outcome.stdout == "Point(x=0.3, y=0, z=1.2)\nQuaternion(x=1, y=0, z=0, w=0)\n"


def test_geometry_style_value_types_get_their_public_fields_and_nothing_else():
    """The guards read the value types from the policy (tool_api.VALUE_TYPES by default), not from a list of names:
    a geometry_msgs-like pose works the way plain Python does, its privates and the class stay out of reach; a policy
    may let code build them (``constructors``)."""
    policy = CodePolicy(value_types=(StampedPose, GeoPoint, GeoQuaternion), constructors=frozenset({"StampedPose", "GeoPoint"}))
    made = StampedPose(GeoPoint(0.4, 0.0, 0.8))
    source = ("p = get_gripper_pose()\np.position.z += 0.1\np.position.x = 0.5\nq = StampedPose(GeoPoint(1.0, 2.0, 3.0))\n"
              "print(round(p.position.z, 2), p.orientation.w, p.as_list(), q.position.y)\n")
    assert policy.check(source).ok, policy.check(source).messages()
    assert DEFAULT_POLICY.check("q = Pose(Point(1.0, 2.0, 3.0), Quaternion(0, 0, 0, 1))").ok  # public code builds these
    assert "unknown_function" in CodePolicy(constructors=frozenset()).check("q = Point(1.0, 2.0, 3.0)").codes
    printed: list[str] = []
    namespace = policy.runtime_globals({"get_gripper_pose": lambda: made},
                                       print_fn=lambda *a, **k: printed.append(" ".join(map(str, a))))
    exec(policy.compile(source), namespace)  # noqa: S102 - restricted code object, guarded globals
    assert printed == ["0.9 1.0 [0.5, 0.0, 0.9] 2.0"]
    for bad, error in (("p = get_gripper_pose()\np.position.w = 1", AttributeError),
                       ("p = get_gripper_pose()\nx = p.position.dataclass_fields", AttributeError),
                       ("p = get_gripper_pose()\nk = p.as_list.im_func", SandboxViolation),
                       ("x = StampedPose.as_list", SandboxViolation)):
        with pytest.raises(error):
            exec(policy.compile(bad), namespace)  # noqa: S102


def test_messages_are_checked_against_the_schema():
    assert wire.loads(b'{"t":"print","text":"hi"}', "child") == {"t": "print", "text": "hi"}
    for line in (b"\x80\x04\x95", b"[]", b'{"t":"done","status":"ok"}', b'{"t":"print","text":1}',
                 b'{"t":"print","text":"x","extra":1}', b'{"t":"call","id":true,"tool":"x","args":[],"kwargs":{}}',
                 b'{"t":"error","kind":"ok","text":"","line":null,"ref":null}', b'{"t":"print","text":NaN}',
                 b'{"t":"start","code":"","tools":{},"policy":{},"max_stdout":1}'):
        with pytest.raises(wire.ProtocolError):
            wire.loads(line, "child")
    reader = wire.LineReader(max_line=10, max_total=100)
    assert reader.feed(b"abc\nde") == [b"abc"]
    with pytest.raises(wire.ProtocolError):
        reader.feed(b"x" * 20)
    assert len(wire.clip("E" * 60_000_000)) == wire.MAX_TEXT and wire.clip("a\x1b[2Jb") == "a\\x1b[2Jb"
