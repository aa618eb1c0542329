"""Typed schema of the ``roboscript:`` section of ``params.yaml`` (mounted on ``tasks.params.Params``): world
sampling, queries, code generation and the robot evaluation with its ablation and shape study. The table, robot and
perception settings a runner goal carries come from the contract (``robot.contract.params``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from core.plugins import PERCEPTION_MODES, ROBOT_BACKENDS
from core.schema import Strict
from robot.contract.params import NoiseParams, PipelineParams, RobotParams, TableParams


class WorldsParams(Strict):
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
    benchmark_worlds: Literal["ours", "public"] = "public"
    """The worlds of the eight benchmark tasks (tasks/roboscript/benchmark_tasks.yaml): ``ours`` (a 4-drawer cabinet
    on the table, objects re-laid round it) or ``public`` (the public eval worlds: cabinet_1076 on the floor behind
    the robot, every object at its public pose, on the public table)."""

    @model_validator(mode="after")
    def _ranges(self) -> WorldsParams:
        if self.max_containers < self.min_containers:
            raise ValueError("max_containers must be >= min_containers")
        if self.max_objects < self.min_objects:
            raise ValueError("max_objects must be >= min_objects")
        return self


class QueriesParams(Strict):
    per_world: Annotated[int, Field(ge=1, le=200)] = 5
    """Task queries asked of the LLM per world (the paper's dataset has ~45 per world)."""
    max_words: Annotated[int, Field(ge=3, le=200)] = 40
    """Longer lines are rejected as not a single task."""


class CodegenParams(Strict):
    n_examples: Annotated[int, Field(ge=0, le=10)] = 10
    """Few-shot query -> code examples in the main agent's prompt (the file has ten, as the paper)."""
    max_depth: Annotated[int, Field(ge=0, le=10)] = 3
    """Sub-agent levels: helpers called by helpers are written down to this depth; deeper ones stay undefined."""
    max_helpers: Annotated[int, Field(ge=0, le=100)] = 8
    """Sub-agent requests per snippet at most, whatever the depth."""
    max_queries: Annotated[int, Field(ge=1)] | None = None
    """Generate code for the first N queries only; null = every query."""


#: The ablation settings of paper V-C (Figs. 7-8): where the perception tools' results and the planning scene come
#: from. ``gt`` runs the ground_truth mode; the others run the pipeline with these sources.
ABLATION_SETTINGS: dict[str, dict[str, str]] = {
    "gt": {"detection": "ground_truth", "planning_scene": "ground_truth"},
    "gt_planning_scene": {"detection": "perceived", "planning_scene": "ground_truth"},
    "gt_detection": {"detection": "ground_truth", "planning_scene": "perceived"},
    "no_gt": {"detection": "perceived", "planning_scene": "perceived"},
    "detector_model": {"detection": "perceived", "planning_scene": "ground_truth"},
}
#: Settings whose 2-D grounding is a model rather than the simulator's segmentation masks (``sim-seg``):
#: ``detector_model`` = ``gt_planning_scene`` with the tiny random OWL-ViT of tasks/roboscript/eval/tiny_detector.py.
DETECTOR_SETTINGS = ("detector_model",)


class AblationParams(Strict):
    """The perception ablation (paper V-C): pick-and-place and open-drawer-and-place over the best-grasped objects."""

    objects: list[str] = ["apple", "blue_block", "gelatin_box", "tomato_soup_can"]
    """Catalog assets (the paper: the 10 objects with the highest grasp success in the shape study)."""
    studies: list[Literal["pick_place", "drawer"]] = ["pick_place", "drawer"]
    settings: list[Literal["gt", "gt_planning_scene", "gt_detection", "no_gt", "detector_model"]] = \
        list(ABLATION_SETTINGS)
    repeats: Annotated[int, Field(ge=1, le=100)] = 2

    @field_validator("objects", "studies", "settings")
    @classmethod
    def _non_empty(cls, value: list) -> list:
        if not value:
            raise ValueError("must name at least one")
        if len(set(value)) != len(value):
            raise ValueError(f"names repeat: {value}")
        return value


class ShapesParams(Strict):
    """The object-shape study (paper V-B): pick-and-place and open-drawer-and-place over catalog objects."""

    objects: Literal["all"] | list[str] = "all"
    """"all" = every catalog object and container (cabinets excluded), or a list of asset names."""
    studies: list[Literal["pick_place", "drawer"]] = ["pick_place", "drawer"]
    repeats: Annotated[int, Field(ge=1, le=100)] = 2


class RobotEvalParams(Strict):
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
    """ground_truth (the simulator's boxes and poses) | noisy (ground truth + the noise below) | perceived (the
    perception pipeline below)."""
    noise: NoiseParams = NoiseParams()
    pipeline: PipelineParams = PipelineParams()
    pose_jitter_m: Annotated[float, Field(ge=0.0, le=0.05)] = 0.005
    """Each repeat displaces the loose objects by up to this much (the sim is otherwise deterministic)."""
    code: Literal["generate", "snippets"] = "generate"
    """generate: the code generator with ``llm`` params (offline by default) writes the code of each task;
    snippets: read it from ``snippets_file``."""
    snippets_file: str | None = None
    """JSON or YAML mapping task id -> code, or a parquet/JSON table with task_id (or query_id) and code columns."""
    tasks: Literal["all"] | list[str] = "all"
    offline_noise: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """The offline coder's deliberate mistakes (``llm.offline.noise``) in the benchmark's code; null = none. The
    ``llm.offline.noise`` knob feeds dataset generation only, so a benchmark result never carries injected noise
    unless this key asks for it."""
    episode_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    """Wall-clock limit of one repeat's code (tool time included)."""
    memory_mb: Annotated[int, Field(ge=64, le=65536)] = 512
    """Address-space budget of the sandboxed code beyond what the interpreter already uses."""
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    """Times an episode is retried on another runner when its runner dies mid-episode."""
    isolation: Literal["auto", "bwrap", "none"] = "auto"
    """How the runners confine generated code (docs/robot.md, "Sandbox"): auto and bwrap run it in bubblewrap's
    namespaces and refuse to start where bubblewrap cannot create them; none runs it without namespaces (the
    restricted compiler, uid 65534, rlimits and seccomp still apply) and warns on every episode. Goals carry it:
    a runner without namespaces refuses a goal that asks for auto or bwrap."""
    motion_failure: Literal["return_false", "raise"] = "return_false"
    """What a motion tool does when the robot cannot plan or execute it (robot/contract/outcomes.py):
    return_false -- the public RoboScript contract: it returns False, the code goes on and the repeat is scored on
    the final state; raise -- it raises RobotError, the repeat ends robot_error and scores 0 (stricter)."""
    grasp: Literal["rigid", "contact"] = "contact"
    """How the sim holds what it grasps (robot/backends/sim.py, docs/robot.md "Grasping with contacts"): contact
    (the default) -- only the fingers' force and friction hold it, so it can slip, turn in the hand or fall; rigid
    -- a loose object both fingers touch follows the hand rigidly (Gazebo's grasp plugin; for debugging)."""
    seed: int = 0
    shapes: ShapesParams = ShapesParams()
    ablation: AblationParams = AblationParams()

    def episode_settings(self) -> dict:
        """The runner-goal fields (``robot/episode.py``) every episode of this evaluation shares: how perception
        works, the jitter, seed, limits and the isolation the runner must give the code."""
        return {"perception": self.perception, "noise": self.noise.model_dump(),
                "pipeline": self.pipeline.model_dump(mode="json"), "pose_jitter_m": self.pose_jitter_m,
                "seed": self.seed, "timeout_s": self.episode_timeout_s, "memory_mb": self.memory_mb,
                "isolation": self.isolation, "motion_failure": self.motion_failure, "grasp": self.grasp}

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return ROBOT_BACKENDS.require(value)

    @field_validator("perception")
    @classmethod
    def _known_perception(cls, value: str) -> str:
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


class RoboScriptParams(Strict):
    worlds: WorldsParams = WorldsParams()
    queries: QueriesParams = QueriesParams()
    codegen: CodegenParams = CodegenParams()
    eval: RobotEvalParams = RobotEvalParams()  # robot evaluation on ROS runners (robot/contract/params.py, docs/robot.md)
