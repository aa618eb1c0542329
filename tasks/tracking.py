"""MLflow tracking: one place that decides where runs go.

Order of precedence: ``tracking.uri`` in params.yaml, then the ``MLFLOW_TRACKING_URI`` environment variable, then a
local sqlite store ``mlflow.db`` at the repository root (MLflow's file store is deprecated) with artifacts under
``mlartifacts/``. ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows the same runs.
"""

from __future__ import annotations

import os

from tasks import paths
from tasks.params import TrackingParams


def tracking_uri(params: TrackingParams) -> str:
    if params.uri:
        return params.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{paths.ROOT / 'mlflow.db'}"


def artifact_location(params: TrackingParams) -> str | None:
    """Where new experiments keep artifacts when the store is the local default (None: the server decides)."""
    if params.uri or os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    return (paths.ROOT / "mlartifacts").as_uri()


def setup(params: TrackingParams, experiment: str):
    """Point MLflow at the store and return the experiment id (created on first use)."""
    import mlflow

    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    mlflow.set_tracking_uri(tracking_uri(params))
    name = f"{params.experiment_prefix}/{experiment}"
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=artifact_location(params))
