"""How a repeat of generated code can end on a runner: the status vocabulary runners report and scoring reads.

``ok`` and ``robot_error`` are the grammatical endings (the code itself raised nothing): a robot that cannot carry
out a well-formed request does not make the code wrong.
"""

from __future__ import annotations

GRAMMATICAL = ("ok", "robot_error")
STATUSES = ("ok", "robot_error", "code_error", "refused", "timeout", "memory", "crashed", "cancelled")
