"""The wire format between the runner, the sandbox's fork server (zygote) and a child: JSON, one message per line
(per packet on the zygote's control socket), each checked against a schema, with size caps. Never pickle: unpickling
runs whatever an object's ``__reduce__`` names, in whoever unpickles it (the runner).

Values (tool arguments and results)::

    null | true | false | int (|x| < 2**63) | finite float | str | [v, ...] (list)
    {"$f": "nan" | "inf" | "-inf"}               a non-finite float (JSON has none)
    {"$t": [v, ...]}                              tuple
    {"$set": [v, ...]}  {"$fs": [v, ...]}          set, frozenset (items hashable once decoded)
    {"$d": [[k, v], ...]}                         dict (keys: any value above that is hashable once decoded)
    {"$nd": [dtype, [shape...], [flat...]]}       numpy array, dtype "f8" | "i8" | "b1" | "U"
    {"$ns": [dtype, x]}                           numpy scalar of those dtypes
    {"$v": [type name, {field: v, ...}]}          a value type of the tool API (tool_api.VALUE_TYPES), by its fields

One schema for both ends: :meth:`Codec.encode` ends by running :meth:`Codec.decode` on what it produced, so a value
the sender can encode is, by construction, a value the receiver accepts; anything else is refused where it is sent
(in the child: a catchable ToolArgumentError, never a protocol violation that ends the repeat ``crashed``).

Messages (``t`` names the type; a missing, extra or mistyped field is a protocol violation)::

    child  -> runner  call  {id, tool, args: [v], kwargs: {name: v}, line: int|null (the snippet's line)}
                      print {text}
                      error {kind: code|robot|memory|violation, text, line: int|null, ref: int|null}
    runner -> child   start {code, tools: {name: [[param, ...], n_required]}, policy: {list name: [str]},
                             max_stdout}
                      result {id, value}      raise {id, exc, text}
                      probe {code}            (tests only: a zygote started with allow_probe)
    runner -> zygote  spawn {id, memory_mb, cpu_s}  (+ the child's two pipe ends by SCM_RIGHTS)      kill {id}
    zygote -> runner  ready {pid, uid, isolation}   spawned {id}   exit {id, code: int|null, signal: int|null}
                      spawn_failed {id, text}

Nothing in a message decides how a repeat ends: the runner classifies it from its own bookkeeping and the child's
exit status, which the zygote (running no untrusted code) reports (``robot/sandbox/host.py``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from robot.contract.tool_api import value_fields

MAX_LINE = 1 << 20
"""Longest message the runner accepts from a child (1 MiB); longer is a protocol violation."""
MAX_TOTAL = 32 << 20
"""Bytes a child may send in one repeat (32 MiB); more is a protocol violation."""
MAX_TEXT = 2000
"""Longest error text kept, in characters."""
MAX_STDOUT = 4000
"""Longest printed output kept per repeat, in characters."""
MAX_DEPTH = 24
MAX_ITEMS = 500_000
MAX_INT = 1 << 63
DTYPES = {"f8": "float64", "i8": "int64", "b1": "bool", "U": "str"}


class ProtocolError(Exception):
    """A message that does not follow the schema, or a value that cannot cross the boundary."""


_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional marks and overrides: printable to Python, but they reorder what a terminal or a report shows."""
CLIPPED = " ... (clipped)"


def _escape(c: str) -> str:
    if c in "\n\t" or (c.isprintable() and c not in _BIDI):
        return c
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def clip(text: Any, limit: int = MAX_TEXT) -> str:
    """The one cleaner for every text a snippet can make the runner store or show (printed output, error text,
    exception names, tool-argument echoes, notes): valid UTF-8 only, then capped at ``limit`` characters.

    Newline and tab stay; every other character Python does not call printable -- control characters (NUL, ESC,
    carriage return, DEL, C1), lone surrogates (which no UTF-8 encoder accepts), private-use and unassigned code
    points, line and paragraph separators -- and the bidirectional overrides become a visible escape (``\\x1b``,
    ``\\udc80``, ``\\u202e``); an escape is never cut in half. The result always encodes as UTF-8 and round-trips
    through JSON. Anything that is not a ``str`` is cleaned as its ``str()`` (or its type's name if that fails)."""
    if type(text) is not str:
        try:
            text = str(text)
        except Exception:  # noqa: BLE001 - a __str__ that raises
            text = f"<{type(text).__name__}>"
        text = str.__str__(text) if isinstance(text, str) else ""
    if limit <= len(CLIPPED):
        raise ValueError(f"clip limit {limit} is too small")
    pieces = [_escape(c) for c in text[: limit + 1]]
    if len(text) <= limit and sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    out, room = [], limit - len(CLIPPED)
    for piece in pieces:
        if len(piece) > room:
            break
        out.append(piece)
        room -= len(piece)
    return "".join(out) + CLIPPED


# ---------------------------------------------------------------------------------------------------------- values


class Codec:
    """Turns values into their JSON form and back; the tool API's value types travel by their fields
    (``tool_api.value_fields``).

    Anything else -- a function, a module, an arbitrary object -- cannot be encoded (:class:`ProtocolError`)."""

    def __init__(self, value_types: tuple[type, ...]):
        self.names: dict[type, str] = {}
        self.types: dict[str, type] = {}
        self.fields: dict[type, tuple[str, ...]] = {}
        for cls in value_types:
            fields = value_fields(cls)
            if not fields:
                raise TypeError(f"value type {cls.__name__} must declare its fields (a dataclass, or __slots__) to "
                                "cross the sandbox boundary")
            self.names[cls] = cls.__name__
            self.types[cls.__name__] = cls
            self.fields[cls] = fields

    # -------------------------------------------------------------------------------------------- encode

    def encode(self, value: Any) -> Any:
        """The JSON form of ``value``; :class:`ProtocolError` when the value, or its JSON form, is outside the
        schema -- checked by the very decoder the other end runs."""
        data = self._enc(value, 0, _Budget())
        self.decode(data)
        return data

    def _enc(self, v: Any, depth: int, budget: _Budget) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError("value nested too deeply")
        budget.take()
        cls = type(v)
        if v is None or cls is bool or cls is str:
            return v
        if cls is int:
            if not -MAX_INT < v < MAX_INT:
                raise ProtocolError("integer out of range")
            return v
        if cls is float:
            return v if math.isfinite(v) else {"$f": repr(v)}
        if cls is list:
            return [self._enc(x, depth + 1, budget) for x in v]
        if cls is tuple:
            return {"$t": [self._enc(x, depth + 1, budget) for x in v]}
        if cls in (set, frozenset):
            return {"$set" if cls is set else "$fs": [self._enc(x, depth + 1, budget) for x in v]}
        if cls is dict:
            return {"$d": [[self._enc(k, depth + 1, budget), self._enc(x, depth + 1, budget)] for k, x in v.items()]}
        if cls in self.names:
            return {"$v": [self.names[cls], {f: self._enc(getattr(v, f), depth + 1, budget) for f in self.fields[cls]}]}
        import numpy as np  # only here: the schema itself imports without numpy

        if isinstance(v, np.generic):
            code = _dtype_code(v.dtype)
            return {"$ns": [code, _plain_scalar(v.item(), code)]}
        if isinstance(v, np.ndarray):
            code = _dtype_code(v.dtype)
            _check_shape(list(v.shape), int(v.size))
            budget.take(int(v.size))
            flat = [_plain_scalar(x, code) for x in v.reshape(-1).tolist()]
            return {"$nd": [code, list(v.shape), flat]}
        raise ProtocolError(f"a value of type {cls.__name__} cannot be sent to the robot")

    # -------------------------------------------------------------------------------------------- decode

    def decode(self, data: Any) -> Any:
        return self._dec(data, 0, _Budget())

    def _dec(self, d: Any, depth: int, budget: _Budget) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError("value nested too deeply")
        budget.take()
        cls = type(d)
        if d is None or cls in (bool, str, float):
            return d
        if cls is int:
            if not -MAX_INT < d < MAX_INT:
                raise ProtocolError("integer out of range")
            return d
        if cls is list:
            return [self._dec(x, depth + 1, budget) for x in d]
        _need(cls is dict and len(d) == 1, "a JSON object in a value must have exactly one tag")
        (tag, body), = d.items()
        if tag == "$f":
            _need(body in _NONFINITE, "bad non-finite float")
            return _NONFINITE[body]
        if tag in ("$t", "$set", "$fs"):
            _need(type(body) is list, f"{tag} needs a list")
            items = [self._dec(x, depth + 1, budget) for x in body]
            if tag == "$t":
                return tuple(items)
            _need(all(_hashable(x) for x in items), "a set holds only hashable values (no list, dict or set)")
            return set(items) if tag == "$set" else frozenset(items)
        if tag == "$d":
            _need(type(body) is list, "$d needs a list of pairs")
            out = {}
            for pair in body:
                _need(type(pair) is list and len(pair) == 2, "$d needs a list of pairs")
                key = self._dec(pair[0], depth + 1, budget)
                _need(_hashable(key), "a dict key must be hashable (no list, dict or set)")
                out[key] = self._dec(pair[1], depth + 1, budget)
            return out
        if tag == "$nd":
            return self._array(body, budget)
        if tag == "$ns":
            _need(type(body) is list and len(body) == 2 and body[0] in DTYPES, "bad $ns")
            import numpy as np

            value = body[1]  # a plain scalar, as the encoder writes it (one item of the budget, like there)
            if body[0] == "f8" and type(value) is dict and len(value) == 1 and value.get("$f") in _NONFINITE:
                value = _NONFINITE[value["$f"]]
            _need(type(value) in _KINDS[body[0]], "$ns value of the wrong type")
            if type(value) is int:
                _need(-MAX_INT < value < MAX_INT, "integer out of range")
            return np.array(value, dtype=DTYPES[body[0]])[()]
        if tag == "$v":
            _need(type(body) is list and len(body) == 2 and body[0] in self.types and type(body[1]) is dict,
                  "bad $v (an unknown value type?)")
            target = self.types[body[0]]
            _need(set(body[1]) == set(self.fields[target]), f"the fields of a {body[0]} are {self.fields[target]}")
            fields = {k: self._dec(v, depth + 1, budget) for k, v in body[1].items()}
            try:
                return target(**fields)
            except Exception as exc:  # noqa: BLE001 - a value type's own validation
                raise ProtocolError(f"bad {body[0]}: {str(exc)[:200]}") from None
        raise ProtocolError(f"unknown value tag {str(tag)[:20]!r}")

    def _array(self, body: Any, budget: _Budget) -> Any:
        _need(type(body) is list and len(body) == 3 and body[0] in DTYPES and type(body[1]) is list
              and type(body[2]) is list, "bad $nd")
        shape = body[1]
        _check_shape(shape, len(body[2]))
        size = len(body[2])
        budget.take(size)
        code = body[0]
        flat = body[2]
        if code == "f8":
            flat = [_NONFINITE[x["$f"]] if type(x) is dict and len(x) == 1 and x.get("$f") in _NONFINITE else x
                    for x in flat]
        _need(all(type(x) in _KINDS[code] for x in flat), "$nd data of the wrong type")
        _need(all(-MAX_INT < x < MAX_INT for x in flat if type(x) is int), "integer out of range")
        import numpy as np

        return np.array(flat, dtype=DTYPES[code]).reshape(shape)


class _Budget:
    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items = 0

    def take(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise ProtocolError(f"value too large (more than {MAX_ITEMS} items)")


_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_KINDS: dict[str, tuple[type, ...]] = {"f8": (int, float), "i8": (int,), "b1": (bool,), "U": (str,)}


def _dtype_code(dtype: Any) -> str:
    code = {"f": "f8", "i": "i8", "u": "i8", "b": "b1", "U": "U"}.get(dtype.kind)
    if code is None:
        raise ProtocolError(f"numpy values of dtype {dtype} cannot be sent to the robot")
    return code


def _plain_scalar(x: Any, code: str) -> Any:
    if code == "f8":
        x = float(x)
        return x if math.isfinite(x) else {"$f": repr(x)}
    if code == "i8":
        x = int(x)
        if not -MAX_INT < x < MAX_INT:
            raise ProtocolError("integer out of range")
        return x
    return bool(x) if code == "b1" else str(x)


def _check_shape(shape: list, size: int) -> None:
    """The one rule for an array's shape, on both ends: at most 8 dimensions of at most MAX_ITEMS each, whose
    product is the number of items."""
    _need(len(shape) <= 8 and all(type(n) is int and 0 <= n <= MAX_ITEMS for n in shape),
          f"an array may have at most 8 dimensions of at most {MAX_ITEMS} each")
    _need(math.prod(shape) == size and size <= MAX_ITEMS, "$nd data does not match its shape")


def _hashable(k: Any) -> bool:
    """Whether a *decoded* value can be a dict key or set item (what both ends check: a numpy scalar, a tuple of
    them, a frozenset can; a list, dict, set or array cannot)."""
    try:
        hash(k)
    except TypeError:
        return False
    return True


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise ProtocolError(why)


# -------------------------------------------------------------------------------------------------------- messages

_INT = (int,)
_OPT_INT = (int, type(None))
_STR = (str,)
_ANY = (object,)

SCHEMAS: dict[str, dict[str, dict[str, tuple[type, ...]]]] = {
    "child": {
        "call": {"id": _INT, "tool": _STR, "args": (list,), "kwargs": (dict,), "line": _OPT_INT},
        "print": {"text": _STR},
        "error": {"kind": _STR, "text": _STR, "line": _OPT_INT, "ref": _OPT_INT},
    },
    "runner": {
        "start": {"code": _STR, "tools": (dict,), "policy": (dict,), "max_stdout": _INT},
        "result": {"id": _INT, "value": _ANY},
        "raise": {"id": _INT, "exc": _STR, "text": _STR},
        "probe": {"code": _STR},
    },
    "host": {
        "spawn": {"id": _INT, "memory_mb": _INT, "cpu_s": (int, float)},
        "kill": {"id": _INT},
    },
    "zygote": {
        "ready": {"pid": _INT, "uid": _INT, "isolation": _STR},
        "spawned": {"id": _INT},
        "exit": {"id": _INT, "code": _OPT_INT, "signal": _OPT_INT},
        "spawn_failed": {"id": _INT, "text": _STR},
    },
}
ERROR_KINDS = ("code", "robot", "memory", "violation")


def dumps(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode() + b"\n"


def loads(line: bytes, sender: str, max_line: int = MAX_LINE) -> dict:
    """Parse and check one message from ``sender`` (a key of :data:`SCHEMAS`); :class:`ProtocolError` for anything
    that sender may not send."""
    if len(line) > max_line:
        raise ProtocolError("message too long")
    try:
        msg = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {str(exc)[:100]}") from None
    if type(msg) is not dict or type(msg.get("t")) is not str:
        raise ProtocolError("a message is a JSON object with a string 't'")
    schema = SCHEMAS[sender].get(msg["t"])
    if schema is None:
        raise ProtocolError(f"{sender} may not send a {msg['t'][:40]!r} message")
    if set(msg) != {"t", *schema}:
        raise ProtocolError(f"the fields of {msg['t']!r} must be exactly {sorted(schema)}")
    for key, kinds in schema.items():
        value = msg[key]
        if object not in kinds and (type(value) not in kinds or (type(value) is bool and bool not in kinds)):
            raise ProtocolError(f"field {key!r} of {msg['t']!r} has the wrong type")
    if msg["t"] == "error" and msg["kind"] not in ERROR_KINDS:
        raise ProtocolError("unknown error kind")
    return msg


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class LineReader:
    """Splits a byte stream into lines within the caps; :class:`ProtocolError` on overflow."""

    def __init__(self, max_line: int = MAX_LINE, max_total: int = MAX_TOTAL):
        self.buffer = bytearray()
        self.total = 0
        self.max_line = max_line
        self.max_total = max_total

    def feed(self, data: bytes) -> list[bytes]:
        self.total += len(data)
        if self.total > self.max_total:
            raise ProtocolError(f"more than {self.max_total} bytes from the child")
        self.buffer += data
        lines = []
        while True:
            cut = self.buffer.find(b"\n")
            if cut < 0:
                break
            if cut > self.max_line:
                raise ProtocolError("message too long")
            lines.append(bytes(self.buffer[:cut]))
            del self.buffer[:cut + 1]
        if len(self.buffer) > self.max_line:
            raise ProtocolError("message too long")
        return lines

