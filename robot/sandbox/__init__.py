"""Running generated robot code: a static check, a restricted compiler with run-time guards, and a confined child
process that reaches the robot only through a JSON channel to the runner.

1. :data:`~robot.contract.code_policy.DEFAULT_POLICY` checks the snippet (the tree checks, then the restricted
   compiler of ``robot/contract/restricted.py``); a snippet that fails never runs (status ``refused``).
2. It runs in a child forked from a fork server (the *zygote*, ``zygote.py``) that lives in bubblewrap's namespaces
   (``isolation.py``: no network, a read-only view of /usr, the interpreter and the few packages it needs, a
   private /tmp, its own pid namespace, an empty environment; each child clears even what is left). Each child
   becomes uid 65534 with no capabilities, gets resource limits (address space, CPU, no files or processes), dies
   with the zygote, and installs a seccomp filter (``seccomp.py``: no open, fork, exec, socket, kill, file
   changes...) before it reads the snippet (``child.py``). The snippet is compiled by the restricted compiler and
   executed with the guarded globals of the same policy object: every attribute, item, call and iteration is
   checked at run time.
3. A tool call travels as JSON with a schema (``wire.py``, never pickle) to the runner, which checks the tool's
   signature, runs the real tool against the robot, reports the step and answers with the result or the error.
   How the repeat ended is decided by the runner from its own bookkeeping and the child's exit status
   (``host.py``); every text the snippet can make the runner store is cleaned and capped (``wire.clip``).

``isolation: none`` (params.yaml ``roboscript.eval.isolation``) runs the zygote without namespaces, where bubblewrap
cannot work; everything else stays, and every episode warns. ``auto`` refuses to start without bubblewrap.

Statuses: ``ok``, ``robot_error`` (a tool raised RobotError, and that exception, never caught by the snippet, ended
it), ``code_error`` (an exception from the code itself, a
ToolArgumentError or a sandbox violation), ``refused``, ``timeout``, ``memory``, ``crashed`` (the child died or
broke the protocol), ``cancelled``. Only ``ok`` counts as grammatically correct (``robot.contract.outcomes``, as the
public evaluator evaluates only code that ran without raising); by default a failed motion returns False and does
not raise, so ``robot_error`` comes only from other robot failures or under ``motion_failure: raise``.
"""

from robot.sandbox.host import (
    NONE_WARNING,
    Limits,
    Outcome,
    SandboxHost,
    SandboxUnavailable,
    configure,
    default_mode,
    host_for,
    prepare,
    run_code,
    run_probe,
)
from robot.sandbox.isolation import MODES, IsolationUnavailable, bwrap_status

__all__ = ["MODES", "NONE_WARNING", "IsolationUnavailable", "Limits", "Outcome", "SandboxHost", "SandboxUnavailable",
           "bwrap_status", "configure", "default_mode", "host_for", "prepare", "run_code", "run_probe"]
