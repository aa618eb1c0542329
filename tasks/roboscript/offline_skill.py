"""Offline skills for the RoboScript prompts, named in ``core.plugins.OFFLINE_SKILLS``:

* ``roboscript-task-queries``: reads the scene text of the prompt and suggests tasks, one numbered line each;
* ``roboscript-main-code``: reads the task query (objects line + task) and the tool list of the system prompt and
  writes a script with step comments (``tasks/roboscript/offline_code.py``);
* ``roboscript-sub-code``: reads the requested function's name and call line and writes its definition, copying
  it from the prompt's examples when they show one, else from what it knows, else it delegates or gives up.

Everything comes from the messages (and the model's "knowledge", ``offline_knowledge.py``), never from files. With
``llm.offline.noise`` the skills make the mistakes real models make: chatty lines, objects that are not in the
scene, run-on tasks and repeats for queries; a hallucinated keyword, a missing argument, an import, a hallucinated
tool, prose instead of code for scripts; helpers that only delegate to further undefined helpers.
"""

from __future__ import annotations

import ast
import random
import re
import threading
from collections.abc import Sequence

from tasks.roboscript import offline_knowledge as kb
from tasks.roboscript.code_prompts import (
    CALLED_LIKE,
    DEFINE_PREFIX,
    MAIN_MARK,
    SUB_MARK,
    TASK_PREFIX,
)
from tasks.roboscript.offline_code import NotUnderstood, compose, read_task
from tasks.roboscript.queries import COUNT_PREFIX, QUERY_MARK, SCENE_HEADER
from tasks.roboscript.scene_text import OBJECTS_LINE, parse_scene_text

Messages = Sequence[tuple[str, str]]
_AST_LOCK = threading.Lock()
"""The LLM client runs skills in threads, and CPython 3.11's ``ast.parse`` is not thread-safe (its AST
constructor's recursion-depth check is interpreter-global: concurrent parses fail with "AST constructor recursion
depth mismatch"), so the skills parse one at a time."""


def _parse(source: str, mode: str = "exec") -> ast.AST:
    with _AST_LOCK:
        return ast.parse(source, mode=mode)
_GHOSTS = ("teapot", "unicorn figurine", "potted plant", "laptop", "toy robot", "candle")


def _system(messages: Messages) -> str:
    return next((text for role, text in messages if role == "system"), "")


def _last_user(messages: Messages) -> str:
    return next(text for role, text in reversed(messages) if role == "user")


# ------------------------------------------------------------------------------------------------------------------
# Task queries


class TaskQueryProposer:
    def matches(self, messages: Messages) -> bool:
        return _system(messages).startswith(QUERY_MARK)

    def respond(self, messages: Messages, rng: random.Random, noise: float) -> str:
        user = _last_user(messages)
        count = re.search(rf"{re.escape(COUNT_PREFIX)}\s*(\d+)", user)
        n_tasks = int(count.group(1)) if count else 5
        scene = user.split(SCENE_HEADER, 1)[-1].split(COUNT_PREFIX, 1)[0]
        candidates = self._candidates(parse_scene_text(scene), rng)
        lines: list[str] = []
        for _ in range(n_tasks):
            if rng.random() < noise:
                lines.append(self._mistake(rng, lines, candidates))
            elif candidates:
                lines.append(candidates.pop(0))
        numbered = [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
        if rng.random() < noise:
            numbered = [f"Here are {len(lines)} tasks for this scene:", *numbered, "I hope these tasks help!"]
        return "\n".join(numbered)

    def _candidates(self, arr, rng: random.Random) -> list[str]:
        """Sentences for tasks the scene allows, one list per pattern, interleaved so patterns alternate."""
        placed = {name: (rel, parent) for name, rel, parent in arr.placements}
        receptacles = [n for n, (_, p) in placed.items() if kb.is_receptacle(n) and not kb.is_furniture(n)
                       and p == "table"]
        loose = [n for n, (_, p) in placed.items() if p == "table" and not kb.is_receptacle(n)
                 and not kb.is_furniture(n)]
        inside = [(n, p) for n, (rel, p) in placed.items() if rel == "in"]
        drawers = [d for d, _ in arr.drawers]
        ph = kb.phrase
        by_kind: dict[str, list[str]] = {}
        for obj in loose:
            for rec in receptacles:
                by_kind.setdefault("put", []).append(f"Place the {ph(obj)} {kb.preposition(rec)} the {ph(rec)}.")
            for ref in receptacles + loose:
                if ref != obj:
                    rel = rng.choice(("to the left of", "to the right of", "in front of", "behind"))
                    by_kind.setdefault("relative", []).append(f"Put the {ph(obj)} {rel} the {ph(ref)}.")
            by_kind.setdefault("lift", []).append(f"Pick up the {ph(obj)} and lift it {rng.choice((5, 10, 15))} "
                                                  "centimetres.")
            for i in range(len(drawers)):
                by_kind.setdefault("drawer", []).append(
                    f"Open the {kb.ordinal_words(i, len(drawers))} drawer and put the {ph(obj)} into it.")
        for obj, parent in inside:
            by_kind.setdefault("take_out", []).append(f"Take the {ph(obj)} out of the {ph(parent)} and put it on "
                                                      "the table.")
        for a in loose:
            for b in loose:
                if a < b:
                    by_kind.setdefault("swap", []).append(f"Exchange the positions of the {ph(a)} and the {ph(b)}.")
        for plural, category in kb.PLURALS.items():
            members = [o for o in loose if kb.category_of(o) == category]
            if len(members) >= 2:
                by_kind.setdefault("category", []).extend(
                    f"Place all {plural} on the table {kb.preposition(r)} the {ph(r)}." for r in receptacles)
        for rec in receptacles:
            if len(loose) >= 2 and any(w in ("basket", "tray", "cardboard") for w in kb.words(rec)):
                by_kind.setdefault("clear", []).append(f"Clear the table by moving all table objects into the "
                                                       f"{ph(rec)}.")
        for obj in loose + receptacles:
            colour = kb.colour_of(obj)
            if colour and any(kb.colour_of(r) == colour and r != obj for r in receptacles):
                by_kind.setdefault("colour", []).append(f"Move the {ph(obj)} into a container with the same colour.")
        for word in ("plate", "bowl"):
            same = [r for r in receptacles if kb.words(r)[-1] == word]
            full = {p for _, p in inside}
            if len(same) >= 2 and any(r not in full for r in same) and any(r in full for r in same):
                by_kind.setdefault("empty", []).extend(f"Place the {ph(o)} {kb.preposition(word)} an empty {word}."
                                                       for o in loose)
        for i in range(len(drawers)):
            by_kind.setdefault("drawer_open", []).append(f"Open the {kb.ordinal_words(i, len(drawers))} drawer.")
        if arr.doors:
            by_kind["door"] = ["Open the cabinet door."]
        pools = [rng.sample(v, len(v)) for _, v in sorted(by_kind.items())]
        rng.shuffle(pools)
        out: list[str] = []
        while any(pools):
            for pool in pools:
                if pool:
                    out.append(pool.pop())
        return out

    def _mistake(self, rng: random.Random, lines: list[str], candidates: list[str]) -> str:
        kind = rng.choice(("ghost", "ghost_only", "run_on", "repeat"))
        ghost = rng.choice(_GHOSTS)
        if kind == "repeat" and lines:
            return lines[-1]
        if kind == "run_on" and len(candidates) >= 3:
            return (f"First {candidates[0][0].lower()}{candidates[0][1:-1]}, and then, when that is done and the arm "
                    f"is back, {candidates[1][0].lower()}{candidates[1][1:-1]}, and finally, if there is still time "
                    f"left, {candidates[2][0].lower()}{candidates[2][1:-1]} as well.")
        if kind == "ghost" and candidates:
            target = re.search(r"the ([a-z ]+?)\.$", candidates[0])
            where = target.group(1) if target else "table"
            return f"Place the {ghost} next to the {where}."
        return f"Water the {ghost} by the window."


# ------------------------------------------------------------------------------------------------------------------
# Scripts (main agent)


def _called_names(code: str) -> set[str]:
    tree = _parse(code)
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


class MainCoder:
    def matches(self, messages: Messages) -> bool:
        return _system(messages).startswith(MAIN_MARK)

    def respond(self, messages: Messages, rng: random.Random, noise: float) -> str:
        system, user = _system(messages), _last_user(messages)
        tools = set(re.findall(r"^def (\w+)\(", system, re.MULTILINE))
        objects_match = OBJECTS_LINE.search(user)
        objects = [o.strip() for o in objects_match.group(1).split(",")] if objects_match else []
        task = next((line[len(TASK_PREFIX):] for line in user.splitlines() if line.startswith(TASK_PREFIX)), "")
        if not task or not objects:
            return "I need the list of objects and the task to write a script."
        try:
            script = compose(read_task(task, objects))
        except NotUnderstood as exc:
            return f"{exc} Could you rephrase the task using the objects listed?"
        code = script.text()
        allowed = {"print", "len", "range", "np"} | script.helpers
        missing = sorted(_called_names(code) - tools - allowed)
        if missing:
            return f"I cannot do this: the tools {', '.join(missing)} are not available."
        if rng.random() < noise:
            code = self._mistake(rng, code, task)
        if not code.startswith(("I ", "First")) and rng.random() < 0.3:
            code = f"```python\n{code}\n```"
        return code

    def _mistake(self, rng: random.Random, code: str, task: str) -> str:
        kind = rng.choice(("keyword", "arity", "import", "prose", "tool"))
        if kind == "keyword" and "receptacle_name=" in code:
            return code.replace("receptacle_name=", "receptacle=", 1)
        if kind == "arity" and "grasp(grasp_pose)" in code:
            return code.replace("grasp(grasp_pose)", "grasp()", 1)
        if kind == "tool" and "attach_object(" in code:
            return code.replace("attach_object(", "attach(", 1)
        if kind != "prose":
            return "import numpy as np\n" + code
        return (f"First I would detect the objects involved in '{task}'. Then I would grasp the object, carry it to "
                "its destination and release it.\nFinally the arm returns to its default pose.")


# ------------------------------------------------------------------------------------------------------------------
# Helper definitions (sub-agent)


class SubCoder:
    def matches(self, messages: Messages) -> bool:
        return _system(messages).startswith(SUB_MARK)

    def respond(self, messages: Messages, rng: random.Random, noise: float) -> str:
        user = _last_user(messages)
        wanted = re.search(rf"{re.escape(DEFINE_PREFIX)}`(\w+)`", user)
        if wanted is None:
            return "Which function should I define?"
        name = wanted.group(1)
        call = user.split(CALLED_LIKE, 1)[-1].strip()
        params = self._params(name, call)
        if rng.random() < noise / 2:
            return self._delegate(name, params)
        for role, text in messages[:-1]:
            if role == "assistant" and re.match(rf"\s*def {name}\(", text):
                return text.strip()
        known = kb.known_definition(name)
        if known is not None:
            return known
        if rng.random() < 0.5:
            return self._delegate(name, params)
        return f"I do not know what `{name}` should do; it is neither a tool nor a helper I can infer from its name."

    def _params(self, name: str, call: str) -> list[str]:
        """Parameter names for the definition, one per argument of the call shown (the variable's name when the
        argument is a variable, ``arg_<i>`` otherwise)."""
        start = call.find(f"{name}(")
        depth, end = 0, -1
        for i in range(start + len(name), len(call)) if start >= 0 else ():
            depth += {"(": 1, ")": -1}.get(call[i], 0)
            if depth == 0:
                end = i
                break
        try:
            node = _parse(call[start:end + 1], mode="eval").body if end > 0 else None
        except SyntaxError:
            node = None
        if not isinstance(node, ast.Call):
            return ["value"]
        names: list[str] = []
        for i, arg in enumerate(node.args):
            label = arg.id if isinstance(arg, ast.Name) else f"arg_{i}"
            names.append(label if label not in names else f"{label}_{i}")
        return names + [k.arg for k in node.keywords if k.arg and k.arg not in names]

    def _delegate(self, name: str, params: list[str]) -> str:
        args = ", ".join(params)
        return (f"def {name}({args}):\n"
                f'    """Carry out {name.replace("_", " ")} by a more specific step."""\n'
                f"    return {name}_step({args})")


