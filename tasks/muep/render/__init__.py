"""Renderers: the image of a MuEP world state.

The demonstrations stage replays an expert plan and, after every action, asks a renderer for the picture of the
resulting :class:`~tasks.muep.world_state.WorldState`. A renderer is chosen by name (``renderer:`` in the params)::

    renderer = build_renderer("schematic", size=320)
    renderer.begin_scene(layout)              # once per scene: static background, geometry
    png = renderer.render(layout, state)      # once per step: PNG bytes
    renderer.close()

Implementations (``core.plugins.RENDERERS``):

* ``schematic`` (default, :mod:`tasks.muep.render.schematic`): a deterministic top-down drawing made with Pillow.
  Runs everywhere, no extra dependency.
* ``thor`` (:mod:`tasks.muep.render.thor`): egocentric frames from the real AI2-THOR simulator. Needs the optional
  ``ai2thor`` package and a machine that can run its Unity build; fails at construction otherwise.

Every record the demonstrations stage writes names the renderer (``name``) and its ``version``: change ``version``
whenever the pictures a renderer produces change.
"""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from core.errors import ConfigError
from core.plugins import RENDERERS
from tasks.muep.world_state import SceneLayout, WorldState

DEFAULT_RENDERER = "schematic"


@runtime_checkable
class Renderer(Protocol):
    name: str
    version: str

    def begin_scene(self, layout: SceneLayout) -> None:
        """Precompute what depends only on the scene (the static background). Called once per scene."""

    def render(self, layout: SceneLayout, state: WorldState) -> bytes:
        """The PNG bytes of ``state`` drawn in ``layout``."""

    def close(self) -> None:
        """Release whatever the renderer holds (a simulator process...)."""


def build_renderer(name: str, **options) -> Renderer:
    """Construct the renderer registered as ``name`` with its keyword ``options``.

    Raises :class:`~core.errors.ConfigError` for an unknown name (listing the registered ones) or an option the
    renderer does not take; a renderer that cannot run here (``thor`` without its simulator) raises its own
    :class:`~core.errors.PipelineError` at this point, never at the first step.
    """
    factory = RENDERERS.load(name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError:
        params = [p for p in inspect.signature(factory).parameters.values()
                  if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        takes = ", ".join(p.name for p in params) or "none"
        unknown = ", ".join(sorted(set(options) - {p.name for p in params})) or "(none)"
        raise ConfigError(f"renderer {name!r} does not take option(s) {unknown}; it takes: {takes}.") from None
    return factory(**options)

__all__ = ["DEFAULT_RENDERER", "RENDERERS", "Renderer", "build_renderer"]
