"""Typed schema of the robot evaluation's ``params.yaml`` keys (mounted on the params model as ``eval``).

Defined here, with its own strict base, so that ``tasks.params`` can import it without a cycle and the runner can
validate a goal's perception settings with the same models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoiseParams(_Strict):
    """The ``noisy`` perception mode: Gaussian noise (standard deviations) on what ``detect_objects`` reports."""

    position_m: Annotated[float, Field(ge=0.0, le=0.2)] = 0.005
    """On box centres, object poses and joint origins."""
    size_m: Annotated[float, Field(ge=0.0, le=0.2)] = 0.005
    """On each box extent."""
    yaw_deg: Annotated[float, Field(ge=0.0, le=45.0)] = 2.0
    """On object orientations about the vertical."""
    axis_deg: Annotated[float, Field(ge=0.0, le=45.0)] = 2.0
    """On joint axes."""


class ShapesParams(_Strict):
    """The object-shape study (paper V-B): pick-and-place and open-drawer-and-place over catalog objects."""

    objects: Literal["all"] | list[str] = "all"
    """"all" = every catalog object and container (cabinets excluded), or a list of asset names."""
    studies: list[Literal["pick_place", "drawer"]] = ["pick_place", "drawer"]
    repeats: Annotated[int, Field(ge=1, le=100)] = 2


class RobotEvalParams(_Strict):
    runners: Annotated[int, Field(ge=1, le=64)] = 2
    """Local sim runners the flow starts (with their own ROS master) when ``master_uri`` is null."""
    master_uri: str | None = None
    """An existing ROS master whose runners the flow uses (robots or runners on other hosts), e.g.
    http://lab-pc:11311; null = start a local master and ``runners`` sim runners."""
    runner_namespaces: list[str] = []
    """Runners on ``master_uri`` to use, e.g. [/franka, /ur5]; [] = every runner found on that master."""
    backend: str = "sim"
    """Backend of the local runners: sim | moveit."""
    arm: Literal["panda", "ur5"] = "panda"
    repeats: Annotated[int, Field(ge=1, le=100)] = 2
    """Repeats per task: 2 keeps the default run within a minute; the paper reports the mean over 10
    (``dvc exp run -S roboscript.eval.repeats=10``)."""
    perception: str = "ground_truth"
    """ground_truth (the simulator's boxes and poses) | noisy (ground truth + the noise below)."""
    noise: NoiseParams = NoiseParams()
    pose_jitter_m: Annotated[float, Field(ge=0.0, le=0.05)] = 0.005
    """Each repeat displaces the loose objects by up to this much (the sim is otherwise deterministic)."""
    code: Literal["generate", "snippets"] = "generate"
    """generate: the code generator with ``llm`` params (offline by default) writes the code of each task;
    snippets: read it from ``snippets_file``."""
    snippets_file: str | None = None
    """JSON or YAML mapping task id -> code, or a parquet/JSON table with task_id (or query_id) and code columns."""
    tasks: Literal["all"] | list[str] = "all"
    episode_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    """Wall-clock limit of one repeat's code (tool time included)."""
    memory_mb: Annotated[int, Field(ge=64, le=65536)] = 512
    """Address-space budget of the sandboxed code beyond what the interpreter already uses."""
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    """Times an episode is retried on another runner when its runner dies mid-episode."""
    seed: int = 0
    shapes: ShapesParams = ShapesParams()

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from robot.backends import ROBOT_BACKENDS

        return ROBOT_BACKENDS.require(value)

    @field_validator("perception")
    @classmethod
    def _known_perception(cls, value: str) -> str:
        from robot.perception import PERCEPTION_MODES

        return PERCEPTION_MODES.require(value)

    @field_validator("master_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("http://"):
            raise ValueError(f"a ROS master URI looks like http://host:11311, got {value!r}")
        return value

    @field_validator("runner_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for ns in value:
            if not ns.startswith("/") or ns.endswith("/") or " " in ns:
                raise ValueError(f"a runner namespace looks like /runner1, got {ns!r}")
        return value

    @model_validator(mode="after")
    def _snippets(self) -> RobotEvalParams:
        if self.code == "snippets" and not self.snippets_file:
            raise ValueError("code: snippets needs snippets_file")
        return self
