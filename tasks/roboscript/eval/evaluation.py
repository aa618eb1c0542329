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
    METRICS,
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


def generate_code(tasks: list[BenchmarkTask], params) -> tuple[dict[str, TaskCode], str]:
    """Code for each task from the configured LLM backend through the hierarchical generator (cached)."""
    from tasks.llm import build_client
    from tasks.roboscript.code_prompts import task_query
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator

    client = build_client(params.llm, layout.EVAL_CACHE)
    generator = HierarchicalGenerator(client, params.llm, params.roboscript.codegen)
    jobs = [CodeJob(t.id, t.id, t.instruction, task_query(t.world.object_names(), t.instruction)) for t in tasks]
    out = {}
    for snippet in generator.generate(jobs):
        verdict = snippet.verdict
        out[snippet.job.query_id] = TaskCode(snippet.job.query_id, snippet.assembled(), bool(verdict and verdict.ok),
                                             tuple(verdict.codes) if verdict else (), "generated")
    return out, f"{params.llm.backend}:{params.llm.model}"


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
             "runner_namespaces": ep.runner_namespaces}
    blob = json.dumps([request, robot, code], sort_keys=True, default=str)
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


def store_result(directory: Path, key: str, fingerprint: str, result: dict) -> bool:
    """Keep a goal's result (atomically) so that a rerun after an interruption reuses it. Only a goal that ran
    (``ok``) is kept: a runner that died or a goal that could not be sent is tried again."""
    from core.io import write_json

    if not result.get("ok"):
        return False
    write_json(_goal_file(directory, key), {"key": key, "fingerprint": fingerprint, "result": result})
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
               {"master_uri": ep.master_uri, "runners": namespaces, "local": False})
        return
    from robot.pool import LocalPool

    with LocalPool(ep.runners, ep.backend, ep.arm) as local:
        ensure_node(local.master_uri)
        pool = RunnerPool(local.namespaces, alive=local.alive, restart=local.restart, max_retries=ep.max_retries)
        yield pool, {"master_uri": local.master_uri, "runners": local.namespaces, "local": True,
                     "backend": ep.backend, "arm": ep.arm}


def build_report(tasks: list[BenchmarkTask], codes: dict[str, TaskCode], results: dict[str, dict],
                 model: str, ep: RobotEvalParams, pool_info: dict, wall_s: float) -> tuple[dict, dict]:
    """(the metrics report -- eval.json, a DVC metrics file --, the details: code, per-repeat outcomes, pool)."""
    per_task: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for task in tasks:
        code = codes.get(task.id)
        result = results.get(task.id)
        if code is None:
            result = {"ok": False, "error": "no code for this task"}
        metrics = task_metrics(result, len(task.evaluation))
        per_task[task.id] = {k: v for k, v in metrics.items() if k != "error"}
        details[task.id] = {
            "instruction": task.instruction, "items": [i.describe() for i in task.evaluation],
            "error": metrics["error"], "code": code.code if code else None,
            "code_check_ok": code.check_ok if code else None, "code_check_reasons": list(code.reasons) if code else [],
            "runner": (result or {}).get("runner"), "attempts": (result or {}).get("attempts"),
            "runner_errors": (result or {}).get("runner_errors", []),
            "repeats": [{"status": r["status"], "success": r["success"], "error": r["error"],
                         "items": r["items"], "steps": r["steps"], "wall_s": r["wall_s"]}
                        for r in (result or {}).get("repeats", [])]}
    settings = {"repeats": ep.repeats, "perception": ep.perception, "arm": ep.arm, "backend": ep.backend,
                "pose_jitter_m": ep.pose_jitter_m, "seed": ep.seed, "runners": len(pool_info["runners"])}
    report = {"model": model, "settings": settings, "summary": summary(per_task), "tasks": per_task,
              "wall_s": round(wall_s, 2)}
    return report, {"model": model, "pool": pool_info, "tasks": details,
                    "metric_definitions": "tasks/roboscript/eval/scoring.py, docs/robot.md"}


def table2(report: dict) -> str:
    tasks = list(report["tasks"])
    title = (f"# RoboScript benchmark, Table II layout\n\n{report['settings']['repeats']} repeats per task, "
             f"{report['settings']['perception']} perception, {report['settings']['arm']} "
             f"({report['settings']['backend']}); metric definitions in docs/robot.md.")
    return table2_markdown({report["model"]: report["tasks"]}, tasks, title)


def benchmark_dataset(goals: dict[str, dict]) -> DatasetRef:
    """The benchmark as evaluated (each task's world, code and items), as the run's MLflow dataset input."""
    digest = hashlib.sha256(json.dumps(goals, sort_keys=True).encode()).hexdigest()
    return DatasetRef("roboscript-benchmark", digest, paths.rel(BENCHMARK_FILE), "evaluation", len(goals))


def mlflow_fields(report: dict, params) -> tuple[dict, dict]:
    """(params, tags) of the evaluation's MLflow run (``params``: the whole ``Params``)."""
    ep = params.roboscript.eval
    tags = {"model": report["model"], "backend": ep.backend, "arm": ep.arm}
    run_params = {"model": report["model"], "llm_backend": params.llm.backend, "code": ep.code,
                  "repeats": ep.repeats, "perception": ep.perception, "arm": ep.arm, "backend": ep.backend,
                  "runners": report["settings"]["runners"], "pose_jitter_m": ep.pose_jitter_m, "seed": ep.seed,
                  "tasks": ",".join(report["tasks"])}
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
    return out
