"""One baseline's training run in two halves: :func:`plan_run` checks everything that can be checked without compute
(name, hyper-parameters, device, 4-bit support, base path, data and images); :func:`run` builds, trains, saves and
logs. The flow plans every requested baseline before it runs the first one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.errors import ConfigError, DataError
from tasks import paths
from tasks.muep import layout
from tasks.params import TrackingParams, TrainParams
from tasks.train import tiny
from tasks.train.data import Example, ImageStore, check_window, file_digest, read_split
from tasks.train.families import FAMILIES, Family
from tasks.train.registry import TINY_DEFAULTS, BaselineSpec, get_spec

log = logging.getLogger("embp")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class Plan:
    spec: BaselineSpec
    family: Family
    hyper: object                    # tasks.train.models.Hyper
    profile: str
    device: str
    model_dir: Path
    sft_dir: Path
    train: list[Example]
    held_out: list[Example]
    dataset: dict
    parts: dict[str, str] = field(default_factory=dict)   # full profile: what Family.load gets
    eval_batches: int = 0
    cpu_threads: int | None = None
    image_root: Path = paths.ROOT     # the records' shard paths are relative to it (the repository root)
    projection_init: str | None = None   # MiniGPT-4: the pre-trained llama_proj file (train.projection_init)


def resolve_hyper(spec: BaselineSpec, params: TrainParams):
    from tasks.train.models import Hyper

    base = asdict(spec.defaults) | (TINY_DEFAULTS if params.profile == "tiny" else {})
    chosen = {k: getattr(params, k) for k in ("learning_rate", "batch_size", "grad_accum", "warmup_steps",
                                              "quantize_4bit", "lora_r", "lora_alpha")}
    values = {k: (v if v is not None else base[k]) for k, v in chosen.items()}
    return Hyper(**values, lora_dropout=base["lora_dropout"], adapter_len=base["adapter_len"],
                 adapter_layers=base["adapter_layers"], max_steps=params.max_steps, max_seq_len=params.max_seq_len,
                 history_window=params.history_window, gradient_checkpointing=params.gradient_checkpointing,
                 max_grad_norm=params.max_grad_norm, save_every=params.save_every, seed=params.seed,
                 precision=params.precision)


def check_base(base: str) -> str:
    """A base override is a local model (``LOCAL_MODELS``), an existing local folder or a hub id (``org/name``);
    anything else is an error."""
    from tasks.hf.local_models import is_local_model

    if is_local_model(base):
        return base
    if Path(base).expanduser().exists():
        return str(Path(base).expanduser().resolve())
    if base.startswith(("/", ".", "~")) or not _HUB_ID.match(base):
        raise ConfigError(f"base checkpoint {base!r} does not exist (neither a local model, a local folder nor a hub "
                          "id org/name).")
    return base


class _VocabOnly:
    """Stands in for the tiny tokenizer when only the layer widths of a tiny config matter."""

    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2

    def __len__(self) -> int:
        return tiny.TOKENIZER_VOCAB


def _tiny_llm_config(family: Family):
    return {"llama": tiny.llama_config, "opt": tiny.opt_config, "bloom": tiny.bloom_config}[family.name](_VocabOnly())


def dvc_md5(sft_dir: Path) -> str:
    """DVC's md5 of the SFT folder (what dvc.lock records for it), from its contents (:func:`core.io.dvc_md5`)."""
    from core.io import dvc_md5 as content_md5

    return content_md5(sft_dir)


def plan_run(name: str, params: TrainParams, *, sft_dir: Path | None = None, base: str | None = None,
             image_root: Path | None = None) -> Plan:
    from tasks.train.build import pick_device
    from tasks.train.models import check_4bit

    spec = get_spec(name)
    family = FAMILIES[spec.family]
    hyper = resolve_hyper(spec, params)
    device = pick_device(params.device)
    parts: dict[str, str] = {}
    if params.profile == "full":
        parts = dict(spec.checkpoints)
        if base is not None:
            parts["model" if "model" in parts else "llm"] = check_base(base)
    elif base is not None:
        raise ConfigError("a base checkpoint override applies to the full profile only; the tiny profile builds "
                          "its own random base.")
    if hyper.quantize_4bit:
        if spec.method == "qlora" and device == "cpu":
            from tasks.train.build import llm_config

            config = _tiny_llm_config(family) if params.profile == "tiny" else llm_config(family, parts)
            check_4bit(spec, device, config)
        else:
            check_4bit(spec, device)
    projection = None
    if params.projection_init is not None:
        if spec.family != "minigpt4":
            raise ConfigError(f"train.projection_init is for minigpt4 (its pre-trained llama_proj), not {spec.name}.",
                              hint="The other LMMs load their projection with their checkpoint; set it to null.")
        found = Path(params.projection_init).expanduser()
        found = found if found.is_absolute() else paths.ROOT / found
        if not found.is_file():
            raise ConfigError(f"train.projection_init: {params.projection_init} is not a file.",
                              hint="Give MiniGPT-4's released checkpoint (.pth) or a .safetensors file with "
                                   "llama_proj.weight and llama_proj.bias.")
        projection = str(found.resolve())
    sft_dir = Path(sft_dir) if sft_dir is not None else layout.SFT
    train = read_split(sft_dir / "train.jsonl")
    check_window(train, hyper.history_window, str(sft_dir / "train.jsonl"))
    if params.max_train_records is not None:
        train = train[: params.max_train_records]
    held_out = read_split(sft_dir / "seen_test.jsonl") if params.eval_batches and \
        (sft_dir / "seen_test.jsonl").exists() else []
    image_root = Path(image_root) if image_root is not None else paths.ROOT
    if family.kind == "vision":
        store = ImageStore(image_root)
        missing = store.missing(train + held_out)
        store.close()
        if missing:
            raise DataError(f"{spec.name} is a vision baseline but {len(missing)} of {len(train) + len(held_out)} "
                            f"records have no image: {', '.join(missing[:3])}.",
                            hint="The SFT records and the demonstration shards disagree: rerun muep-demos and "
                                 "muep-sft.")
    dataset = {"path": paths.rel(sft_dir), "sha256": file_digest([sft_dir / "train.jsonl"]),
               "dvc_md5": dvc_md5(sft_dir), "records": len(train), "held_out_records": len(held_out)}
    model_dir = Path(params.output_dir)
    model_dir = (model_dir if model_dir.is_absolute() else paths.ROOT / model_dir) / spec.name
    return Plan(spec, family, hyper, params.profile, device, model_dir, sft_dir, train, held_out, dataset, parts,
                params.eval_batches, params.cpu_threads, image_root, projection)


def fingerprint(plan: Plan) -> str:
    blob = json.dumps({"baseline": plan.spec.name, "profile": plan.profile, "hyper": plan.hyper.as_dict(),
                       "data": plan.dataset["sha256"], "records": plan.dataset["records"], "parts": plan.parts}
                      | ({"projection": plan.projection_init} if plan.projection_init else {}), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run(plan: Plan, tracking: TrackingParams, on_step=None) -> dict:
    """Build, train (resuming if a checkpoint of this configuration exists), save, log. Returns the report."""
    from tasks.train.session import TrainSession

    return TrainSession(plan, tracking).train(on_step)
