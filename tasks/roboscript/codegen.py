"""Hierarchical code generation (RoboScript section III-B, Algorithm 1) and the check of every snippet.

The main agent gets the system prompt, the few-shot dialogues and the task query and writes a script. The script is
parsed; every called function that is neither a tool, an allowed builtin nor defined goes to a sub-agent with its
name and the line that calls it (its context), and the sub-agent writes the definition. Definitions may call
further undefined helpers, which go to the sub-agent in turn, one level deeper, until ``max_depth``; at most
``max_helpers`` sub-agent requests are made per snippet. Helpers still undefined at the end stay undefined, and the
checker rejects the snippet for them. The snippet is the helper definitions (deepest first) followed by the script,
as Algorithm 1 prepends each sub-agent's code.

The recursion of Algorithm 1 runs level by level over all snippets at once, so each level's requests go to the LLM
concurrently (``llm.concurrency``); the result is the same as the depth-first recursion's.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from robot.contract.code_checks import TooComplex
from robot.contract.code_checks import parse as parse_within_limits
from robot.contract.code_policy import DEFAULT_POLICY, CodePolicy, Verdict
from tasks.llm import request_from_params
from tasks.llm.base import Completion, LLMClient, Provenance
from tasks.params import LLMParams
from tasks.progress import Progress
from tasks.roboscript.code_prompts import main_messages, sub_messages
from tasks.roboscript.params import CodegenParams

_FENCE_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)

#: Why the generator could not complete a snippet (kept besides the checker's reasons).
NOTE_CODES = {
    "helper_depth_exceeded": "a helper was still undefined at the depth bound",
    "helper_budget_exceeded": "more helpers were needed than max_helpers allows",
    "subagent_not_code": "the sub-agent answered with prose or unparsable code",
    "subagent_missing_definition": "the sub-agent's code does not define the requested function",
    "subagent_extra_statements": "top-level statements besides definitions (example calls) were dropped",
}


def extract_code(text: str) -> str:
    """The code of a reply: the fenced blocks when there are any, else the whole text."""
    blocks = _FENCE_BLOCK.findall(text)
    code = "\n\n".join(b.strip("\n") for b in blocks) if blocks else text
    return code.strip("\n")


def definitions_only(code: str) -> tuple[str, int]:
    """The top-level function definitions of a sub-agent's code, and how many other top-level statements were
    dropped (a model's "example usage" lines would otherwise run inside the snippet). Unparsable code is returned
    as it is, for the checker to report (also code beyond the check's limits: it refuses it ``too_complex``)."""
    try:
        tree = parse_within_limits(code)
    except (SyntaxError, ValueError, TooComplex):
        return code, 0
    defs = [ast.get_source_segment(code, node) or "" for node in tree.body if isinstance(node, ast.FunctionDef)]
    others = [node for node in tree.body if not isinstance(node, ast.FunctionDef)
              and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]  # bare strings: harmless
    return ("\n\n".join(defs), len(others)) if defs else (code, 0)


@dataclass(frozen=True)
class CodeJob:
    query_id: str
    world_id: str
    instruction: str
    query: str


@dataclass
class Helper:
    name: str
    depth: int
    call_source: str
    code: str
    defines: bool
    response_key: str
    prompt_hash: str


@dataclass
class Snippet:
    job: CodeJob
    main: Completion
    main_code: str
    helpers: list[Helper] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    requested: set[str] = field(default_factory=set)
    given_up: set[str] = field(default_factory=set)
    verdict: Verdict | None = None

    def defined_code(self) -> list[str]:
        return [h.code for h in self.helpers if h.defines]

    def assembled(self) -> str:
        ordered = sorted((h for h in self.helpers if h.defines), key=lambda h: -h.depth)
        return "\n\n".join([*(h.code for h in ordered), self.main_code]).strip("\n")

    @property
    def max_depth(self) -> int:
        return max((h.depth for h in self.helpers), default=0)


@dataclass(frozen=True)
class _Pending:
    snippet: Snippet
    name: str
    call_source: str
    depth: int


class HierarchicalGenerator:
    def __init__(self, client: LLMClient, llm: LLMParams, params: CodegenParams,
                 policy: CodePolicy = DEFAULT_POLICY):
        self.client = client
        self.llm = llm
        self.params = params
        self.policy = policy

    def _queue(self, snippet: Snippet, code: str, depth: int) -> list[_Pending]:
        """Undefined helpers called in ``code`` that no code of the snippet defines yet, for level ``depth``."""
        everything = "\n\n".join([*snippet.defined_code(), snippet.main_code])
        defined = set(self.policy.defined_functions(everything))
        out = []
        for site in self.policy.undefined_calls(code):
            if site.name in defined or site.name in snippet.requested or site.name in snippet.given_up:
                continue
            if depth > self.params.max_depth:
                snippet.given_up.add(site.name)
                snippet.notes.append(("helper_depth_exceeded", f"'{site.name}' would be at depth {depth}, the "
                                                               f"bound is {self.params.max_depth}"))
                continue
            if len(snippet.requested) >= self.params.max_helpers:
                snippet.given_up.add(site.name)
                snippet.notes.append(("helper_budget_exceeded",
                                      f"'{site.name}' not requested: {self.params.max_helpers} helpers already"))
                continue
            snippet.requested.add(site.name)
            out.append(_Pending(snippet, site.name, site.source, depth))
        return out

    def generate(self, jobs: list[CodeJob], progress: Progress | None = None) -> list[Snippet]:
        requests = [request_from_params(main_messages(job.query, self.params.n_examples, self.policy), self.llm)
                    for job in jobs]
        completions = self.client.complete_many(
            requests, on_done=(lambda _i, _c: progress.advance()) if progress is not None else None)
        snippets = [Snippet(job, c, extract_code(c.text)) for job, c in zip(jobs, completions, strict=True)]
        pending = [p for s in snippets for p in self._queue(s, s.main_code, 1)]
        while pending:
            sub_requests = [request_from_params(sub_messages(p.name, p.call_source, self.policy), self.llm)
                            for p in pending]
            answers = self.client.complete_many(sub_requests)
            next_level: list[_Pending] = []
            for p, answer in zip(pending, answers, strict=True):
                code, dropped = definitions_only(extract_code(answer.text))
                if dropped:
                    p.snippet.notes.append(("subagent_extra_statements", f"answer for '{p.name}': {dropped} "
                                                                         "top-level statement(s) dropped"))
                defined = self.policy.defined_functions(code)
                helper = Helper(p.name, p.depth, p.call_source, code, p.name in defined, answer.key,
                                answer.prompt_hash)
                p.snippet.helpers.append(helper)
                broken = {"not_code", "syntax_error", "empty"} & set(self.policy.check(code).codes)
                unusable = not defined and bool(broken)
                if unusable:
                    p.snippet.notes.append(("subagent_not_code", f"asked for '{p.name}', got no usable code"))
                elif not helper.defines:
                    p.snippet.notes.append(("subagent_missing_definition", f"asked for '{p.name}', the answer "
                                                                           f"defines {defined or 'nothing'}"))
                else:
                    next_level += self._queue(p.snippet, code, p.depth + 1)
            pending = next_level
        for snippet in snippets:
            snippet.verdict = self.policy.check(snippet.assembled())
        return snippets


# --------------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class SnippetRecord(Provenance):
    snippet_id: str
    query_id: str
    world_id: str
    instruction: str
    query: str
    code: str
    """The snippet: helper definitions (deepest first), then the main script."""
    main_code: str
    main_reply: str
    helper_names: list[str]
    helper_code: list[str]
    helper_depths: list[int]
    max_helper_depth: int
    ok: bool
    reason_codes: list[str]
    reasons: list[str]
    notes: list[str]
    finish_reason: str


@dataclass(frozen=True)
class HelperRecord:
    snippet_id: str
    name: str
    depth: int
    call_source: str
    code: str
    defines: bool
    prompt_hash: str
    response_key: str


def snippet_id(snippet: Snippet) -> str:
    return hashlib.sha256(f"{snippet.job.query_id}:{snippet.main.key}".encode()).hexdigest()[:16]


def to_records(snippets: list[Snippet]) -> tuple[list[SnippetRecord], list[HelperRecord]]:
    rows, helpers = [], []
    for s in snippets:
        assert s.verdict is not None
        sid = snippet_id(s)
        defined = [h for h in s.helpers if h.defines]
        rows.append(SnippetRecord(
            snippet_id=sid, query_id=s.job.query_id, world_id=s.job.world_id, instruction=s.job.instruction,
            query=s.job.query, code=s.assembled(), main_code=s.main_code, main_reply=s.main.text,
            helper_names=[h.name for h in defined], helper_code=[h.code for h in defined],
            helper_depths=[h.depth for h in defined], max_helper_depth=s.max_depth, ok=s.verdict.ok,
            reason_codes=list(s.verdict.codes), reasons=s.verdict.messages(),
            notes=[f"{code}: {detail}" for code, detail in s.notes], finish_reason=s.main.finish_reason,
            **Provenance.of(s.main)))
        helpers += [HelperRecord(sid, h.name, h.depth, h.call_source, h.code, h.defines, h.prompt_hash,
                                 h.response_key) for h in s.helpers]
    return rows, helpers


def summarise(rows: list[SnippetRecord], helpers: list[HelperRecord], client: LLMClient) -> dict:
    failing = [r for r in rows if not r.ok]
    return {
        "snippets": len(rows),
        "passing": len(rows) - len(failing),
        "failing": len(failing),
        "pass_rate": round((len(rows) - len(failing)) / len(rows), 4) if rows else 0.0,
        "failing_by_reason": dict(sorted(Counter(c for r in failing for c in r.reason_codes).items())),
        "notes_by_reason": dict(sorted(Counter(n.split(":")[0] for r in rows for n in r.notes).items())),
        "helper_requests": len(helpers),
        "helpers_defined": sum(h.defines for h in helpers),
        "snippets_with_helpers": sum(bool(r.helper_names) for r in rows),
        "max_helper_depth": max((r.max_helper_depth for r in rows), default=0),
        "llm_calls": client.calls,
        "cache_hits": client.cache_hits,
        "backend": client.backend.name,
        "model": client.backend.model,
    }
