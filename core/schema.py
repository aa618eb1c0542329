"""The base of every params schema: unknown keys are errors, values are frozen once validated."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A params section: ``extra="forbid"`` turns a misspelt key into an error naming it; ``frozen`` keeps a
    validated configuration from changing under a running stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)
