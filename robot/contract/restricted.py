"""The restricted language generated robot code runs in: RestrictedPython's compiler, extended, and the guards the
compiled code calls at run time.

RestrictedPython (``compile_restricted_exec``) rewrites ``a.b`` to ``_getattr_(a, 'b')``, ``a[i]`` to
``_getitem_(a, i)``, iteration to ``_getiter_(x)``, item stores to ``_write_(a)[i] = v``, ``n += 1`` to
``n = _inplacevar_('+=', n, 1)`` and unpacking to ``_unpack_sequence_``; it refuses every name and attribute that
starts with ``_``, the frame, code, generator and traceback attributes that do not (``gi_frame``, ``f_back``,
``f_globals``, ``tb_frame``, ...), ``exec``/``eval``, async code, ``nonlocal``, ``match`` and ``except*``.
:class:`SnippetTransformer` adds, for robot code:

* every call becomes ``_call_(f, *args, **kwargs)``, so what is called is checked *when it is called* -- a tool, an
  allowed builtin, an allowed numpy function, a method on the allow-list of a plain value, a value type of the tool
  API, or a function the snippet itself defined -- and never by what the name was bound to earlier;
* no decorators, classes, ``global``, ``yield`` or ``with``; ``del a.b`` is refused;
* ``a.b = v`` and ``a.b += v`` go through ``_write_attr_`` (only the declared fields of a tool API value type can be
  set), ``x[i] += v`` through ``_augitem_`` (RestrictedPython refuses both; robot code does ``p[2] += 0.05``);
* ``print`` stays a plain name: the sandbox's builtins hold a capped ``print``.

The guards (:func:`guarded_globals`) allow attributes by *the receiver's real type and the name*
(:class:`PlainValues`): plain values (numbers, strings, bytes, lists, tuples, dicts, sets, numpy arrays and scalars,
the tool exceptions, and subclasses of them only where they inherit the plain kind's own attribute) expose the
policy's method and attribute names,
tool API value types their public fields and methods, the ``np`` view its allow-listed names. An attribute of
anything else -- a function, a generator, a frame, a type, a module, a tool proxy -- is a violation that ends the
repeat (the ``violation`` hook does not return in the sandbox, so ``except`` cannot swallow it). ``format`` of
every ``str``-like receiver (numpy's ``str_`` too) is a formatter that refuses ``{0.attr}`` and ``{0[key]}`` fields;
``format_map`` is not on the allow-list. Every ``except`` handler starts with ``_caught_()``: the sandbox learns that
the code went on after the exception it handles (a re-raised robot error is then the code's own).

This module imports only the standard library and RestrictedPython (numpy when the guards are built): the sandbox's
fork server imports it inside its namespaces.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
import string
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from RestrictedPython import compile_restricted_exec
from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
)
from RestrictedPython.transformer import (
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

SNIPPET = "<snippet>"
"""File name of every compiled snippet: the call guard knows the snippet's own functions by it."""


# ------------------------------------------------------------------------------------------------- static layer


class SnippetTransformer(RestrictingNodeTransformer):
    """RestrictedPython's transformer with the additions listed in the module doc string."""

    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 - ast.NodeTransformer's naming
        if node.id == "print" and isinstance(node.ctx, ast.Load):
            return node  # the sandbox's own (capped) print, not RestrictedPython's print collector
        if node.id == "printed":
            self.error(node, '"printed" is a reserved name.')
            return node
        return super().visit_Name(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802
        if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
            self.error(node, f"{node.func.id} calls are not allowed.")
        node = self.node_contents_visit(node)
        call = ast.Call(func=ast.Name("_call_", ast.Load()), args=[node.func, *node.args], keywords=node.keywords)
        copy_locations(call, node)
        return call

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:  # noqa: N802
        if node.decorator_list:
            self.error(node, "Decorators are not allowed.")
        return super().visit_FunctionDef(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:  # noqa: N802
        self.error(node, "Class definitions are not allowed.")
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:  # noqa: N802
        self.error(node, "global statements are not allowed.")
        return node

    def visit_Yield(self, node: ast.AST) -> ast.AST:  # noqa: N802
        self.error(node, "Generators (yield) are not allowed.")
        return node

    visit_YieldFrom = visit_Yield

    def visit_With(self, node: ast.With) -> ast.AST:  # noqa: N802
        self.error(node, "with statements are not allowed (nothing robot code may use is a context manager).")
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:  # noqa: N802
        if isinstance(node.ctx, ast.Del):
            self.error(node, f'Deleting the attribute "{node.attr}" is not allowed.')
            return node
        if isinstance(node.ctx, ast.Store):
            self._check_attribute_name(node)
            node.value = self.visit(node.value)
            writer = ast.Call(func=ast.Name("_write_attr_", ast.Load()), args=[node.value], keywords=[])
            copy_locations(writer, node.value)
            node.value = writer
            return node
        return super().visit_Attribute(node)

    def _check_attribute_name(self, node: ast.Attribute) -> None:
        # the checks RestrictedPython's visit_Attribute makes on a load, for a store
        probe = ast.Attribute(value=ast.Name("_", ast.Load()), attr=node.attr, ctx=ast.Load())
        copy_locations(probe, node)
        super().visit_Attribute(probe)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:  # noqa: N802
        """Every handler first tells the runtime that the exception it handles was caught: the code went on after
        it, so re-raising it later ends the repeat as the code's own error (``_caught_``)."""
        node = super().visit_ExceptHandler(node)
        mark = ast.Expr(ast.Call(func=ast.Name("_caught_", ast.Load()), args=[], keywords=[]))
        copy_locations(mark, node)
        copy_locations(mark.value, node)
        copy_locations(mark.value.func, node)
        node.body.insert(0, mark)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:  # noqa: N802
        target = node.target
        if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice):
            args = [self.visit(target.value), self.visit(target.slice)]
            return self._aug_call("_augitem_", args, node)
        if isinstance(target, ast.Attribute):
            self._check_attribute_name(target)
            return self._aug_call("_augattr_", [self.visit(target.value), ast.Constant(target.attr)], node)
        return super().visit_AugAssign(node)

    def _aug_call(self, guard: str, args: list[ast.expr], node: ast.AugAssign) -> ast.AST:
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        call = ast.Call(func=ast.Name(guard, ast.Load()), args=[*args, op, self.visit(node.value)], keywords=[])
        statement = ast.Expr(call)
        copy_locations(statement, node)
        copy_locations(call, node)
        return statement


_LINE = re.compile(r"^Line (\d+): (.*)$", re.S)


def compile_snippet(code: str) -> tuple[types.CodeType | None, list[tuple[int | None, str]]]:
    """``(code object, [])``, or ``(None, [(line, message), ...])`` with what the restricted compiler refuses."""
    try:
        result = compile_restricted_exec(code, filename=SNIPPET, policy=SnippetTransformer)
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - null bytes, absurd nesting, a bug
        return None, [(getattr(exc, "lineno", None), f"{type(exc).__name__}: {str(exc)[:300]}")]
    if result.errors:
        found = []
        for error in result.errors:
            match = _LINE.match(error)
            found.append((int(match[1]), match[2]) if match else (None, error))
        return None, found
    return result.code, []


# ------------------------------------------------------------------------------------------------ runtime layer


class SandboxViolation(BaseException):
    """A guard refused something; not an ``Exception``, so the snippet's ``except Exception`` does not catch it.
    In the sandbox the violation hook ends the process before this is even raised."""


def _refuse(what: str) -> None:
    raise SandboxViolation(what)


class ModuleView(types.SimpleNamespace):
    """What robot code sees as a module (``np``): only the allow-listed names, ``linalg.norm`` as a nested view."""

    def __repr__(self) -> str:
        return "<module view>"


def module_view(module: Any, allowed: Iterable[str]) -> ModuleView:
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for dotted in sorted(allowed):
        head, _, rest = dotted.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = getattr(getattr(module, head), rest)
        else:
            top[head] = getattr(module, head)
    for head, items in nested.items():
        top[head] = ModuleView(**items)
    return ModuleView(**top)


class SafeFormat:
    """``text.format`` for robot code: positional and keyword fields with format specs, but no ``{0.attr}`` or
    ``{0[key]}`` field (the classic walk from a value to ``__globals__``), nested specs included."""

    __slots__ = ("_text",)

    def __init__(self, text: str):
        self._text = text

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        _check_format(self._text, 0)
        return self._text.format(*args, **kwargs)

    def __repr__(self) -> str:
        return "<str.format>"


def _check_format(text: str, depth: int) -> None:
    if depth > 2:
        raise ValueError("format string nested too deeply")
    for _, name, spec, _ in string.Formatter().parse(text):
        if name is not None and ("." in name or "[" in name):
            raise ValueError(f"format field {name[:40]!r}: attribute and index lookups are not allowed in robot code")
        if spec and "{" in spec:
            _check_format(spec, depth + 1)


def public_names(cls: type) -> frozenset[str]:
    """The attributes robot code may read on a tool API value type: its fields and public class attributes."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    return frozenset(names)


def field_names(cls: type) -> frozenset[str]:
    """The attributes robot code may set on a tool API value type (its fields: ``tool_api.value_fields``)."""
    from robot.contract.tool_api import value_fields

    return frozenset(value_fields(cls))


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
}


class _FieldWriter:
    """What ``_write_attr_`` hands to an attribute store: sets declared fields of a value type only."""

    __slots__ = ("_target", "_fields")

    def __init__(self, target: Any, fields: frozenset[str]):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_fields", fields)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._fields:
            raise AttributeError(f"'{type(self._target).__name__}' has no field {name!r} to set "
                                 f"(fields: {', '.join(sorted(self._fields)) or 'none'})")
        setattr(self._target, name, value)


_NO = object()
INDEXABLE = ("list", "tuple", "dict", "str", "bytes", "range", "ndarray")
WRITABLE = ("list", "dict", "ndarray")


class PlainValues:
    """Which attributes a plain value exposes to robot code, decided by the *real* type of the receiver.

    The plain kinds are exact classes: the builtin containers, strings, bytes and numbers, the dict views, numpy's
    ``ndarray`` and ``generic`` (every numpy scalar), and the allowed exceptions. A value whose class is a subclass
    of one (numpy's ``str_`` of ``str``, ``float64`` of ``float`` and ``generic``) counts as each plain kind in its
    method resolution order, and a name is exposed only when it is on the policy's lists, exists on one of those
    kinds, and the receiver's class resolves it to *that kind's own* attribute (a subclass's override is not the
    method the policy listed). Answers are cached per (class, name): snippets cannot create classes.
    """

    def __init__(self, names: frozenset[str], exceptions: frozenset[type]):
        import numpy as np

        self.names = names
        self.exceptions = exceptions
        self.kinds: tuple[type, ...] = (
            list, tuple, dict, set, frozenset, str, bytes, int, float, bool, complex, type(None), range, slice,
            type({}.keys()), type({}.values()), type({}.items()), np.ndarray, np.generic)
        self.by_name = {k.__name__: k for k in self.kinds}
        self.cache: dict[tuple[type, str], bool | None] = {}
        self.kind_cache: dict[type, tuple[type, ...]] = {}

    def kinds_of(self, cls: type) -> tuple[type, ...]:
        """The plain kinds ``cls`` is (in its method resolution order); () when it is none."""
        found = self.kind_cache.get(cls)
        if found is None:
            if issubclass(cls, BaseException):
                found = (cls,) if cls in self.exceptions or cls.__module__ == "builtins" else ()
            else:
                found = tuple(base for base in cls.__mro__ if base in self.kinds)
            self.kind_cache[cls] = found
        return found

    def kind(self, cls: type, names: tuple[str, ...]) -> bool:
        return any(self.by_name.get(n) in self.kinds_of(cls) for n in names)

    def allows(self, cls: type, name: str) -> bool | None:
        """None: ``cls`` is no plain kind (every attribute is a violation); False: no such attribute in robot code;
        True: ``getattr`` may hand it out."""
        key = (cls, name)
        if key not in self.cache:
            kinds = self.kinds_of(cls)
            verdict: bool | None = None if not kinds else False
            if kinds and name in self.names:
                own = _static(cls, name)
                verdict = own is not _NO and any(_static(kind, name) is own for kind in kinds)
            self.cache[key] = verdict
        return self.cache[key]


def _static(cls: type, name: str) -> Any:
    import inspect

    return inspect.getattr_static(cls, name, _NO)


def guarded_globals(*, builtins: Mapping[str, Any], modules: Mapping[str, ModuleView], tools: Mapping[str, Any],
                    methods: frozenset[str], attributes: frozenset[str], value_types: tuple[type, ...],
                    exception_types: tuple[type, ...] = (),
                    violation: Callable[[str], None] = _refuse,
                    caught: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Globals for ``exec`` of a code object from :func:`compile_snippet`.

    ``builtins``: the allowed builtins by name (the sandbox's ``print`` among them); ``modules``: name -> view;
    ``tools``: name -> callable; ``methods`` / ``attributes``: what may be called / read on plain values;
    ``value_types``: the tool API's value types; ``exception_types``: exceptions besides the builtin ones whose
    ``args`` code may read; ``violation``: called with a description when a guard refuses (must not return in the
    sandbox; the default raises :class:`SandboxViolation`); ``caught``: called first thing in every ``except``
    handler of the snippet (the sandbox marks the exception being handled: the code went on after it).
    """
    views: list[ModuleView] = []
    for view in modules.values():
        views.append(view)
        views += [v for v in vars(view).values() if type(v) is ModuleView]
    view_ids = {id(v) for v in views}
    allowed_callables: dict[int, Any] = {}
    for source in (builtins, tools, *(vars(v) for v in views)):
        allowed_callables.update({id(f): f for f in source.values() if callable(f) and type(f) is not ModuleView})
    readable = {cls: public_names(cls) for cls in value_types}
    settable = {cls: field_names(cls) for cls in value_types}
    plain = PlainValues(methods | attributes, frozenset(exception_types))

    def deny(what: str) -> Any:
        violation(what)
        raise SandboxViolation(what)  # reached only when the hook returns

    def getattr_(obj: Any, name: Any, *default: Any) -> Any:
        if type(name) is not str or name.startswith("_"):
            return deny(f"the attribute {str(name)[:40]!r} is not available to robot code")
        cls = type(obj)
        if id(obj) in view_ids and cls is ModuleView:
            if name in vars(obj):
                return vars(obj)[name]
            raise AttributeError(f"np has no attribute {name!r} in robot code")
        if cls in readable:
            if name in readable[cls]:
                return getattr(obj, name)
            raise AttributeError(f"'{cls.__name__}' object has no attribute {name!r} in robot code "
                                 f"(it has {', '.join(sorted(readable[cls]))})")
        allowed = plain.allows(cls, name)
        if allowed is None:
            return deny(f"attributes of a {cls.__name__} are not available to robot code (read of {name!r})")
        if not allowed:
            raise AttributeError(f"'{cls.__name__}' object has no attribute {name!r} in robot code")
        if name == "format" and isinstance(obj, str):
            return SafeFormat(str.__str__(obj))  # every str-like receiver, numpy's str_ included
        return getattr(obj, name)

    def call_(func: Any, *args: Any, **kwargs: Any) -> Any:
        if allowed_callables.get(id(func)) is func:
            return func(*args, **kwargs)
        cls = type(func)
        if cls is types.FunctionType and func.__code__.co_filename == SNIPPET:
            return func(*args, **kwargs)  # a def or lambda of the snippet itself
        if cls is types.BuiltinMethodType and func.__name__ != "format" \
                and plain.allows(type(func.__self__), func.__name__):
            return func(*args, **kwargs)  # e.g. names.append, a.tolist: what getattr_ hands out, by the real type
        if cls is SafeFormat:
            return func(*args, **kwargs)
        if cls is types.MethodType and type(func.__self__) in readable \
                and func.__func__.__name__ in readable[type(func.__self__)]:
            return func(*args, **kwargs)  # a public method of a value type
        if cls is type and func in readable:
            return func(*args, **kwargs)  # building a value type
        return deny(f"calling a {cls.__name__} is not allowed in robot code")

    def getitem_(obj: Any, key: Any) -> Any:
        if plain.kind(type(obj), INDEXABLE) or (
                type(obj) in readable and hasattr(type(obj), "__getitem__")):
            return obj[key]
        return deny(f"indexing a {type(obj).__name__} is not allowed in robot code")

    def write_(obj: Any) -> Any:
        if plain.kind(type(obj), WRITABLE):
            return obj
        return deny(f"changing items of a {type(obj).__name__} is not allowed in robot code")

    def write_attr_(obj: Any) -> Any:
        if type(obj) in settable:
            return _FieldWriter(obj, settable[type(obj)])
        return deny(f"setting attributes of a {type(obj).__name__} is not allowed in robot code")

    def getiter_(obj: Any) -> Any:
        return iter(obj)

    def inplacevar_(op: str, x: Any, y: Any) -> Any:
        return _OPS[op](x, y)

    def augitem_(obj: Any, key: Any, op: str, value: Any) -> None:
        target = write_(obj)
        target[key] = _OPS[op](getitem_(obj, key), value)

    def augattr_(obj: Any, name: str, op: str, value: Any) -> None:
        writer = write_attr_(obj)
        setattr(writer, name, _OPS[op](getattr_(obj, name), value))

    return {
        "__builtins__": dict(builtins), "__name__": "snippet", **modules, **tools,
        "_getattr_": getattr_, "_call_": call_, "_getitem_": getitem_, "_getiter_": getiter_, "_write_": write_,
        "_write_attr_": write_attr_, "_inplacevar_": inplacevar_, "_augitem_": augitem_, "_augattr_": augattr_,
        "_caught_": caught,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence, "_unpack_sequence_": guarded_unpack_sequence,
    }
