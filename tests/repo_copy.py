"""A throw-away git copy of this repository for tests that run `dvc repro` (the real pipeline, its real flows)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
NOT_COPIED = ("data/", "reports/", "models/")  # outputs: the copy regenerates them (but see committed_persisted)


def run_checked(cmd: list[str], cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group and assert it succeeded. Whatever stops the wait (its own ``timeout``,
    pytest-timeout's signal, Ctrl-C) kills the whole group: `dvc repro`'s stage processes and the servers they
    started do not live on to slow down the rest of the suite."""
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            raise
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def stages_run(proc: subprocess.CompletedProcess, stages: tuple[str, ...]) -> set[str]:
    """Which of ``stages`` a `dvc repro` run actually ran (from its output)."""
    out = proc.stdout + proc.stderr
    return {s for s in stages if f"Running stage '{s}'" in out}


def _persisted_outs(dvc_yaml: dict) -> list[str]:
    """The paths of the outputs dvc.yaml declares ``persist: true`` (DVC keeps them when it reruns the stage)."""
    paths = []
    for stage in (dvc_yaml.get("stages") or {}).values():
        body = stage.get("do", stage)
        for kind in ("outs", "metrics", "plots"):
            for out in body.get(kind) or []:
                if isinstance(out, dict):
                    (path, opts), = out.items()
                    if (opts or {}).get("persist") and "${" not in path:
                        paths.append(path.rstrip("/"))
    return paths


def committed_bytes(rel: str, repo: Path = REPO) -> bytes:
    """A file as the last commit holds it (not as the working tree has it after local runs)."""
    return subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=repo, capture_output=True, check=True).stdout


def committed_persisted(repo: Path = REPO) -> list[str]:
    """The committed files of persisted outputs (e.g. reports/roboscript/table2_runs/: the committed 10-repeat
    Table II run). A fresh clone has them and `dvc repro` keeps them, so the outputs built on them (table2.md) and
    their md5 in dvc.lock include them: a copy that stands for a fresh clone must hold them too, as committed."""
    paths = _persisted_outs(yaml.safe_load((repo / "dvc.yaml").read_text()))
    if not paths:
        return []
    out = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return sorted(filter(None, out.split("\0")))


def copy_repo(work: Path, edit_params: Callable[[dict], None] | None = None,
              before_commit: Callable[[Path], None] | None = None) -> dict:
    """Copy the tracked and untracked-but-not-ignored files into ``work`` (outputs left out, but for the committed
    files of persisted outputs: :func:`committed_persisted`), let ``edit_params`` change params.yaml,
    commit it all to a fresh git repository, and return the environment for running `dvc` and the flows there."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not rel.startswith(NOT_COPIED) and rel != "dvc.lock":
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    for rel in committed_persisted():                   # as committed, whatever local runs added or changed
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(committed_bytes(rel))
    if edit_params is not None:
        params = yaml.safe_load((work / "params.yaml").read_text())
        edit_params(params)
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if before_commit is not None:
        before_commit(work)
    bin_dir = str(Path(sys.executable).parent)
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "EMBP_ROOT": str(work),
                        # the copy's code, not whatever checkout the environment's editable install points at
                        # (a console script such as `embp` does not put its cwd on sys.path)
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])),
                        "DVC_NO_ANALYTICS": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                        # Prefect gives its temporary server 20 s to start; a busy 2-core machine can need more.
                        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    for key in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI"):
        env.pop(key, None)
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy"]):
        run_checked(cmd, work, env)
    return env
