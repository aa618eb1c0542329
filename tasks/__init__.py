"""Plain-Python units of work for the pipelines.

Everything here is importable and testable without a Prefect server: the flows in ``flows/`` only orchestrate
these functions.
"""
