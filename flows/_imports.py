"""The project's import graph, read from the source: which module imports which (lazy imports inside functions
included, ``if TYPE_CHECKING:`` blocks left out), and the plug-ins a module can load through a name table
(``core.plugins``): a call ``TABLE.load(...)`` depends on every module the table names, and a module that starts
``python -m <module>`` (a list ``[..., "-m", "robot.runner", ...]``) depends on the module the child runs.

Two users: ``tests/test_architecture.py`` (which part may import which, no new cycle) and the DVC code
dependencies of each stage (``embp dev dvc-deps``: the modules a stage's flow can execute, so that a code change
reruns exactly the stages it can affect).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import networkx as nx

from tasks import paths

PACKAGES = ("core", "robot", "tasks", "flows")

#: Modules that only orchestrate or report (logging, Prefect, the CLI, MLflow runs): they cannot change a data
#: output, so they are no DVC dependency of a stage.
ORCHESTRATION_ONLY = ("flows/_runtime.py", "flows/_prefect_server.py", "flows/_imports.py", "flows/cli.py",
                      "tasks/progress.py", "tasks/tracking.py", "tasks/summary.py")


def modules(root: Path | None = None) -> dict[str, Path]:
    root = root or paths.ROOT
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``'s nodes in its order, but none inside the body of an ``if TYPE_CHECKING:`` (its test and ``else``
    are walked). One pass: a stage's :func:`code_digest` reads every project file."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.append(node.test)
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
        yield node


def _plugin_targets() -> dict[str, set[str]]:
    from core.plugins import ALL

    return {name: {reg.target(n).partition(":")[0] for n in reg.names()}
            for name, reg in ((_table_name(reg), reg) for reg in ALL.values())}


def _table_name(registry) -> str:
    import core.plugins as plugins

    return next(k for k, v in vars(plugins).items() if v is registry)


@cache
def import_graph(root: Path | None = None, plugins: bool = False) -> nx.DiGraph:
    """Module -> module edges (attribute ``line``: where the import is). With ``plugins``, also an edge from a
    module calling ``TABLE.load(...)`` to every module ``TABLE`` names (``kind="plugin"``)."""
    found = modules(root)
    tables = _plugin_targets() if plugins else {}

    def resolve(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for module, path in found.items():
        graph.add_node(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
            elif plugins and isinstance(node, ast.List):
                items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                child = next((items[i + 1] for i, v in enumerate(items[:-1]) if v == "-m"), None)
                if isinstance(child, str) and (hit := resolve(child)) and hit != module:
                    graph.add_edge(module, hit, line=node.lineno, kind="process")
                continue
            elif (tables and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "load" and isinstance(node.func.value, ast.Name)
                  and node.func.value.id in tables):
                for target in tables[node.func.value.id]:
                    if (hit := resolve(target)) and hit != module:
                        graph.add_edge(module, hit, line=node.lineno, kind="plugin")
                continue
            else:
                continue
            for target in targets:
                hit = resolve(target)
                if hit and hit != module:
                    graph.add_edge(module, hit, line=node.lineno, kind="import")
    return graph


def code_files(module: str, root: Path | None = None) -> list[str]:
    """Every project source file ``module`` can execute (imports and plug-ins, transitively), relative to the root,
    orchestration-only modules left out."""
    root = root or paths.ROOT
    graph = import_graph(root, plugins=True)
    found = modules(root)
    reach = {module} | nx.descendants(graph, module)
    reach |= {".".join(m.split(".")[:i]) for m in reach for i in range(1, m.count(".") + 1)}  # parent packages run
    files = {str(found[m].relative_to(root)) for m in reach if m in found and not _docstring_only(found[m])}
    return sorted(f for f in files if f not in ORCHESTRATION_ONLY)


def code_digest(module: str, root: Path | None = None) -> str:
    """A hash of the contents of :func:`code_files` of ``module``: what a stage's finished work was made with, so
    that a resumed run does not reuse work of other code. ``root``: the code's checkout (default: this one's)."""
    import hashlib

    root = root or Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for name in code_files(module, root):
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@cache
def _docstring_only(path: Path) -> bool:
    """A package ``__init__`` that holds only its docstring runs nothing that could change an output."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
               or isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in body)


def covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


@cache
def _python_files(folder: Path) -> frozenset[Path]:
    return frozenset(folder.rglob("*.py"))


def _compress(files: list[str], root: Path) -> list[str]:
    """The files, with every folder whose Python files are all among them named once instead."""
    wanted = set(files)
    out: list[str] = []
    done: set[str] = set()
    for f in sorted(files):
        if f in done:
            continue
        parts = Path(f).parts
        best = f
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            members = {str(p.relative_to(root)) for p in _python_files(root / folder)
                       if not _docstring_only(p)} - set(ORCHESTRATION_ONLY)
            if members and members <= wanted:
                best = str(folder)
                break
        if best == f:
            out.append(f)
            done.add(f)
        else:
            out.append(best)
            done |= {m for m in wanted if m.startswith(best + "/")}
    return sorted(set(out))


def _is_code(dep: str, root: Path) -> bool:
    path = root / dep
    if not dep.startswith(tuple(p + "/" for p in PACKAGES)) and dep not in PACKAGES:
        return False
    if path.is_file():
        return path.suffix == ".py"
    return path.is_dir() and all(p.suffix == ".py" for p in path.rglob("*") if p.is_file()
                                 and "__pycache__" not in p.parts)


def _with_comments(old, derived: list[str], kept: list[int]):
    """A new deps list: the derived code deps, then the kept data deps with the comments they had."""
    from ruamel.yaml.comments import CommentedSeq

    new = CommentedSeq(derived + [old[i] for i in kept])
    for position, i in enumerate(kept, start=len(derived)):
        if i in old.ca.items:
            new.ca.items[position] = old.ca.items[i]
    return new


def stage_module(cmd: str) -> str | None:
    import re

    found = re.search(r"python -m (flows\.\w+)", cmd)
    return found.group(1) if found else None


def sync_dvc_deps(root: Path | None = None, write: bool = False) -> dict[str, tuple[list[str], list[str]]]:
    """Per stage of ``dvc.yaml``: (code deps missing, code deps no longer needed). With ``write``, rewrite the code
    deps of every stage to the derived ones (data deps and comments are kept)."""
    from ruamel.yaml import YAML

    root = root or paths.ROOT
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # keep long lines (descriptions) as they are
    yaml.indent(mapping=2, sequence=4, offset=2)
    dvc_file = root / "dvc.yaml"
    doc = yaml.load(dvc_file.read_text(encoding="utf-8"))
    changes = {}
    for name, stage in doc["stages"].items():
        body = stage.get("do", stage)
        module = stage_module(body["cmd"])
        if module is None:
            continue
        code = code_files(module, root)
        deps = list(body.get("deps", []))
        missing = [f for f in code if not covered(f, deps)]
        derived = _compress(code, root)
        stale = [d for d in deps if _is_code(d, root) and not any(c == d or c.startswith(d + "/") for c in code)]
        changes[name] = (missing, stale)
        if write and (missing or stale or [d for d in deps if _is_code(d, root)] != derived):
            body["deps"] = _with_comments(body["deps"], derived, [i for i, d in enumerate(deps)
                                                                   if not _is_code(d, root) and not covered(d, derived)])
    if write:
        import io

        out = io.StringIO()
        yaml.dump(doc, out)
        from core.io import write_text

        write_text(dvc_file, out.getvalue())
    return changes
