"""How an LLM agent's answer becomes one command (``muep.eval.hf.action_selection``), the three ways the papers'
agents use:

* ``rank`` -- every admissible command is scored by the model as its reply (sum of its tokens' log-probabilities,
  end-of-turn token included, divided by the token count) and the best is sent. The command is always valid, so LC
  is 100 by construction; what the model decides is *which* valid command.
* ``generate`` -- greedy free text; its one command (:func:`tasks.muep.eval.prompts.parse_action`) is sent as it is.
  LC measures how often the model writes a command the game accepts.
* ``generate-closest`` -- free text mapped to the most similar admissible command (``difflib`` ratio, ties to the
  first in the game's order): valid when anything is admissible.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

SELECTIONS = {"rank": "ranks the admissible commands by mean token log-likelihood",
              "generate": "free generation, sent as written",
              "generate-closest": "free generation mapped to the most similar admissible command"}


def closest(text: str, admissible: Sequence[str]) -> str:
    """The admissible command most similar to ``text`` ("" when nothing is admissible)."""
    best, best_ratio = "", -1.0
    for command in admissible:
        ratio = difflib.SequenceMatcher(None, text, command, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = command, ratio
    return best


def ranked(candidates: Sequence[str], sums: Sequence[float], lengths: Sequence[int], top: int = 3) -> str:
    """The trajectory's record of a ranking: the best ``top`` commands with their mean log-probabilities."""
    means = [s / n for s, n in zip(sums, lengths, strict=True)]
    order = sorted(range(len(means)), key=lambda i: (-means[i], i))[:top]
    shown = " | ".join(f"{candidates[i]} ({means[i]:.3f})" for i in order)
    return f"rank {len(candidates)}: {shown}"
