"""One small registry type, used once per extensible kind (LLM backend, agent, baseline, renderer, robot backend).

Adding an implementation is adding a module with a decorated class or function, never editing an if/else chain::

    LLM_BACKENDS = Registry("LLM backend")

    @LLM_BACKENDS.register("offline")
    class OfflineProposer: ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from tasks.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return decorator

    def _unknown(self, name: object, kind: str | None = None) -> str:
        return f"unknown {kind or self.kind} {name!r}; registered: {', '.join(self.names()) or 'none'}"

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(self._unknown(name) + ".") from None

    def require(self, name: str, kind: str | None = None) -> str:
        """``name`` if registered, else a ``ValueError`` listing the registered names (for schema validators,
        where pydantic turns it into "<dotted key>: <message>"). ``kind`` overrides the registry's word for it."""
        if name not in self._entries:
            raise ValueError(self._unknown(name, kind))
        return name

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
