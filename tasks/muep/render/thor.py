"""The ``thor`` renderer: egocentric frames from the real AI2-THOR simulator (optional).

Requirements: the ``ai2thor`` package (``pip install ai2thor``) and a machine that can run its Unity build -- an X
server (``x_display=":0"``) or, headless on Linux with a GPU, ``platform="CloudRendering"``. ``ai2thor`` downloads
that build on first use, so the first run also needs network access. When the package is missing or the simulator
cannot start, :class:`ThorRenderer` raises :class:`ThorUnavailableError` **when it is constructed** -- there is no
silent fallback; choose ``renderer: schematic`` to run without it.

What this renderer reproduces faithfully:

* the scene: ``begin_scene`` resets the controller to ``layout.scene`` (FloorPlanN);
* the agent's pose: each step teleports the agent to the interaction pose (x, z, rotation, horizon) of the
  receptacle it stands at -- ALFWorld's own pose from its ``-openable.json`` layout files -- or to the layout's start
  pose, and returns that egocentric frame;
* open / closed receptacles, for the receptacles whose THOR object id comes from ALFWorld's openable file: the id is
  looked up again from ALFWorld's data by receptacle name, matched to the running scene's objects (exactly, or the
  nearest object of the same type when the THOR version numbers the id slightly differently) and opened or closed
  to follow ``state.opened``.

What it cannot reproduce (the frame shows THOR's own scene, not ours, for these):

* receptacles whose pose we synthesised (``pose_synthesized``: StoveBurner, CoffeeMachine, Toaster, most
  GarbageCans) have no THOR id in ALFWorld's file: the agent is teleported to the made-up pose, but nothing is
  opened there, and the view may not even face the object;
* small objects: our instances and their initial placements are drawn from a seed by the metadata stage and have no
  3-D pose; THOR shows its default objects where its scene puts them. Picking up, putting down and the held object
  are therefore not shown;
* state marks (hot, cool, clean, sliced, toggled lamps) are symbolic in our pipeline and are not applied to THOR
  objects.

Frames are what the simulator returns; THOR does not promise bit-identical frames across machines or GPU drivers, so
unlike ``schematic`` this renderer is not byte-deterministic.
"""

from __future__ import annotations

import importlib
import io
import logging
import math
import re
from collections.abc import Mapping

from PIL import Image

from core.errors import PipelineError
from tasks.muep.world_state import SceneLayout, WorldState

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "To use it: `pip install ai2thor`, on a machine that can run its Unity build (an X server, or "
    "platform: CloudRendering on a headless Linux GPU machine; the build is downloaded on first use, so that needs "
    "network access). Otherwise choose `renderer: schematic` (the default), which needs nothing extra."
)


class ThorUnavailableError(PipelineError):
    """The ``thor`` renderer cannot run on this machine."""

    hint = INSTALL_HINT


def _floorplan(scene: str) -> int:
    # FloorPlanN, an instantiation FloorPlanN-K, or an ALFWorld evaluation game's FloorPlanN-trial_T...
    m = re.match(r"FloorPlan(\d+)(?:-\d+|-trial_T\w+)?$", scene)
    if not m:
        raise PipelineError(f"renderer 'thor': scene {scene!r} is not an AI2-THOR FloorPlanN scene.")
    return int(m.group(1))


def _id_position(thor_id: str) -> tuple[float, float, float] | None:
    parts = thor_id.split("|")
    try:
        return (float(parts[1]), float(parts[2]), float(parts[3]))
    except (IndexError, ValueError):
        return None


def alfworld_thor_ids(layout: SceneLayout) -> dict[str, str]:
    """Receptacle name -> THOR object id from ALFWorld's openable file, for the receptacles with a real pose.

    The metadata stage numbers receptacles by (type, THOR id); the ids of real receptacles do not depend on the seed
    (only synthesised ones do), so they can be looked up again here. A name whose pose in ``layout`` differs from
    ALFWorld's is left out rather than guessed.
    """
    from tasks.muep import alfworld_data
    from tasks.muep.metadata import collect_receptacles

    records = collect_receptacles(alfworld_data.read_scene(_floorplan(layout.scene)), seed=0)
    by_name = {r.name: r for r in records if not r.pose_synthesized}
    out = {}
    for rec in layout.receptacles:
        r = by_name.get(rec.name)
        if r is None or rec.pose_synthesized:
            continue
        if (abs(r.x - rec.x), abs(r.z - rec.z), abs(r.rotation - rec.rotation)) > (1e-6, 1e-6, 1e-6):
            log.warning("thor renderer: %s in %s has another pose than ALFWorld's %s; not opened/closed",
                        rec.name, layout.scene, r.thor_id)
            continue
        out[rec.name] = r.thor_id
    return out


class ThorRenderer:
    """AI2-THOR egocentric frames (see the module docstring for what is and is not reproduced).

    Options: ``width``/``height`` of the frame (default 300x300, ALFWorld's), ``platform`` (``None`` for the X
    display, or ``"CloudRendering"``), ``x_display``, ``scene`` to start with (default FloorPlan1), and
    ``controller_options`` passed on to ``ai2thor.controller.Controller``.
    """

    name = "thor"
    version = "1"

    def __init__(self, width: int = 300, height: int = 300, platform: str | None = None, x_display: str | None = None,
                 scene: str = "FloorPlan1", controller_options: Mapping | None = None):
        try:
            controller_mod = importlib.import_module("ai2thor.controller")
            ai2thor = importlib.import_module("ai2thor")
        except ImportError as exc:
            raise ThorUnavailableError(
                f"renderer 'thor' needs the optional `ai2thor` package, which cannot be imported here ({exc})."
            ) from None
        kwargs = dict(scene=scene, width=width, height=height, gridSize=0.25, visibilityDistance=1.5,
                      renderDepthImage=False, renderInstanceSegmentation=False)
        if x_display is not None:
            kwargs["x_display"] = x_display
        if platform is not None:
            try:
                kwargs["platform"] = getattr(importlib.import_module("ai2thor.platform"), platform)
            except (ImportError, AttributeError):
                raise ThorUnavailableError(f"renderer 'thor': unknown ai2thor platform {platform!r}.") from None
        kwargs.update(controller_options or {})
        try:
            self._controller = controller_mod.Controller(**kwargs)
        except Exception as exc:  # the Unity build is missing, cannot be downloaded or cannot open a display
            raise ThorUnavailableError(
                f"renderer 'thor': the AI2-THOR simulator could not be started ({type(exc).__name__}: {exc})."
            ) from None
        self.version = f"{ThorRenderer.version}+ai2thor-{getattr(ai2thor, '__version__', 'unknown')}"
        self._layout: SceneLayout | None = None
        self._ids: dict[str, str] = {}       # receptacle name -> object id in the running scene
        self._open: set[str] = set()         # object ids currently open in the simulator
        self._agent_y = 0.9009992            # ALFWorld's standing camera height; replaced by the scene's own

    # ---------------------------------------------------------------------------------------------------------------

    def _step(self, **action):
        event = self._controller.step(**action)
        if not event.metadata.get("lastActionSuccess", True):
            log.warning("thor renderer: %s failed: %s", action.get("action"), event.metadata.get("errorMessage"))
        return event

    def begin_scene(self, layout: SceneLayout) -> None:
        event = self._controller.reset(scene=layout.scene)
        objects = event.metadata.get("objects", [])
        self._agent_y = event.metadata.get("agent", {}).get("position", {}).get("y", self._agent_y)
        by_id = {o["objectId"]: o for o in objects}
        self._ids = {}
        for name, thor_id in alfworld_thor_ids(layout).items():
            resolved = thor_id if thor_id in by_id else self._nearest(thor_id, objects)
            if resolved is None:
                log.warning("thor renderer: no object like %s (%s) in %s", thor_id, name, layout.scene)
                continue
            self._ids[name] = resolved
        self._open = {o["objectId"] for o in objects if o.get("isOpen")}
        self._layout = layout

    @staticmethod
    def _nearest(thor_id: str, objects: list[dict]) -> str | None:
        """The object of the same type nearest the position encoded in ``thor_id`` (within 0.5 m)."""
        pos = _id_position(thor_id)
        if pos is None:
            return None
        otype = thor_id.split("|")[-1] if len(thor_id.split("|")) > 4 else thor_id.split("|")[0]
        best, best_d = None, 0.5
        for o in objects:
            if o.get("objectType") != otype:
                continue
            p = o.get("position", {})
            d = math.dist(pos, (p.get("x", 0.0), p.get("y", 0.0), p.get("z", 0.0)))
            if d < best_d:
                best, best_d = o["objectId"], d
        return best

    def render(self, layout: SceneLayout, state: WorldState) -> bytes:
        if self._layout is not layout and self._layout != layout:
            self.begin_scene(layout)
        want = {self._ids[n] for n in state.opened if n in self._ids}
        for obj_id in sorted(set(self._ids.values())):
            if obj_id in want and obj_id not in self._open:
                self._step(action="OpenObject", objectId=obj_id, forceAction=True)
                self._open.add(obj_id)
            elif obj_id not in want and obj_id in self._open:
                self._step(action="CloseObject", objectId=obj_id, forceAction=True)
                self._open.discard(obj_id)
        if state.agent_at is not None:
            try:
                r = layout.receptacle(state.agent_at)
            except KeyError:
                raise PipelineError(f"renderer 'thor': the agent stands at {state.agent_at!r}, which has no pose in "
                                    f"the layout of {layout.scene}.") from None
            x, z, rotation, horizon = r.x, r.z, r.rotation, r.horizon
        else:
            x, z, rotation, horizon = layout.start
        event = self._step(action="TeleportFull", x=x, y=self._agent_y, z=z, rotation=dict(x=0, y=rotation, z=0),
                           horizon=horizon, standing=True, forceAction=True)
        out = io.BytesIO()
        Image.fromarray(event.frame).convert("RGB").save(out, format="PNG")
        return out.getvalue()

    def close(self) -> None:
        controller, self._controller = getattr(self, "_controller", None), None
        if controller is not None:
            controller.stop()
