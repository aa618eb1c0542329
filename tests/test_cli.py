"""Code tests of the `embp` command line: every group and stage command answers --help, and the params commands
validate."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import STAGES, app

runner = CliRunner()


@pytest.mark.parametrize("args", [[], ["params"], ["muep"], ["roboscript"], ["params", "check"],
                                  ["params", "profile"]] + [[g, c] for g, c in STAGES])
def test_every_command_has_help(args):
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_every_stage_command_names_a_flow_module():
    import importlib

    for module, _ in STAGES.values():
        flow_module = importlib.import_module(f"flows.{module}")
        assert callable(getattr(flow_module, module))


def test_params_check_and_a_bad_file(tmp_path):
    ok = runner.invoke(app, ["params", "check"])
    assert ok.exit_code == 0 and '"backend": "offline"' in ok.output
    bad = tmp_path / "p.yaml"
    bad.write_text("llm:\n  temperature: hot\n")
    result = runner.invoke(app, ["params", "check", str(bad)])
    assert result.exit_code == 2 and "llm.temperature" in result.output


def test_profile_prints_dvc_overrides():
    result = runner.invoke(app, ["params", "profile", "paper"])
    assert result.exit_code == 0 and "--set-param muep.generate.requests_per_scene=12" in result.output
    assert "--set-param 'roboscript.eval.ablation.objects=[\"apple\",\"blue_block\"," in result.output


def test_an_unknown_profile_is_named(tmp_path):
    result = runner.invoke(app, ["run", "--profile", "no-such-profile"])
    assert result.exit_code == 2 and "no profile 'no-such-profile'" in result.output and "paper" in result.output


def test_summary_fits_120_columns():
    result = runner.invoke(app, ["summary"])
    assert result.exit_code == 0 and "MuEP" in result.output and "RoboScript" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 120


@pytest.mark.dvc
@pytest.mark.prefect
def test_run_with_a_profile_as_the_readme_writes_it(tmp_path):
    """`embp run --profile NAME STAGE` in a fresh copy: list values reach DVC intact, the stage runs with them,
    the summary follows, and no Prefect server is left running."""
    import json
    import subprocess

    import yaml
    from repo_copy import copy_repo

    from flows import _prefect_server

    def profile(work):
        (work / "profiles" / "smoke.yaml").write_text(
            "roboscript:\n  worlds:\n    n_worlds: 2\n  eval:\n    ablation:\n      objects: [apple, blue_block]\n")

    env = copy_repo(tmp_path, before_commit=profile)
    out = subprocess.run(["embp", "run", "--profile", "smoke", "roboscript-worlds"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert params["roboscript"]["worlds"]["n_worlds"] == 2
    assert params["roboscript"]["eval"]["ablation"]["objects"] == ["apple", "blue_block"]
    assert len(list((tmp_path / "data/roboscript/worlds").glob("world_*.json"))) == 2
    assert json.loads((tmp_path / "reports/roboscript/worlds.json").read_text())["benchmark_tasks"] == 8
    assert "roboscript-worlds" in out.stdout and "RoboScript" in out.stdout
    assert _prefect_server._read_state(tmp_path / ".dvc" / "tmp" / "embp-prefect") is None
    # the stages ran on the parallel scheduler, and the run is a DVC experiment as `dvc exp run` would record it
    assert "stages side by side" in out.stderr and "dvc exp save" in out.stderr
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.split()
    refs = [ref for ref in refs if not ref.startswith("refs/exps/exec/")]  # DVC's own bookkeeping
    assert len(refs) == 1, refs
    saved = subprocess.run(["git", "show", f"{refs[0]}:params.yaml"], cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout
    assert saved == (tmp_path / "params.yaml").read_text()


def test_experiment_links_open_the_runs_table(tmp_path):
    """`embp ui` prints, per experiment, the link that opens MLflow 3's runs table rather than its GenAI overview."""
    from tasks import tracking
    from tasks.params import TrackingParams

    settings = TrackingParams(uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = tracking.log_run(settings, "roboscript-eval", "probe", metrics={"m": 1.0}, started_at=1_700_000_000.0)
    links = tracking.experiment_links(settings, "http://127.0.0.1:5000/")
    assert list(links) == ["embp/roboscript-eval"]
    assert links["embp/roboscript-eval"].startswith("http://127.0.0.1:5000/#/experiments/")
    assert links["embp/roboscript-eval"].endswith("?workflowType=machine_learning")
    from mlflow import MlflowClient

    run = MlflowClient(settings.uri).get_run(run_id)
    assert run.info.start_time == 1_700_000_000_000 and run.info.status == "FINISHED"
    assert (tmp_path / "mlartifacts").is_dir() or not list(tmp_path.glob("mlruns"))  # artifacts beside the store


def test_models_export_names_the_folder_and_an_unknown_model():
    """`make setup` runs `embp models export`: the local model's transformers folder (exported once per machine)."""
    name = "smollm2-135m-instruct"             # the one `make setup` installs (the ladder's others: `make models`)
    out = runner.invoke(app, ["models", "export", name])
    assert out.exit_code == 0, out.output
    folder = out.output.strip().split(": ", 1)[1]
    assert (Path(folder) / "config.json").is_file() and (Path(folder) / "export.json").is_file()
    bad = runner.invoke(app, ["models", "export", "no-such-model"])
    assert bad.exit_code == 2 and "no-such-model" in bad.output
