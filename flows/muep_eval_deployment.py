"""Deployable entry point of MuEP evaluation for Prefect work pools (prefect.yaml).

``flows.muep_eval.muep_eval`` picks the task runner from params.yaml (one TextWorld game per process) before it calls
its flow; a deployment needs a flow object as entry point, so this parent flow makes that same call and the
evaluation runs as its sub-flow with the right runner.
"""

from __future__ import annotations

from prefect import flow

from flows.muep_eval import muep_eval


@flow(name="muep-eval-deployment")
def muep_eval_deployment(params_file: str | None = None) -> dict:
    """MuEP evaluation on a work pool: the agents of muep.eval.agents play the test episodes."""
    return muep_eval(params_file=params_file)
