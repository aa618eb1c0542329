"""Plug-in registries as name tables: kind -> name -> ``"module:attribute"``, resolved only when a plug-in is built.

A table names its plug-ins without importing them, so validating ``params.yaml`` against it (``require``) costs
nothing and ties no module to another; ``load`` imports the one implementation a run asks for. The tables of every
extensible kind live together in :mod:`core.plugins`. Adding an implementation is adding its module and one line
there::

    LLM_BACKENDS = Registry("LLM backend", {
        "offline": "tasks.llm.offline:OfflineBackend",
        "openai": "tasks.llm.openai_backend:OpenAIBackend",
    })
    backend_cls = LLM_BACKENDS.load("openai")     # imports tasks.llm.openai_backend now, not before
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from core.errors import ConfigError

T = TypeVar("T")

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class Registry(Generic[T]):
    """One extensible kind. ``table`` maps each name to ``"package.module:attribute"`` (the attribute may be
    dotted: ``"pkg.mod:Class.factory"``)."""

    def __init__(self, kind: str, table: Mapping[str, str]):
        for name, target in table.items():
            if not _TARGET.match(target):
                raise ValueError(f"{kind} {name!r}: target {target!r} is not 'module:attribute'")
        self.kind = kind
        self._table = dict(table)

    def _unknown(self, name: object, kind: str | None = None) -> str:
        return f"unknown {kind or self.kind} {name!r}; registered: {', '.join(self.names()) or 'none'}"

    def require(self, name: str, kind: str | None = None) -> str:
        """``name`` if registered, else a ``ValueError`` listing the registered names (for schema validators,
        where pydantic turns it into "<dotted key>: <message>"). ``kind`` overrides the registry's word for it."""
        if name not in self._table:
            raise ValueError(self._unknown(name, kind))
        return name

    def target(self, name: str) -> str:
        """The ``"module:attribute"`` of ``name``, or a :class:`ConfigError` listing the registered names."""
        try:
            return self._table[name]
        except KeyError:
            raise ConfigError(self._unknown(name) + ".") from None

    def load(self, name: str) -> T:
        """Import the plug-in's module and return the named attribute (a class, a factory or a spec object)."""
        module_name, _, attribute = self.target(name).partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            obj = getattr(obj, part)
        return obj

    def names(self) -> list[str]:
        return sorted(self._table)

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._table.items())

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
