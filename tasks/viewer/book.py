"""One run's episodes in one self-contained HTML file (``viewer/episodes.html``): what an MLflow evaluation run
carries, so that its episodes open in MLflow's artifact view.

How MLflow's UI (3.x, ``ShowArtifactHtmlView`` in its JS bundle) previews an ``.html`` artifact: it fetches the
file's text, wraps it in a ``Blob`` and shows the blob's URL in ``<iframe sandbox="allow-scripts">``. Inside, scripts
run, but the document has an opaque origin and its base URL is the ``blob:`` URL, against which no relative URL
resolves: links to other pages and ``<img src="images/...">`` lead nowhere. An absolute ``get-artifact`` URL would
not help a page either: the server sends every artifact as a download (``Content-Disposition: attachment``). So the
book holds everything: the index with its filters, every episode (the viewer's JS shows one in place of the index,
with the same keys as an episode page; a link is handled by the script, never followed), and each image it shows
once, as a ``data:`` URI. The same file works opened from the file system (a downloaded artifact).

Size: the images are inlined within ``PAGE_BYTES`` for the whole file; when they do not fit, all of them are shrunk
(to 70 %, then 50 % of their side), and when even that does not fit, the later episodes' images are left out and the
page says how many.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from tasks.viewer.pages import esc, json_script, page, shrink, write_text

#: The most bytes one run's book may take with its images (the text alone may exceed it: then it has no images).
PAGE_BYTES = 8_000_000
#: The image scales tried in turn until every image fits ``PAGE_BYTES``.
SCALES = (1.0, 0.7, 0.5)
#: The artifact folder and file name of the book in an MLflow run.
FOLDER, FILE = "viewer", "episodes.html"


def _scaled(png: bytes, scale: float) -> bytes:
    if scale == 1.0:
        return png
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        side = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        small = image.convert("RGB").resize(side, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="PNG")
    return shrink(out.getvalue())


def _uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _fitting(found: dict[str, bytes], scale: float, budget: int) -> tuple[dict[str, str], int, bool]:
    """The images of ``found`` in order, as data URIs at ``scale``, while they fit ``budget`` together: the URIs,
    their bytes, and whether all of them fit. It stops at the first that does not fit, so a scale that cannot hold
    all of them costs only the images up to that point, not every image of the run (a paper-scale split has tens of
    thousands; each one shrunk is a resize and a PNG encode)."""
    uris: dict[str, str] = {}
    used = 0
    for name, png in found.items():
        uri = _uri(_scaled(png, scale))
        cost = len(uri) + len(name) + 6
        if used + cost > budget:
            return uris, used, False
        uris[name], used = uri, used + cost
    return uris, used, True


def inline_images(folder: Path | str, names: Iterable[str], budget: int) -> tuple[dict[str, str], dict]:
    """``names`` (in the order their episodes are listed) read from ``folder`` as data URIs, together within
    ``budget`` bytes (a URI and its key, quoted): at the first of ``SCALES`` at which all fit, else at the smallest
    scale the first ones that fit. Returns name -> URI and a summary (images, left_out, missing, scale, bytes)."""
    folder = Path(folder)
    found, missing = {}, 0
    for name in dict.fromkeys(names):
        try:
            found[name] = (folder / name).read_bytes()
        except FileNotFoundError:
            missing += 1
    for scale in SCALES:
        uris, used, whole = _fitting(found, scale, budget)
        if whole:
            break
    return uris, {"images": len(uris), "left_out": len(found) - len(uris), "missing": missing, "scale": scale,
                  "image_bytes": used}


def book(title: str, index: str, episodes: Sequence[dict], images_dir: Path | str | None = None,
         budget: int = PAGE_BYTES) -> tuple[str, dict]:
    """The whole page: ``index`` is the index's HTML (filters and a table whose rows carry ``data-outcome`` and link
    ``#episode-<k>``, k the position in ``episodes``); each episode is ``{"title", "body", "steps"}``: the HTML an
    episode page shows above its steps, and the steps' data with ``image`` the name of a file in ``images_dir`` (or
    None). Returns the HTML and a summary (episodes, images, left_out, missing, scale, bytes)."""
    names = [s["image"] for e in episodes for s in e["steps"] if s.get("image")]

    def whole(images: dict[str, str], note: str) -> str:
        return page(title, note + f'<div id="book-index">{index}</div><div id="book-episode" hidden></div>'
                    + json_script("book-data", {"episodes": list(episodes), "images": images}))

    note_room = 200   # the note's bytes, at most
    budget_left = budget - len(whole({}, "").encode()) - note_room
    if names and images_dir is not None:
        images, summary = inline_images(images_dir, names, max(0, budget_left))
    else:
        images, summary = {}, {"images": 0, "left_out": 0, "missing": len(set(names)), "scale": 1.0}
    notes = []
    if summary["scale"] != 1.0:
        notes.append(f"images shrunk to {summary['scale']:.0%} of their side")
    if summary["left_out"]:
        notes.append(f"{summary['left_out']} images of the later episodes left out")
    note = (f"<p class='muted' id='book-note'>To keep this file under {budget / 1e6:.0f} MB: {esc('; '.join(notes))}"
            " (the file-system viewer under reports/viewer/ has them all).</p>") if notes else ""
    html = whole(images, note)
    summary = {"episodes": len(episodes), **{k: v for k, v in summary.items() if k != "image_bytes"},
               "bytes": len(html.encode())}
    return html, summary


def stage(target: Path, html: str) -> Path:
    """``target/viewer/episodes.html`` holding ``html``; returns the ``viewer`` folder, to log as a run's artifact
    (it lands as ``viewer/episodes.html``)."""
    folder = Path(target) / FOLDER
    write_text(folder / FILE, html)
    return folder
