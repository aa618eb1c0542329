"""Code tests of the `embp` command line: every group and stage command answers --help, and the params commands
validate."""

from __future__ import annotations

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
    assert result.exit_code == 0 and "-S muep.generate.requests_per_scene=12" in result.output
