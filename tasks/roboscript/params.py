"""Typed schema of the ``roboscript:`` section of ``params.yaml`` (mounted on ``tasks.params.Params``).

Defined here, with its own strict base class, so that ``tasks.params`` can import it without an import cycle.
World frame (metres): x points away from the robot across the table, y to the robot's left, z up from the floor;
the robot base stands on the table top at (``robot.base_x``, ``robot.base_y``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot.params import RobotEvalParams

Metres = Annotated[float, Field(ge=-5.0, le=5.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableParams(_Strict):
    center_x: Metres = 0.4
    center_y: Metres = 0.0
    size_x: Annotated[float, Field(gt=0.2, le=4.0)] = 1.0
    size_y: Annotated[float, Field(gt=0.2, le=4.0)] = 1.6
    height: Annotated[float, Field(gt=0.2, le=2.0)] = 0.75
    edge_margin: Annotated[float, Field(ge=0.0, le=0.3)] = 0.03
    """Clearance kept between every model and the table's edges."""

    def bounds(self) -> tuple[float, float, float, float]:
        """(x_min, y_min, x_max, y_max) of the table top."""
        return (self.center_x - self.size_x / 2, self.center_y - self.size_y / 2,
                self.center_x + self.size_x / 2, self.center_y + self.size_y / 2)


class RobotParams(_Strict):
    name: str = "panda"
    base_x: Metres = 0.0
    base_y: Metres = 0.0
    reach: Annotated[float, Field(gt=0.2, le=2.0)] = 0.85
    """Horizontal distance from the base within which every corner of a model's footprint must lie."""
    keep_out: tuple[Metres, Metres, Metres, Metres] = (-0.25, -0.25, 0.3, 0.25)
    """Box around the base, (x_min, y_min, x_max, y_max) relative to it, that no model may overlap."""

    @model_validator(mode="after")
    def _box_order(self) -> RobotParams:
        x0, y0, x1, y1 = self.keep_out
        if x1 <= x0 or y1 <= y0:
            raise ValueError("keep_out must be (x_min, y_min, x_max, y_max) with x_min < x_max and y_min < y_max")
        return self


class WorldsParams(_Strict):
    n_worlds: Annotated[int, Field(ge=1, le=10000)] = 6
    seed: int = 0
    min_containers: Annotated[int, Field(ge=0, le=20)] = 2
    max_containers: Annotated[int, Field(ge=0, le=20)] = 4
    min_objects: Annotated[int, Field(ge=0, le=40)] = 3
    max_objects: Annotated[int, Field(ge=0, le=40)] = 6
    p_in_container: Annotated[float, Field(ge=0.0, le=1.0)] = 0.4
    """Chance that an object goes into a container that is free and wide enough rather than on the table."""
    max_objects_per_container: Annotated[int, Field(ge=1, le=10)] = 1
    p_cabinet: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3
    """Chance that a world has a cabinet with drawers (placed first, facing the robot)."""
    min_gap: Annotated[float, Field(ge=0.0, le=0.2)] = 0.02
    """Clearance between the footprints of any two models on the table."""
    max_tries_per_item: Annotated[int, Field(ge=1, le=10000)] = 100
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 5
    """Whole-world attempts when an item finds no place; the best attempt is kept and its failures recorded."""
    picture_px: Annotated[int, Field(ge=100, le=2000)] = 360
    table: TableParams = TableParams()
    robot: RobotParams = RobotParams()

    @model_validator(mode="after")
    def _ranges(self) -> WorldsParams:
        if self.max_containers < self.min_containers:
            raise ValueError("max_containers must be >= min_containers")
        if self.max_objects < self.min_objects:
            raise ValueError("max_objects must be >= min_objects")
        return self


class QueriesParams(_Strict):
    per_world: Annotated[int, Field(ge=1, le=200)] = 5
    """Task queries asked of the LLM per world (the paper's dataset has ~45 per world)."""
    max_words: Annotated[int, Field(ge=3, le=200)] = 40
    """Longer lines are rejected as not a single task."""


class CodegenParams(_Strict):
    n_examples: Annotated[int, Field(ge=0, le=10)] = 10
    """Few-shot query -> code examples in the main agent's prompt (the file has ten, as the paper)."""
    max_depth: Annotated[int, Field(ge=0, le=10)] = 3
    """Sub-agent levels: helpers called by helpers are written down to this depth; deeper ones stay undefined."""
    max_helpers: Annotated[int, Field(ge=0, le=100)] = 8
    """Sub-agent requests per snippet at most, whatever the depth."""
    max_queries: Annotated[int, Field(ge=1)] | None = None
    """Generate code for the first N queries only; null = every query."""


class RoboScriptParams(_Strict):
    worlds: WorldsParams = WorldsParams()
    queries: QueriesParams = QueriesParams()
    codegen: CodegenParams = CodegenParams()
    eval: RobotEvalParams = RobotEvalParams()  # robot evaluation on ROS runners (robot/params.py, docs/robot.md)
