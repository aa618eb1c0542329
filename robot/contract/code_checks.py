"""The static checks behind :class:`robot.contract.code_policy.CodePolicy`: one pass over the syntax tree of a snippet.

Kept apart from the policy object so that ``code_policy.py`` reads as the policy (what is allowed) and this module
as the mechanics (how a tree is walked). Scoping is deliberately flow-insensitive: a name counts as defined if the
snippet binds it anywhere (assignment, loop or comprehension target, parameter, ``def``, ``except ... as``).
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robot.contract.code_policy import CodePolicy, Reason
    from robot.contract.tool_api import ToolSpec


@dataclass(frozen=True)
class CallSite:
    """Where a function that nothing defines is first called."""

    name: str
    line: int
    source: str
    """The source line of the call, stripped."""
    n_args: int
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class _Signature:
    positional: tuple[str, ...]
    n_required: int
    kwonly: tuple[str, ...] = ()
    kwonly_required: frozenset[str] = frozenset()
    varargs: bool = False
    varkw: bool = False

    @classmethod
    def of_tool(cls, spec: ToolSpec) -> _Signature:
        return cls(positional=spec.param_names, n_required=spec.n_required)

    @classmethod
    def of_def(cls, node: ast.FunctionDef) -> _Signature:
        args = node.args
        positional = tuple(a.arg for a in [*args.posonlyargs, *args.args])
        kw_required = frozenset(a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None)
        return cls(positional=positional, n_required=len(positional) - len(args.defaults),
                   kwonly=tuple(a.arg for a in args.kwonlyargs), kwonly_required=kw_required,
                   varargs=args.vararg is not None, varkw=args.kwarg is not None)


_CODE_LINE = re.compile(
    r"^(?:#|@|def\s|for\s|if\s|elif\s|else\s*:|while\s|return\b|try\s*:|except\b|with\s|import\s|from\s\S+\simport|"
    r"[A-Za-z_][\w.\[\]'\", ]*\s*[+\-*/]?=|[A-Za-z_][\w.]*\(.*\)\s*$|[)\]}])"
)


def looks_like_prose(text: str) -> bool:
    """True when fewer than half of the non-empty lines look like Python (an LLM that explained instead of coding)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    code_like = sum(bool(_CODE_LINE.match(line)) for line in lines)
    return code_like * 2 < len(lines)


def _reason(code: str, message: str, line: int | None = None) -> Reason:
    from robot.contract.code_policy import Reason

    return Reason(code, message, line)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _attribute_chain(node: ast.Attribute) -> tuple[ast.expr, list[str]]:
    """(root expression, attribute names from the root outward) of ``a.b.c``."""
    names = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        names.append(current.attr)
        current = current.value
    return current, names[::-1]


def _bound_names(tree: ast.AST) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return bound


def _lambda_names(tree: ast.AST) -> set[str]:
    """Names assigned a lambda (``key = lambda o: ...``): callable, defined in the snippet."""
    return {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
            for t in node.targets if isinstance(t, ast.Name)}


def _function_defs(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def defined_functions(code: str) -> list[str]:
    try:
        tree = parse(code)
    except (SyntaxError, ValueError, TooComplex):
        return []
    return list(_function_defs(tree))


def _escapes_loop(body: list[ast.stmt]) -> bool:
    """Whether a loop body contains a ``break`` or ``return`` that leaves this loop (not a nested one)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Return)):
            return True
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            if isinstance(node, (ast.For, ast.While)):
                stack.extend(node.orelse)  # `else` of an inner loop still belongs to the outer one
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _bind(sig: _Signature, call: ast.Call, what: str) -> list[Reason]:
    line = call.lineno
    n_pos = len(call.args)
    out = []
    if n_pos > len(sig.positional) and not sig.varargs:
        out.append(_reason("wrong_arity", f"{what} takes at most {len(sig.positional)} positional argument(s), got "
                                          f"{n_pos}", line))
    covered = set(sig.positional[:n_pos])
    for keyword in call.keywords:
        name = keyword.arg
        if name in sig.positional[:n_pos]:
            out.append(_reason("wrong_arity", f"{what} got two values for argument '{name}'", line))
        elif name not in sig.positional and name not in sig.kwonly and not sig.varkw:
            known = ", ".join((*sig.positional, *sig.kwonly)) or "none"
            out.append(_reason("unknown_keyword", f"{what} has no parameter '{name}' (parameters: {known})", line))
        covered.add(str(name))
    missing = [p for p in sig.positional[:sig.n_required] if p not in covered]
    missing += sorted(k for k in sig.kwonly_required if k not in covered)
    if missing:
        out.append(_reason("wrong_arity", f"{what} is missing required argument(s) {', '.join(missing)}", line))
    return out


def _suggest(name: str, candidates: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


MAX_SOURCE_CHARS = 100_000
"""Longest snippet the check reads (generated snippets are a few thousand characters)."""
MAX_NESTING = 40
"""Deepest nesting of brackets, or of indented blocks, in the source."""
MAX_LINE_TOKENS = 20_000
"""Most tokens in one logical line (one statement, however many physical lines it spans)."""
MAX_TREE_DEPTH = 120
"""Deepest syntax tree the check and the restricted compiler walk (both recurse): ``1+1+...+1`` is as deep as it
is long."""


class TooComplex(Exception):
    """A snippet beyond the check's limits."""


def limits(code: str) -> None:
    """:class:`TooComplex` for source beyond the limits above; measured on the tokens before anything is parsed
    (the tokenizer is iterative: no input makes it recurse). Tokenizer errors are left to the parser's message."""
    if len(code) > MAX_SOURCE_CHARS:
        raise TooComplex(f"the snippet has {len(code)} characters; at most {MAX_SOURCE_CHARS} are checked")
    depth = indent = tokens = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            tokens += 1
            kind, text = token.type, token.string
            if kind == tokenize.OP and text in "([{":
                depth += 1
                if depth > MAX_NESTING:
                    raise TooComplex(f"brackets nested more than {MAX_NESTING} deep (line {token.start[0]})")
            elif kind == tokenize.OP and text in ")]}":
                depth -= 1
            elif kind == tokenize.INDENT:
                indent += 1
                if indent > MAX_NESTING:
                    raise TooComplex(f"blocks nested more than {MAX_NESTING} deep (line {token.start[0]})")
            elif kind == tokenize.DEDENT:
                indent -= 1
            elif kind == tokenize.NEWLINE:
                tokens = 0
            if tokens > MAX_LINE_TOKENS:
                raise TooComplex(f"a statement of more than {MAX_LINE_TOKENS} tokens (line {token.start[0]})")
    except (tokenize.TokenError, SyntaxError):  # unterminated brackets or strings, bad indentation: the parser says
        return


def _tree_depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_TREE_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse(code: str) -> ast.Module:
    """The syntax tree of ``code`` within the limits: :class:`TooComplex`, or the parser's SyntaxError/ValueError."""
    limits(code)
    try:
        tree = ast.parse(code)
    except (RecursionError, MemoryError) as exc:
        raise TooComplex(f"the parser gave up ({type(exc).__name__})") from None
    if _tree_depth(tree) > MAX_TREE_DEPTH:
        raise TooComplex(f"an expression or block nested more than {MAX_TREE_DEPTH} levels deep")
    return tree


def check(code: str, policy: CodePolicy) -> list[Reason]:
    """Every reason ``code`` fails; never raises for anything in the source: a snippet beyond the limits, or one the
    check itself cannot finish on (whatever the exception), is refused ``too_complex``."""
    try:
        return _check(code, policy)
    except TooComplex as exc:
        return [_reason("too_complex", str(exc))]
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - the check refuses, it never crashes
        return [_reason("too_complex", f"the code check could not finish on this snippet "
                                       f"({type(exc).__name__}: {str(exc)[:200]})")]


def _check(code: str, policy: CodePolicy) -> list[Reason]:
    if not code.strip():
        return [_reason("empty", "the snippet is empty")]
    try:
        tree = parse(code)
        compile(tree, "<snippet>", "exec")
    except SyntaxError as exc:
        if looks_like_prose(code):
            return [_reason("not_code", "the text is prose, not Python code")]
        return [_reason("syntax_error", f"{exc.msg}", exc.lineno)]
    except ValueError as exc:  # e.g. null bytes
        return [_reason("syntax_error", str(exc))]
    if not tree.body:
        return [_reason("empty", "the snippet holds only comments")]
    reasons = _Checker(tree, policy).run()
    if reasons:
        return reasons
    return _restricted(code)


def _restricted(code: str) -> list[Reason]:
    """What the restricted compiler (the one the sandbox runs) refuses in a snippet the tree checks passed."""
    from robot.contract.restricted import compile_snippet

    _, errors = compile_snippet(code)
    return [_reason("restricted", message, line) for line, message in errors]


class _Checker:
    def __init__(self, tree: ast.Module, policy: CodePolicy):
        self.tree = tree
        self.policy = policy
        self.parents = _parents(tree)
        self.defs = _function_defs(tree)
        self.lambdas = _lambda_names(tree)
        self.bound = _bound_names(tree)
        self.modules = frozenset(policy.modules)
        self.found: list[tuple[int, int, int, Reason]] = []

    def add(self, code: str, message: str, node: ast.AST | None) -> None:
        self.extend([_reason(code, message, getattr(node, "lineno", None))], node)

    def extend(self, reasons: list[Reason], node: ast.AST | None) -> None:
        position = tuple(getattr(node, key, 0) or 0 for key in ("lineno", "col_offset", "end_col_offset"))
        self.found += [(*position, r) for r in reasons]

    def run(self) -> list[Reason]:
        called_names: set[int] = set()
        for node in ast.walk(self.tree):
            kind = type(node).__name__
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = ", ".join(a.name for a in node.names)
                self.add("forbidden_import", f"import of {names}: imports are not allowed, tools and np are "
                                             "already available", node)
            elif kind in self.policy.forbidden_statements:
                self.add("forbidden_statement", f"{kind} statements are not allowed", node)
            if isinstance(node, ast.Name):
                self._name(node)
            elif isinstance(node, ast.FunctionDef):
                self._definition(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node)
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    called_names.add(id(node.func))
                self._call(node)
            elif isinstance(node, ast.While):
                self._while(node)
        self._undefined(called_names)
        self.found.sort(key=lambda item: item[:3])  # source order (a.__b__.__c__: __b__ first); stable per node
        return [item[3] for item in self.found]

    def _name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.policy.forbidden_names:
            self.add("forbidden_name", f"'{name}' is not allowed in robot code", node)
        elif name.startswith("__"):
            self.add("dunder_access", f"the name '{name}' is not allowed", node)
        elif isinstance(node.ctx, ast.Store) and (name in self.policy.tools or name in self.modules
                                                  or name in self.policy.constructors):
            self.add("shadows_tool", f"assignment to '{name}' would replace a tool or module", node)

    def _definition(self, node: ast.FunctionDef) -> None:
        if node.name in self.policy.tools or node.name in self.policy.builtins or node.name in self.modules:
            self.add("shadows_tool", f"'def {node.name}' would replace a tool, builtin or module", node)
        elif node.name in self.policy.forbidden_names or node.name.startswith("__"):
            self.add("forbidden_name", f"a function may not be called '{node.name}'", node)

    def _attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__"):
            self.add("dunder_access", f"access to the attribute '{node.attr}' is not allowed", node)
            return
        if node.attr.startswith("_"):
            self.add("private_access", f"access to the private attribute '{node.attr}' is not allowed", node)
            return
        if isinstance(self.parents.get(node), ast.Attribute):
            return  # the outermost attribute of a chain is checked once
        root, names = _attribute_chain(node)
        if isinstance(root, ast.Name) and root.id in self.modules and root.id not in self.bound:
            dotted = ".".join(names)
            allowed = self.policy.modules[root.id]
            if dotted not in allowed and not any(a.startswith(dotted + ".") for a in allowed):
                self.add("unknown_module_attribute", f"{root.id}.{dotted} is not on the allow-list"
                                                     f"{_suggest(dotted, allowed)}", node)

    def _call(self, node: ast.Call) -> None:
        func = node.func
        starred = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        if isinstance(func, ast.Name):
            name = func.id
            if name in self.policy.forbidden_names or name.startswith("__"):
                return  # reported by _name
            if name in self.policy.tools:
                if starred:
                    self.add("unverifiable_call", f"tool {name} is called with * or ** unpacking; pass the "
                                                  "arguments by name", node)
                else:
                    spec = self.policy.tools[name]
                    self.extend(_bind(_Signature.of_tool(spec), node, f"tool {spec.signature()}"), node)
            elif name in self.defs:
                if not starred:
                    self.extend(_bind(_Signature.of_def(self.defs[name]), node, f"function {name}"), node)
            elif name in self.policy.builtins or name in self.policy.constructors:
                if not starred:
                    self._signature(self.policy.call_signatures.get(name), node, name)
            elif name in self.lambdas:
                return
            else:
                candidates = frozenset(self.policy.tools) | self.policy.builtins | frozenset(self.defs)
                self.add("unknown_function", f"'{name}' is neither a tool, an allowed builtin nor a function "
                                             f"defined in the snippet{_suggest(name, candidates)}", node)
        elif isinstance(func, ast.Attribute):
            root, names = _attribute_chain(func)
            if isinstance(root, ast.Name) and root.id in self.modules and root.id not in self.bound:
                if not starred:  # the name itself is checked as a module attribute
                    dotted = ".".join([root.id, *names])
                    self._signature(self.policy.call_signatures.get(dotted), node, dotted)
                return
            if func.attr.startswith("_"):
                return  # reported by _attribute
            if func.attr in self.policy.tools:
                self.add("unknown_method", f"'.{func.attr}(...)': tools are plain functions, call "
                                           f"{func.attr}(...)", node)
            elif func.attr not in self.policy.methods and func.attr not in self.policy.value_methods:
                self.add("unknown_method", f"the method '{func.attr}' is not on the allow-list"
                                           f"{_suggest(func.attr, self.policy.methods)}", node)
            elif func.attr == "format" and isinstance(func.value, ast.Constant) and "_" in str(func.value.value):
                if "__" in str(func.value.value):
                    self.add("dunder_access", "a format string that reaches a double-underscore attribute", node)
            elif not starred:
                self._signature(self.policy.method_signatures.get(func.attr), node, f"the method .{func.attr}")
        else:
            self.add("dynamic_call", f"only names and attributes can be called, not {type(func).__name__}", node)

    def _signature(self, sigs: tuple | None, node: ast.Call, what: str) -> None:
        """Refuse a call that no signature known for ``what`` binds (``robot/contract/signatures.py``)."""
        from robot.contract.signatures import refusal

        refused = refusal(sigs, len(node.args), [k.arg for k in node.keywords]) if sigs else None
        if refused is not None:
            self.add(refused[0], f"{what}: {refused[1]}", node)

    def _while(self, node: ast.While) -> None:
        test = node.test
        always = isinstance(test, ast.Constant) and bool(test.value)
        if always and not _escapes_loop(node.body):
            self.add("unbounded_loop", "`while True` without break or return never ends", node)

    def _undefined(self, called_names: set[int]) -> None:
        known = self.policy.known_names | self.bound | self.policy.forbidden_names
        seen: set[str] = set()
        for node in ast.walk(self.tree):
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in called_names
                    and node.id not in known and not node.id.startswith("__") and node.id not in seen):
                seen.add(node.id)
                self.add("undefined_name", f"'{node.id}' is read but never defined", node)


def undefined_calls(code: str, policy: CodePolicy) -> list[CallSite]:
    try:
        tree = parse(code)
    except (SyntaxError, ValueError, TooComplex):
        return []
    defined = set(_function_defs(tree)) | _lambda_names(tree)
    skip = policy.known_names | policy.forbidden_names | defined
    lines = code.splitlines()
    sites: dict[str, CallSite] = {}
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        name = call.func.id  # type: ignore[attr-defined]
        if name in skip or name in sites or name.startswith("__"):
            continue
        source = lines[call.lineno - 1].strip() if 0 < call.lineno <= len(lines) else name
        sites[name] = CallSite(name, call.lineno, source, len(call.args),
                               tuple(k.arg for k in call.keywords if k.arg is not None))
    return list(sites.values())
