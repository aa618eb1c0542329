"""The asset catalog (``assets.yaml``): pickable objects, containers and cabinets, each entry validated.

Every problem is a :class:`CatalogIssue` naming the file, the line, the entry and the field. ``strict=True`` raises
:class:`CatalogError` listing all of them; ``strict=False`` (what the world stage uses) leaves the bad entries out,
keeps the issues on the catalog so the stage records them, and goes on with the rest -- unless nothing usable is
left.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from matplotlib.colors import is_color_like, to_rgba

from core.errors import DataError

CATALOG_FILE = Path(__file__).with_name("assets.yaml")
KINDS = ("object", "container", "cabinet")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_FIELDS = {
    "common": {"name", "kind", "category", "colour", "size", "mass", "pickable", "source"},
    "container": {"holds", "opening", "floor"},
    "cabinet": {"drawers", "doors", "stands", "drawer_bands", "drawer_depth", "travel", "handle"},
}
STANDS = ("table", "floor")
MAX_SIZE_M = 3.0


@dataclass(frozen=True)
class Asset:
    name: str
    kind: str
    category: str
    colour: str
    size: tuple[float, float, float]
    mass: float
    pickable: bool
    holds: tuple[str, ...] = ()
    opening: tuple[float, float] | None = None
    floor: float = 0.0
    drawers: int = 0
    doors: int = 0
    stands: str = "table"
    """Cabinets: on the ``table`` top (the sampled worlds) or on the ``floor`` beside it (the public benchmark's)."""
    drawer_bands: tuple[tuple[float, float], ...] = ()
    """Cabinets: (bottom, top) of each drawer above the cabinet's bottom, top drawer first; () = stacked evenly."""
    drawer_depth: float | None = None
    """Cabinets: a drawer's depth from the front face; None = the body's depth less 3 cm."""
    travel: float | None = None
    """Cabinets: how far a drawer pulls out (m); None = 0.6 x its depth."""
    handle: tuple[float, float, float] | None = None
    """Cabinets: a drawer handle's box (depth off the front, width, height); None = the default bar."""
    source: str = ""
    line: int | None = None

    @property
    def is_container(self) -> bool:
        return self.kind == "container"

    def can_hold(self, other: Asset) -> bool:
        """Whether ``other`` belongs in this container by kind (its name or category is listed in ``holds``)."""
        return self.is_container and (other.name in self.holds or other.category in self.holds)

    def fits_inside(self, other: Asset) -> bool:
        """Whether ``other``'s footprint fits in the opening, in either orientation."""
        if self.opening is None:
            return False
        (w, d), (x, y) = self.opening, other.size[:2]
        return (x <= w and y <= d) or (y <= w and x <= d)

    @property
    def phrase(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True)
class CatalogIssue:
    source: str
    line: int | None
    entry: str
    field: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: entry {self.entry}: {self.field}: {self.reason}"


class CatalogError(DataError):
    def __init__(self, issues: list[CatalogIssue]):
        lines = "; ".join(str(i) for i in issues[:20])
        more = f" (and {len(issues) - 20} more)" if len(issues) > 20 else ""
        super().__init__(f"the asset catalog has {len(issues)} bad entr{'y' if len(issues) == 1 else 'ies'}: "
                         f"{lines}{more}.", hint="Fix the entries named above.")
        self.issues = issues


@dataclass
class Catalog:
    assets: dict[str, Asset]
    source: str
    issues: list[CatalogIssue] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Asset]:
        return [a for a in self.assets.values() if a.kind == kind]

    @property
    def objects(self) -> list[Asset]:
        return self.of_kind("object")

    @property
    def containers(self) -> list[Asset]:
        return self.of_kind("container")

    @property
    def cabinets(self) -> list[Asset]:
        """The cabinets a tabletop world may hold (those standing on the table)."""
        return [a for a in self.of_kind("cabinet") if a.stands == "table"]

    def __getitem__(self, name: str) -> Asset:
        try:
            return self.assets[name]
        except KeyError:
            raise DataError(f"the asset catalog {self.source} has no asset {name!r}.") from None


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader where PyYAML has it (about ten times faster, the same objects); a document it refuses is read
again with PyYAML's own loader, so that errors read the same everywhere."""


def _entry_lines(text: str) -> list[int | None]:
    """1-based line of each item of the top-level ``assets`` list, by position."""
    try:
        root = yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "assets" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _numbers(value: Any, n: int) -> list[float] | None:
    if not isinstance(value, list) or len(value) != n:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    return [float(v) for v in value]


class _EntryChecker:
    def __init__(self, source: str, line: int | None, index: int, raw: Any):
        self.source, self.line, self.raw = source, line, raw
        name = raw.get("name") if isinstance(raw, dict) else None
        self.label = f"'{name}'" if isinstance(name, str) and name else f"#{index + 1}"
        self.issues: list[CatalogIssue] = []

    def bad(self, field_name: str, reason: str) -> None:
        self.issues.append(CatalogIssue(self.source, self.line, self.label, field_name, reason))

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if not isinstance(value, str) or not value.strip():
            self.bad(key, f"must be a non-empty string, got {value!r}")
            return ""
        return value.strip()

    def check(self) -> Asset | None:
        raw = self.raw
        if not isinstance(raw, dict):
            self.bad("<entry>", f"must be a mapping of fields, got {type(raw).__name__}")
            return None
        name, kind = self.text("name"), self.text("kind")
        if name and not _NAME.match(name):
            self.bad("name", f"must be snake_case (a-z, 0-9, _), got {name!r}")
        if kind and kind not in KINDS:
            self.bad("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
        allowed = _FIELDS["common"] | _FIELDS.get(kind, set())
        for key in sorted(set(raw) - allowed):
            self.bad(key, f"unknown field for kind {kind!r} (allowed: {', '.join(sorted(allowed))})")
        category, colour = self.text("category"), self.text("colour")
        size = _numbers(raw.get("size"), 3)
        if size is None:
            self.bad("size", f"must be [x, y, z] in metres, got {raw.get('size')!r}")
        else:
            for axis, value in zip("xyz", size, strict=True):
                if not 0.0 < value <= MAX_SIZE_M:
                    self.bad("size", f"{axis} must be > 0 and <= {MAX_SIZE_M} m, got {value}")
        mass = raw.get("mass")
        if not isinstance(mass, (int, float)) or isinstance(mass, bool) or mass <= 0:
            self.bad("mass", f"must be a number of kg > 0, got {mass!r}")
        pickable = raw.get("pickable", kind == "object")
        if not isinstance(pickable, bool):
            self.bad("pickable", f"must be true or false, got {pickable!r}")
        elif kind == "object" and not pickable:
            self.bad("pickable", "an object must be pickable (use kind: container or cabinet otherwise)")
        elif kind == "cabinet" and pickable:
            self.bad("pickable", "a cabinet cannot be picked up")
        extra = self._container(size) if kind == "container" else self._cabinet() if kind == "cabinet" else {}
        if self.issues or size is None:
            return None
        return Asset(name=name, kind=kind, category=category, colour=colour, size=(size[0], size[1], size[2]),
                     mass=float(mass), pickable=bool(pickable), source=str(raw.get("source", "")), line=self.line,
                     **extra)

    def _container(self, size: list[float] | None) -> dict[str, Any]:
        holds = self.raw.get("holds")
        if not isinstance(holds, list) or not holds or not all(isinstance(h, str) and h for h in holds):
            self.bad("holds", f"a container must list the categories or assets it holds, got {holds!r}")
            holds = []
        opening = _numbers(self.raw.get("opening"), 2)
        if opening is None or min(opening) <= 0:
            self.bad("opening", f"must be [x, y] > 0 in metres, got {self.raw.get('opening')!r}")
        elif size is not None and (opening[0] > size[0] or opening[1] > size[1]):
            self.bad("opening", f"{opening} is wider than the container's footprint {size[:2]}")
        floor = self.raw.get("floor", 0.0)
        if not isinstance(floor, (int, float)) or isinstance(floor, bool) or floor < 0:
            self.bad("floor", f"must be a height >= 0 in metres, got {floor!r}")
        elif size is not None and floor >= size[2]:
            self.bad("floor", f"{floor} is not below the container's height {size[2]}")
        return {"holds": tuple(holds), "opening": tuple(opening) if opening else None, "floor": float(floor or 0.0)}

    def _cabinet(self) -> dict[str, Any]:
        counts = {}
        for key in ("drawers", "doors"):
            value = self.raw.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 8:
                self.bad(key, f"must be a whole number 0-8, got {value!r}")
                value = 0
            counts[key] = value
        if counts["drawers"] + counts["doors"] == 0:
            self.bad("drawers", "a cabinet needs at least one drawer or door")
        out: dict[str, Any] = dict(counts)
        stands = self.raw.get("stands", "table")
        if stands not in STANDS:
            self.bad("stands", f"must be one of {', '.join(STANDS)}, got {stands!r}")
        out["stands"] = stands
        bands = self.raw.get("drawer_bands")
        if bands is not None:
            pairs = [_numbers(b, 2) for b in bands] if isinstance(bands, list) else [None]
            if any(p is None or not 0 <= p[0] < p[1] for p in pairs) or len(pairs) != counts["drawers"]:
                self.bad("drawer_bands", f"must list one [bottom, top] (0 <= bottom < top, metres) per drawer "
                                         f"({counts['drawers']}), top drawer first, got {bands!r}")
            else:
                out["drawer_bands"] = tuple((p[0], p[1]) for p in pairs)  # type: ignore[index]
        for key in ("drawer_depth", "travel"):
            value = self.raw.get(key)
            if value is not None:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= MAX_SIZE_M:
                    self.bad(key, f"must be a length in metres > 0, got {value!r}")
                else:
                    out[key] = float(value)
        if self.raw.get("handle") is not None:
            handle = _numbers(self.raw.get("handle"), 3)
            if handle is None or min(handle) <= 0:
                self.bad("handle", f"must be [depth, width, height] > 0 in metres, got {self.raw.get('handle')!r}")
            else:
                out["handle"] = (handle[0], handle[1], handle[2])
        return out


def parse_catalog(text: str, source: str = "assets.yaml", strict: bool = True) -> Catalog:
    try:
        try:
            data = yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            data = yaml.safe_load(text)  # the message PyYAML's own parser gives
    except yaml.YAMLError as exc:
        raise DataError(f"{source} is not valid YAML: {exc}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("assets"), list):
        raise DataError(f"{source} must hold a mapping with a list under 'assets'.")
    lines = _entry_lines(text)
    assets: dict[str, Asset] = {}
    issues: list[CatalogIssue] = []
    for index, raw in enumerate(data["assets"]):
        checker = _EntryChecker(source, lines[index] if index < len(lines) else None, index, raw)
        asset = checker.check()
        if asset is not None and asset.name in assets:
            checker.bad("name", f"duplicate of the entry at line {assets[asset.name].line}")
            asset = None
        issues.extend(checker.issues)
        if asset is not None:
            assets[asset.name] = asset
    # Container targets must name something the catalog knows.
    known = set(assets) | {a.category for a in assets.values()}
    for asset in list(assets.values()):
        unknown = [h for h in asset.holds if h not in known]
        if unknown:
            issues.append(CatalogIssue(source, asset.line, f"'{asset.name}'", "holds",
                                       f"unknown container target(s) {', '.join(map(repr, unknown))}: neither an "
                                       "asset name nor a category of the catalog"))
            del assets[asset.name]
    if strict and issues:
        raise CatalogError(issues)
    catalog = Catalog(assets, source, issues)
    if not catalog.objects or not catalog.containers:
        raise CatalogError(issues or [CatalogIssue(source, None, "<catalog>", "assets",
                                                   "needs at least one object and one container")])
    return catalog


def load_catalog(path: Path | None = None, strict: bool = True) -> Catalog:
    """The catalog at ``path`` (default: the project's). Parsed once per file version and process (a robot runner
    builds its tools every episode); each caller gets its own ``Catalog`` (the assets are frozen)."""
    path = Path(path) if path is not None else CATALOG_FILE
    try:
        stat = path.stat()
    except OSError:
        raise DataError(f"asset catalog {path} not found.") from None
    parsed = _parsed_catalog(str(path.resolve()), strict, stat.st_mtime_ns, stat.st_size)
    return Catalog(dict(parsed.assets), parsed.source, list(parsed.issues))


@functools.lru_cache(maxsize=8)
def _parsed_catalog(path: str, strict: bool, _mtime_ns: int, _size: int) -> Catalog:
    return parse_catalog(Path(path).read_text(encoding="utf-8"), source=Path(path).name, strict=strict)


_COLOURS = {"white": "#f2f2f2", "grey": "#9a9a9a", "beige": "#e6d3a8", "brown": "#8b5a2b", "silver": "#c8c8c8",
            "multicolour": "#c060d0", "yellow": "#f2d13a", "orange": "#f08c2a", "green": "#4caf50", "blue": "#3f7fd0",
            "red": "#d23c3c", "purple": "#8050b0", "pink": "#f0a0c0", "black": "#333333"}


def colour_hex(name: str) -> str:
    """A catalog colour word (or any matplotlib colour) as the hex colour pictures and the simulator paint."""
    return _COLOURS.get(name, name if is_color_like(name) else "#b0b0b0")


def colour_rgba(name: str) -> tuple[float, float, float, float]:
    """A catalog colour word as RGBA in [0, 1] (the simulator's renderer paints the models with it)."""
    return to_rgba(colour_hex(name))
