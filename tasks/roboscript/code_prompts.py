"""The code-generation prompts (RoboScript section III-B): system prompt with format rules and the tool doc strings,
ten few-shot query -> code dialogues, and the task query; the sub-agent's prompt has the same three sections.

The tool section is generated from ``robot/contract/tool_api.py`` (:func:`robot.contract.tool_api.tool_docs`), so the prompt always
describes exactly the tools the checker and the robot backends know. The examples live in ``prompts/fewshot.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from core.errors import DataError
from robot.contract.code_policy import DEFAULT_POLICY, CodePolicy
from robot.contract.tool_api import tool_docs
from tasks.roboscript.scene_text import objects_line

FEWSHOT_FILE = Path(__file__).parent / "prompts" / "fewshot.yaml"

#: First line of each system prompt; the offline backend's skills recognise their prompts by it.
MAIN_MARK = "You write Python scripts that make a robot arm with a parallel gripper carry out a task at a table."
SUB_MARK = "You write one Python function for a robot arm's script, given its name and how it is called."
TASK_PREFIX = "Task: "
DEFINE_PREFIX = "Define the function "
CALLED_LIKE = "It is called like this:"


@dataclass(frozen=True)
class Example:
    query: str
    code: str
    helpers: tuple[tuple[str, str], ...] = ()

    def assembled(self) -> str:
        """The example as the hierarchical generator would deliver it: helper definitions, then the script."""
        return "\n\n".join([*(code for _, code in self.helpers), self.code])


@lru_cache(maxsize=4)
def load_examples(path: Path = FEWSHOT_FILE) -> tuple[Example, ...]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the few-shot examples {path}: {exc}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("main"), list):
        raise DataError(f"{path} must hold a list under 'main'.")
    examples = []
    for i, item in enumerate(data["main"], start=1):
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or not isinstance(item.get("code"),
                                                                                                  str):
            raise DataError(f"{path}: example {i} needs a 'query' and a 'code' string.")
        helpers = item.get("helpers") or {}
        if not isinstance(helpers, dict) or not all(isinstance(v, str) for v in helpers.values()):
            raise DataError(f"{path}: example {i}: 'helpers' must map function names to code.")
        examples.append(Example(item["query"].strip(), item["code"].strip(),
                                tuple((k, v.strip()) for k, v in helpers.items())))
    return tuple(examples)


def task_query(objects: list[str] | tuple[str, ...], instruction: str) -> str:
    """The user turn of the main agent (paper: what objects are present, then the instruction)."""
    return f"{objects_line(objects)}\n{TASK_PREFIX}{instruction.strip()}"


def _rules_builtins(policy: CodePolicy) -> str:
    names = sorted(n for n in policy.builtins if n[0].islower())
    return ", ".join(names)


def main_system_prompt(policy: CodePolicy = DEFAULT_POLICY) -> str:
    return f"""{MAIN_MARK}

Format rules:
- Answer with Python code and comments only: no prose before or after, no markdown.
- Think step by step: before each step, write a comment saying what the step does and why.
- The tools below and `np` (numpy) are already loaded; call the tools as plain functions. Do not import anything.
- Refer to objects by their names from the objects list, as strings ('cabinet.drawer_1', 'grey_bowl').
- Call detect_objects before acting on objects, and again after the scene changed (an opened drawer).
- After grasp, close the gripper and attach the object; after placing, open the gripper and detach it.
- When a sub-task deserves its own function, call a helper with a descriptive name and clear arguments without
  defining it: another agent writes it.
- Builtins you may use: {_rules_builtins(policy)}.

{tool_docs()}"""


def sub_system_prompt(policy: CodePolicy = DEFAULT_POLICY) -> str:
    return f"""{SUB_MARK}

Format rules:
- Answer with the function definition only: `def ...` with a doc string, code and comments; no prose, no markdown,
  no example calls.
- Keep the parameters the call shows.
- Use the tools below, `np` (numpy, already loaded) and the builtins {_rules_builtins(policy)}. Do not import
  anything. You may call further helper functions; another agent writes them.

{tool_docs()}"""


def sub_query(name: str, call_source: str) -> str:
    return f"{DEFINE_PREFIX}`{name}`.\n{CALLED_LIKE}\n    {call_source}"


def sub_examples(examples: tuple[Example, ...]) -> list[tuple[str, str]]:
    """(sub query, definition) for each distinct helper of the examples, with the line of the example that calls it."""
    out: dict[str, tuple[str, str]] = {}
    for example in examples:
        script = example.assembled()
        for name, code in example.helpers:
            if name in out:
                continue
            call = next((line.strip() for line in script.splitlines()
                         if f"{name}(" in line and not line.lstrip().startswith("def ")), f"{name}(...)")
            out[name] = (sub_query(name, call), code)
    return list(out.values())


def main_messages(query: str, n_examples: int, policy: CodePolicy = DEFAULT_POLICY) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": main_system_prompt(policy)}]
    for example in load_examples()[:n_examples]:
        messages += [{"role": "user", "content": example.query}, {"role": "assistant", "content": example.code}]
    messages.append({"role": "user", "content": query})
    return messages


def sub_messages(name: str, call_source: str, policy: CodePolicy = DEFAULT_POLICY) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": sub_system_prompt(policy)}]
    for query, code in sub_examples(load_examples()):
        messages += [{"role": "user", "content": query}, {"role": "assistant", "content": code}]
    messages.append({"role": "user", "content": sub_query(name, call_source)})
    return messages
