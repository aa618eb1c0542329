"""The code policy: what generated robot code may do, checked statically before it runs.

One :class:`CodePolicy` object holds the whole policy -- the tool signatures (from ``robot/contract/tool_api.py``), the
builtins and ``numpy`` functions on the allow-list, the method and attribute names allowed on values, the tool API's
value types, the forbidden names and statements. The data pipeline checks every generated snippet with it
(:func:`check_snippet`), and the ROS runner's sandbox compiles a snippet with :meth:`CodePolicy.compile` and runs it
only with :meth:`CodePolicy.runtime_globals` of the same object (``robot/contract/restricted.py``: the guards check
every attribute, item, call and iteration at run time), so the static check and the runtime agree on what exists.

A snippet passes when it compiles and

* every call names a tool, an allowed builtin or a function defined in the snippet (no hallucinated tools); calls
  on ``np`` name an allowed numpy function; calls on values name an allowed method (``append``, ``tolist``...);
* tool calls and calls of defined functions match the signature: number of positional arguments, required
  arguments present, keyword names known;
* it has no imports, no ``exec``/``eval``/``open``/``__import__``/``getattr``..., no dunder or private attribute
  access, no class definitions, ``global``, ``async`` or generators, no ``while True`` without a way out, and no
  name is read that nothing defines;
* RestrictedPython's compiler, extended (``robot/contract/restricted.py``), accepts it: no name or attribute
  starting with ``_``, no frame, code, generator or traceback attribute, no decorators, ``with`` or ``del a.b``.

Each failure is a :class:`Reason` with a code from :data:`REASON_CODES`, a sentence and the line number.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from robot.contract import code_checks as _code_checks
from robot.contract.tool_api import (
    TOOL_SPECS,
    VALUE_CLASSES,
    VALUE_TYPES,
    ToolAPI,
    ToolSpec,
)

#: Every reason a snippet can fail, with what it means.
REASON_CODES: dict[str, str] = {
    "empty": "no statement at all (only blanks or comments)",
    "too_complex": "beyond the check's limits, which hold before anything is parsed (source size, nesting depth, "
                   "expression length), or a snippet the check itself could not finish on",
    "not_code": "prose instead of Python code",
    "syntax_error": "does not compile",
    "forbidden_import": "an import statement (everything the code may use is already loaded)",
    "forbidden_name": "a name that escapes the sandbox or reaches the host (exec, eval, open, __import__, getattr...)",
    "dunder_access": "a double-underscore name or attribute (a classic sandbox escape)",
    "private_access": "an attribute starting with an underscore",
    "forbidden_statement": "a statement outside the allowed subset (class, global, nonlocal, async, yield)",
    "unknown_function": "a call to a name that is neither a tool, an allowed builtin nor defined in the snippet",
    "unknown_module_attribute": "a numpy attribute that is not on the allow-list",
    "unknown_method": "a method that is not on the allow-list",
    "dynamic_call": "a call of something other than a plain name or attribute",
    "wrong_arity": "too many or too few arguments for the function's signature",
    "unknown_keyword": "a keyword argument the function does not have",
    "unverifiable_call": "a tool call with *args or **kwargs unpacking, which cannot be checked",
    "shadows_tool": "a definition or assignment that replaces a tool",
    "undefined_name": "a name that is read but never defined",
    "unbounded_loop": "a `while True` loop with no break or return",
    "restricted": "a construct the restricted compiler refuses (a name starting with '_', a frame or generator "
                  "attribute, a decorator, `with`, `del a.b`...)",
}

ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "enumerate", "filter", "float", "int", "isinstance", "len", "list", "map",
    "max", "min", "next", "print", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip",
    "Exception", "ValueError", "RuntimeError", "KeyError", "IndexError", "TypeError",
})

FORBIDDEN_NAMES = frozenset({
    "exec", "eval", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "hasattr", "input", "breakpoint", "exit", "quit", "help", "dir", "id", "type", "object", "super", "memoryview",
    "classmethod", "staticmethod", "property", "__builtins__", "__loader__", "__spec__",
})

#: Attributes of ``numpy`` (as ``np.<dotted>``) generated code may use.
NUMPY_ATTRIBUTES = frozenset({
    "array", "asarray", "zeros", "ones", "full", "eye", "linspace", "arange", "concatenate", "stack", "vstack",
    "hstack", "dot", "cross", "mean", "sum", "min", "max", "abs", "sqrt", "clip", "sign", "round", "maximum",
    "minimum", "argmin", "argmax", "allclose", "isclose", "any", "all", "cos", "sin", "tan", "arctan2", "arccos",
    "deg2rad", "rad2deg", "radians", "degrees", "pi", "inf", "linalg.norm",
})

#: Methods generated code may call on values (lists, dicts, sets, strings, numpy arrays).
ALLOWED_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "index", "count", "sort", "reverse", "copy", "clear",
    "get", "items", "keys", "values", "update", "setdefault", "add", "discard", "union", "intersection", "difference",
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "format",
    "join", "find", "title", "capitalize", "isdigit", "tolist", "dot", "flatten", "reshape", "mean", "sum", "min",
    "max", "item",
})

#: Data attributes generated code may read on plain values (numpy arrays and scalars, exceptions) besides the
#: methods above; the tool API's value types (``tool_api.VALUE_TYPES``) add their own public fields.
ALLOWED_ATTRIBUTES = frozenset({"shape", "size", "ndim", "T", "dtype", "real", "imag", "args"})

FORBIDDEN_STATEMENTS: tuple[str, ...] = (
    "ClassDef", "Global", "Nonlocal", "AsyncFunctionDef", "AsyncFor", "AsyncWith", "Await", "Yield", "YieldFrom",
)


@dataclass(frozen=True)
class Reason:
    code: str
    message: str
    line: int | None = None

    def __post_init__(self) -> None:
        if self.code not in REASON_CODES:
            raise ValueError(f"unknown reason code {self.code!r}")

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.code}{where}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: tuple[Reason, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        """Distinct reason codes, in order of first appearance."""
        return tuple(dict.fromkeys(r.code for r in self.reasons))

    def messages(self) -> list[str]:
        return [str(r) for r in self.reasons]


@dataclass(frozen=True)
class CodePolicy:
    tools: Mapping[str, ToolSpec] = field(default_factory=lambda: dict(TOOL_SPECS))
    builtins: frozenset[str] = ALLOWED_BUILTINS
    modules: Mapping[str, frozenset[str]] = field(default_factory=lambda: {"np": NUMPY_ATTRIBUTES})
    methods: frozenset[str] = ALLOWED_METHODS
    attributes: frozenset[str] = ALLOWED_ATTRIBUTES
    value_types: tuple[type, ...] = VALUE_CLASSES
    constructors: frozenset[str] = frozenset(VALUE_TYPES)
    """Names of value types code may build (``Pose(...)``, ``Point(...)``, as public RoboScript code does): known
    names statically, globals at run time."""
    forbidden_names: frozenset[str] = FORBIDDEN_NAMES
    forbidden_statements: tuple[str, ...] = FORBIDDEN_STATEMENTS

    def __post_init__(self) -> None:
        allowed = self.builtins | frozenset(self.modules) | self.constructors
        clash = allowed & (frozenset(self.tools) | self.forbidden_names)
        if clash:
            raise ValueError(f"policy lists {sorted(clash)} both as allowed and as tool or forbidden name")
        unknown = self.constructors - {cls.__name__ for cls in self.value_types}
        if unknown:
            raise ValueError(f"constructors {sorted(unknown)} name no value type")

    @property
    def known_names(self) -> frozenset[str]:
        """Names a snippet may use without defining them."""
        return frozenset(self.tools) | self.builtins | frozenset(self.modules) | self.constructors

    @functools.cached_property
    def value_methods(self) -> frozenset[str]:
        """Public methods of the value types: callable on values like the methods on the allow-list."""
        return frozenset(name for cls in self.value_types for name in dir(cls)
                         if not name.startswith("_") and callable(getattr(cls, name)))

    @functools.cached_property
    def call_signatures(self) -> dict[str, tuple[Any, ...]]:
        """Signatures of the allowed builtins (by name), numpy functions (``np.<dotted>``) and value-type
        constructors, from the objects themselves (``robot/contract/signatures.py``); a name missing is not
        checked for arity."""
        import numpy

        from robot.contract import signatures

        found: dict[str, tuple[Any, ...]] = {}
        named = [(name, getattr(builtins, name)) for name in self.builtins]
        named += [(cls.__name__, cls) for cls in self.value_types if cls.__name__ in self.constructors]
        for module, allowed in self.modules.items():
            for dotted in allowed:
                obj: Any = numpy
                for part in dotted.split("."):
                    obj = getattr(obj, part)
                named.append((f"{module}.{dotted}", obj))
        for name, obj in named:
            if callable(obj):
                sig = signatures.signature_of(obj, name)
                if sig is not None:
                    found[name] = (sig,)
        return found

    @functools.cached_property
    def method_signatures(self) -> dict[str, tuple[Any, ...]]:
        """Signatures of the allowed methods on every plain type and value type that has them (any one may be the
        receiver); a name missing is not checked for arity."""
        from robot.contract import signatures

        return signatures.method_signatures(self.methods | self.value_methods, self.value_types)

    def check(self, code: str) -> Verdict:
        reasons = _code_checks.check(code, self)
        return Verdict(ok=not reasons, reasons=tuple(reasons))

    def undefined_calls(self, code: str) -> list[_code_checks.CallSite]:
        """Calls of plain names that are neither known nor defined in ``code``, first call site per name, in order
        of appearance; [] when the code does not parse. The hierarchical generator sends each to a sub-agent."""
        return _code_checks.undefined_calls(code, self)

    def defined_functions(self, code: str) -> list[str]:
        """Names of the functions ``code`` defines at any level; [] when it does not parse."""
        return _code_checks.defined_functions(code)

    # ------------------------------------------------------------------------------------------ runtime side

    def compile(self, code: str) -> Any:
        """The code object of a snippet, compiled by the restricted compiler; ValueError when it refuses."""
        from robot.contract.restricted import compile_snippet

        compiled, errors = compile_snippet(code)
        if compiled is None:
            raise ValueError("; ".join(f"line {line}: {message}" if line else message for line, message in errors))
        return compiled

    def safe_builtins(self) -> dict[str, Any]:
        """The ``__builtins__`` of the sandbox: exactly the allowed builtins."""
        return {name: getattr(builtins, name) for name in sorted(self.builtins)}

    def runtime_globals(self, tools: Mapping[str, Any], print_fn: Any = None, violation: Any = None,
                        exception_types: tuple[type, ...] = (), caught: Any = None) -> dict[str, Any]:
        """Globals for executing a snippet compiled by :meth:`compile`: the allowed builtins (``print`` replaced by
        ``print_fn`` if given), the module views, the tools (name -> callable) and the guards of
        ``robot/contract/restricted.py`` built from this policy's lists. ``violation`` is called when a guard refuses
        (default: raise ``SandboxViolation``)."""
        import numpy

        from robot.contract import restricted

        safe = self.safe_builtins()
        if print_fn is not None:
            safe["print"] = print_fn
        views = {"np": restricted.module_view(numpy, self.modules["np"])}
        extra = {} if violation is None else {"violation": violation}
        if caught is not None:
            extra["caught"] = caught
        namespace = restricted.guarded_globals(builtins=safe, modules=views, tools=dict(tools), methods=self.methods,
                                               attributes=self.attributes, value_types=self.value_types,
                                               exception_types=exception_types, **extra)
        namespace.update({cls.__name__: cls for cls in self.value_types if cls.__name__ in self.constructors})
        return namespace

    def namespace(self, backend: ToolAPI) -> dict[str, Any]:
        """:meth:`runtime_globals` with ``backend``'s methods as the tools (in-process: tests, the recording backend
        of the prompts). The ROS runner never runs code in its own process: see ``robot/sandbox/``.

        ``np`` is not the numpy module but a view of it holding only the attributes on ``modules["np"]`` -- the
        very list the static check uses -- so code cannot reach at run time what the check would reject.
        """
        return self.runtime_globals({name: getattr(backend, name) for name in self.tools})


def restricted_module(module: Any, allowed: frozenset[str]) -> SimpleNamespace:
    """A stand-in for a module holding only the allow-listed attributes (``linalg.norm`` as a nested namespace)."""
    from robot.contract.restricted import module_view

    return module_view(module, allowed)


#: The policy every stage and the ROS runner use.
DEFAULT_POLICY = CodePolicy()


def check_snippet(code: str, policy: CodePolicy = DEFAULT_POLICY) -> Verdict:
    """Check one snippet against the policy; the verdict carries every reason it fails."""
    return policy.check(code)
