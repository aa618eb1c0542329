"""Every command the README shows still names something that exists: make targets, `embp` commands and their
options, flow and robot modules, bench scripts, params keys set with `-S`, profiles, Prefect deployments.

This catches a command going stale when code moves. Whether the commands *work* end to end is what the rest of the
suite checks (`embp run --profile` in tests/test_cli.py, the pipeline in tests/test_reproducible.py, ...)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.cli import app

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# The first word of a command line we do not own (system tools), checked no further.
EXTERNAL = {"apt-get", "source", "cd", "export", "prefect", "mlflow", "huggingface-cli", "git"}


def readme_commands() -> list[str]:
    """Command lines of the README's bash blocks: continuations joined, comments and blank lines dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def _words(command: str) -> list[str]:
    words = shlex.split(command)
    while words and re.match(r"^[A-Z_]+=", words[0]):   # leading VAR=value assignments
        words = words[1:]
    return words


def _params_key_exists(key: str) -> bool:
    node = yaml.safe_load((REPO / "params.yaml").read_text())
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


COMMANDS = readme_commands()


def test_the_readme_has_commands():
    assert len(COMMANDS) > 20 and "make run" in COMMANDS and "make test" in COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_names_what_exists(command):
    words = _words(command)
    tool, args = words[0], words[1:]
    if tool == "make":
        targets = re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), flags=re.M)
        assert set(args) <= set(targets), f"{command}: no such make target"
    elif tool == "embp":
        sub = [a for a in args if not a.startswith("-")]
        options = [a.split("=")[0] for a in args if a.startswith("--")]
        # the command path: the leading words that are commands (not values of options or arguments)
        path = []
        for word in sub:
            result = CliRunner().invoke(app, [*path, word, "--help"])
            if result.exit_code != 0:
                break
            path.append(word)
        assert path, f"{command}: not an embp command"
        help_text = CliRunner().invoke(app, [*path, "--help"], terminal_width=200).output
        for option in options:
            assert option in help_text, f"{command}: `embp {' '.join(path)}` has no option {option}"
        if "--profile" in args:
            name = args[args.index("--profile") + 1]
            assert (REPO / "profiles" / f"{name}.yaml").exists(), f"{command}: no profile {name}"
    elif tool == "python":
        if args[0] == "-m":
            assert importlib.util.find_spec(args[1]) is not None, f"{command}: no module {args[1]}"
        else:
            assert (REPO / args[0]).is_file(), f"{command}: no script {args[0]}"
    elif tool == "dvc":
        for i, word in enumerate(args):
            if word in ("-S", "--set-param"):
                key = args[i + 1].split("=")[0]
                assert _params_key_exists(key), f"{command}: params.yaml has no {key}"
    elif tool == "prefect" and args[:2] == ["deployment", "run"]:
        flow, deployment = args[2].split("/")
        spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
        names = {(d["entrypoint"].split(":")[1].replace("_", "-"), d["name"]) for d in spec["deployments"]}
        assert (flow, deployment) in names, f"{command}: prefect.yaml deploys no {flow}/{deployment}"
    else:
        assert tool in EXTERNAL, f"{command}: unknown tool {tool} (add it to EXTERNAL if it is a system tool)"


def test_deployments_named_in_the_readme_prose_exist():
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = {f"{d['entrypoint'].split(':')[1].replace('_', '-')}/{d['name']}" for d in spec["deployments"]}
    named = set(re.findall(r"`([a-z-]+/[a-z-]+-(?:gpu|tiny|cpu))`", README.read_text()))
    assert named and named <= names, named - names
