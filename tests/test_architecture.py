"""The shape of the house (docs/architecture.md), checked on the source: which part may import which, no new import
cycle, plug-in tables that name without importing, artifact paths in one place per pipeline, and DVC code deps that
match what each stage runs.

Imports are read from the syntax tree (``flows._imports``), including the ones inside functions (a lazy import is
still a dependency); only those under ``if TYPE_CHECKING:`` are left out.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from core.plugins import ALL
from flows._imports import import_graph, modules

ROOT = Path(__file__).resolve().parent.parent

#: Part -> the parts it may import (besides itself and third-party code). The first matching prefix decides.
PARTS: tuple[tuple[str, set[str]], ...] = (
    ("core", set()),
    ("robot.contract", {"core"}),
    ("robot", {"core", "robot.contract"}),
    ("tasks.roboscript.eval", {"core", "robot.contract", "robot", "tasks"}),
    ("tasks", {"core", "robot.contract", "tasks"}),
    ("flows", {"core", "robot.contract", "robot", "tasks", "tasks.roboscript.eval"}),
)

#: Import cycles of two modules that are allowed to stay; any other cycle fails. Each is a lazy import in one
#: direction (the loader and the thing it loads).
ALLOWED_CYCLES = {
    frozenset({"robot.contract.code_checks", "robot.contract.code_policy"}),
    frozenset({"tasks.train.policy", "tasks.train.registry"}),
    frozenset({"tasks.train.pipeline", "tasks.train.session"}),
}


def part_of(module: str) -> str:
    for prefix, _ in PARTS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"{module} belongs to no part of docs/architecture.md")


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph(ROOT)


def test_every_import_goes_where_the_layers_allow(graph):
    allowed = dict(PARTS)
    bad = []
    for src, dst, data in graph.edges(data=True):
        a, b = part_of(src), part_of(dst)
        if a != b and b not in allowed[a]:
            bad.append(f"{src} (line {data['line']}) imports {dst}: {a} may not import {b}")
    assert not bad, "forbidden imports (docs/architecture.md):\n" + "\n".join(sorted(bad))


def test_no_import_cycle_between_parts(graph):
    parts = nx.DiGraph()
    for src, dst in graph.edges():
        if part_of(src) != part_of(dst):
            parts.add_edge(part_of(src), part_of(dst))
    assert nx.is_directed_acyclic_graph(parts), list(nx.simple_cycles(parts))
    top = {m.split(".")[0] for m in graph}
    packages = nx.DiGraph()
    packages.add_nodes_from(top)
    packages.add_edges_from((s.split(".")[0], d.split(".")[0]) for s, d in graph.edges() if s[:4] != d[:4])
    assert nx.is_directed_acyclic_graph(packages), list(nx.simple_cycles(packages))


def test_no_new_module_cycle(graph):
    cycles = [frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    new = [sorted(c) for c in cycles if c not in ALLOWED_CYCLES]
    assert not new, f"new import cycles: {new}"
    assert all(len(c) <= 2 for c in cycles)


def test_flows_are_imported_by_flows_only(graph):
    offenders = [(s, d) for s, d in graph.edges() if d.startswith("flows") and not s.startswith("flows")]
    assert not offenders


@pytest.mark.parametrize("kind", sorted(ALL))
def test_every_plugin_name_resolves(kind):
    registry = ALL[kind]
    assert registry.names(), kind
    for name in registry.names():
        obj = registry.load(name)
        assert obj is not None, (kind, name)
        if kind in ("LLM backend", "agent", "renderer", "robot backend", "perception mode", "grounding backend",
                    "grasp backend", "offline proposer skill"):
            assert inspect.isclass(obj), f"{kind} {name!r} -> {registry.target(name)} is not a class"
    if kind == "agent":
        from tasks.muep.eval.agents.base import Agent

        assert all(issubclass(registry.load(n), Agent) for n in registry.names())
    if kind == "baseline":
        assert all(registry.load(n).name == n for n in registry.names())


def test_validating_params_imports_no_plugin():
    """The schemas check names against the tables; no implementation module is imported to do so."""
    targets = sorted({reg.target(n).partition(":")[0] for reg in ALL.values() for n in reg.names()})
    code = ("import json, sys\nfrom tasks.params import load_params\nload_params(None)\n"
            f"print(json.dumps(sorted(m for m in {targets!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_architecture_doc_names_every_part():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for prefix, _ in PARTS:
        assert f"`{prefix.replace('.', '/')}/`" in doc, prefix
    for kind, registry in ALL.items():
        assert kind in doc, kind


def test_cli_lives_beside_the_flows():
    assert not (ROOT / "tasks" / "cli.py").exists()
    assert "flows.cli" in modules(ROOT)


def _dvc_outputs() -> set[str]:
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    outs = set()
    for stage in stages.values():
        stage = stage.get("do", stage)  # a foreach stage's template
        for key in ("outs", "metrics", "plots"):
            for out in stage.get(key) or []:
                outs.add((next(iter(out)) if isinstance(out, dict) else out).split("${")[0].rstrip("/"))
    return outs


@pytest.mark.parametrize("module", ["tasks.muep.layout", "tasks.roboscript.layout"])
def test_every_layout_path_is_a_dvc_output(module):
    """A pipeline's layout names only what its DVC stages produce (or a folder of it)."""
    import importlib

    from tasks import paths

    outs = _dvc_outputs()
    layout = importlib.import_module(module)
    for name, value in vars(layout).items():
        if name.isupper() and isinstance(value, Path):
            rel = paths.rel(value)
            assert any(rel == o or rel.startswith(o + "/") or o.startswith(rel + "/") for o in outs), (name, rel)


def test_no_module_spells_an_artifact_path():
    """Artifact paths come from the layout modules; no other module writes ``data/...`` or ``reports/...``."""
    import re

    spelled = re.compile(r"""["'](data/(muep|roboscript|cache)|reports|models)/[\w./-]*["']""")
    allowed = {"tasks/paths.py", "tasks/muep/layout.py", "tasks/roboscript/layout.py"}
    offenders = []
    for name, path in modules(ROOT).items():
        rel = str(path.relative_to(ROOT))
        if rel in allowed:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if spelled.search(line) and not line.lstrip().startswith(("#", '"""', "'")):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_dvc_yaml_lists_the_code_each_stage_runs():
    """Every module a stage's flow can run (imports, plug-ins it loads, child processes it starts) is a dep of the
    stage in dvc.yaml, and no code dep is one it cannot run (`embp dev dvc-deps --write` fixes both)."""
    from flows._imports import sync_dvc_deps

    drift = {stage: change for stage, change in sync_dvc_deps().items() if change[0] or change[1]}
    assert not drift, drift
