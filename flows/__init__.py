"""Prefect flows: one per pipeline stage, orchestration only (the work lives in ``tasks/``).

Run one with ``python -m flows.<name>`` (what ``dvc.yaml`` does) or ``embp <group> <stage>``. Prefect uses its
embedded ephemeral server unless ``PREFECT_API_URL`` points at a server.
"""

import os

# Before Prefect is imported anywhere: no telemetry from a pipeline run, and no heartbeat thread to join.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
