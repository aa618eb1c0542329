"""Hostile and legitimate robot code for the sandbox tests (tests/test_robot_sandbox_hostile.py).

HOSTILE: snippets as generated code could contain them, each with the statuses it may end in -- ``refused`` (the
static check: the tree checks plus the restricted compiler) or the status of a run that a guard or a limit ended --
and words that name the layer that stopped it. Code may use ``{secret}``, ``{sentinel}`` and ``{pwned}``: paths of a
secret file the sandbox must not read, a host file it must not change, and one it must not create (:func:`fill`).

PROBES: *unrestricted* Python run in a confined child (``robot.sandbox.run_probe``), i.e. what a snippet that
escaped every guard could still do; each names what its report must say, per isolation mode where they differ.
FORGERY: unrestricted children that lie to the runner over the protocol. LEGIT_STYLE: code in the styles generated
code uses, with its printed output. FakeRobot: all tools, deterministic answers, a log of calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot.contract.tool_api import Pose
from robot.errors import ToolArgumentError, WorkspaceError

SECRET_TEXT = "SECRET-FILE-7f3a"
SECRET_ENV = ("EMBP_SANDBOX_TEST_SECRET", "SECRET-ENV-91bc")
SENTINEL_TEXT = "untouched"


def fill(code: str, **paths: str) -> str:
    """``code`` with its ``{secret}``, ``{sentinel}``, ``{pwned}``, ``{repo}`` placeholders replaced."""
    for key, value in paths.items():
        code = code.replace("{" + key + "}", value)
    return code


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    code: str
    expect: tuple[str, ...]
    words: str = ""
    """Must appear in the outcome's error or reasons: the *right* layer stopped it."""
    timeout_s: float = 3.0


R = ("refused",)
CE = ("code_error",)

HOSTILE: list[Case] = [
    # --- frame walking through generator / coroutine / traceback objects. The first one escaped the sandbox before
    # this issue: it passed the code check, walked from a generator's frame to the harness's globals, called exec
    # through a name once bound to a lambda and ran os.system as root, and the repeat ended `ok`.
    Case("frame-walk-full-chain", "frames",
         "ex = lambda s: 0\ng = (q for q in [1])\ng = (g.gi_frame.f_back.f_back for q in [1])\nchild = list(g)[0]\n"
         "b = child.f_globals.get('__built' + 'ins__')\nex = b.get('exec')\n"
         "ex(\"import os; os.system('touch {pwned}')\", child.f_globals)\n", R, "gi_frame"),
    Case("gen-gi_frame-f_builtins", "frames", "g = (x for x in [1])\nb = g.gi_frame.f_back.f_builtins['open']\n", R,
         "restricted"),
    Case("gen-gi_code", "frames", "g = (x for x in [1])\nc = g.gi_code\n", R, "gi_code"),
    Case("gen-frame-f_globals", "frames", "f = (y for y in [0]).gi_frame\nprint(f.f_globals)\n", R, "restricted"),
    Case("coroutine-cr_frame", "frames", "async def f():\n    pass\nc = f()\nprint(c.cr_frame)\n", R),
    Case("generator-def-f_locals", "frames", "def gen():\n    yield 1\nprint(gen().gi_frame.f_locals)\n", R),
    Case("traceback-tb_frame", "frames",
         "try:\n    x = 1 / 0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame.f_globals)\n", R),
    Case("exception-with_traceback", "frames",
         "try:\n    x = 1 / 0\nexcept Exception as e:\n    t = e.with_traceback\n", CE,
         "no attribute 'with_traceback'"),
    Case("gen-runtime-only-attribute", "frames", "g = (x for x in [1])\nstate = g.gi_running\nprint(state)\n", CE,
         "attributes of a generator"),
    Case("gen-send-through-alias", "frames", "g = (x for x in [1])\nh = g\nm = h.send\n", CE,
         "attributes of a generator"),
    Case("getattr-builtin", "frames", "g = (x for x in [1])\nf = getattr(g, 'gi_' + 'frame')\n", R, "getattr"),
    # --- names bound to a lambda / def, rebound: the call is checked when it happens
    Case("lambda-rebound-to-tool", "rebinding", "helper = lambda p: p\nhelper = move_to_pose\nhelper()\n", CE,
         "ToolArgumentError"),
    Case("def-rebound-to-tool", "rebinding", "def f(a):\n    return a\nf = open_gripper\nf(1)\n", CE,
         "ToolArgumentError"),
    Case("def-rebound-to-np-view", "rebinding", "def h(x):\n    return x\nh = np\nh(1)\n", CE,
         "calling a ModuleView"),
    Case("walrus-rebinds-tool", "walrus", "f = lambda: 1\nif (f := get_3d_bbox):\n    f()\n", CE,
         "ToolArgumentError"),
    Case("lambda-rebound-in-loop", "rebinding",
         "step = lambda: 0\nfor step in [get_gripper_pose, grasp]:\n    step()\n", CE, "ToolArgumentError"),
    Case("tool-proxy-attributes", "rebinding", "f = get_gripper_pose\nprint(f.name)\n", CE,
         "attributes of a ToolProxy"),
    Case("builtin-method-rebound", "rebinding", "m = print\nm = [].append\nm = len\nx = m.real\n", CE,
         "attributes of a builtin_function_or_method"),
    # --- str.format / format_map on strings that are not literals
    Case("format-nonliteral-globals", "format", "s = '{0.__globals__}'\nprint(s.format(get_gripper_pose))\n", CE,
         "attribute and index lookups"),
    Case("format-nonliteral-chain", "format",
         "t = '{0.__init__.__globals__[os]}'\nprint(t.format(move_to_pose))\n", CE, "attribute and index lookups"),
    Case("format-nested-spec", "format", "a = '{0:{1.real}}'\nprint(a.format(1, 2))\n", CE,
         "attribute and index lookups"),
    Case("format-index-field", "format", "k = '{0[0]}'\nprint(k.format([get_gripper_pose]))\n", CE,
         "attribute and index lookups"),
    Case("format-map", "format", "m = 'x'.format_map\n", CE, "no attribute 'format_map'"),
    Case("format-literal-dunder", "format", "s = '{0.__class__}'.format(1)\n", R, "dunder_access"),
    Case("fstring-dunder", "format", "print(f'{get_gripper_pose.__globals__}')\n", R, "dunder_access"),
    # --- class construction, type(), decorators, comprehension scopes
    Case("type-three-args", "classes", "X = type('X', (), {})\n", R, "'type'"),
    Case("class-def", "classes", "class A:\n    pass\n", R, "ClassDef"),
    Case("class-via-dunder", "classes", "k = (1).__class__.__base__.__subclasses__()\n", R, "dunder_access"),
    Case("type-of-value-attributes", "classes", "p = get_gripper_pose()\nc = [p][0]\nx = int.from_bytes\n", CE,
         "attributes of a type"),
    Case("decorator-builtin", "decorators", "@print\ndef f():\n    pass\n", R, "Decorators"),
    Case("decorator-own", "decorators",
         "def deco(fn):\n    return fn\n@deco\ndef g():\n    return 1\nprint(g())\n", R, "Decorators"),
    Case("comprehension-dunder", "comprehensions", "print([x.__name__ for x in [get_gripper_pose]])\n", R,
         "dunder_access"),
    Case("comprehension-proxy-attribute", "comprehensions", "print([f.harness for f in [get_gripper_pose]])\n", CE,
         "attributes of a ToolProxy"),
    Case("comprehension-generator-code", "comprehensions",
         "gen = (y for y in range(3))\nlst = [gen for i in range(2)]\nprint(lst[0].gi_code)\n", R, "gi_code"),
    Case("comprehension-leaks-generator", "comprehensions",
         "gens = [(y for y in [i]) for i in range(2)]\nnxt = gens[0].close\n", CE, "attributes of a generator"),
    Case("walrus-open", "walrus", "if (o := open):\n    pass\n", R, "forbidden_name"),
    Case("walrus-builtins", "walrus", "print([(b := __builtins__) for i in [1]])\n", R),
    Case("walrus-in-comprehension-tool", "walrus",
         "t = lambda a: a\nvals = [(t := move_in_direction) for i in [1]]\nt(np.array([0, 0, 1]))\n", CE,
         "ToolArgumentError"),
    Case("private-name", "names", "_getattr_ = 1\n", R, "restricted"),
    Case("printed-name", "names", "print(1)\nx = printed\n", R),
    Case("attribute-store-on-np", "names", "np.array = print\n", CE, "setting attributes of a ModuleView"),
    # --- recursion and bombs
    Case("recursion", "recursion", "def f(n):\n    return f(n + 1)\nf(0)\n", CE, "RecursionError"),
    Case("recursion-mutual-lambda", "recursion", "a = lambda n: b(n)\nb = lambda n: a(n)\na(0)\n", CE,
         "RecursionError"),
    Case("nested-repr", "recursion", "a = []\nfor i in range(100000):\n    a = [a]\nprint(a)\n", CE, "RecursionError"),
    Case("fork-bomb-import", "bombs", "import os\nwhile True:\n    os.fork()\n", R, "forbidden_import"),
    Case("memory-list", "bombs", "x = [0] * (10 ** 10)\n", ("memory",)),
    Case("memory-append", "bombs", "blocks = []\nfor i in range(100000):\n    blocks.append(' ' * 10 ** 8)\n",
         ("memory",)),
    Case("memory-numpy", "bombs", "z = np.zeros((100000, 100000))\n", ("memory",)),
    Case("cpu-bigint", "bombs", "x = 7 ** (10 ** 9)\n", ("timeout",)),
    Case("cpu-loop", "bombs", "n = 0\nwhile n < 1:\n    n = n * 1\n", ("timeout",)),
    Case("huge-output", "output", "for i in range(10 ** 5):\n    print('x' * 1000)\n", ("ok",), timeout_s=20),
    Case("huge-exception", "output", "raise ValueError('A' * 60000000)\n", CE, "ValueError"),
    Case("huge-keyerror", "output", "d = {}\nv = d['k' * 10000000]\n", CE, "KeyError"),
    Case("huge-int-str", "output", "print(10 ** 100000)\n", CE, "ValueError"),
    Case("huge-tool-error", "output", "p = get_object_center_position('u' * 5000000)\n", CE, "ToolArgumentError"),
    # --- the environment and files
    Case("open-secret", "files", "print(open('{secret}').read())\n", R, "forbidden_name"),
    Case("os-environ", "env", "import os\nprint(os.environ)\n", R, "forbidden_import"),
    Case("np-load", "files", "print(np.load('{secret}'))\n", R, "unknown_module_attribute"),
    Case("np-tofile", "files", "np.array([1.0]).tofile('{pwned}')\n", R, "unknown_method"),
    Case("np-tofile-at-runtime", "files", "a = np.array([1.0])\nw = a.tofile\n", CE, "no attribute 'tofile'"),
    Case("np-ctypes", "files", "a = np.array([1.0])\nc = a.ctypes\n", CE, "no attribute 'ctypes'"),
    Case("tool-with-a-path", "files", "p = get_object_center_position('{secret}')\n", CE, "ToolArgumentError"),
    Case("print-self", "env", "b = print.__self__\n", R, "dunder_access"),
    # --- forged protocol messages from inside the snippet
    Case("print-forged-robot-error", "protocol",
         "print('\\n{\"t\": \"error\", \"kind\": \"robot\", \"text\": \"x\", \"line\": null, \"ref\": 1}\\n')\n"
         "raise ValueError('boom')\n", CE, "ValueError"),
    Case("print-forged-done", "protocol", "print('{\"t\": \"done\", \"status\": \"ok\"}')\nx = [1][3]\n", CE,
         "IndexError"),
    Case("tool-argument-not-data", "protocol", "move_to_pose(lambda: 0)\n", CE, "cannot be sent"),
    Case("tool-argument-huge", "protocol", "detect_objects(object_list=['x' * 1000] * 2000)\n", CE, "too large"),
    # --- issue #33: str subclasses (numpy's str_) and the other formatting paths
    Case("npstr-format-attribute", "str-subclass", "s = np.array(['{0.real.imag}'])[0]\nprint(s.format(1.0))\n", CE,
         "attribute and index lookups"),
    Case("npstr-format-dunder-walk", "str-subclass",
         "s = np.array(['{0.' + '_' * 2 + 'class' + '_' * 2 + '}'])[0]\nprint(s.format(1))\n", CE,
         "attribute and index lookups"),
    Case("npstr-format-index", "str-subclass", "s = np.array(['{0[0]}'])[0]\nprint(s.format([1]))\n", CE,
         "attribute and index lookups"),
    Case("npstr-format-nested-spec", "str-subclass", "s = np.array(['{0:{1.real}}'])[0]\nprint(s.format(1, 2))\n",
         CE, "attribute and index lookups"),
    Case("npstr-item-format", "str-subclass", "s = np.array(['{0.real}'])[0].item()\nprint(s.format(1))\n", CE,
         "attribute and index lookups"),
    Case("npstr-format-method-called-later", "str-subclass",
         "f = np.array(['{0.imag}'])[0].format\nout = list(map(f, [1, 2]))\n", CE, "attribute and index lookups"),
    Case("npstr-format-map", "str-subclass", "s = np.array(['{a.real}'])[0]\nprint(s.format_map({'a': 1}))\n", R,
         "unknown_method"),
    Case("np-char-functions", "str-subclass", "print(np.char.mod('%s', ['{0.real}']))\n", R, "unknown_module_attribute"),
    Case("format-builtin", "str-subclass", "print(format(np.array(['x'])[0], '{0.real}'))\n", R, "unknown_function"),
    Case("np-dtype-object", "str-subclass", "d = np.array(['x']).dtype\nprint(d.type)\n", CE, "attributes of a"),
    Case("percent-format-does-not-walk", "str-subclass",
         "print('%(a)s %s' % {'a': np.array(['{0.real}'])[0]} if False else '%(a)s' % {'a': 1})\n", ("ok",)),
    Case("fstring-spec-from-npstr", "str-subclass", "s = np.array(['>8'])[0]\nprint(f'{1.5:{s}}')\n", ("ok",)),
    # --- issue #33: source that crashed the check itself
    Case("checker-deep-brackets", "checker", "x = " + "[" * 300 + "]" * 300 + "\n", R, "too_complex"),
    Case("checker-long-expression", "checker", "x = " + "1 + " * 30000 + "1\n", R, "too_complex"),
    Case("checker-deep-lambdas", "checker", "f = " + "lambda: " * 150 + "0\n", R, "too_complex"),
    Case("checker-deep-calls", "checker", "x = " + "abs(" * 150 + "1" + ")" * 150 + "\n", R, "too_complex"),
    Case("checker-deep-unary", "checker", "x = " + "-" * 5000 + "1\n", R, "too_complex"),
    Case("checker-huge-source", "checker", "x = 1\n" * 30000, R, "too_complex"),
    # --- issue #33: a caught robot error re-raised later is the code's own error
    Case("launder-robot-error-after-own-failure", "laundering",
         "try:\n    move_to_pose(parse_place_pose('apple', position=np.array([2.0, 0.0, 1.0])))\n"
         "except Exception as e:\n    err = e\ntry:\n    x = [][1]\nexcept Exception:\n    raise err\n", CE,
         "WorkspaceError"),
    Case("launder-robot-error-bare-reraise", "laundering",
         "try:\n    move_to_pose(parse_place_pose('apple', position=np.array([2.0, 0.0, 1.0])))\n"
         "except Exception:\n    x = [][0] if False else 1\n    raise\n", CE, "WorkspaceError"),
    # --- issue #33: values the child can send, the runner accepts; the rest is a catchable ToolArgumentError
    Case("dict-keyed-by-numpy-scalar", "wire", "k = np.argmax([1, 3])\ndetect_objects({k: 'apple', (k, 1.5): 2})\n",
         ("ok",)),
    Case("unsendable-argument-is-catchable", "wire",
         "try:\n    detect_objects(len)\nexcept Exception as e:\n    print('refused')\n"
         "detect_objects([{1, 2}, np.sqrt(4.0)])\n",
         ("ok",)),
    # --- issue #33: text a snippet makes the runner store
    Case("print-control-and-surrogates", "output", "print('a\\udc80b\\x1b[2J\\x00\\r\\u202e' * 3)\n", ("ok",)),
    Case("error-text-with-surrogates", "output", "raise ValueError('\\udc80\\x1b]0;pwned\\x07')\n", CE, "\\udc80"),
    Case("tool-argument-echo", "output", "get_object_center_position('\\x1b[31m\\udc80')\n", CE, "\\x1b[31m"),
]

# Unrestricted code run in a confined child, as if every guard had been escaped. ``report`` prints a line.
PROBE_HELPERS = '''
import os
def attempt(name, fn):
    try:
        fn()
        report(name, "ALLOWED")
    except BaseException as exc:
        report(name, "DENIED", type(exc).__name__)
'''

#: name -> (code, what the report must say in bwrap mode, in none mode)
PROBES: dict[str, tuple[str, str, str]] = {
    "read-secret-file": ("attempt('read', lambda: open('{secret}').read())", "read DENIED", "read DENIED"),
    "read-etc-passwd": ("attempt('read', lambda: open('/etc/passwd').read())", "read DENIED", "read DENIED"),
    "environment-is-empty": ("report('secret' if any('SECRET' in v for v in os.environ.values()) else 'clean', "
                             "sorted(os.environ))", "clean []", "clean []"),
    "environ-of-pid-1": ("attempt('read', lambda: open('/proc/1/environ').read())", "read DENIED", "read DENIED"),
    "environ-of-the-zygote": ("attempt('read', lambda: open('/proc/%d/environ' % os.getppid()).read())",
                              "read DENIED", "read DENIED"),
    "create-a-file": ("attempt('create', lambda: open('{pwned}', 'w').write('x'))", "create DENIED", "create DENIED"),
    "truncate-a-file": ("attempt('trunc', lambda: open('{sentinel}', 'w'))", "trunc DENIED", "trunc DENIED"),
    "delete-a-file": ("attempt('unlink', lambda: os.unlink('{sentinel}'))", "unlink DENIED", "unlink DENIED"),
    "rename-a-file": ("attempt('rename', lambda: os.rename('{sentinel}', '{pwned}'))", "rename DENIED",
                      "rename DENIED"),
    "chmod-a-file": ("attempt('chmod', lambda: os.chmod('{sentinel}', 0o777))", "chmod DENIED", "chmod DENIED"),
    "fork": ("attempt('fork', os.fork)", "fork DENIED", "fork DENIED"),
    "exec-a-shell": ("attempt('exec', lambda: os.execv('/bin/sh', ['sh', '-c', 'touch {pwned}']))", "exec DENIED",
                     "exec DENIED"),
    "network": ("import socket\nattempt('socket', lambda: socket.create_connection(('127.0.0.1', 22), 1))",
                "socket DENIED", "socket DENIED"),
    "kill-the-zygote": ("attempt('kill', lambda: os.kill(os.getppid(), 9))", "kill DENIED", "kill DENIED"),
    "setuid-root": ("attempt('setuid', lambda: os.setuid(0))", "setuid DENIED", "setuid DENIED"),
    "uid-is-nobody": ("report('uid', os.getuid(), os.geteuid(), os.getgroups())", "uid 65534 65534 []",
                      "uid 65534 65534 []"),
    "no-capabilities": ("import ctypes\nlibc = ctypes.CDLL(None)\n"
                        "report('bounding', [libc.prctl(23, c, 0, 0, 0) for c in (0, 6, 7, 21, 24)])",
                        "bounding [0, 0, 0, 0, 0]", "bounding [0, 0, 0, 0, 0]"),
    "memory-bomb": ("attempt('alloc', lambda: bytearray(8 * 1024 ** 3))", "alloc DENIED MemoryError",
                    "alloc DENIED MemoryError"),
    # what only the namespaces add: the repository and the host's files are not even there, nor its processes
    "see-the-repository": ("report('repo', os.path.exists('{repo}'), os.path.exists('/etc/passwd'))",
                           "repo False False", "repo True True"),
    "see-host-processes": ("report('pid1', os.path.exists('/proc/1/cmdline') and os.getppid() < 10)",
                           "pid1 True", "pid1 False"),
}

# Children that lie to the runner: (code, expected status, words in the error).
FORGERY: dict[str, tuple[str, str, str]] = {
    "fake-robot-error": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'error', 'kind': 'robot', 'text': 'WorkspaceError: x', "
        "'line': 1, 'ref': 1}).encode() + b'\\n')\nos._exit(11)", "crashed", "never raised"),
    "fake-done-ok": ("os.write(OUT_FD, b'{\"t\": \"done\", \"status\": \"ok\"}\\n')\nimport time\ntime.sleep(5)",
                     "crashed", "protocol violation"),
    "pickle-payload": (
        "import pickle\nclass P:\n    def __reduce__(self):\n        return (os.system, ('touch {pwned}',))\n"
        "os.write(OUT_FD, pickle.dumps(P()) + b'\\n')\nimport time\ntime.sleep(5)", "crashed", "protocol violation"),
    "huge-line": ("os.write(OUT_FD, b'{' * (2 << 20))\nimport time\ntime.sleep(5)", "crashed", "too long"),
    "flood-prints": (
        "import json\nline = json.dumps({'t': 'print', 'text': 'y' * 500000}).encode() + b'\\n'\n"
        "for i in range(100):\n    os.write(OUT_FD, line)\nimport time\ntime.sleep(5)", "crashed",
        "bytes from the child"),
    "unknown-tool": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'call', 'id': 1, 'tool': 'system', 'args': ['id'], "
        "'kwargs': {}, 'line': None}).encode() + b'\\n')\nimport time\ntime.sleep(5)", "crashed", "unknown tool"),
    "value-of-another-type": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'call', 'id': 1, 'tool': 'move_to_pose', "
        "'args': [{'$v': ['Popen', {'args': 'id'}]}], 'kwargs': {}, 'line': None}).encode() + b'\\n')\nimport time\n"
        "time.sleep(5)", "crashed", "unknown value type"),
    "extra-field": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'print', 'text': 'x', 'status': 'ok'}).encode() + b'\\n')\n"
        "import time\ntime.sleep(5)", "crashed", "protocol violation"),
    "error-text-60mb": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'error', 'kind': 'code', 'text': 'E' * 60000000, "
        "'line': None, 'ref': None}).encode() + b'\\n')\nos._exit(10)", "crashed", "too long"),
    "exit-code-error-with-long-text": (
        "import json\nos.write(OUT_FD, json.dumps({'t': 'error', 'kind': 'code', 'text': 'E' * 900000, "
        "'line': None, 'ref': None}).encode() + b'\\n')\nos._exit(10)", "code_error", "(clipped)"),
    "exit-zero-early": ("os._exit(0)", "ok", ""),
}


LEGIT_STYLE: dict[str, tuple[str, str | None]] = {
    # name: (code, expected stdout or None)
    "augmented-item": ("p = get_object_center_position('apple')\np[2] += 0.05\nq = [1, 2]\nq[0] -= 1\n"
                       "print(round(float(p[2]), 3), q)\n", "0.89 [0, 2]\n"),
    "fstring-format": ("x = 0.12345\nprint(f'{x:.2f}', '{:.1f}'.format(x), '{0} {name}'.format(1, name='a'), "
                       "'%.3f' % x, f'{x!r:>10}')\n", "0.12 0.1 1 a 0.123    0.12345\n"),
    "unpacking": ("a, (b, c) = 1, (2, 3)\nfor i, (k, v) in enumerate({'x': 1}.items()):\n"
                  "    print(i, k, v, a + b + c)\n", "0 x 1 6\n"),
    "comprehensions": ("names = get_object_name_list()\nboxes = {n: get_3d_bbox(n).tolist() for n in names}\n"
                       "tall = sorted([n for n in names if boxes[n][5] > 0.8], key=lambda n: len(n))\n"
                       "print(len(boxes), tall[:1], any(w in ['plate'] for w in 'white_plate'.split('_')))\n",
                       None),
    "walrus-and-while": ("count = 0\nwhile True:\n    count += 1\n    if (half := count / 2) > 1:\n        break\n"
                         "print(count, half)\n", "3 1.5\n"),
    "try-except-robot": ("try:\n    move_to_pose(parse_place_pose('apple', position=np.array([9.0, 0.0, 0.0])))\n"
                         "except Exception as error:\n    print('handled', str(error)[:9], error.args[0][:9])\n",
                         "handled Workspace Workspace\n"),
    "numpy-math": ("v = np.array([3.0, 4.0, 0.0])\nu = v / np.linalg.norm(v)\nang = np.degrees(np.arctan2(u[1], u[0]))"
                   "\nprint(round(float(ang), 1), np.round(u, 2).tolist(), v.shape, v.T.shape, float(v.mean()), "
                   "v.dtype)\n", "53.1 [0.6, 0.8, 0.0] (3,) (3,) 2.3333333333333335 float64\n"),
    "nested-defs": ("def outer(n):\n    def inner(k):\n        return k * 2\n    return [inner(i) for i in range(n)]\n"
                    "print(outer(3), sum(map(lambda t: t + 1, [1, 2])), list(filter(lambda t: t > 1, [1, 2, 3])))\n",
                    "[0, 2, 4] 5 [2, 3]\n"),
    "pose-fields": ("pose = get_gripper_pose()\nx, y, z = pose.position\nprint(round(x, 2), len(pose.orientation), "
                    "pose.orientation[0])\n", "0.3 4 1.0\n"),
    "pose-built-back": ("pose = get_gripper_pose()\nmove_to_pose(pose)\npath = [pose, get_gripper_pose()]\n"
                        "follow_path(path)\n", ""),
    "joint-dict": ("h = get_object_center_position('cabinet.handle_0')\n"
                   "info = get_object_joint_info(object_name='cabinet.drawer_0', position=h, type='prismatic')\n"
                   "move_in_direction(info['joint_axis'], distance=0.2)\nprint(info['type'], info.get('x', 0))\n",
                   "prismatic 0\n"),
    "arc-path": ("p = get_gripper_pose()\npath = generate_arc_path_around_joint(current_pose=p, "
                 "joint_axis=np.array([0, 0, 1]), joint_position=np.array([0.7, 0.2, 0.8]), n=5, angle=60)\n"
                 "follow_path(path)\nprint(len(path))\n", "5\n"),
    "helpers-and-recursion": ("def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
                              "def place(obj, target):\n    detect_objects(object_list=[obj, target])\n"
                              "    return parse_place_pose(object_name=obj, receptacle_name=target)\n"
                              "pose = place('apple', 'white_plate')\nprint(fact(5), round(pose.position[2], 2))\n",
                              None),
    "containers": ("s = set(['a', 'b'])\ns.add('c')\nd = dict(a=1)\nd.update({'b': 2})\nd['c'] = 3\n"
                   "t = tuple(sorted(s))\nprint(sorted(d.items()), t, ' '.join(t).upper(), 'abc'.replace('b', '-'))\n",
                   "[('a', 1), ('b', 2), ('c', 3)] ('a', 'b', 'c') A B C a-c\n"),
    "every-allowed-numpy-name": (
        "a = np.array([1.0, -2.0, 3.0])\n"
        "r = [np.asarray(a), np.zeros(3), np.ones(2), np.full(2, 0.5), np.eye(2), np.linspace(0, 1, 3), "
        "np.arange(3), np.concatenate([a, a]), np.stack([a, a]), np.vstack([a, a]), np.hstack([a, a]), "
        "np.dot(a, a), np.cross(a, a), np.mean(a), np.sum(a), np.min(a), np.max(a), np.abs(a), np.sqrt(np.abs(a)), "
        "np.clip(a, 0, 1), np.sign(a), np.round(a, 1), np.maximum(a, 0), np.minimum(a, 0), np.argmin(a), "
        "np.argmax(a), np.allclose(a, a), np.isclose(a, a), np.any(a > 0), np.all(a > 0), np.cos(a), np.sin(a), "
        "np.tan(a), np.arctan2(a, a), np.arccos(np.clip(a, -1, 1)), np.deg2rad(a), np.rad2deg(a), np.radians(a), "
        "np.degrees(a), np.pi, np.inf, np.linalg.norm(a)]\n"
        "print(len(r), a.reshape(3, 1).shape, a.flatten().tolist(), a.copy().sum(), a.max(), a.min(), "
        "a.dot(a), np.mean(a).item())\n", "42 (3, 1) [1.0, -2.0, 3.0] 2.0 3.0 -2.0 14.0 0.6666666666666666\n"),
}


# ------------------------------------------------------------------------------------------------ a fake robot

def _example_objects() -> list[str]:
    """Every object the few-shot examples' queries list (``objects = [...]``), so the fake robot knows them."""
    from tasks.roboscript.code_prompts import load_examples

    names: list[str] = []
    for example in load_examples():
        line = next((x for x in example.query.splitlines() if x.startswith("objects = [")), "objects = []")
        names += [n.strip() for n in line.removeprefix("objects = [").rstrip("]").split(",") if n.strip()]
    return names


NAMES = list(dict.fromkeys(
    ["table", "apple", "banana", "white_plate", "blue_plate", "brown_cup", "white_mug", "white_bowl", "red_bowl",
     "wicker_basket", "lemon", "mustard_bottle", "footed_bowl", "cabinet", "cabinet.drawer_0", "cabinet.handle_0",
     "cabinet.drawer_1", "cabinet.handle_1", "cabinet.door_0", "cabinet.door_handle_0", "red_mug", "peach",
     "grey_bowl", "cabinet.drawer_2", "cabinet.handle_2", "cabinet.drawer_3", "cabinet.handle_3"]
    + _example_objects()))


def _centre(name: str) -> np.ndarray:
    h = sum(ord(c) for c in name)
    return np.array([0.3 + (h % 7) * 0.05, -0.4 + (h % 11) * 0.07, 0.8 + (h % 3) * 0.02])


class FakeRobot:
    """Every tool of the API with deterministic answers and a log of calls (arguments rounded for comparison)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.notes: list[str] = []

    def _log(self, name: str, *args) -> None:
        def plain(a):
            if isinstance(a, np.ndarray):
                return np.round(np.asarray(a, dtype=float), 6).tolist()
            if isinstance(a, Pose):
                return ("Pose", tuple(round(float(v), 6) for v in (*a.position, *a.orientation)))
            if isinstance(a, list):
                return [plain(x) for x in a]
            return a

        self.calls.append((name, *[plain(a) for a in args]))

    def _check(self, name) -> str:
        if not isinstance(name, str) or name not in NAMES:
            raise ToolArgumentError(f"there is no object named {name!r}")
        return name

    def detect_objects(self, object_list=None):
        self._log("detect_objects", object_list)

    def get_object_name_list(self):
        self._log("get_object_name_list")
        return list(NAMES)

    def get_object_center_position(self, object_name):
        self._log("get_object_center_position", object_name)
        return _centre(self._check(object_name))

    def get_object_pose(self, object_name):
        self._log("get_object_pose", object_name)
        return Pose(tuple(_centre(self._check(object_name)).tolist()))

    def get_3d_bbox(self, object_name):
        self._log("get_3d_bbox", object_name)
        c = _centre(self._check(object_name))
        return np.concatenate([c - 0.04, c + 0.04])

    def get_object_joint_info(self, object_name, position, type="any"):  # noqa: A002 - the tool's parameter name
        self._log("get_object_joint_info", object_name, position, type)
        self._check(object_name)
        kind = "revolute" if "door" in object_name else "prismatic"
        return {"joint_position": np.asarray(position, dtype=float) + np.array([0.0, 0.2, 0.0]),
                "joint_axis": np.array([-1.0, 0.0, 0.0]) if kind == "prismatic" else np.array([0.0, 0.0, 1.0]),
                "type": kind}

    def get_plane_normal(self, object_name, position):
        self._log("get_plane_normal", object_name, position)
        return np.array([-1.0, 0.0, 0.0])

    def _grasp_pose(self, tool, object_name, *rest):
        self._log(tool, object_name, *rest)
        c = _centre(self._check(object_name))
        return Pose(tuple(c.tolist()), (1.0, 0.0, 0.0, 0.0))

    def parse_adaptive_shape_grasp_pose(self, object_name, preferred_position=None,
                                        preferred_approach_direction=None, preferred_plane_normal=None,
                                        description=None):
        return self._grasp_pose("parse_adaptive_shape_grasp_pose", object_name, preferred_position,
                                preferred_approach_direction, preferred_plane_normal, description)

    def parse_central_lift_grasp_pose(self, object_name, description="center"):
        return self._grasp_pose("parse_central_lift_grasp_pose", object_name, description)

    def parse_horizontal_grasp_pose(self, object_name, approach_direction=None):
        return self._grasp_pose("parse_horizontal_grasp_pose", object_name, approach_direction)

    def parse_place_pose(self, object_name, receptacle_name=None, position=None):
        self._log("parse_place_pose", object_name, receptacle_name, position)
        target = _centre(self._check(receptacle_name)) if receptacle_name else np.asarray(position, dtype=float)
        return Pose(tuple(float(v) for v in target + np.array([0.0, 0.0, 0.1])), (1.0, 0.0, 0.0, 0.0))

    def open_gripper(self):
        self._log("open_gripper")

    def close_gripper(self):
        self._log("close_gripper")

    def attach_object(self, object_id):
        self._log("attach_object", object_id)

    def detach_object(self, object_id):
        self._log("detach_object", object_id)

    def grasp(self, grasp_pose):
        self._log("grasp", grasp_pose)

    def move_to_pose(self, pose):
        self._log("move_to_pose", pose)
        if not isinstance(pose, Pose):
            raise ToolArgumentError(f"pose must be a Pose, got {type(pose).__name__}")
        if pose.position[0] > 1.0:
            raise WorkspaceError(f"Workspace limit: x = {pose.position[0]:.2f} is outside the workspace")

    def move_in_direction(self, axis, distance):
        self._log("move_in_direction", axis, distance)

    def generate_arc_path_around_joint(self, current_pose, joint_axis, joint_position, n, angle):
        self._log("generate_arc_path_around_joint", current_pose, joint_axis, joint_position, n, angle)
        return [Pose((0.5, 0.1 * i, 1.0)) for i in range(int(n))]

    def follow_path(self, path):
        self._log("follow_path", path)

    def get_gripper_pose(self):
        self._log("get_gripper_pose")
        return Pose((0.3, 0.0, 1.2), (1.0, 0.0, 0.0, 0.0))

    def reset_to_default_pose(self):
        self._log("reset_to_default_pose")
