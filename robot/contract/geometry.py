"""Axis-aligned rectangles (table footprints) and boxes (3D bounding boxes), in metres."""

from __future__ import annotations

import math
from dataclasses import dataclass

EPS = 1e-9


@dataclass(frozen=True)
class Rect:
    x0: float
    y0: float
    x1: float
    y1: float

    @classmethod
    def centred(cls, cx: float, cy: float, sx: float, sy: float) -> Rect:
        return cls(cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def depth(self) -> float:
        return self.y1 - self.y0

    @property
    def center(self) -> tuple[float, float]:
        return ((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2)

    def corners(self) -> tuple[tuple[float, float], ...]:
        return ((self.x0, self.y0), (self.x0, self.y1), (self.x1, self.y0), (self.x1, self.y1))

    def overlaps(self, other: Rect, gap: float = 0.0) -> bool:
        """True when the rectangles are closer than ``gap`` (touching counts as apart when gap is 0)."""
        return not (self.x1 + gap <= other.x0 + EPS or other.x1 + gap <= self.x0 + EPS
                    or self.y1 + gap <= other.y0 + EPS or other.y1 + gap <= self.y0 + EPS)

    def inside(self, other: Rect, margin: float = 0.0) -> bool:
        return (self.x0 >= other.x0 + margin - EPS and self.y0 >= other.y0 + margin - EPS
                and self.x1 <= other.x1 - margin + EPS and self.y1 <= other.y1 - margin + EPS)

    def intersection_area(self, other: Rect) -> float:
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        d = min(self.y1, other.y1) - max(self.y0, other.y0)
        return max(0.0, w) * max(0.0, d)

    @property
    def area(self) -> float:
        return self.width * self.depth

    def farthest_corner_distance(self, x: float, y: float) -> float:
        return max(math.hypot(cx - x, cy - y) for cx, cy in self.corners())


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    z0: float
    x1: float
    y1: float
    z1: float

    @classmethod
    def from_center(cls, center: tuple[float, float, float], size: tuple[float, float, float]) -> Box:
        (cx, cy, cz), (sx, sy, sz) = center, size
        return cls(cx - sx / 2, cy - sy / 2, cz - sz / 2, cx + sx / 2, cy + sy / 2, cz + sz / 2)

    @classmethod
    def of(cls, values: list[float] | tuple[float, ...]) -> Box:
        if len(values) != 6:
            raise ValueError(f"a bounding box has 6 numbers, got {len(values)}")
        return cls(*(float(v) for v in values))

    @property
    def rect(self) -> Rect:
        return Rect(self.x0, self.y0, self.x1, self.y1)

    @property
    def center(self) -> tuple[float, float, float]:
        return ((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2, (self.z0 + self.z1) / 2)

    def as_list(self) -> list[float]:
        return [self.x0, self.y0, self.z0, self.x1, self.y1, self.z1]

    def xy_overlap_ratio(self, other: Box) -> float:
        """Share of this box's footprint that lies over ``other``'s footprint (0..1)."""
        area = self.rect.area
        return self.rect.intersection_area(other.rect) / area if area > 0 else 0.0

    @property
    def volume(self) -> float:
        return max(0.0, self.x1 - self.x0) * max(0.0, self.y1 - self.y0) * max(0.0, self.z1 - self.z0)

    def volume_overlap_ratio(self, other: Box) -> float:
        """Share of this box's volume that lies inside ``other`` (0..1; 0 for a box without volume)."""
        volume = self.volume
        if volume <= 0:
            return 0.0
        common = Box(max(self.x0, other.x0), max(self.y0, other.y0), max(self.z0, other.z0),
                     min(self.x1, other.x1), min(self.y1, other.y1), min(self.z1, other.z1))
        if common.x1 <= common.x0 or common.y1 <= common.y0 or common.z1 <= common.z0:
            return 0.0
        return common.volume / volume
