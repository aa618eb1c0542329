"""MLflow tracking: one place that decides where runs go.

Order of precedence: ``tracking.uri`` in params.yaml, then the ``MLFLOW_TRACKING_URI`` environment variable, then a
local sqlite store ``mlflow.db`` at the repository root (MLflow's file store is deprecated) with artifacts under
``mlartifacts/``. ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows the same runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tasks import paths
from tasks.params import TrackingParams


def tracking_uri(params: TrackingParams) -> str:
    if params.uri:
        return params.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{paths.ROOT / 'mlflow.db'}"


def artifact_location(params: TrackingParams) -> str | None:
    """Where new experiments keep artifacts: ``mlartifacts/`` beside a local sqlite store (the default store or any
    ``sqlite:///`` URI), else wherever the tracking server decides (None)."""
    uri = tracking_uri(params)
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").as_uri()
    return None


#: MLflow 3's UI opens an experiment on its GenAI trace overview unless the experiment says it holds model runs.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


@dataclass(frozen=True)
class DatasetRef:
    """What a run evaluated or trained on, logged as an MLflow dataset input (the runs table's Dataset column):
    ``digest`` is the data version (DVC's md5 or a content hash), ``context`` "training" or "evaluation"."""

    name: str
    digest: str
    source: str
    context: str
    records: int

    def entity(self):
        from mlflow.entities import Dataset, DatasetInput, InputTag

        dataset = Dataset(name=self.name, digest=self.digest[:36], source_type="local", source=self.source,
                          profile=json.dumps({"records": self.records}))
        return DatasetInput(dataset, [InputTag("mlflow.data.context", self.context)])


def setup(params: TrackingParams, experiment: str):
    """Point MLflow at the store and return the experiment id (created on first use, marked as holding model runs)."""
    import mlflow

    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    uri = tracking_uri(params)
    mlflow.set_tracking_uri(uri)
    name = f"{params.experiment_prefix}/{experiment}"
    with _store_lock(uri):
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            return mlflow.create_experiment(name, artifact_location=artifact_location(params), tags=EXPERIMENT_KIND)
        for key, value in EXPERIMENT_KIND.items():
            if found.tags.get(key) != value:
                mlflow.MlflowClient().set_experiment_tag(found.experiment_id, key, value)
        return found.experiment_id


@contextlib.contextmanager
def _store_lock(uri: str):
    """Held while a process opens a local sqlite store and finds or creates its experiment: stages that run side by
    side (``embp run``) would otherwise both create a new store's tables, or both create one experiment (MLflow's
    sqlite store has no guard for either). A server store needs none."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    from core.io import file_lock

    path = Path(uri.removeprefix("sqlite:///"))
    with file_lock(path.parent / f".{path.name}.lock"):
        yield


_MAX_METRICS, _MAX_PARAMS = 1000, 100  # MLflow's caps per log_batch call


def log_run(params: TrackingParams, experiment: str, run_name: str, *, run_params: dict | None = None,
            metrics: dict[str, float] | None = None, tags: dict[str, str] | None = None,
            artifacts: list[Path | str | tuple[str, Path | str]] = (), dataset: DatasetRef | None = None,
            started_at: float | None = None) -> str:
    """One finished MLflow run in ``<prefix>/<experiment>``: params, metrics and tags in batched calls, then the
    artifacts (a path goes to the run's root, ``(folder, path)`` into that folder) and the dataset input.
    ``started_at`` (epoch seconds, e.g. the stage's start) makes the run's duration the stage's, not the logging's. Every flow logs through this; returns the run id. A failure
    half-way marks the run FAILED, so a leaderboard never reads half a run."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    experiment_id = setup(params, experiment)
    client = MlflowClient(tracking_uri(params))
    tags = dict(tags or {})
    run = client.create_run(experiment_id, run_name=run_name, tags={"mlflow.runName": run_name} | tags,
                            start_time=int(started_at * 1000) if started_at is not None else None)
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        metric_list = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None]
        param_list = [Param(k, str(v)[:6000]) for k, v in sorted((run_params or {}).items())]
        client.log_batch(run_id, metrics=metric_list[:_MAX_METRICS], params=param_list[:_MAX_PARAMS],
                         tags=[RunTag(k, str(v)) for k, v in sorted(tags.items())])
        for k in range(_MAX_METRICS, len(metric_list), _MAX_METRICS):
            client.log_batch(run_id, metrics=metric_list[k:k + _MAX_METRICS])
        for k in range(_MAX_PARAMS, len(param_list), _MAX_PARAMS):
            client.log_batch(run_id, params=param_list[k:k + _MAX_PARAMS])
        if dataset is not None:
            client.log_inputs(run_id, [dataset.entity()])
        for item in artifacts:
            folder, path = item if isinstance(item, tuple) else (None, item)
            client.log_artifact(run_id, str(path), artifact_path=folder)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def experiment_links(params: TrackingParams, base_url: str) -> dict[str, str]:
    """A link per experiment of this project that opens the MLflow UI (3.x) on its runs table: the UI starts in its
    GenAI view unless the URL asks for the model-training one (``workflowType=machine_learning``)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri(params))
    return {e.name: f"{base_url.rstrip('/')}/#/experiments/{e.experiment_id}?workflowType=machine_learning"
            for e in client.search_experiments(filter_string=f"name LIKE '{params.experiment_prefix}/%'")}
