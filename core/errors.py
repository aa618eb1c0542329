"""Errors a user can act on. Each carries one readable paragraph; flows print it instead of a traceback."""

from __future__ import annotations


class PipelineError(Exception):
    """A failure with a message meant for the person running the pipeline."""

    hint: str | None = None

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def paragraph(self) -> str:
        text = str(self)
        if self.hint:
            text += f" {self.hint}"
        return text


class ConfigError(PipelineError):
    """``params.yaml`` (or a profile) is malformed: unknown key, wrong type, impossible value."""


class DataError(PipelineError):
    """An input file is missing or malformed."""


class LLMError(PipelineError):
    """The LLM endpoint failed in a way retries could not fix."""
