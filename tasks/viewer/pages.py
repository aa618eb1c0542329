"""The viewer's page skeleton and its shared images.

Every page inlines the viewer's CSS and JS (``assets/``, a few kB): a page opened from the file system needs nothing
else but its images (MLflow's artifact view cannot resolve those: runs carry a book instead, tasks/viewer/book.py).
Images are content-addressed files in one
``images/`` folder per viewer (``<sha256[:16]>.png``), referenced by relative links: a state drawn twice, by two agents
or on two steps, is stored once, and no page copies one.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from importlib import resources
from pathlib import Path

from core.io import atomic_path

IMAGES = "images"


def asset(name: str) -> str:
    return resources.files("tasks.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def slug(text: str) -> str:
    """A file name for an id: letters, digits, ``-_.`` kept, the rest ``_``, plus a short hash when anything changed
    (two ids never share a file)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80]
    return safe if safe == text else f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def index_link(agent: str, split: str) -> str:
    """The index page of (agent, split) relative to a viewer's root (agent: its registry name or code writer)."""
    return f"{slug(agent)}/{slug(split)}/index.html"


def json_script(element_id: str, data: object) -> str:
    """``data`` as a JSON script element the page's JS reads (``</`` escaped so no string can end the element)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    return f'<script id="{element_id}" type="application/json">{text}</script>'


def page(title: str, body: str, *, up: str | None = None) -> str:
    """A whole HTML page; ``up`` is the relative link of the page above it (the index)."""
    nav = f'<p class="muted"><a href="{esc(up)}">&larr; back to the list</a></p>' if up else ""
    return ("<!doctype html>\n<html><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{asset('viewer.css')}</style></head>\n<body>\n{nav}\n"
            f"<h1>{esc(title)}</h1>\n{body}\n<script>{asset('viewer.js')}</script>\n</body></html>\n")


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


def shrink(png: bytes, colors: int = 64) -> bytes:
    """``png`` as a paletted PNG of at most ``colors`` colours (a schematic drawing loses nothing visible; a third of
    the bytes). Deterministic: the same drawing gives the same bytes."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return shrink_picture(image, colors)


def shrink_picture(image, colors: int = 64) -> bytes:
    """:func:`shrink` of a drawing still in memory (a Pillow image): the same bytes as ``shrink`` of its PNG, without
    encoding the PNG only to decode it again (PNG is lossless; a quarter of an episode viewer image's cost)."""
    import io

    from PIL import Image

    small = image.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


#: Side of the episode viewer's images in pixels (the schematic renderer draws the state at this size directly).
IMAGE_SIZE = 160


def image_name(png: bytes) -> str:
    return f"{hashlib.sha256(png).hexdigest()[:16]}.png"


def save_image(folder: Path | str, png) -> str:
    """``png`` shrunk (:func:`shrink`; a Pillow image: :func:`shrink_picture`) into ``folder`` under its content's
    name, once (atomic: workers of one run share the folder); returns the name."""
    small = shrink(png) if isinstance(png, bytes | bytearray) else shrink_picture(png)
    name = image_name(small)
    target = Path(folder) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            Path(tmp).write_bytes(small)
    return name


class ImageStore:
    """``root/images/``: the images a viewer's pages show, each copied once from the folder the evaluation saved
    them in. :meth:`add` returns the path relative to ``root``, or None (with a count) for a missing image."""

    def __init__(self, root: Path, source: Path | str):
        self.root = Path(root)
        self.source = Path(source)
        self.written: set[str] = set()
        self.missing: set[str] = set()

    def add(self, name: str | None) -> str | None:
        if not name:
            return None
        rel = f"{IMAGES}/{name}"
        if rel in self.written:
            return rel
        try:
            data = (self.source / name).read_bytes()
        except FileNotFoundError:
            self.missing.add(name)
            return None
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.written.add(rel)
        return rel


def select_filter(name: str, label: str, values: list[str]) -> str:
    """A ``<select>`` that the index's JS applies to the rows' ``data-<name>`` attribute ("" = any)."""
    options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return (f'<label>{esc(label)} <select id="filter-{esc(name)}" data-filter="{esc(name)}">'
            f'<option value="">any</option>{options}</select></label>')
