"""Call signatures of what robot code may call besides tools and its own functions -- the allowed builtins, numpy
functions, value methods and value-type constructors -- taken from the objects themselves, so that the static check
refuses a call for its arity or keywords only where Python would refuse it too.

``inspect.signature`` answers for most of them. Where it cannot (builtins implemented in C without a text
signature: ``next``, ``min``, ``max``, ``range``, ``dict``...; numpy's ufuncs in old numpy), :data:`FALLBACK` states
the signature as a stub with the same parameters, and tests call the real object with what each stub accepts and
refuses (tests/test_sandbox_signatures.py). A callable with neither is not checked: a call is refused only when every
signature known for the name refuses it.

A method name is checked against every plain type that has it (``pop`` of a list, a dict and a set), since the
receiver's type is not known statically: the call passes when one of them accepts it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

_ = object()

#: Builtins without a signature ``inspect`` can read, as stubs taking the same parameters.
FALLBACK: dict[str, Callable[..., Any]] = {
    "next": lambda iterator, default=_, /: None,
    "iter": lambda obj, sentinel=_, /: None,
    "min": lambda *args, key=_, default=_: None,
    "max": lambda *args, key=_, default=_: None,
    "range": lambda start_or_stop, stop=_, step=_, /: None,
    "dict": lambda mapping=_, /, **kwargs: None,
    "zip": lambda *iterables, strict=False: None,
    "map": lambda function, iterable, /, *iterables: None,
    "filter": lambda function, iterable, /: None,
    "int": lambda x=_, /, base=_: None,
    "str": lambda object=_, encoding=_, errors=_: None,  # noqa: A002 - str's own parameter name
    "set": lambda iterable=_, /: None,
    "bool": lambda x=_, /: None,
}
_EXCEPTION = inspect.signature(lambda *args: None)
_UFUNC_KEYWORDS = ("out", "where", "casting", "order", "dtype", "subok", "signature", "axes", "axis", "keepdims")

#: Receivers whose methods robot code may call (one example of each plain type; numpy's added when built).
_RECEIVERS: tuple[Any, ...] = ([], (), {}, set(), frozenset(), "", b"", 0, 0.0, True, 0j, range(0), {}.keys(),
                               {}.values(), {}.items())


def signature_of(obj: Any, name: str = "") -> inspect.Signature | None:
    """The signature Python binds a call of ``obj`` with; None when it cannot be known."""
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        pass
    if name in FALLBACK:
        return inspect.signature(FALLBACK[name])
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return _EXCEPTION
    nin = getattr(obj, "nin", None)
    if type(nin) is int and type(getattr(obj, "nout", None)) is int:  # a numpy ufunc
        positional = [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(nin)]
        positional += [inspect.Parameter(f"out{i}", inspect.Parameter.POSITIONAL_ONLY, default=None)
                       for i in range(obj.nout)]
        return inspect.Signature(positional + [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None)
                                               for k in _UFUNC_KEYWORDS])
    return None


def method_signatures(names: Iterable[str], value_types: Iterable[type]) -> dict[str, tuple[inspect.Signature, ...]]:
    """name -> the signatures of that method on every plain type and value type having it; a name missing from the
    answer (some receiver's method has no readable signature) is not checked."""
    import numpy as np

    receivers = (*_RECEIVERS, np.zeros(1), np.float64(0), np.int64(0), np.bool_(False), np.str_(""))
    found: dict[str, tuple[inspect.Signature, ...]] = {}
    for name in names:
        sigs: list[inspect.Signature] = []
        unknown = False
        for receiver in receivers:
            method = getattr(receiver, name, None)
            if method is None:
                continue
            sig = signature_of(method)
            unknown |= sig is None
            if sig is not None:
                sigs.append(sig)
        for cls in value_types:
            method = inspect.getattr_static(cls, name, None)
            if method is None or not callable(getattr(cls, name, None)):
                continue
            sig = signature_of(getattr(cls, name))
            if sig is None:
                unknown = True
                continue
            if not isinstance(method, (staticmethod, classmethod)):
                sig = sig.replace(parameters=list(sig.parameters.values())[1:])  # self
            sigs.append(sig)
        if sigs and not unknown:
            found[name] = tuple(sigs)
    return found


def refusal(sigs: tuple[inspect.Signature, ...], n_positional: int, keywords: Iterable[str]) -> tuple[str, str] | None:
    """None when one of ``sigs`` binds ``n_positional`` positional arguments and ``keywords``; else (reason code,
    Python's own words for the first signature)."""
    keywords = list(keywords)
    errors = []
    for sig in sigs:
        try:
            sig.bind(*([None] * n_positional), **dict.fromkeys(keywords))
            return None
        except TypeError as exc:
            errors.append(str(exc))
    known = {p.name for sig in sigs for p in sig.parameters.values() if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for sig in sigs for p in sig.parameters.values())
    unknown = [k for k in keywords if k not in known]
    code = "unknown_keyword" if unknown and not takes_any else "wrong_arity"
    return code, errors[0]
