"""ALFWorld's json_2.1.1 game files, read from the archives this repository carries (``tasks/muep/alfworld/``).

Each ``<split>/<task>-<Object>-<MovableRecep>-<Target>-<floorplan>/<trial>/game.tw-pddl`` is JSON holding ALFWorld's
PDDL domain, its command grammar (with the templated goal sentence), the trial's PDDL problem -- ALFRED's real
initial state of that trial -- and a walkthrough (a fully observable expert plan). We read:

* the **task**: type, object, target and floorplan from the task directory's name, the goal sentence from the grammar's
  ``task`` rule ("put some pencil on dresser.");
* the **initial state** from ``(:init ...)``: receptacles (type, location, openable), the objects placed in them
  (several objects have two ``inReceptacle`` facts: a mug in the coffee machine *and* on the countertop), the initial
  marks (``isCool``: some objects start cold in a fridge), per-object ``pickupable``, and the objects outside every
  receptacle (scenery, and things on the floor);
* **names** as ALFWorld shows them, by ALFWorld's own demangling rule (the type prefix and a number; the sorted ids
  of a prefix take the numbers from the largest down), so "cabinet 3" here is "cabinet 3" in ALFWorld's game;
* **poses** from the location ids (``loc_bar_X_bar_Z_bar_R_bar_H``: x = X / 4 m, z = Z / 4 m, rotation R x 90 deg,
  camera horizon H deg), so receptacles that share an ALFWorld location share a pose and hence one game location.

Archives are checked against ``SHA256SUMS`` before they are opened and are streamed (never unpacked to disk); a
corrupt archive or a malformed game raises :class:`~core.errors.DataError` naming the file (and the member).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import tarfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from core.errors import DataError
from tasks.muep.vocab import TASK_TYPES

ARCHIVE_DIR = Path(__file__).parent / "alfworld"
TRAIN_ARCHIVE = ARCHIVE_DIR / "json_2.1.1_train.tar.xz"
VALID_ARCHIVE = ARCHIVE_DIR / "json_2.1.1_valid.tar.xz"
ANNOTATIONS = ARCHIVE_DIR / "annotations_valid.jsonl.xz"
CHECKSUMS = ARCHIVE_DIR / "SHA256SUMS"

#: Games per split in the archives (ALFWorld's counts; MuEP's "#Seen 140 / #Unseen 134 test tasks").
EXPECTED_GAMES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
GAME_FILE = "game.tw-pddl"
LOCATION_STEP_M = 0.25   # ALFWorld's grid: a location id counts 0.25 m steps
ROTATION_STEP_DEG = 90

_FACT = re.compile(r"\(\s*([A-Za-z][A-Za-z0-9_-]*)((?:\s+[^\s()]+)*)\s*\)")
_GOAL = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"Your task is to: ([^"]*)"')
_MARKS = ("isCool", "isHot", "isClean", "isToggled", "isSliced")


@dataclass(frozen=True)
class GameReceptacle:
    name: str        # ALFWorld's name, "cabinet 3"
    type: str        # "Cabinet"
    thor_id: str     # AI2-THOR id, "Cabinet|-01.55|+00.50|+00.38"
    location: str    # ALFWorld location id, "loc_bar_-6_bar_2_bar_3_bar_60" (unmangled: signs as "-", "+" dropped)
    openable: bool


@dataclass(frozen=True)
class GameObject:
    name: str
    type: str
    thor_id: str
    parents: tuple[str, ...]
    """Receptacle names it starts in; the first is the one at its recorded location (``objectAtLocation``)."""
    marks: tuple[str, ...]  # initial state marks, e.g. ("isCool",)
    pickupable: bool
    toggleable: bool


@dataclass(frozen=True)
class AlfGame:
    split: str               # "train" | "valid_seen" | "valid_unseen"
    trial: str               # "trial_T20190909_044715_250790"
    task_dir: str            # "look_at_obj_in_light-AlarmClock-None-DeskLamp-323"
    task_type: str
    object_type: str
    mrecep_type: str | None  # always None in json_2.1.1
    target_type: str         # receptacle type, or the lamp type for look tasks
    floorplan: int
    goal: str                # ALFWorld's templated goal sentence, "look at alarmclock under the desklamp."
    walkthrough: tuple[str, ...]
    receptacles: tuple[GameReceptacle, ...]
    objects: tuple[GameObject, ...]           # objects in at least one receptacle
    loose: tuple[tuple[str, str], ...]        # (name, type) of objects in no receptacle (scenery, things on the floor)
    agent_start: str
    locations: tuple[str, ...] = ()
    """Every location of the problem (receptacles', objects' and the start pose), sorted, as TextWorld reads their
    ids (:func:`mangle`: lower-case, ``loc_bar__minus_6_bar_2_bar_3_bar_60``): what MuEP's released client numbers
    "loc N" (``tasks.muep.textworld_env.released_location_names``)."""

    @property
    def member(self) -> str:
        return f"{self.split}/{self.task_dir}/{self.trial}/{GAME_FILE}"


# --------------------------------------------------------------------------------------------------------------------
# Names and poses


def unmangle(pddl_id: str) -> str:
    """``Cabinet_bar__minus_01_dot_55_bar_...`` -> ``Cabinet|-01.55|...`` (AI2-THOR's id, as in the pose files)."""
    for code, char in (("_bar_", "|"), ("_minus_", "-"), ("_plus_", "+"), ("_dot_", "."), ("_comma_", ",")):
        pddl_id = pddl_id.replace(code, char)
    return pddl_id


def demangle_names(ids: list[str]) -> dict[str, str]:
    """ALFWorld's names for PDDL ids (compared lower-cased, as TextWorld reads them): the type prefix (the part before
    the first ``_bar_``, plus "basin" for sink and bathtub basins) and a number. Ids are sorted, and each takes the
    largest number of its prefix not yet given -- ALFWorld's ``Demangler`` rule, which its games and walkthroughs
    use. Returns lower-cased id -> name for every id that has a prefix."""
    lowered = sorted({i.lower() for i in ids})
    prefix: dict[str, str] = {}
    for i in lowered:
        head, sep, _ = i.partition("_bar_")
        if sep:
            prefix[i] = head + ("basin" if "basin" in i else "")
    pools = {p: list(range(1, n + 1)) for p, n in Counter(prefix.values()).items()}
    return {i: f"{prefix[i]} {pools[prefix[i]].pop()}" for i in lowered if i in prefix}


def mangle(thor_id: str) -> str:
    """The inverse of :func:`unmangle`, lower-cased: the id as TextWorld reads it from the PDDL problem
    (``loc|-6|2|3|60`` -> ``loc_bar__minus_6_bar_2_bar_3_bar_60``)."""
    for char, code in (("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"), ("|", "_bar_")):
        thor_id = thor_id.replace(char, code)
    return thor_id.lower()


def decode_location(location: str) -> tuple[float, float, float, float]:
    """``loc_bar_-6_bar_2_bar_3_bar_60`` (unmangled or not) -> (x m, z m, rotation deg, horizon deg)."""
    text = unmangle(location) if "_bar_" in location else location
    parts = text.split("|")
    if len(parts) != 5 or parts[0] != "loc":
        raise ValueError(f"not an ALFWorld location id: {location!r}")
    x, z, rotation, horizon = (int(p) for p in parts[1:])
    return x * LOCATION_STEP_M, z * LOCATION_STEP_M, float(rotation * ROTATION_STEP_DEG), float(horizon)


# --------------------------------------------------------------------------------------------------------------------
# Archives


@cache
def _checksums() -> dict[str, str]:
    try:
        lines = CHECKSUMS.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"{CHECKSUMS} is missing: the ALFWorld archives cannot be verified.") from None
    out = {}
    for line in lines:
        if line.strip():
            digest, name = line.split(maxsplit=1)
            out[name.strip().lstrip("*")] = digest
    return out


def verify(archive: Path) -> None:
    """Fail unless ``archive`` exists and matches its line in ``SHA256SUMS``."""
    expected = _checksums().get(archive.name)
    if expected is None:
        raise DataError(f"{archive.name} has no line in {CHECKSUMS}.")
    try:
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise DataError(f"the ALFWorld archive {archive} is missing.",
                        hint="It is committed to git with the repository; restore it with `git checkout`.") from None
    if digest != expected:
        raise DataError(f"the ALFWorld archive {archive} does not match its SHA-256 in {CHECKSUMS} (corrupt or "
                        "replaced).", hint="Restore it with `git checkout` or copy it again from its source (README.md "
                        "there names it).")


def iter_members(archive: Path, wanted: Callable[[str], bool] | None = None) -> Iterator[tuple[str, bytes]]:
    """(member path, bytes) of every game file in ``archive`` that ``wanted`` accepts, in archive order."""
    verify(archive)
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar:
                if not member.isfile() or PurePosixPath(member.name).name != GAME_FILE:
                    continue
                if wanted is not None and not wanted(member.name):
                    continue
                stream = tar.extractfile(member)
                assert stream is not None
                yield member.name, stream.read()
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:
        raise DataError(f"cannot read the ALFWorld archive {archive}: {type(exc).__name__}: {exc}.") from None


def member_names(archive: Path) -> list[str]:
    """Every game file's path in ``archive`` (reads the archive through once)."""
    names: list[str] = []

    def note(name: str) -> bool:
        names.append(name)
        return False  # only the names: no member is read

    for _ in iter_members(archive, note):
        pass
    return names


def _task_fields(task_dir: str, where: str) -> dict:
    parts = task_dir.split("-")
    if len(parts) != 5 or parts[0] not in TASK_TYPES or not parts[4].isdigit():
        raise DataError(f"{where}: task directory {task_dir!r} is not <task type>-<Object>-<MovableRecep>-<Target>-"
                        "<floorplan> with one of the six task types.")
    task_type, obj, mrecep, target, floorplan = parts
    return {"task_type": task_type, "object_type": obj, "mrecep_type": None if mrecep == "None" else mrecep,
            "target_type": target, "floorplan": int(floorplan)}


def split_of(member: str) -> str:
    return PurePosixPath(member).parts[0]


def trial_of(member: str) -> str:
    return PurePosixPath(member).parts[-2]


@dataclass(frozen=True)
class AlfTask:
    """A game's task without its initial state (what an in-context example needs; cheap to read)."""

    split: str
    trial: str
    task_dir: str
    task_type: str
    object_type: str
    mrecep_type: str | None
    target_type: str
    floorplan: int
    goal: str
    walkthrough: tuple[str, ...]


def _read(member: str, raw: bytes, archive: Path | str) -> tuple[AlfTask, str]:
    """The task fields and the text of ``(:init ...)``."""
    where = f"{archive}:{member}" if archive else member
    parts = PurePosixPath(member).parts
    if len(parts) != 4:
        raise DataError(f"{where}: expected <split>/<task>/<trial>/{GAME_FILE}.")
    split, task_dir, trial, _ = parts
    fields = _task_fields(task_dir, where)
    try:
        data = json.loads(raw)
        problem, grammar = data["pddl_problem"], data["grammar"]
        walkthrough = tuple(data.get("walkthrough") or ())
        init = problem[problem.index("(:init") + len("(:init"):problem.index("(:goal")]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{where} is not an ALFWorld game file ({type(exc).__name__}: {exc}).") from None
    goal = _GOAL.search(grammar)
    if goal is None:
        raise DataError(f"{where}: its grammar has no `task` rule with the goal sentence.")
    return AlfTask(split=split, trial=trial, task_dir=task_dir, **fields, goal=goal.group(1).strip(),
                   walkthrough=walkthrough), init


def parse_task(member: str, raw: bytes, archive: Path | str = "") -> AlfTask:
    """One game file's task (type, items, floorplan, goal sentence, walkthrough), without parsing its state."""
    return _read(member, raw, archive)[0]


def read_tasks(archive: Path) -> list[AlfTask]:
    """Every game's task in ``archive``, sorted by (split, task dir, trial)."""
    tasks = [parse_task(member, raw, archive) for member, raw in iter_members(archive)]
    return sorted(tasks, key=lambda g: (g.split, g.task_dir, g.trial))


def parse_game(member: str, raw: bytes, archive: Path | str = "") -> AlfGame:
    """One game file -> :class:`AlfGame`. ``member`` is its path in the archive (``<split>/<task>/<trial>/...``)."""
    where = f"{archive}:{member}" if archive else member
    task, init = _read(member, raw, archive)

    facts: dict[str, list[tuple[str, ...]]] = {}
    for m in _FACT.finditer(init):
        facts.setdefault(m.group(1), []).append(tuple(m.group(2).split()))
    ids = {a for rows in facts.values() for args in rows for a in args if "_bar_" in a}
    names = demangle_names(sorted(ids))
    lower = str.lower

    def type_name(t: str) -> str:
        return t.removesuffix("Type")

    rtype = {lower(r): type_name(t) for r, t in facts.get("receptacleType", [])}
    otype = {lower(o): type_name(t) for o, t in facts.get("objectType", [])}
    thor = {lower(i): unmangle(i) for i in ids}
    rloc = {lower(r): unmangle(loc) for r, loc in facts.get("receptacleAtLocation", [])}
    oloc = {lower(o): unmangle(loc) for o, loc in facts.get("objectAtLocation", [])}
    flags = {p: {lower(args[0]) for args in facts.get(p, []) if args} for p in ("openable", "pickupable", "toggleable",
                                                                                 *_MARKS)}
    parents: dict[str, list[str]] = {}
    for o, r in facts.get("inReceptacle", []):
        parents.setdefault(lower(o), []).append(lower(r))
    start = [unmangle(loc) for _, loc in facts.get("atLocation", [])]
    locations = sorted({lower(a) for rows in facts.values() for args in rows for a in args
                        if lower(a).startswith("loc_bar_")})
    missing = [r for r in rtype if r not in rloc or r not in names]
    if not rtype or missing or len(start) != 1:
        raise DataError(f"{where}: its initial state lacks receptacles, a receptacle's location or the agent's start "
                        f"({', '.join(missing[:3]) or 'no receptacle or no single atLocation'}).")
    unknown = [r for rs in parents.values() for r in rs if r not in rtype]
    if unknown:
        raise DataError(f"{where}: objects are in {unknown[0]}, which is not a receptacle of the game.")

    receptacles = tuple(sorted(
        (GameReceptacle(names[r], t, thor[r], rloc[r], r in flags["openable"]) for r, t in rtype.items()),
        key=lambda g: (g.type, _number(g.name))))
    objects, loose = [], []
    for o, t in otype.items():
        if o not in parents:
            if o in names:
                loose.append((names[o], t))
            continue
        ps = sorted(names[r] for r in parents[o])
        here = [names[r] for r in parents[o] if rloc[r] == oloc.get(o)]
        first = min(here) if here else ps[0]
        objects.append(GameObject(names[o], t, thor[o], (first, *[p for p in ps if p != first]),
                                  tuple(m for m in _MARKS if o in flags[m]), o in flags["pickupable"],
                                  o in flags["toggleable"]))
    objects.sort(key=lambda g: (g.type, _number(g.name)))
    loose.sort(key=lambda nt: (nt[1], _number(nt[0])))
    return AlfGame(**{f: getattr(task, f) for f in AlfTask.__dataclass_fields__}, receptacles=receptacles,
                   objects=tuple(objects), loose=tuple(loose), agent_start=start[0], locations=tuple(locations))


def _number(name: str) -> int:
    tail = name.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def read_games(archive: Path, wanted: Callable[[str], bool] | None = None) -> list[AlfGame]:
    """The games of ``archive`` that ``wanted`` accepts (by member path), sorted by (split, task dir, trial)."""
    games = [parse_game(member, raw, archive) for member, raw in iter_members(archive, wanted)]
    return sorted(games, key=lambda g: (g.split, g.task_dir, g.trial))


def check_counts(games: list[AlfGame] | list[AlfTask], archive: Path, splits: tuple[str, ...]) -> None:
    """Every split of ``splits`` must be complete: a game missing from the archive is an error naming the archive."""
    counts = Counter(g.split for g in games)
    short = {s: counts.get(s, 0) for s in splits if counts.get(s, 0) != EXPECTED_GAMES[s]}
    if short:
        detail = ", ".join(f"{s}: {n} of {EXPECTED_GAMES[s]}" for s, n in short.items())
        raise DataError(f"the ALFWorld archive {archive} does not hold the expected games ({detail}).",
                        hint="Restore the archive from git; see its README.md for the source.")
