"""The worlds stage as a plain function: sample the worlds, load the benchmark tasks, and return the typed records
and the report that the flow writes (world JSON files and pictures are written by :func:`write_world_files`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from robot.contract.catalog import Catalog
from robot.contract.world import World, write_world
from tasks.progress import Progress
from tasks.roboscript.benchmark import BenchmarkTask, load_benchmark
from tasks.roboscript.params import WorldsParams
from tasks.roboscript.render import render_world
from tasks.roboscript.scene_text import describe
from tasks.roboscript.worlds import sample_world


@dataclass(frozen=True)
class WorldRecord:
    world_id: str
    index: int
    seed: str
    n_models: int
    n_containers: int
    n_objects: int
    n_in_containers: int
    has_cabinet: bool
    n_drawers: int
    n_doors: int
    object_names: list[str]
    scene_text: str
    attempts: int
    n_failures: int
    world_file: str
    picture_file: str


@dataclass(frozen=True)
class PlacementFailureRecord:
    world_id: str
    asset: str
    kind: str
    reason: str
    detail: str


@dataclass(frozen=True)
class CatalogRejectRecord:
    source: str
    line: int | None
    entry: str
    field: str
    reason: str


@dataclass(frozen=True)
class BenchmarkTaskRecord:
    task_id: str
    instruction: str
    reasoning: list[str]
    object_names: list[str]
    scene_text: str
    evaluation: list[str]
    world_file: str
    picture_file: str


def world_record(world: World, index: int, world_file: str, picture_file: str) -> WorldRecord:
    kinds = Counter(m.kind for m in world.models)
    return WorldRecord(
        world_id=world.world_id, index=index, seed=world.seed, n_models=len(world.models),
        n_containers=kinds["container"], n_objects=kinds["object"],
        n_in_containers=sum(m.relation == "in" for m in world.models), has_cabinet=kinds["cabinet"] > 0,
        n_drawers=sum(j.type == "prismatic" for j in world.joints),
        n_doors=sum(j.type == "revolute" for j in world.joints), object_names=world.object_names(),
        scene_text=describe(world), attempts=world.attempts, n_failures=len(world.failures), world_file=world_file,
        picture_file=picture_file)


def sample_worlds(catalog: Catalog, params: WorldsParams) -> list[World]:
    worlds = []
    with Progress(params.n_worlds, "roboscript-worlds: sampling", unit="worlds") as progress:
        for index in range(params.n_worlds):
            worlds.append(sample_world(index, catalog, params))
            progress.advance()
    return worlds


def write_world_files(worlds: list[World], directory: Path, pictures: Path, size_px: int, root: Path
                      ) -> list[tuple[str, str]]:
    """Write each world's JSON and picture; returns (world file, picture file) relative to ``root``, in order.
    Files of earlier runs that this run did not write are removed, so the folder holds exactly these worlds."""
    written = []
    with Progress(len(worlds), "roboscript-worlds: writing files and pictures", unit="worlds") as progress:
        for world in worlds:
            json_path, png_path = directory / f"{world.world_id}.json", pictures / f"{world.world_id}.png"
            write_world(json_path, world)
            render_world(world, png_path, size_px)
            written.append((json_path, png_path))
            progress.advance()
    keep = {p for pair in written for p in pair}
    for stale in [*directory.glob("*.json"), *pictures.glob("*.png")]:
        if stale not in keep:
            stale.unlink()
    return [(_rel(a, root), _rel(b, root)) for a, b in written]


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def benchmark_tasks(catalog: Catalog, params: WorldsParams) -> list[BenchmarkTask]:
    return load_benchmark(catalog, params)


def benchmark_record(task: BenchmarkTask, world_file: str, picture_file: str) -> BenchmarkTaskRecord:
    return BenchmarkTaskRecord(task.id, task.instruction, list(task.reasoning), task.world.object_names(),
                               describe(task.world), [i.describe() for i in task.evaluation], world_file,
                               picture_file)


def worlds_report(catalog: Catalog, worlds: list[World], records: list[WorldRecord],
                  failures: list[PlacementFailureRecord], tasks: list[BenchmarkTask]) -> dict:
    return {
        "worlds": len(worlds),
        "models": sum(r.n_models for r in records),
        "containers": sum(r.n_containers for r in records),
        "objects": sum(r.n_objects for r in records),
        "objects_in_containers": sum(r.n_in_containers for r in records),
        "worlds_with_cabinet": sum(r.has_cabinet for r in records),
        "world_attempts": sum(r.attempts for r in records),
        "placement_failures": len(failures),
        "placement_failures_by_reason": dict(sorted(Counter(f.reason for f in failures).items())),
        "catalog": {"objects": len(catalog.objects), "containers": len(catalog.containers),
                    "cabinets": len(catalog.cabinets), "rejected_entries": len(catalog.issues)},
        "benchmark_tasks": len(tasks),
    }
