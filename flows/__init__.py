"""Prefect flows: one per pipeline stage, orchestration only (the work lives in ``tasks/``).

Run one with ``python -m flows.<name>`` (what ``dvc.yaml`` does) or ``embp <group> <stage>``. Prefect uses its
embedded ephemeral server unless ``PREFECT_API_URL`` points at a server.
"""

import os

from core import cpu as _cpu

# Before Prefect is imported anywhere: no telemetry from a pipeline run, and no heartbeat thread to join.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Before numpy or torch is imported anywhere: every float kernel at one instruction-set level, so a stage's outputs
# are the same bytes on every x86-64 machine with AVX2 (core/cpu.py; EMBP_CPU_LEVEL=native opts out).
_cpu.pin()
# ... and one thread per process in each math library (parallelism is processes and stages side by side).
_cpu.single_threaded()

# Run by `embp run`'s warm stage host if there is one (flows/_stage_host.py): this process then only waits for it.
if os.environ.get("EMBP_STAGE_HOST"):
    from flows import _stage_host

    _stage_host.delegate_if_stage()
