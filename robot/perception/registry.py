"""The perception-mode registry (its own module so that every mode module can register without import cycles)."""

from __future__ import annotations

from tasks.registry import Registry

PERCEPTION_MODES: Registry[type] = Registry("perception mode")
