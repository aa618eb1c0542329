"""The ``schematic`` renderer: a deterministic top-down drawing of a world state, made with Pillow.

What the picture shows (north, AI2-THOR's +z, is up; +x is right):

* a header: the step number, the scene, and the last action;
* the floor: one light square per navigable grid point (0.25 m);
* each receptacle as a labelled box placed just in front of its interaction pose (the point where the agent stands
  to use it, drawn as a small grey dot joined to the box by a thin line). The layout files give where the agent
  stands, not where the furniture is, so the box is put 0.5 m ahead along the pose's rotation and then nudged
  (deterministically) so that no two boxes overlap. Box styles: openable receptacles are wood-coloured with a thick
  *door* edge on the side facing the agent; an open one is drawn with a light interior and its door swung out;
  other receptacles are grey-blue; a receptacle whose pose we synthesised has a dashed outline. Singletons are
  labelled by type ("fridge"), others with their number ("cab3" = cabinet 3);
* objects as small dots in the bottom row of their receptacle's box, one colour per object type; an object in a
  closed openable receptacle is not drawn unless ``show_hidden=True`` (the picture is an observation: the text
  game does not reveal it either). State marks are rings round the dot: hot red, cool blue, clean cyan (with a
  sparkle), toggled a yellow glow (also round the box of a toggled receptacle); a sliced object is drawn as two
  half dots;
* the agent as an orange arrow at its pose (the start pose, or the pose of the receptacle it stands at, whose box
  is then outlined in orange) pointing along its rotation;
* a footer: what the agent holds (with its marks) and, in words, what lies in the receptacle it stands at.

Speed: :meth:`SchematicRenderer.begin_scene` computes the geometry and draws the static background (floor, closed
boxes, labels, header title) once per scene -- the last few scenes are kept, so calling it once per episode is
cheap; :meth:`SchematicRenderer.render` copies that image and draws only the dynamic parts. Output is
deterministic: the same layout and state give the same PNG bytes (no timestamps, no randomness, a fixed drawing
order, sets iterated sorted).
"""

from __future__ import annotations

import io
import json
import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from cachetools import LRUCache
from PIL import Image, ImageDraw, ImageFont, features

from core.errors import ConfigError
from tasks.muep.world_state import ReceptacleLayout, SceneLayout, WorldState

# --------------------------------------------------------------------------------------------------------------------
# Look

BACKDROP = (229, 231, 235)
FLOOR = (252, 248, 238)
FLOOR_EDGE = (226, 218, 200)
STRIP = (38, 44, 56)
STRIP_TEXT = (240, 242, 245)
STRIP_DIM = (160, 168, 180)
TEXT = (30, 30, 36)
LEADER = (160, 160, 168)
OPENABLE_FILL = (214, 184, 140)
OPENABLE_EDGE = (120, 84, 44)
OPEN_FILL = (250, 242, 228)
SURFACE_FILL = (196, 208, 222)
SURFACE_EDGE = (86, 100, 122)
AGENT = (232, 89, 12)
AGENT_EDGE = (120, 40, 0)
MARKS = {
    "hot": (220, 38, 38),
    "cool": (37, 99, 235),
    "clean": (6, 182, 212),
    "toggled": (250, 204, 21),
    "sliced": (90, 90, 90),
}
MARK_ORDER = ("hot", "cool", "clean", "toggled", "sliced")
#: Object colours, picked by a stable hash of the object type (crc32, not Python's salted ``hash``).
PALETTE = (
    (230, 25, 75), (60, 180, 75), (255, 165, 0), (0, 130, 200), (145, 30, 180), (70, 200, 200),
    (240, 50, 230), (150, 190, 40), (170, 110, 40), (128, 0, 0), (0, 128, 128), (0, 0, 128), (128, 128, 0),
    (255, 105, 180),
)

#: Short labels for receptacle types (``instance_prefix`` of the type, i.e. its lower-cased name, otherwise).
ABBREVIATIONS = {
    "Cabinet": "cab", "Drawer": "drw", "CounterTop": "ctr", "Shelf": "shelf", "SinkBasin": "sink",
    "BathtubBasin": "tub", "StoveBurner": "stove", "CoffeeMachine": "coffee", "Microwave": "micro",
    "Fridge": "fridge", "GarbageCan": "trash", "Toaster": "toaster", "DiningTable": "table", "SideTable": "side",
    "CoffeeTable": "ctable", "Desk": "desk", "Bed": "bed", "Sofa": "sofa", "ArmChair": "chair",
    "Dresser": "dresser", "Safe": "safe", "Ottoman": "ottoman", "TVStand": "tv", "Toilet": "toilet",
    "ToiletPaperHanger": "tp", "TowelHolder": "towel", "HandTowelHolder": "htowel", "LaundryHamper": "hamper",
    "Cart": "cart", "Box": "box",
}

SLOTS = 3          # object dots per box (more: the last slot shows "+")
REACH_M = 0.5      # the box is drawn this far ahead of the interaction pose
CELL_M = 0.25      # grid spacing
DOOR_ANGLE = math.radians(60)
SCENE_CACHE = 8    # scenes whose background is kept (about 0.3 MB each at 320x320)
#: encoded pictures kept, by (layout, state): the demonstrations of one scene instance start from the same state and
#: often take the same first steps (44 % of a paper-profile worker's pictures were drawn before); ~10 KB each
PICTURE_CACHE = 1024


#: Text runs (a string in one colour at one sub-pixel offset) whose bitmap and length a renderer's font keeps: the
#: header, footer and labels repeat the same few hundred across the states of a scene; ~1 KB each
GLYPH_RUNS = 4096


class KeptRunsFont(ImageFont.FreeTypeFont):
    """A FreeType font that keeps the bitmap (``getmask2``) and the advance (``getlength``) of each text run it
    has rendered, by every argument Pillow passes: both are functions of those arguments, so a drawing gets the same
    pixels; FreeType's layout and rasterisation were four fifths of a schematic drawing. Bitmaps that Pillow changes
    after the call (colour fonts, mode ``RGBA``) are made anew each time."""

    def __init__(self, font: ImageFont.FreeTypeFont, kept: int = GLYPH_RUNS) -> None:
        super().__init__(io.BytesIO(font.font_bytes), size=font.size, index=font.index, encoding=font.encoding,
                         layout_engine=font.layout_engine)
        self._masks: LRUCache[tuple, tuple] = LRUCache(kept)
        self._lengths: LRUCache[tuple, float] = LRUCache(kept)

    @staticmethod
    def _keep(store: LRUCache, key: tuple, make):
        try:
            found = store.get(key)
        except TypeError:  # an unhashable argument: made, not kept
            return make()
        if found is None:
            found = store[key] = make()
        return found

    def getmask2(self, text, mode="", direction=None, features=None, language=None, stroke_width=0, anchor=None,
                 ink=0, start=None, *args, **kwargs):
        def make():
            return super(KeptRunsFont, self).getmask2(text, mode, direction, features, language, stroke_width, anchor,
                                                      ink, start, *args, **kwargs)

        if mode == "RGBA":
            return make()
        key = (text, mode, direction, _frozen(features), language, stroke_width, anchor, ink, start, args,
               tuple(sorted(kwargs.items())))
        return self._keep(self._masks, key, make)

    def getlength(self, text, mode="", direction=None, features=None, language=None) -> float:
        key = (text, mode, direction, _frozen(features), language)
        return self._keep(self._lengths, key, lambda: super(KeptRunsFont, self).getlength(
            text, mode, direction, features, language))


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def state_key(layout: SceneLayout, state: WorldState) -> tuple[SceneLayout, str] | None:
    """What a schematic picture is a function of, as a dict key: the layout and the state's canonical JSON. None
    for a layout built with lists instead of tuples (or a state without a JSON form): such a picture is drawn, not
    kept."""
    try:
        key = (layout, json.dumps(state.to_json(), sort_keys=True))
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's embedded default font at ``size`` px (needs FreeType; keeping its text runs: :class:`KeptRunsFont`);
    its fixed bitmap font otherwise."""
    if features.check("freetype2"):
        return KeptRunsFont(ImageFont.load_default(size=size))
    return ImageFont.load_default()


def type_of(instance: str) -> str:
    """ALFWorld instance name -> lower-case type: "apple 1" -> "apple", "butterknife 2" -> "butterknife"."""
    head, _, tail = instance.rpartition(" ")
    return head if head and tail.isdigit() else instance


def colour_of(instance: str) -> tuple[int, int, int]:
    return PALETTE[zlib.crc32(type_of(instance).encode()) % len(PALETTE)]


def marks_of(state: WorldState, name: str) -> list[str]:
    sets = {"hot": state.hot, "cool": state.cool, "clean": state.clean, "toggled": state.toggled,
            "sliced": state.sliced}
    return [m for m in MARK_ORDER if name in sets[m]]


# --------------------------------------------------------------------------------------------------------------------
# Geometry computed once per scene


@dataclass(frozen=True)
class _Box:
    receptacle: ReceptacleLayout
    label: str
    rect: tuple[int, int, int, int]       # x0, y0, x1, y1 (inclusive)
    pose_px: tuple[float, float]          # the interaction pose, in pixels
    facing: tuple[float, float]           # unit vector of the pose's rotation, in pixel space (y down)
    slots: tuple[tuple[int, int], ...]    # centres of the object dots


@dataclass
class _Scene:
    layout: SceneLayout
    background: Image.Image
    boxes: dict[str, _Box]
    scale: float                          # pixels per metre
    to_px: tuple[float, float, float, float]  # (ox, oy, x_min, z_max): px = ox + (x - x_min) * s, oy + (z_max - z) * s


def _facing(rotation: float) -> tuple[float, float]:
    """Rotation in degrees (0 = +z = up on the picture, 90 = +x = right) -> unit vector in pixel space."""
    rad = math.radians(rotation)
    return (round(math.sin(rad), 9), round(-math.cos(rad), 9))


def _label(r: ReceptacleLayout, counts: dict[str, int]) -> str:
    prefix, _, number = r.name.rpartition(" ")
    short = ABBREVIATIONS.get(r.receptacle_type, prefix or r.name)
    return short if counts.get(r.receptacle_type, 0) == 1 or not number.isdigit() else f"{short}{number}"


def _sat(mask: np.ndarray) -> np.ndarray:
    """Summed-area table with a zero row and column in front: sat[y, x] = mask[:y, :x].sum()."""
    sat = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), dtype=np.int64)
    sat[1:, 1:] = mask.cumsum(0).cumsum(1)
    return sat


def _window_sums(sat: np.ndarray, ys: np.ndarray, xs: np.ndarray, h: int, w: int) -> np.ndarray:
    """Sum of the mask over the h x w window at every (y, x) of ``ys`` x ``xs`` (windows clipped to the mask)."""
    H, W = sat.shape[0] - 1, sat.shape[1] - 1
    y0, y1 = np.clip(ys, 0, H)[:, None], np.clip(ys + h, 0, H)[:, None]
    x0, x1 = np.clip(xs, 0, W)[None, :], np.clip(xs + w, 0, W)[None, :]
    return sat[y1, x1] - sat[y0, x1] - sat[y1, x0] + sat[y0, x0]


class SchematicRenderer:
    """Top-down schematic renderer (see the module docstring for what it draws).

    Options: ``size`` (an int for a square picture, or ``(width, height)``; default 320), ``show_hidden`` (draw
    objects inside closed receptacles too; default False), ``cache_background`` (reuse the per-scene background;
    and the encoded pictures; only turned off to measure what they save), ``compress_level`` (PNG zlib level 0-9, default 6).
    """

    name = "schematic"
    version = "1"

    def __init__(self, size: int | tuple[int, int] | list[int] = 320, show_hidden: bool = False,
                 cache_background: bool = True, compress_level: int = 6):
        if isinstance(size, int):
            width = height = size
        elif isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(v, int) for v in size):
            width, height = size
        else:
            raise ConfigError(f"renderer 'schematic': size must be an int or [width, height], got {size!r}.")
        if min(width, height) < 160 or max(width, height) > 4096:
            raise ConfigError(f"renderer 'schematic': size {width}x{height} is out of range (160..4096 pixels).")
        if not 0 <= compress_level <= 9:
            raise ConfigError(f"renderer 'schematic': compress_level must be 0..9, got {compress_level}.")
        self.width, self.height = width, height
        self.show_hidden = show_hidden
        self.cache_background = cache_background
        self.compress_level = compress_level
        unit = min(width, height)
        self._label_font = _font(max(9, round(unit * 0.031)))
        self._text_font = _font(max(10, round(unit * 0.036)))
        self._line_h = self._text_font.getbbox("Ag")[3] + max(2, unit // 110)
        self._header_h = 2 * self._line_h + 4
        self._footer_h = 2 * self._line_h + 4
        self._dot_r = max(2, round(unit * 0.0085))
        self._gap = max(3, self._dot_r)  # between a box's label and its first object dot
        self._scene: _Scene | None = None
        self._scenes: OrderedDict[SceneLayout, _Scene] = OrderedDict()
        self._encoded: LRUCache[tuple[SceneLayout, str], bytes] = LRUCache(PICTURE_CACHE)
        self.background_builds = 0  # how many times the static background was drawn (tests and the bench read it)

    # ---------------------------------------------------------------------------------------------------------------
    # Renderer protocol

    def begin_scene(self, layout: SceneLayout) -> None:
        """Compute the geometry and draw the background of ``layout`` -- or reuse them: the last ``SCENE_CACHE``
        scenes are kept, so calling this once per episode costs one build per scene, not per episode."""
        self._scene = self._scene_for(layout) if self.cache_background else self._build_scene(layout)

    def render(self, layout: SceneLayout, state: WorldState) -> bytes:
        """The PNG of ``state`` in ``layout``. The drawing is a function of the two (and of this renderer's
        options), so the same pair gets the bytes already encoded for it (the last :data:`PICTURE_CACHE`)."""
        key = state_key(layout, state) if self.cache_background else None  # off only to measure what it saves
        png = self._encoded.get(key) if key is not None else None
        if png is not None:
            return png
        image = self.picture(layout, state)
        out = io.BytesIO()
        image.save(out, format="PNG", compress_level=self.compress_level)
        png = out.getvalue()
        if key is not None:
            self._encoded[key] = png
        return png

    def forget_pictures(self) -> None:
        """Drop the encoded pictures kept (the next :meth:`render` of any state draws it): for measuring a drawing."""
        self._encoded.clear()

    def picture(self, layout: SceneLayout, state: WorldState) -> Image.Image:
        """The drawing :meth:`render` encodes, as a Pillow image (RGB): for a caller that re-encodes it anyway (the
        episode viewer's paletted images, tasks/viewer/pages.py)."""
        scene = self._scene
        if not self.cache_background:
            scene = self._build_scene(layout)
        elif scene is None or (scene.layout is not layout and scene.layout != layout):
            scene = self._scene = self._scene_for(layout)  # begin_scene was not called for this layout
        return self.draw(scene, state)

    def close(self) -> None:
        self._scene = None
        self._scenes.clear()
        self.forget_pictures()

    def _scene_for(self, layout: SceneLayout) -> _Scene:
        try:
            hash(layout)
        except TypeError:  # a layout built with lists instead of tuples: usable, just not kept
            return self._build_scene(layout)
        scene = self._scenes.pop(layout, None)
        if scene is None:
            scene = self._build_scene(layout)
        self._scenes[layout] = scene  # most recently used last
        while len(self._scenes) > SCENE_CACHE:
            self._scenes.popitem(last=False)
        return scene

    # ---------------------------------------------------------------------------------------------------------------
    # Static part

    def _build_scene(self, layout: SceneLayout) -> _Scene:
        self.background_builds += 1
        W, H = self.width, self.height
        counts: dict[str, int] = {}
        for r in layout.receptacles:
            counts[r.receptacle_type] = counts.get(r.receptacle_type, 0) + 1
        labels = {r.name: _label(r, counts) for r in layout.receptacles}
        # A crowded scene (FloorPlan30 has 51 receptacles) gets boxes with fewer object slots until they all fit.
        for slots in range(SLOTS, 0, -1):
            boxes, cells, half, scale, to_px, crowded = self._geometry(layout, labels, slots)
            if not crowded:
                break

        # Background.
        img = Image.new("RGB", (W, H), BACKDROP)
        draw = ImageDraw.Draw(img)
        for cx, cy in cells:  # an outline pass then a fill pass: the floor reads as one region with a soft rim
            draw.rectangle((round(cx - half) - 1, round(cy - half) - 1, round(cx + half) + 1, round(cy + half) + 1),
                           fill=FLOOR_EDGE)
        for cx, cy in cells:
            draw.rectangle((round(cx - half), round(cy - half), round(cx + half), round(cy + half)), fill=FLOOR)
        for box in boxes.values():
            bx, by = self._nearest_point(box.rect, box.pose_px)
            draw.line((box.pose_px, (bx, by)), fill=LEADER, width=1)
        for box in boxes.values():
            pxx, pyy = box.pose_px
            draw.ellipse((pxx - 1.5, pyy - 1.5, pxx + 1.5, pyy + 1.5), fill=LEADER)
        for box in boxes.values():
            self._draw_box(draw, box, opened=False)
        draw.rectangle((0, 0, W - 1, self._header_h - 1), fill=STRIP)
        draw.rectangle((0, H - self._footer_h, W - 1, H - 1), fill=STRIP)
        title = f"{layout.scene} · {layout.room_type.replace('_', ' ')}"
        tw = self._text_font.getlength(title)
        draw.text((W - 4 - tw, 2), title, font=self._text_font, fill=STRIP_DIM)
        return _Scene(layout, img, boxes, scale, to_px)

    def _geometry(self, layout: SceneLayout, labels: dict[str, str], slots: int):
        """World -> pixels, then the boxes (``slots`` object dots each).

        Returns (boxes, floor cell centres, half a cell in pixels, scale, transform, crowded); ``crowded`` is True
        when some box could only be put over another one.
        """
        W, H = self.width, self.height
        map_top, map_bottom = self._header_h, H - self._footer_h
        margin = max(4, min(W, H) // 64)
        d = 2 * self._dot_r + 2                         # one object slot
        box_h = max(self._label_font.getbbox("Ag")[3] + 3, 2 * self._dot_r + 4)
        label_w = {name: round(self._label_font.getlength(text)) for name, text in labels.items()}
        sizes = {name: (w + 3 + self._gap + slots * d + 1, box_h) for name, w in label_w.items()}
        max_w = max((w for w, _ in sizes.values()), default=0)

        # Fit the floor, the poses and the box anchors, leaving room for boxes on every side.
        pts = list(layout.grid) + [(layout.start[0], layout.start[1])]
        anchors = {}
        for r in layout.receptacles:
            fx, fz = math.sin(math.radians(r.rotation)), math.cos(math.radians(r.rotation))
            anchors[r.name] = (r.x + REACH_M * fx, r.z + REACH_M * fz)
            pts += [(r.x, r.z), anchors[r.name]]
        x_min = min(p[0] for p in pts) - CELL_M / 2
        x_max = max(p[0] for p in pts) + CELL_M / 2
        z_min = min(p[1] for p in pts) - CELL_M / 2
        z_max = max(p[1] for p in pts) + CELL_M / 2
        avail_w = W - 2 * margin - max_w
        avail_h = (map_bottom - map_top) - 2 * margin - 2 * box_h
        scale = max(1.0, min(avail_w / max(x_max - x_min, 1e-6), avail_h / max(z_max - z_min, 1e-6)))
        ox = (W - (x_max - x_min) * scale) / 2
        oy = map_top + ((map_bottom - map_top) - (z_max - z_min) * scale) / 2

        def px(x: float, z: float) -> tuple[float, float]:
            return (ox + (x - x_min) * scale, oy + (z_max - z) * scale)

        half = CELL_M / 2 * scale
        cells = [px(x, z) for x, z in layout.grid]
        bounds = (margin, map_top + 2, W - 1 - margin, map_bottom - 2)
        boxes, crowded = self._place_boxes(layout, sizes, labels, label_w, anchors, cells, half, px, bounds, slots)
        return boxes, cells, half, scale, (ox, oy, x_min, z_max), crowded

    def _place_boxes(self, layout, sizes, labels, label_w, anchors, cells, half, px, bounds,
                     slots: int) -> tuple[dict[str, _Box], bool]:
        """Put every box as near its anchor as possible without overlapping another one, preferring spots off the
        floor (furniture is not on the navigable grid) and not between the box and the agent's pose.

        Every candidate top-left corner inside ``bounds`` is scored at once with summed-area tables of the occupied
        and floor pixels; ties go to the first in row-major order, so the placement is deterministic. Returns the
        boxes and whether some box had to overlap another (no free spot left).
        """
        W, H = self.width, self.height
        occupied = np.zeros((H, W), dtype=np.int32)
        floor = np.zeros((H, W), dtype=np.int32)
        for cx, cy in cells:
            floor[max(0, round(cy - half)):round(cy + half) + 1, max(0, round(cx - half)):round(cx + half) + 1] = 1
        floor_sat = _sat(floor)
        bx0, by0, bx1, by1 = bounds
        d = 2 * self._dot_r + 2
        boxes: dict[str, _Box] = {}
        gap = 1
        crowded = False
        for r in layout.receptacles:
            w, h = sizes[r.name]
            facing = _facing(r.rotation)
            ax, ay = px(*anchors[r.name])
            # candidate top-left corners (x0, y0) with the box inside the bounds
            ys = np.arange(by0, by1 - h + 1)
            xs = np.arange(bx0, bx1 - w + 1)
            if len(xs) == 0 or len(ys) == 0:
                raise ConfigError(f"renderer 'schematic': the picture is too small for the box of {r.name}.")
            Y, X = np.meshgrid(ys, xs, indexing="ij")
            dx, dy = X + w / 2 - ax, Y + h / 2 - ay
            toward_agent = np.maximum(0.0, -(dx * facing[0] + dy * facing[1]))
            cost = dx * dx + dy * dy + 8.0 * toward_agent ** 2
            cost += 1e6 * _window_sums(_sat(occupied), ys - gap, xs - gap, h + 1 + 2 * gap, w + 1 + 2 * gap)
            cost += 2.0 * _window_sums(floor_sat, ys, xs, h + 1, w + 1)
            k = int(np.argmin(cost))
            crowded |= bool(cost.flat[k] >= 1e6)
            y0, x0 = int(ys[k // len(xs)]), int(xs[k % len(xs)])
            rect = (x0, y0, x0 + w, y0 + h)
            occupied[y0:y0 + h + 1, x0:x0 + w + 1] = 1
            sx = x0 + 3 + label_w[r.name] + self._gap + self._dot_r
            centres = tuple((sx + i * d, y0 + h // 2 + 1) for i in range(slots))
            boxes[r.name] = _Box(r, labels[r.name], rect, px(r.x, r.z), facing, centres)
        return boxes, crowded

    @staticmethod
    def _nearest_point(rect: tuple[int, int, int, int], p: tuple[float, float]) -> tuple[float, float]:
        return (min(max(p[0], rect[0]), rect[2]), min(max(p[1], rect[1]), rect[3]))

    def _front(self, box: _Box) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """The box edge facing the agent (start, end) and the outward normal (toward the agent), axis-aligned."""
        x0, y0, x1, y1 = box.rect
        fx, fy = box.facing
        if abs(fy) >= abs(fx):
            if fy > 0:   # agent looks down the picture: it stands above the box, the door is the top edge
                return (x0, y0), (x1, y0), (0, -1)
            return (x0, y1), (x1, y1), (0, 1)
        if fx > 0:
            return (x0, y0), (x0, y1), (-1, 0)
        return (x1, y0), (x1, y1), (1, 0)

    def _draw_box(self, draw: ImageDraw.ImageDraw, box: _Box, opened: bool) -> None:
        r = box.receptacle
        x0, y0, x1, y1 = box.rect
        if r.openable:
            fill, edge = (OPEN_FILL if opened else OPENABLE_FILL), OPENABLE_EDGE
        else:
            fill, edge = SURFACE_FILL, SURFACE_EDGE
        draw.rectangle(box.rect, fill=fill)
        if r.pose_synthesized:
            self._dashed_rect(draw, box.rect, edge)
        else:
            draw.rectangle(box.rect, outline=edge, width=1)
        if r.openable:
            (ax, ay), (bx, by), (nx, ny) = self._front(box)
            if opened:  # the door swings out from the first corner toward the agent
                length = min(math.hypot(bx - ax, by - ay), 3.2 * self._dot_r + 10)
                ex, ey = (bx - ax), (by - ay)
                norm = math.hypot(ex, ey) or 1.0
                ex, ey = ex / norm, ey / norm
                tip = (ax + length * (math.cos(DOOR_ANGLE) * ex + math.sin(DOOR_ANGLE) * nx),
                       ay + length * (math.cos(DOOR_ANGLE) * ey + math.sin(DOOR_ANGLE) * ny))
                draw.line(((ax, ay), tip), fill=OPENABLE_EDGE, width=3)
            else:
                draw.line(((ax, ay), (bx, by)), fill=OPENABLE_EDGE, width=3)
        draw.text((x0 + 3, y0 + 1), box.label, font=self._label_font, fill=TEXT)

    @staticmethod
    def _dashed_rect(draw: ImageDraw.ImageDraw, rect: tuple[int, int, int, int], colour, dash: int = 3) -> None:
        x0, y0, x1, y1 = rect
        for x in range(x0, x1 + 1, 2 * dash):
            draw.line((x, y0, min(x + dash - 1, x1), y0), fill=colour)
            draw.line((x, y1, min(x + dash - 1, x1), y1), fill=colour)
        for y in range(y0, y1 + 1, 2 * dash):
            draw.line((x0, y, x0, min(y + dash - 1, y1)), fill=colour)
            draw.line((x1, y, x1, min(y + dash - 1, y1)), fill=colour)

    # ---------------------------------------------------------------------------------------------------------------
    # Dynamic part

    def draw(self, scene: _Scene, state: WorldState) -> Image.Image:
        """The picture of ``state`` on ``scene``'s cached background, as a Pillow image."""
        img = scene.background.copy()
        draw = ImageDraw.Draw(img)
        boxes = scene.boxes
        here = boxes.get(state.agent_at) if state.agent_at else None

        # Receptacles whose look changed: open ones, toggled ones, the one the agent stands at.
        for name in sorted(state.opened):
            box = boxes.get(name)
            if box is not None and box.receptacle.openable:
                self._draw_box(draw, box, opened=True)
        for name in sorted(state.toggled):
            box = boxes.get(name)
            if box is not None:
                x0, y0, x1, y1 = box.rect
                draw.rectangle((x0 - 2, y0 - 2, x1 + 2, y1 + 2), outline=MARKS["toggled"], width=2)
        if here is not None:
            x0, y0, x1, y1 = here.rect
            draw.line((here.pose_px, self._nearest_point(here.rect, here.pose_px)), fill=AGENT, width=2)
            draw.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), outline=AGENT, width=2)

        # Objects, in the bottom row of the box of the receptacle they are in (through movable receptacles).
        contents = self._contents(scene, state)
        for name in sorted(contents):
            box = boxes[name]
            visible = self._visible(box, state)
            items = contents[name] if visible else []
            slots = box.slots
            shown = items if len(items) <= len(slots) else items[: len(slots) - 1]
            for (cx, cy), obj in zip(slots, shown):
                self._draw_dot(draw, cx, cy, obj, state)
            if len(shown) < len(items):
                cx, cy = slots[len(shown)]
                a = self._dot_r
                draw.line((cx - a, cy, cx + a, cy), fill=TEXT, width=2)
                draw.line((cx, cy - a, cx, cy + a), fill=TEXT, width=2)

        # The agent.
        if here is not None:
            r = here.receptacle
            pose = (r.x, r.z, r.rotation)
        else:
            pose = scene.layout.start[:3]
        ox, oy, x_min, z_max = scene.to_px
        ax, ay = ox + (pose[0] - x_min) * scene.scale, oy + (z_max - pose[1]) * scene.scale
        fx, fy = _facing(pose[2])
        size = max(7.0, 0.2 * scene.scale)
        tip = (ax + size * fx, ay + size * fy)
        left = (ax - 0.6 * size * fx - 0.6 * size * fy, ay - 0.6 * size * fy + 0.6 * size * fx)
        right = (ax - 0.6 * size * fx + 0.6 * size * fy, ay - 0.6 * size * fy - 0.6 * size * fx)
        draw.polygon((tip, left, (ax - 0.25 * size * fx, ay - 0.25 * size * fy), right), fill=AGENT, outline=AGENT_EDGE)
        if state.holding:
            self._draw_dot(draw, round(ax - 0.9 * size * fx), round(ay - 0.9 * size * fy), state.holding, state)

        # Header: step and last action. Footer: inventory and what is here.
        W, H = self.width, self.height
        font, lh = self._text_font, self._line_h
        draw.text((4, 2), f"step {state.step}", font=font, fill=STRIP_TEXT)
        action = state.last_action or "(start)"
        self._text_fit(draw, (4, 2 + lh), [("> ", STRIP_DIM), (action, STRIP_TEXT)], W - 8)
        y = H - self._footer_h + 2
        if state.holding:
            cx = 4 + round(font.getlength("holding: ")) + self._dot_r + 2
            segments: list[tuple[str, tuple[int, int, int]]] = [("holding: ", STRIP_DIM)]
            self._text_fit(draw, (4, y), segments, W - 8)
            self._draw_dot(draw, cx, y + lh // 2, state.holding, state)
            segs = [(state.holding, STRIP_TEXT)] + [(f" {m}", MARKS[m] if m != "sliced" else STRIP_TEXT)
                                                    for m in marks_of(state, state.holding)]
            self._text_fit(draw, (cx + 2 * self._dot_r + 4, y), segs, W - cx - 2 * self._dot_r - 8)
        else:
            self._text_fit(draw, (4, y), [("holding: ", STRIP_DIM), ("nothing", STRIP_TEXT)], W - 8)
        y += lh
        if here is None and state.agent_at:  # a place the layout has no pose for: drawn at the start pose
            self._text_fit(draw, (4, y), [(f"at {state.agent_at} (no pose in the layout)", STRIP_DIM)], W - 8)
        elif here is None:
            self._text_fit(draw, (4, y), [("at the start pose", STRIP_DIM)], W - 8)
        else:
            r = here.receptacle
            status = ""
            if r.openable:
                status = " (open)" if r.name in state.opened else " (closed)"
            segs = [(f"{r.name}{status}: ", STRIP_DIM)]
            if self._visible(here, state):
                items = contents.get(r.name, [])
                if not items:
                    segs.append(("empty", STRIP_TEXT))
                for i, obj in enumerate(items):
                    segs.append((obj, STRIP_TEXT))
                    segs += [(f" {m}", MARKS[m] if m != "sliced" else STRIP_TEXT) for m in marks_of(state, obj)]
                    if i < len(items) - 1:
                        segs.append((", ", STRIP_DIM))
            self._text_fit(draw, (4, y), segs, W - 8)
        return img

    def _visible(self, box: _Box, state: WorldState) -> bool:
        return self.show_hidden or not box.receptacle.openable or box.receptacle.name in state.opened

    @staticmethod
    def _contents(scene: _Scene, state: WorldState) -> dict[str, list[str]]:
        """Receptacle name -> the objects in it, sorted; an object in a movable receptacle ("apple 1" in "bowl 1")
        is listed at the receptacle that holds the bowl, after it."""
        out: dict[str, list[str]] = {}
        for obj in sorted(state.placements):
            if obj == state.holding:
                continue
            where, seen = state.placements[obj], {obj}
            while where not in scene.boxes and where in state.placements and where not in seen:
                seen.add(where)
                where = state.placements[where]
            if where in scene.boxes:
                out.setdefault(where, []).append(obj)
        return out

    def _draw_dot(self, draw: ImageDraw.ImageDraw, cx: int, cy: int, obj: str, state: WorldState) -> None:
        r = self._dot_r
        marks = marks_of(state, obj)
        ring = r
        if "toggled" in marks:
            g = r + 3
            draw.ellipse((cx - g, cy - g, cx + g, cy + g), fill=MARKS["toggled"])
        for m in ("hot", "cool", "clean"):
            if m in marks:
                ring += 2
                draw.ellipse((cx - ring, cy - ring, cx + ring, cy + ring), outline=MARKS[m], width=2)
        colour = colour_of(obj)
        if "sliced" in marks:  # two halves with a gap
            draw.pieslice((cx - r - 1, cy - r, cx + r - 1, cy + r), 90, 270, fill=colour)
            draw.pieslice((cx - r + 1, cy - r, cx + r + 1, cy + r), 270, 90, fill=colour)
        else:
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour, outline=(255, 255, 255))
        if "clean" in marks:  # a small sparkle at the top right
            sx, sy, s = cx + ring, cy - ring, max(2, r)
            draw.line((sx - s, sy, sx + s, sy), fill=MARKS["clean"])
            draw.line((sx, sy - s, sx, sy + s), fill=MARKS["clean"])

    def _text_fit(self, draw: ImageDraw.ImageDraw, xy: tuple[int, int],
                  segments: list[tuple[str, tuple[int, int, int]]], max_width: float) -> None:
        """Draw coloured text segments on one line, cutting with an ellipsis at ``max_width``."""
        font = self._text_font
        x, y = xy
        widths = [font.getlength(text) for text, _ in segments]
        budget = max_width if sum(widths) <= max_width else max_width - font.getlength("…")
        for (text, colour), w in zip(segments, widths):
            if x - xy[0] + w <= budget:
                draw.text((x, y), text, font=font, fill=colour)
                x += w
                continue
            while text and x - xy[0] + font.getlength(text) > budget:
                text = text[:-1]
            draw.text((x, y), text + "…", font=font, fill=colour)
            return
