"""Top-view pictures of worlds (matplotlib, Agg backend) and a grid of them for the dataset card.

Seen from above with the robot at the bottom: up is +x (away from the robot), left is +y. Drawn are the table, the
robot's reach (dashed arc) and keep-out box (hatched), every model's footprint in its colour -- containers with a
thick outline, objects in containers on top of them -- and each model's name.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Rectangle

from core.io import atomic_path
from robot.contract.catalog import colour_hex as _colour
from robot.contract.world import World

_TABLE = "#d9c7a3"


def render_world(world: World, path: Path, size_px: int = 360) -> None:
    dpi = 100
    tr = world.table_rect
    robot = world.robot
    margin = 0.05
    x_lo = min(tr.x0, robot.base_x - 0.1, world.keep_out_rect.x0) - margin
    aspect = (tr.x1 + margin - x_lo) / (tr.depth + 2 * margin)
    fig = Figure(figsize=(size_px / dpi, size_px * aspect / 0.92 / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, 0.92))
    ax.add_patch(Rectangle((tr.y0, tr.x0), tr.depth, tr.width, facecolor=_TABLE, edgecolor="#7a6a4a", lw=1))
    ax.add_patch(Arc((robot.base_y, robot.base_x), 2 * robot.reach, 2 * robot.reach, theta1=0, theta2=180,
                     ls="--", lw=0.8, color="#555555"))
    ko = world.keep_out_rect
    ax.add_patch(Rectangle((ko.y0, ko.x0), ko.depth, ko.width, facecolor="none", edgecolor="#aa3333", hatch="//",
                           lw=0.6))
    ax.plot([robot.base_y], [robot.base_x], marker="o", color="#222222", ms=6)
    layers = [m for m in world.models if m.kind in ("cabinet", "container") and m.relation != "in"]
    layers += [m for m in world.models if m.kind == "part" and m.category == "handle"]
    layers += [m for m in world.models if m.kind == "object" or (m.kind == "container" and m.relation == "in")]
    font = max(4.0, size_px / 80)
    for m in layers:
        r = m.bbox.rect
        thick = m.kind in ("cabinet", "container")
        ax.add_patch(Rectangle((r.y0, r.x0), r.depth, r.width, facecolor=_colour(m.colour), alpha=0.9,
                               edgecolor="#222222", lw=1.4 if thick else 0.6))
        if m.kind != "part":
            cy, cx = r.center[1], r.center[0]
            offset = 0.03 if m.kind == "container" and any(o.parent == m.name for o in world.models) else 0.0
            ax.text(cy, cx + offset, m.name.replace("_", " "), fontsize=font, ha="center", va="center",
                    color="#111111", clip_on=True)
    ax.set_xlim(tr.y1 + margin, tr.y0 - margin)  # +y to the left
    ax.set_ylim(x_lo, tr.x1 + margin)
    ax.set_aspect("equal")
    ax.set_axis_off()
    fig.suptitle(world.world_id, fontsize=font * 1.4, y=0.99)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)


def render_grid(pictures: list[Path], path: Path, columns: int = 3, tile_px: int = 360) -> int:
    """Tile pictures into one PNG (row-major); returns how many were tiled."""
    from PIL import Image

    if not pictures:
        raise ValueError("no pictures to tile")
    rows = math.ceil(len(pictures) / columns)
    cols = min(columns, len(pictures))
    grid = Image.new("RGB", (cols * tile_px, rows * tile_px), "white")
    for i, picture in enumerate(pictures):
        with Image.open(picture) as img:
            tile = img.convert("RGB")
            tile.thumbnail((tile_px, tile_px))
        x, y = (i % cols) * tile_px, (i // cols) * tile_px
        grid.paste(tile, (x + (tile_px - tile.width) // 2, y + (tile_px - tile.height) // 2))
    with atomic_path(path) as tmp:
        grid.save(tmp, format="PNG", optimize=True)
    return len(pictures)
