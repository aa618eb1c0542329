"""From a base model to the model that trains: 4-bit checks, the three fine-tuning methods, the trainable set,
adapter files.

Methods (a baseline's ``method``):

* ``qlora`` -- peft LoRA on the listed linear layers of a (4-bit NF4, double-quantised) base;
* ``projection`` -- everything frozen but the family's projection module;
* ``llama_adapter_v2`` -- :class:`tasks.train.adapters.LlamaAdapterV2` around the LLaMA and the CLIP tower.

Each method marks its parameters trainable by *structure* (peft's LoRA layers, the projection module, the adapter
modules); :func:`check_trainable` then compares that set with the registry's declaration, so a drift between the
two stops a run before it trains.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from core.errors import ConfigError
from tasks.train.baselines import BaselineSpec
from tasks.train.families import Family

ADAPTER_FILE = "trainable.safetensors"
"""The trainable tensors by parameter name: resume checkpoints, and the final adapter of baselines PEFT does not
describe (projections, LLaMA-Adapter-v2)."""
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The final adapter of a LoRA baseline, in PEFT's own format (``PeftModel.save_pretrained``)."""
MIN_4BIT_WIDTH_CPU = 64


@dataclass(frozen=True)
class Hyper:
    """Resolved hyper-parameters of one run (registry defaults with the params.yaml overrides applied)."""

    learning_rate: float
    batch_size: int
    grad_accum: int
    warmup_steps: int
    max_steps: int
    max_seq_len: int
    history_window: int
    quantize_4bit: bool
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    adapter_len: int
    adapter_layers: int
    gradient_checkpointing: bool
    max_grad_norm: float
    save_every: int
    seed: int
    precision: str = "auto"       # "auto" | "bfloat16" | "float32" (train.precision); default: cards of older runs

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------------------------
# 4-bit


def quantization_config(compute_dtype: torch.dtype):
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def check_4bit(spec: BaselineSpec, device: str, model_config=None) -> None:
    """Can this run quantise to 4-bit here? A :class:`ConfigError` naming the reason if not. ``model_config``
    (a transformers config of the causal LM) lets the CPU width limit be checked on a meta-device copy."""
    if spec.method != "qlora":
        raise ConfigError(f"train.quantize_4bit is for the Q-LoRA baselines, not {spec.name} ({spec.method}): the "
                          "paper freezes its 16-bit model and trains the projection/adapters.",
                          hint="Set train.quantize_4bit to null (registry default) or false.")
    try:
        import bitsandbytes  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means no 4-bit here
        raise ConfigError(f"4-bit quantisation needs bitsandbytes, which does not import here ({exc}).") from None
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"bitsandbytes has no 4-bit kernels for device {device!r} (cpu and cuda only).")
    if device == "cpu" and model_config is not None:
        narrow = narrow_linears(model_config)
        if narrow:
            raise ConfigError(f"4-bit on CPU needs every quantised linear layer to be >= {MIN_4BIT_WIDTH_CPU} wide "
                              f"(bitsandbytes' CPU kernels fail below); {spec.name} has {len(narrow)} narrower, e.g. "
                              f"{narrow[0]}.", hint="Train on a GPU, or set train.quantize_4bit: false.")


def narrow_linears(model_config) -> list[str]:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config)
    out = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and not name.endswith("lm_head"):
            width = min(module.in_features, module.out_features)
            if width < MIN_4BIT_WIDTH_CPU:
                out.append(f"{name} ({module.in_features}->{module.out_features})")
    return out


def linear4bit_modules(model: nn.Module) -> list[nn.Module]:
    import bitsandbytes as bnb

    return [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


# --------------------------------------------------------------------------------------------------------------------
# Preparing the model


def _submodule(model: nn.Module, dotted: str) -> nn.Module:
    for part in dotted.split("."):
        model = getattr(model, part)
    return model


def _freeze(model: nn.Module) -> None:
    for p in model.parameters():
        p.requires_grad_(False)


def _checkpointing(model: nn.Module, on: bool) -> None:
    """Activation (gradient) checkpointing, non-reentrant (frozen inputs are fine)."""
    if not on:
        return
    if hasattr(model, "activation_checkpointing_enable"):        # transformers >= 5.2's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    elif hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def prepare(spec: BaselineSpec, family: Family, base: nn.Module, hyper: Hyper) -> nn.Module:
    """Freeze the base, attach the method's trainable parts (seeded), float32 trainables."""
    torch.manual_seed(hyper.seed)
    if spec.method == "qlora":
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if getattr(base, "is_loaded_in_4bit", False):    # freezes, casts the unquantised rest to float32
            base = prepare_model_for_kbit_training(base, use_gradient_checkpointing=False)
        else:
            _freeze(base)
        if hyper.gradient_checkpointing:
            _checkpointing(base, True)
            base.enable_input_require_grads()
        model = get_peft_model(base, LoraConfig(r=hyper.lora_r, lora_alpha=hyper.lora_alpha,
                                                lora_dropout=hyper.lora_dropout, bias="none", task_type="CAUSAL_LM",
                                                target_modules=list(spec.lora_targets)))
    elif spec.method == "projection":
        model = base
        _freeze(model)
        _submodule(model, family.projection).requires_grad_(True)
        _checkpointing(getattr(model, "language_model", model), hyper.gradient_checkpointing)
    elif spec.method == "llama_adapter_v2":
        from tasks.train.adapters import BiasScaleLinear, LlamaAdapterV2

        layers = base.language_model.config.num_hidden_layers
        model = LlamaAdapterV2(base.language_model, base.vision_model, hyper.adapter_len,
                               min(hyper.adapter_layers, layers))
        _freeze(model)
        for module in model.modules():      # MuEP: "only the bias of adapter layers" (tasks/train/adapters.py)
            if isinstance(module, BiasScaleLinear):
                module.v2_bias.requires_grad_(True)
        _checkpointing(model, hyper.gradient_checkpointing)
    else:
        raise ConfigError(f"unknown fine-tuning method {spec.method!r} for {spec.name}.")
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model


def trainable_names(model: nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def declared_trainable(spec: BaselineSpec, model: nn.Module) -> set[str]:
    patterns = [re.compile(p) for p in spec.trainable]
    return {n for n, _ in model.named_parameters() if any(p.search(n) for p in patterns)}


def check_trainable(spec: BaselineSpec, model: nn.Module) -> None:
    actual, declared = trainable_names(model), declared_trainable(spec, model)
    if not actual:
        raise ConfigError(f"{spec.name}: the prepared model has no trainable parameter.")
    if actual != declared:
        extra, missing = sorted(actual - declared), sorted(declared - actual)
        raise ConfigError(f"{spec.name}: trainable parameters differ from the registry: trainable but not declared "
                          f"{extra[:3]}, declared but frozen {missing[:3]}.")


def count(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts (4-bit weights count as stored elements x 2)."""
    trainable = total = 0
    for p in model.parameters():
        n = p.numel() * (2 if p.dtype == torch.uint8 else 1)
        total += n
        trainable += n if p.requires_grad else 0
    return trainable, total


# --------------------------------------------------------------------------------------------------------------------
# Adapter files


def trainable_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().to("cpu").contiguous() for n, p in model.named_parameters() if p.requires_grad}


def save_adapter(model: nn.Module, directory: Path) -> Path:
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ADAPTER_FILE
    save_file(trainable_state(model), str(path))
    return path


def load_adapter(model: nn.Module, directory: Path) -> None:
    """Load the trainable tensors into an identically prepared model; every trainable name must be in the file."""
    from safetensors.torch import load_file

    path = Path(directory) / ADAPTER_FILE
    if not path.exists():
        raise ConfigError(f"adapter file {path} does not exist.")
    state = load_file(str(path))
    params = dict(model.named_parameters())
    expected = trainable_names(model)
    if set(state) != expected:
        raise ConfigError(f"{path} does not match the model: missing {sorted(expected - set(state))[:3]}, "
                          f"unexpected {sorted(set(state) - expected)[:3]}.")
    with torch.no_grad():
        for name, tensor in state.items():
            params[name].copy_(tensor.to(params[name].device, params[name].dtype))


# --------------------------------------------------------------------------------------------------------------------
# The final adapter: PEFT's format where PEFT applies


def is_peft(model: nn.Module) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "save_pretrained")


def save_final_adapter(model: nn.Module, directory: Path, base_id: str) -> list[str]:
    """The trained adapter in ``directory``. A LoRA model goes in PEFT's own format (``adapter_config.json`` +
    ``adapter_model.safetensors``: ``PeftModel.from_pretrained(base, directory)`` loads it, vLLM serves it as a LoRA
    module) with ``base_model_name_or_path`` = ``base_id``; anything else as ``trainable.safetensors``. Returns the
    files written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if not is_peft(model):
        return [save_adapter(model, directory).name]
    embeddings = False
    for config in model.peft_config.values():
        config.base_model_name_or_path = base_id
        targets = config.target_modules or ()
        targets = [targets] if isinstance(targets, str) else list(targets)
        embeddings |= any(name in t for t in targets for name in ("embed_tokens", "lm_head", "wte", "word_embeddings"))
    # No embedding layer is trained (LoRA targets the projections; no baseline resizes its vocabulary), so none is
    # saved -- said here rather than left to PEFT's "auto", which looks the base up on the Hub to decide (a network
    # lookup, and a warning on every offline run).
    model.save_pretrained(directory, save_embedding_layers=embeddings)
    _pin_peft_files(directory, base_id)
    return sorted(p.name for p in directory.iterdir())


def _pin_peft_files(directory: Path, base_id: str) -> None:
    """Make PEFT's files the same bytes for the same training: ``target_modules`` is a set that PEFT writes in the
    process's hash order, and its model card names the base by the folder it was loaded from (an absolute path of
    this machine). Sorted, and the card names ``base_id`` like adapter_config.json does."""
    import json

    config_path = directory / PEFT_FILES[0]
    config = json.loads(config_path.read_text(encoding="utf-8"))
    for key in ("target_modules", "modules_to_save", "exclude_modules"):
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    card = directory / "README.md"
    if card.exists():
        lines = card.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("base_model: "):
                lines[i] = f"base_model: {base_id}"
            elif line.startswith("- base_model:adapter:"):
                lines[i] = f"- base_model:adapter:{base_id}"
        card.write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_final_adapter(model: nn.Module, directory: Path) -> None:
    """Load what :func:`save_final_adapter` wrote into an identically prepared model (every trainable tensor must be
    in the files, and nothing else)."""
    directory = Path(directory)
    if not is_peft(model):
        load_adapter(model, directory)
        return
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = directory / PEFT_FILES[1]
    if not path.exists():
        raise ConfigError(f"adapter file {path} does not exist (a LoRA baseline's adapter is saved in PEFT's format: "
                          f"{', '.join(PEFT_FILES)}).")
    state = load_file(str(path))
    result = set_peft_model_state_dict(model, state)
    missing = [k for k in result.missing_keys if "lora_" in k]
    loaded = {n for n in trainable_names(model)}
    if result.unexpected_keys or missing or len(state) != len(loaded):
        raise ConfigError(f"{path} does not match the model: missing {missing[:3]}, unexpected "
                          f"{list(result.unexpected_keys)[:3]} ({len(state)} tensors for {len(loaded)} trainable).")
