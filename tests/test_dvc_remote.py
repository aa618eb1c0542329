"""`dvc push` / `dvc pull` against the default remote (``.dvc-storage`` beside the repository, .dvc/config): a
stage's outputs go to the remote and come back byte for byte into a workspace that lost them and its cache."""

from __future__ import annotations

import hashlib
import shutil

import pytest
from repo_copy import copy_repo, run_checked

pytestmark = [pytest.mark.dvc, pytest.mark.prefect]


def _digests(folder):
    return {str(p.relative_to(folder)): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_push_then_pull_restores_the_outputs(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    env = copy_repo(work)
    run_checked(["dvc", "repro", "muep-metadata"], work, env)
    before = _digests(work / "data/muep/metadata")
    assert before
    pushed = run_checked(["dvc", "push"], work, env)
    assert (work / ".dvc-storage").is_dir(), pushed.stdout
    shutil.rmtree(work / "data/muep/metadata")
    shutil.rmtree(work / ".dvc/cache")
    run_checked(["dvc", "pull", "muep-metadata"], work, env)
    assert _digests(work / "data/muep/metadata") == before
    status = run_checked(["dvc", "status", "muep-metadata"], work, env)
    assert "up to date" in status.stdout.lower() or "up-to-date" in status.stdout.lower(), status.stdout
