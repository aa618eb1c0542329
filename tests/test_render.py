"""Renderers: the schematic picture of a world state (valid, deterministic, faithful to state changes, cached per
scene), the registry, and the thor renderer's refusal to run without its simulator."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import types
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageChops

from core.errors import ConfigError, PipelineError
from tasks.muep.alfworld_data import read_scene
from tasks.muep.metadata import collect_scene, seeded_scene
from tasks.muep.render import RENDERERS, Renderer, build_renderer
from tasks.muep.render.layout import layout_from_metadata
from tasks.muep.render.schematic import SchematicRenderer
from tasks.muep.render.thor import ThorUnavailableError
from tasks.muep.world_state import WorldState
from tasks.params import MetadataParams, SceneParams


def _scene(floorplan: int, seeded: bool = True):
    """A scene and its layout. The drawing tests use FloorPlan1's seeded state (they name its objects: apple 2 in
    microwave 1, ...); ``seeded=False`` is the metadata stage's instance (ALFRED's state where there is one)."""
    make = seeded_scene if seeded else collect_scene
    meta = make(floorplan, SceneParams(floorplans=[floorplan]), MetadataParams())
    return meta, layout_from_metadata(meta, read_scene(floorplan).grid)


@pytest.fixture(scope="module")
def kitchen():
    return _scene(1)


@pytest.fixture(scope="module")
def renderer(kitchen):
    r = build_renderer("schematic")
    r.begin_scene(kitchen[1])
    yield r
    r.close()


def _state(meta, **changes) -> WorldState:
    base = dict(agent_at="microwave 1", holding=None, placements={i.name: i.parent for i in meta.instances},
                step=3, last_action="go to microwave 1")
    base.update(changes)
    return WorldState(**base)


def _image(png: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(png))
    img.load()
    return img


def _differs(a: bytes, b: bytes) -> int:
    diff = ImageChops.difference(_image(a).convert("RGB"), _image(b).convert("RGB"))
    return int(np.count_nonzero(np.asarray(diff).any(axis=2)))


# --------------------------------------------------------------------------------------------------------------------
# layout


def test_layout_from_metadata():
    meta, layout = _scene(1, seeded=False)
    assert layout.scene == "FloorPlan1" and layout.room_type == "kitchen"
    assert [r.name for r in layout.receptacles] == [r.name for r in meta.receptacles]
    assert len(layout.grid) == meta.scene.grid_points
    x, z, rotation, horizon = layout.start
    assert (x, z) in layout.grid and rotation == 0 and horizon == 30
    assert layout == _scene(1, seeded=False)[1]  # deterministic
    assert all(isinstance(r.x, float) for r in layout.receptacles)
    assert not any(r.pose_synthesized for r in layout.receptacles)  # ALFRED's state: poses from ALFWorld's locations
    seeded = _scene(10)[1]  # a held-out floorplan without ALFRED states: the pose file, completed
    assert any(r.pose_synthesized for r in seeded.receptacles)


# --------------------------------------------------------------------------------------------------------------------
# schematic


def test_schematic_is_a_valid_rgb_png_of_the_requested_size(kitchen, renderer):
    meta, layout = kitchen
    png = renderer.render(layout, _state(meta))
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    img = _image(png)
    assert img.format == "PNG" and img.mode == "RGB" and img.size == (320, 320)
    assert isinstance(renderer, Renderer) and renderer.name == "schematic" and renderer.version

    wide = build_renderer("schematic", size=[400, 300])
    assert _image(wide.render(layout, _state(meta))).size == (400, 300)


def test_schematic_is_deterministic(kitchen, renderer):
    meta, layout = kitchen
    state = _state(meta, opened={"fridge 1"}, hot={"apple 1"}, holding="apple 1", sliced={"bread 1"})
    first = renderer.render(layout, state)
    assert renderer.render(layout, state) == first
    other = build_renderer("schematic")  # a fresh instance, without begin_scene
    assert other.render(layout, state) == first


def test_the_viewer_s_image_from_the_drawing_is_the_one_from_its_png(kitchen, tmp_path):
    """The episode viewer shrinks the schematic drawing in memory (``picture``) instead of encoding a PNG only to
    decode it: the stored image and its content name must be the same bytes as from the PNG."""
    from tasks.muep.eval.env import EvalEnv
    from tasks.viewer.pages import IMAGE_SIZE, save_image, shrink, shrink_picture

    meta, layout = kitchen
    small = build_renderer("schematic", size=IMAGE_SIZE)
    small.begin_scene(layout)
    states = [_state(meta), _state(meta, opened={"fridge 1"}, holding="apple 1", step=7, last_action="open fridge 1"),
              _state(meta, hot={"apple 1"}, sliced={"bread 1"}, step=12, last_action="heat apple 1 with microwave 1")]
    for state in states:
        picture = small.picture(layout, state)
        assert picture.mode == "RGB"
        assert shrink_picture(picture) == shrink(small.render(layout, state))
        assert save_image(tmp_path / "a", picture) == save_image(tmp_path / "b", small.render(layout, state))
    assert sorted(p.read_bytes() for p in (tmp_path / "a").iterdir()) == \
        sorted(p.read_bytes() for p in (tmp_path / "b").iterdir())
    # a renderer without ``picture`` still gives the viewer its PNG
    env = types.SimpleNamespace(layout=layout, state=states[1])
    png_only = types.SimpleNamespace(render=small.render)
    assert EvalEnv.picture(env, png_only) == small.render(layout, states[1])


def test_schematic_bytes_do_not_depend_on_the_process(kitchen):
    """Same picture in another interpreter with another hash seed (set iteration order differs there)."""
    meta, layout = kitchen
    code = (
        "import hashlib\n"
        "from tasks.muep.alfworld_data import read_scene\n"
        "from tasks.muep.metadata import seeded_scene\n"
        "from tasks.muep.render import build_renderer\n"
        "from tasks.muep.render.layout import layout_from_metadata\n"
        "from tasks.muep.world_state import WorldState\n"
        "from tasks.params import MetadataParams, SceneParams\n"
        "meta = seeded_scene(1, SceneParams(floorplans=[1]), MetadataParams())\n"
        "layout = layout_from_metadata(meta, read_scene(1).grid)\n"
        "state = WorldState(agent_at='fridge 1', holding='apple 2', opened={'fridge 1', 'cabinet 1', 'drawer 3'},\n"
        "    placements={i.name: i.parent for i in meta.instances if i.name != 'apple 2'},\n"
        "    cool={'tomato 1', 'bowl 1', 'apple 1'}, clean={'egg 1', 'pot 1'}, step=4, last_action='open fridge 1')\n"
        "print(hashlib.sha256(build_renderer('schematic').render(layout, state)).hexdigest())\n"
    )
    digests = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        digests.add(out.stdout.strip())
    state = WorldState(agent_at="fridge 1", holding="apple 2", opened={"fridge 1", "cabinet 1", "drawer 3"},
                       placements={i.name: i.parent for i in meta.instances if i.name != "apple 2"},
                       cool={"tomato 1", "bowl 1", "apple 1"}, clean={"egg 1", "pot 1"}, step=4,
                       last_action="open fridge 1")
    digests.add(hashlib.sha256(build_renderer("schematic").render(layout, state)).hexdigest())
    assert len(digests) == 1


def test_schematic_changes_with_the_state(kitchen, renderer):
    meta, layout = kitchen
    base = _state(meta)
    before = renderer.render(layout, base)
    placements = dict(base.placements)
    placements.pop("apple 2")  # apple 2 starts in microwave 1
    variants = {
        "agent moves": replace(base, agent_at="countertop 1"),
        "agent back at start": replace(base, agent_at=None),
        "object picked up": replace(base, holding="apple 2", placements=placements),
        "receptacle opened": replace(base, opened={"microwave 1"}),
        "another receptacle opened": replace(base, opened={"cabinet 1"}),
        "step advances": replace(base, step=4, last_action="open microwave 1"),
    }
    for what, state in variants.items():
        assert _differs(before, renderer.render(layout, state)) > 0, what

    holding = replace(base, holding="apple 2", placements=placements)
    held = renderer.render(layout, holding)
    for mark in ("hot", "cool", "clean", "sliced", "toggled"):
        marked = renderer.render(layout, replace(holding, **{mark: {"apple 2"}}))
        assert _differs(held, marked) > 0, f"object {mark}"
    # an object heated in an open receptacle shows on the map too, not only in the footer
    opened = replace(base, opened={"microwave 1"})
    assert _differs(renderer.render(layout, opened), renderer.render(layout, replace(opened, hot={"apple 2"}))) > 0


def test_hidden_objects_are_not_drawn_unless_asked(kitchen):
    meta, layout = kitchen
    closed = _state(meta)                                        # microwave 1 holds apple 2 and bowl 2, closed
    empty = replace(closed, placements={k: v for k, v in closed.placements.items() if v != "microwave 1"})
    plain = build_renderer("schematic")
    assert plain.render(layout, closed) == plain.render(layout, empty)
    seeing = build_renderer("schematic", show_hidden=True)
    assert _differs(seeing.render(layout, closed), seeing.render(layout, empty)) > 0


def test_background_is_drawn_once_per_scene(kitchen, monkeypatch):
    meta, layout = kitchen
    calls = []
    original = SchematicRenderer._build_scene

    def spy(self, lay):
        calls.append(lay.scene)
        return original(self, lay)

    monkeypatch.setattr(SchematicRenderer, "_build_scene", spy)
    cached = build_renderer("schematic")
    cached.begin_scene(layout)
    states = [_state(meta, step=i, agent_at=name) for i, name in enumerate(["fridge 1", "cabinet 1", None])]
    pngs = [cached.render(layout, s) for s in states]
    assert calls == ["FloorPlan1"] and cached.background_builds == 1

    # without the cache the background is rebuilt at every step, and the pictures are the same
    uncached = build_renderer("schematic", cache_background=False)
    uncached.begin_scene(layout)
    calls.clear()
    assert [uncached.render(layout, s) for s in states] == pngs
    assert len(calls) == 3

    # another scene: built once (lazily, even without begin_scene), then reused
    _, bedroom = _scene(301)
    calls.clear()
    for s in states[2:] * 2:
        cached.render(bedroom, s)
    assert calls == ["FloorPlan301"]
    # begin_scene once per episode: a scene seen recently is not rebuilt, not even from an equal copy of its layout
    for lay in (layout, bedroom, _scene(1)[1], bedroom):
        cached.begin_scene(lay)
        cached.render(lay, states[0])
    assert calls == ["FloorPlan301"] and cached.background_builds == 2
    cached.close()
    cached.begin_scene(layout)
    assert cached.background_builds == 3


def test_a_state_drawn_before_gets_the_bytes_encoded_then(kitchen, monkeypatch):
    """Demonstrations of one scene instance start from the same state and often take the same first steps: the
    renderer keeps the PNG of each (layout, state) it encoded, and the same pair gets the same bytes without being
    drawn again; any other state (another step number included) is drawn."""
    from tasks.muep.render import schematic

    meta, layout = kitchen
    drawn = []
    original = SchematicRenderer.draw

    def spy(self, scene, state):
        drawn.append(state.step)
        return original(self, scene, state)

    monkeypatch.setattr(SchematicRenderer, "draw", spy)
    cached, plain = build_renderer("schematic"), build_renderer("schematic", cache_background=False)
    states = [_state(meta), _state(meta, opened={"fridge 1"}, step=1, last_action="open fridge 1"),
              _state(meta, opened={"fridge 1"}, step=2, last_action="open fridge 1")]
    first = [cached.render(layout, s) for s in states]
    assert drawn == [3, 1, 2] and len(set(first)) == 3
    again = [cached.render(layout, _state(meta)), cached.render(layout, states[1])]  # equal states, new objects
    assert again == first[:2] and drawn == [3, 1, 2]
    assert [plain.render(layout, s) for s in states] == first  # what drawing every time gives
    _, bedroom = _scene(301)
    cached.render(bedroom, states[0])  # the same state in another scene is another picture
    assert drawn[-1] == 3 and len(drawn) == 7

    monkeypatch.setattr(schematic, "PICTURE_CACHE", 2)
    small = build_renderer("schematic")
    for s in states:
        small.render(layout, s)
    assert len(small._encoded) == 2  # bounded: the oldest goes
    drawn.clear()
    small.render(layout, states[0])
    assert drawn == [3]


@pytest.mark.parametrize("floorplan", [1, 30, 210, 301, 401])
def test_boxes_fit_without_overlap(floorplan):
    """Every receptacle box lies inside the map and no two overlap -- also in the densest kitchen (FloorPlan30)."""
    meta, layout = _scene(floorplan)
    r = SchematicRenderer()
    scene = r._build_scene(layout)
    rects = [b.rect for b in scene.boxes.values()]
    assert len(rects) == len(layout.receptacles)
    for x0, y0, x1, y1 in rects:
        assert 0 <= x0 < x1 < r.width and r._header_h <= y0 < y1 < r.height - r._footer_h
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1], (a, b)
    assert _image(r.render(layout, _state(meta, agent_at=layout.receptacles[0].name))).size == (320, 320)


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="size"):
        build_renderer("schematic", size=10)
    with pytest.raises(ConfigError, match="colour"):
        build_renderer("schematic", colour="red")


# --------------------------------------------------------------------------------------------------------------------
# registry and thor


def test_unknown_renderer_lists_the_registered_ones():
    assert {"schematic", "thor"} <= set(RENDERERS.names())
    with pytest.raises(ConfigError) as err:
        build_renderer("blender")
    assert "blender" in str(err.value) and "schematic" in str(err.value) and "thor" in str(err.value)


def test_thor_without_ai2thor_fails_at_construction(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai2thor", None)  # `import ai2thor` raises ImportError, installed or not
    monkeypatch.setitem(sys.modules, "ai2thor.controller", None)
    with pytest.raises(ThorUnavailableError) as err:
        build_renderer("thor")
    assert isinstance(err.value, PipelineError)
    text = err.value.paragraph()
    assert "schematic" in text and "pip install ai2thor" in text and "CloudRendering" in text


def _fake_ai2thor(monkeypatch, controller_cls):
    pkg = types.ModuleType("ai2thor")
    pkg.__version__ = "0.0-fake"
    mod = types.ModuleType("ai2thor.controller")
    mod.Controller = controller_cls
    pkg.controller = mod
    monkeypatch.setitem(sys.modules, "ai2thor", pkg)
    monkeypatch.setitem(sys.modules, "ai2thor.controller", mod)


def test_thor_whose_simulator_cannot_start_fails_at_construction(monkeypatch):
    class NoBuild:
        def __init__(self, **kwargs):
            raise RuntimeError("could not download the Unity build")

    _fake_ai2thor(monkeypatch, NoBuild)
    with pytest.raises(ThorUnavailableError) as err:
        build_renderer("thor")
    assert "Unity build" in str(err.value) and "schematic" in err.value.paragraph()


def test_thor_teleports_and_opens_with_alfworld_ids(kitchen, monkeypatch):
    """Against a stand-in controller (the real simulator cannot run here): the calls the renderer makes."""
    meta, layout = kitchen
    fridge = next(r for r in meta.receptacles if r.name == "fridge 1")
    cabinet = next(r for r in meta.receptacles if r.name == "cabinet 1")
    # THOR numbers the cabinet slightly differently than ALFWorld's file: matched by type and position
    shifted = "Cabinet|+00.69|+00.50|-02.20"
    calls = []

    class Event:
        def __init__(self):
            self.frame = np.full((300, 300, 3), 90, dtype=np.uint8)
            self.metadata = {"lastActionSuccess": True, "agent": {"position": {"x": 0, "y": 0.9, "z": 0}},
                             "objects": [{"objectId": fridge.thor_id, "objectType": "Fridge", "isOpen": False,
                                          "position": {"x": -2.1, "y": 0.0, "z": 1.09}},
                                         {"objectId": shifted, "objectType": "Cabinet", "isOpen": False,
                                          "position": {"x": 0.69, "y": 0.5, "z": -2.2}}]}

    class Controller:
        def __init__(self, **kwargs):
            calls.append(("init", kwargs["scene"]))

        def reset(self, scene):
            calls.append(("reset", scene))
            return Event()

        def step(self, action, **kwargs):
            calls.append((action, kwargs.get("objectId") or (kwargs.get("x"), kwargs.get("z"))))
            return Event()

        def stop(self):
            calls.append(("stop",))

    _fake_ai2thor(monkeypatch, Controller)
    r = build_renderer("thor")
    assert r.version.endswith("ai2thor-0.0-fake")
    r.begin_scene(layout)
    png = r.render(layout, _state(meta, agent_at="fridge 1", opened={"fridge 1", "cabinet 1", "toaster 1"}))
    assert _image(png).size == (300, 300)
    r.render(layout, _state(meta, agent_at=None, opened=set()))
    r.close()
    assert calls == [
        ("init", "FloorPlan1"), ("reset", "FloorPlan1"),
        ("OpenObject", shifted), ("OpenObject", fridge.thor_id), ("TeleportFull", (fridge.x, fridge.z)),
        ("CloseObject", shifted), ("CloseObject", fridge.thor_id), ("TeleportFull", layout.start[:2]),
        ("stop",),
    ]
    assert cabinet.thor_id != shifted


def test_kept_text_runs_draw_the_pixels_freetype_draws(kitchen):
    """The renderer's fonts keep each text run's bitmap and length (FreeType's layout was most of a drawing): the
    pictures are the same bytes as with Pillow's plain font, for new runs, repeated runs, cut (ellipsis) runs and
    runs at other sub-pixel offsets, at two picture sizes -- and the runs are kept, bounded."""
    from PIL import ImageFont

    from tasks.muep.render import schematic

    meta, layout = kitchen
    long_name = "a receptacle whose name is far too long for one footer line of the picture 1"
    states = [_state(meta), _state(meta, step=4), _state(meta, holding="apple 2", step=5, last_action="take apple 2"),
              _state(meta, agent_at=None, step=0, last_action=None),
              _state(meta, opened={"fridge 1"}, step=6, last_action=f"open fridge 1 then {long_name}"),
              _state(meta, step=3)]
    for size in (160, 320):
        kept = build_renderer("schematic", size=size)
        plain = build_renderer("schematic", size=size, cache_background=False)
        assert isinstance(kept._text_font, schematic.KeptRunsFont)
        plain._text_font = ImageFont.load_default(size=kept._text_font.size)
        plain._label_font = ImageFont.load_default(size=kept._label_font.size)
        for _ in range(2):  # the second round draws from the kept runs
            assert [kept.picture(layout, s).tobytes() for s in states] == \
                   [plain.picture(layout, s).tobytes() for s in states]
        assert 0 < len(kept._text_font._masks) <= schematic.GLYPH_RUNS
    small = schematic.KeptRunsFont(ImageFont.load_default(size=12), kept=2)
    for text in ("one", "two", "three", "one"):
        small.getmask2(text, "L")
    assert len(small._masks) == 2 and small.getlength("three") == ImageFont.load_default(size=12).getlength("three")
