"""The robot evaluation's units of work (flows/roboscript_eval.py orchestrates them): the code of each benchmark
task (generated or loaded), the runner pool to use, one goal per task, and the reports (eval.json, Table II).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from core.errors import DataError, PipelineError
from robot.client import RunnerPool, discover, ensure_node
from tasks import paths
from tasks.roboscript import layout
from tasks.roboscript.benchmark import BENCHMARK_FILE, BenchmarkTask
from tasks.roboscript.eval.scoring import (
    INTERVAL_METRICS,
    METRICS,
    Table2Block,
    intervals,
    load_published,
    paired_markdown,
    repeat_units,
    task_intervals,
    summary,
    table2_markdown,
    task_metrics,
)
from tasks.roboscript.params import RobotEvalParams
from tasks.tracking import DatasetRef


@dataclass(frozen=True)
class TaskCode:
    task_id: str
    code: str
    check_ok: bool
    reasons: tuple[str, ...]
    source: str


def select_tasks(tasks: list[BenchmarkTask], which: str | list[str]) -> list[BenchmarkTask]:
    if which == "all":
        return tasks
    known = {t.id: t for t in tasks}
    unknown = [t for t in which if t not in known]
    if unknown:
        raise PipelineError(f"roboscript.eval.tasks names unknown task(s) {unknown}; known: {', '.join(known)}.")
    return [known[t] for t in which]


TEMPLATE_CODER = "rules:template-coder"
"""What the ``offline`` backend is when it writes benchmark code: the rule/template program of
``tasks/roboscript/offline_code.py`` (regular expressions -> code templates), not a language model."""


def coder_name(llm) -> str:
    """The code writer's name in reports: the offline backend is named for what it is."""
    return TEMPLATE_CODER if llm.backend == "offline" else f"{llm.backend}:{llm.model}"


def coder_kind(model: str) -> str:
    """What wrote the code, for the column every result table carries."""
    if model.startswith("rules:"):
        return "rule-based template program (not an LLM)"
    if model.startswith("snippets:"):
        return "code read from a file"
    return "LLM"


def eval_llm(params):
    """``params.llm`` as benchmark code generation uses it: the offline backend's deliberate mistakes
    (``llm.offline.noise``, meant for dataset generation) are off unless ``roboscript.eval.offline_noise`` asks
    for them."""
    noise = params.roboscript.eval.offline_noise or 0.0
    return params.llm.model_copy(update={"offline": params.llm.offline.model_copy(update={"noise": noise})})


def generate_code(tasks: list[BenchmarkTask], params, llm=None, codegen=None, client=None
                  ) -> tuple[dict[str, TaskCode], str]:
    """Code for each task from the configured LLM backend through the hierarchical generator (cached). ``llm``,
    ``codegen`` and ``client`` replace ``params.llm`` (as :func:`eval_llm` adapts it), ``roboscript.codegen`` and
    the client over the evaluation's response cache (the real-model step passes its own)."""
    from tasks.llm import build_client
    from tasks.roboscript.code_prompts import task_query
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator

    llm = llm or eval_llm(params)
    noise = llm.offline.noise if llm.backend == "offline" else 0.0
    if client is None:
        # the response cache keys on the prompt and sampling, not on the offline noise: keep noisy answers apart
        cache = layout.EVAL_CACHE if not noise else layout.EVAL_CACHE.with_name(
            f"{layout.EVAL_CACHE.name}-noise{noise:g}")
        client = build_client(llm, cache)
    generator = HierarchicalGenerator(client, llm, codegen or params.roboscript.codegen)
    jobs = [CodeJob(t.id, t.id, t.prompt_instruction, task_query(t.world.object_names(), t.prompt_instruction))
            for t in tasks]
    out = {}
    for snippet in generator.generate(jobs):
        verdict = snippet.verdict
        out[snippet.job.query_id] = TaskCode(snippet.job.query_id, snippet.assembled(), bool(verdict and verdict.ok),
                                             tuple(verdict.codes) if verdict else (), "generated")
    name = coder_name(llm)
    return out, name if not noise else f"{name}+noise{noise:g}"


def load_snippets(path: Path, tasks: list[BenchmarkTask]) -> tuple[dict[str, TaskCode], str]:
    """Code for each task from a file: {task_id: code} (JSON/YAML), or records with task_id|query_id and code
    (JSON list, JSONL or parquet)."""
    from robot.contract.code_policy import check_snippet

    if not path.exists():
        raise DataError(f"snippets file {path} does not exist.")
    try:
        if path.suffix == ".parquet":
            import pandas as pd

            records = pd.read_parquet(path).to_dict("records")
        elif path.suffix == ".jsonl":
            records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            records = yaml.safe_load(path.read_text())
    except Exception as exc:  # noqa: BLE001 - any parse error is the file's fault
        raise DataError(f"cannot read the snippets file {path}: {exc}.") from None
    if isinstance(records, dict):
        mapping = records
    elif isinstance(records, list):
        mapping = {}
        for row in records:
            key = row.get("task_id") or row.get("query_id") if isinstance(row, dict) else None
            if key is None or not isinstance(row.get("code"), str):
                raise DataError(f"{path}: every record needs task_id (or query_id) and code.")
            mapping.setdefault(str(key), row["code"])
    else:
        raise DataError(f"{path}: expected a mapping task_id -> code or a list of records.")
    out = {}
    for task in tasks:
        if task.id in mapping:
            verdict = check_snippet(str(mapping[task.id]))
            out[task.id] = TaskCode(task.id, str(mapping[task.id]), verdict.ok, verdict.codes, str(path))
    return out, f"snippets:{path.name}"


def goal_for(task: BenchmarkTask, code: str, ep: RobotEvalParams) -> dict:
    items = [{k: v for k, v in asdict(i).items() if v is not None} for i in task.evaluation]
    return {"episode_id": task.id, "task_id": task.id, "world": task.world.to_json(), "code": code,
            "repeats": ep.repeats, **ep.episode_settings(), "evaluation": items}


def goal_fingerprint(request: dict, ep: RobotEvalParams, code: str) -> str:
    """What a goal's result depends on: the goal itself, the robot it runs on (backend, arm, or the runners of
    ``master_uri``) and ``code`` (a hash of the code the stage runs)."""
    robot = {"backend": ep.backend, "arm": ep.arm, "master_uri": ep.master_uri,
             "runner_namespaces": ep.runner_namespaces, "isolation": ep.isolation}
    from tasks import paths

    # paths under the checkout (e.g. the ablation's tiny detector) count relative to it: two clones agree
    blob = json.dumps([request, robot, code], sort_keys=True, default=str).replace(str(paths.ROOT), "<root>")
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _goal_file(directory: Path, key: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:80]
    return directory / f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:8]}.json"


def stored_result(directory: Path, key: str, fingerprint: str) -> dict | None:
    """The result a finished goal left in ``directory`` (a stage's work directory) under the same fingerprint."""
    try:
        saved = json.loads(_goal_file(directory, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(saved, dict) and saved.get("key") == key and saved.get("fingerprint") == fingerprint
    return saved.get("result") if ok else None


#: What a goal's result says about the run rather than the goal: which runner took it, how often it was handed on,
#: seconds, the runner-named warnings. Left out of the stored result (a DVC output), so that it is the same bytes
#: whichever runner ran the goal and however busy the machine was; the flows file them as run facts.
RUN_FACT_KEYS = frozenset({"runner", "attempts", "runner_errors", "wall_s", "timings", "warnings"})


def _run_fact(key: str, value) -> bool:
    """A run fact: one of :data:`RUN_FACT_KEYS`, or seconds (``<part>_s`` numbers, e.g. a detection's ``fuse_s``)."""
    return key in RUN_FACT_KEYS or (key.endswith("_s") and isinstance(value, (int, float))
                                    and not isinstance(value, bool))


def computed_part(value):
    """``value`` without its run facts (:func:`_run_fact`), at any depth."""
    if isinstance(value, dict):
        return {k: computed_part(v) for k, v in value.items() if not _run_fact(k, v)}
    if isinstance(value, list):
        return [computed_part(v) for v in value]
    return value


def store_result(directory: Path, key: str, fingerprint: str, result: dict) -> bool:
    """Keep a goal's result (atomically, without its run facts) so that a rerun after an interruption reuses it.
    Only a goal that ran (``ok``) is kept: a runner that died or a goal that could not be sent is tried again."""
    from core.io import write_json

    if not result.get("ok"):
        return False
    write_json(_goal_file(directory, key), {"key": key, "fingerprint": fingerprint, "result": computed_part(result)})
    return True


def pool_size(ep: RobotEvalParams) -> int:
    if ep.master_uri is None:
        return ep.runners
    return len(ep.runner_namespaces or discover(ep.master_uri)) or 1


@contextlib.contextmanager
def runner_pool(ep: RobotEvalParams) -> Iterator[tuple[RunnerPool, dict]]:
    """The pool the params ask for: runners already on ``master_uri``, or a local sim pool started (and stopped)
    here. Yields the pool and a description for the report."""
    if ep.master_uri is not None:
        namespaces = ep.runner_namespaces or discover(ep.master_uri)
        if not namespaces:
            raise PipelineError(f"no runner is registered on {ep.master_uri}.",
                                hint="Start runners there: python -m robot.runner --ns /runner1 --backend sim|moveit")
        ensure_node(ep.master_uri)
        yield (RunnerPool(namespaces, max_retries=ep.max_retries),
               {"master_uri": ep.master_uri, "runners": namespaces, "local": False, "isolation": ep.isolation})
        return
    from robot.pool import LocalPool

    with LocalPool(ep.runners, ep.backend, ep.arm, isolation=ep.isolation) as local:
        ensure_node(local.master_uri)
        pool = RunnerPool(local.namespaces, alive=local.alive, restart=local.restart, max_retries=ep.max_retries)
        yield pool, {"master_uri": local.master_uri, "runners": local.namespaces, "local": True,
                     "backend": ep.backend, "arm": ep.arm, "isolation": ep.isolation}


def scene_json(world) -> dict:
    """What the episode viewer draws of a world before the code runs: the table's footprint and each model's kind,
    colour and box (the repeats' ``after`` holds the boxes at the end)."""
    from robot.contract.catalog import colour_hex

    tr = world.table_rect
    return {"world_id": world.world_id, "table": [round(v, 5) for v in (tr.x0, tr.y0, tr.x1, tr.y1)],
            "models": {m.name: {"kind": m.kind, "colour": colour_hex(m.colour),
                                "box": [round(v, 5) for v in m.bbox.as_list()]} for m in world.models}}


def build_report(tasks: list[BenchmarkTask], codes: dict[str, TaskCode], results: dict[str, dict],
                 model: str, ep: RobotEvalParams, pool_info: dict) -> tuple[dict, dict, dict]:
    """(the metrics report -- eval.json, a DVC metrics file --, the details -- code, per-repeat outcomes --, the run
    facts: the pool, which runner ran each task, repeat wall times; they change from run to run, so they stay out of
    the DVC outputs)."""
    per_task: dict[str, Any] = {}
    details: dict[str, Any] = {}
    ran: dict[str, Any] = {}
    units: dict[str, list] = {}
    for task in tasks:
        code = codes.get(task.id)
        result = results.get(task.id)
        if code is None:
            result = {"ok": False, "error": "no code for this task"}
        metrics = task_metrics(result, len(task.evaluation), ep.repeats)
        units[task.id] = repeat_units(result, len(task.evaluation), ep.repeats)
        per_task[task.id] = {k: v for k, v in metrics.items() if k != "error"}
        details[task.id] = {
            "instruction": task.instruction, "items": [i.describe() for i in task.evaluation],
            "error": metrics["error"], "code": code.code if code else None,
            "code_check_ok": code.check_ok if code else None, "code_check_reasons": list(code.reasons) if code else [],
            "world": scene_json(task.world),
            "repeats": [{"status": r["status"], "success": r["success"], "error": r["error"],
                         "items": r["items"], "steps": r["steps"], "failed_motions": r.get("failed_motions", []),
                         "calls": r.get("calls", []), "after": (r.get("state") or {}).get("boxes", {})}
                        for r in (result or {}).get("repeats", [])]}
        ran[task.id] = {"runner": (result or {}).get("runner"), "attempts": (result or {}).get("attempts"),
                        "runner_errors": (result or {}).get("runner_errors", []),
                        "repeat_wall_s": [r.get("wall_s") for r in (result or {}).get("repeats", [])]}
    settings = {"repeats": ep.repeats, "perception": ep.perception, "arm": ep.arm, "backend": ep.backend,
                "pose_jitter_m": ep.pose_jitter_m, "seed": ep.seed, "motion_failure": ep.motion_failure,
                "grasp": ep.grasp, "runners": len(pool_info["runners"])}
    report = {"model": model, "kind": coder_kind(model), "settings": settings,
              "summary": summary(per_task) | {"ci95": intervals(units), "ci95_tasks": task_intervals(per_task)},
              "tasks": per_task}
    details = {"model": model, "tasks": details, "metric_definitions": "tasks/roboscript/eval/scoring.py, docs/robot.md"}
    return report, details, {"pool": pool_info, "tasks": ran}


def run_record(report: dict) -> dict:
    """What table2.md keeps of one evaluation: who wrote the code, the settings, the four metrics per task."""
    return {"model": report["model"], "kind": coder_kind(report["model"]), "settings": report["settings"],
            "tasks": {t: {k: m[k] for k in METRICS} for t, m in report["tasks"].items()},
            "summary": {k: report["summary"][k] for k in METRICS} | {"ci95": report["summary"].get("ci95", {}),
                                                                      "ci95_tasks": report["summary"].get("ci95_tasks", {})}}


def run_record_name(report: dict) -> str:
    s = report["settings"]
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in report["model"])
    return f"{slug}__r{s['repeats']}__{s['perception']}__{s['arm']}.json"


def load_run_records(folder: Path) -> list[dict]:
    """The evaluation records kept for table2.md, most repeats first."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record.get("tasks"), dict) or "settings" not in record:
                raise ValueError("no 'tasks' or 'settings'")
        except (OSError, ValueError, AttributeError) as exc:
            raise DataError(f"{path} is not a Table II run record: {exc}.") from None
        records.append(record)
    return sorted(records, key=lambda r: (-int(r["settings"]["repeats"]), r["model"]))


OUR_ROWS = ("Our rows come from `python -m flows.roboscript_eval` on the PyBullet sim (`dvc repro roboscript-eval`: "
            "the repeats of `roboscript.eval.repeats`, each block says how many; the paper profile: 10).")


def table2(report: dict, records: list[dict] | None = None, origin: str = OUR_ROWS) -> str:
    """reports/roboscript/table2.md: our runs (this one and the others kept, e.g. the default run's repeats and the
    paper profile's 10) beside the paper's published Table II, every block saying what wrote the code. ``origin``
    says where our rows come from."""
    records = records if records is not None else [run_record(report)]
    published, header = load_published()
    tasks = list(report["tasks"])
    blocks = []
    for record in records:
        st = record["settings"]
        grasp = f", {st['grasp']} grasps" if "grasp" in st else ""
        source = f"this project: {st['repeats']} repeats, {st['perception']}, {st['arm']} ({st['backend']}{grasp})"
        ci = record.get("summary", {}).get("ci95", {})
        blocks.append(Table2Block(record["model"], record["kind"], source, record["tasks"],
                                  {k: ci[k] for k in INTERVAL_METRICS if ci.get(k)}))
    blocks += published
    title = "\n".join([
        "# RoboScript benchmark, Table II layout",
        "",
        "Our runs beside the paper's figures. **published** rows are copied from the paper "
        f"({header['source']}): GPT-4, GPT-3.5-turbo and Gemini-pro writing the code, Franka in Gazebo with "
        f"ground-truth perception, 10 repeats, semantic correctness with a manual check. {origin} "
        "`rules:template-coder` is the offline backend's rule/template program "
        "(tasks/roboscript/offline_code.py: regular expressions -> code templates), **not an LLM**; it writes its "
        "code from the same prompts, without injected mistakes (`roboscript.eval.offline_noise` is null).",
        "",
        "Metrics and success checks follow the public RoboScript evaluator (docs/robot.md, \"Scoring\"): a repeat "
        "that raised counts 0 (a failed motion returns False and the code goes on, as the public tools do: "
        "`roboscript.eval.motion_failure`); grammar = any repeat ran without an exception; ratios divide by the "
        "repeats asked for; the next-to-last column is the mean over the tasks the row ran with its 95 % bootstrap "
        "interval over repeats (resampled within each task), the last the 95 % bootstrap interval of that mean over "
        "tasks (each task one unit; the published rows get it too): two rows whose intervals over tasks overlap are not "
        "shown to differ on this benchmark. Task columns are the Table I names; the public label each follows "
        "is in tasks/roboscript/benchmark_tasks.yaml. The published Moderate_0 / Moderate_1 columns look swapped "
        "relative to Table I (tasks/roboscript/eval/published_table2.yaml).",
    ])
    paired = paired_markdown(blocks, tasks)
    return table2_markdown(blocks, tasks, title) + (f"\n{paired}" if paired else "")


def benchmark_dataset(goals: dict[str, dict]) -> DatasetRef:
    """The benchmark as evaluated (each task's world, code and items), as the run's MLflow dataset input."""
    digest = hashlib.sha256(json.dumps(goals, sort_keys=True).encode()).hexdigest()
    return DatasetRef("roboscript-benchmark", digest, paths.rel(BENCHMARK_FILE), "evaluation", len(goals))


def mlflow_fields(report: dict, params) -> tuple[dict, dict]:
    """(params, tags) of the evaluation's MLflow run (``params``: the whole ``Params``)."""
    ep = params.roboscript.eval
    tags = {"model": report["model"], "kind": coder_kind(report["model"]), "backend": ep.backend, "arm": ep.arm}
    run_params = {"model": report["model"], "llm_backend": params.llm.backend, "code": ep.code,
                  "repeats": ep.repeats, "perception": ep.perception, "arm": ep.arm, "backend": ep.backend,
                  "runners": report["settings"]["runners"], "pose_jitter_m": ep.pose_jitter_m, "seed": ep.seed,
                  "motion_failure": ep.motion_failure, "grasp": ep.grasp,
                  "benchmark_worlds": params.roboscript.worlds.benchmark_worlds, "tasks": ",".join(report["tasks"])}
    return run_params, tags


def mlflow_metrics(report: dict) -> dict[str, float]:
    out = {}
    for task_id, metrics in report["tasks"].items():
        for key in METRICS:
            if metrics[key] is not None:
                out[f"{task_id}.{key}"] = float(metrics[key])
    for key in METRICS:
        if report["summary"][key] is not None:
            out[f"mean.{key}"] = float(report["summary"][key])
    for key, interval in report["summary"].get("ci95", {}).items():
        if key in INTERVAL_METRICS and interval:
            out[f"mean.{key}_ci_low"], out[f"mean.{key}_ci_high"] = float(interval[0]), float(interval[1])
    for key, interval in report["summary"].get("ci95_tasks", {}).items():
        if key in METRICS and interval:
            out[f"mean.{key}_tasks_ci_low"], out[f"mean.{key}_tasks_ci_high"] = float(interval[0]), float(interval[1])
    return out
