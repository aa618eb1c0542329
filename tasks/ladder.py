"""The model ladder's units of work (docs/ladder.md): how a served local model is asked, how each model's results
are reported. The flows (``flows/ladder_roboscript.py``) only orchestrate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks import paths
from tasks.params import LadderParams, LLMParams, Params, ServeParams

SERVER = "llama.cpp"


def model_label(name: str) -> str:
    """A ladder model's name in every table: the engine and the catalogue name (``llama.cpp:qwen2.5-coder-0.5b-...``)."""
    return f"{SERVER}:{name}"


def server_log(stage: str, name: str) -> Path:
    """A model's server log for ``stage``: beside the stage's run facts, kept after the run (never a DVC output)."""
    return paths.REPORTS / "timings" / f"{stage}.{name}.server.log"


def answer_cache(root: Path, name: str, serve: ServeParams) -> Path:
    """Model ``name``'s answer cache under ``root``, one folder per serving setting that can change the numbers the
    server computes (``b<n_batch>-t<threads>``): the kernels' batch shapes move log-probabilities, so an answer cached
    under one batch size is never served as another's -- a warm rerun gives the bytes a cold one would. The model's
    file is pinned by its catalogue entry's sha256, so its name stands for it."""
    return root / name / f"b{serve.n_batch}-t{serve.threads}"


def served_llm(ladder: LadderParams, name: str, base_url: str) -> LLMParams:
    """The ``openai`` backend's settings for a model served at ``base_url``: the same for every model (greedy unless
    ``ladder.temperature`` says otherwise, one request at a time, no retry turning a bad answer into a good one:
    a request that fails is an error of the stage, an answer that is garbage is scored as garbage)."""
    return LLMParams(backend="openai", model=name, base_url=base_url, temperature=ladder.temperature, top_p=1.0,
                     max_tokens=ladder.max_tokens, seed=ladder.seed, timeout_s=900.0, max_retries=0,
                     concurrency=1)


def ladder_eval_params(params: Params):
    """``roboscript.eval`` with the ladder's tasks, repeats and runners; code is generated."""
    rs = params.ladder.roboscript
    return params.roboscript.eval.model_copy(update={"repeats": rs.repeats, "runners": rs.runners, "tasks": rs.tasks,
                                                     "code": "generate"})


def refusal_reasons(codes: dict) -> dict[str, int]:
    """How often each reason of the code check refused one of ``codes`` (name -> generated code), sorted by reason."""
    reasons: dict[str, int] = {}
    for code in codes.values():
        for reason in code.reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
    return dict(sorted(reasons.items()))


def code_checks(codes: dict) -> dict[str, Any]:
    """How many of a model's snippets the code check passed, and the refusals by reason."""
    return {"snippets": len(codes), "passing": sum(c.check_ok for c in codes.values()),
            "refused": sum(not c.check_ok for c in codes.values()), "refusals_by_reason": refusal_reasons(codes)}


def ladder_report(reports: dict[str, dict], params: Params) -> dict[str, Any]:
    """``reports/ladder/roboscript.json``: per model, the Table II summary (with intervals where the evaluation
    gives them), each task's metrics, the code check and the model's provenance; and the settings all shared."""
    ladder = params.ladder
    return {"settings": {"models": list(ladder.models), "max_tokens": ladder.max_tokens,
                         "temperature": ladder.temperature, "seed": ladder.seed, "server": SERVER,
                         "server_settings": ladder.serve.model_dump(exclude={"host", "port", "startup_timeout_s"}),
                         "tasks": ladder.roboscript.tasks, "repeats": ladder.roboscript.repeats},
            "models": {name: {k: report[k] for k in ("model", "kind", "summary", "code_checks", "provenance",
                                                       "tasks_of_benchmark", "tasks")}
                       for name, report in reports.items()}}
