"""The evaluation protocols (``muep.eval.protocol``): which command grammar the games speak and when an episode
stops.

* ``muep-released`` (default) -- as MuEP's released test client plays ALFWorld's games (github.com/kanxueli/MuEP,
  ``testing_environment/network_textworld_client.py``, quoted in docs/muep-eval.md): its grammar file
  (``put X in/on Y``, its feedback texts: ``tasks.muep.textworld_env``, grammar ``muep-released``), at most 30
  actions, and the episode ends at the first proposed action that repeats the previous one (A-A) or completes an
  alternation (A-B-A-B), judged on the proposed actions alone, *before* that action is executed.
* ``alfworld`` -- ALFWorld's: grammar ``alfworld-0.4`` (``move X to Y``), 30 actions, no loop stop.

A protocol plays every episode in its own grammar, whatever grammar the episodes were made in: the expert's
``put`` commands are rewritten (:func:`tasks.muep.eval.env.for_protocol`), every other command is the same in all
grammars. This module does not import the game engine: the leaderboard reads :data:`PROTOCOLS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    name: str
    grammar: str
    released_stop: bool
    """End the episode at the first repeated proposal (:func:`released_repeat`), without executing it."""


#: ``muep.eval.protocol``'s default: the one the leaderboard's rows are labelled plainly by.
DEFAULT_PROTOCOL = "muep-released"

PROTOCOLS = {
    "muep-released": Protocol("muep-released", "muep-released", True),
    "alfworld": Protocol("alfworld", "alfworld-0.4", False),
}

#: How many proposals the released client remembers (``deque(maxlen=4)``, network_textworld_client.py l. 104-107, 196).
MEMORY = 4


def released_repeat(previous: Sequence[str], action: str) -> str | None:
    """The released client's stop rule (``is_aa_or_abab``, network_textworld_client.py l. 109-118): ``previous``
    are the proposals the episode remembers (the last :data:`MEMORY`, oldest first, each one executed), ``action``
    the new one. "A-A" when it equals the last; "A-B-A-B" when the last equals the third-last and ``action`` the
    second-last; else None. Actions are compared as the harness normalises them (whitespace collapsed, as the client
    does, l. 72)."""
    recent = list(previous)[-MEMORY:]
    if recent and action == recent[-1]:
        return "A-A"
    if len(recent) >= 3 and recent[-1] == recent[-3] and recent[-2] == action:
        return "A-B-A-B"
    return None
