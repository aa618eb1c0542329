"""Code tests: the params schema names the offending key and the reason, and a bad file stops a stage before it
writes anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError
from tasks.params import (
    ALL_FLOORPLANS,
    DEFAULT_UNSEEN,
    Params,
    load_params,
    profile_overrides,
    room_type_of,
)

REPO = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def _base() -> dict:
    return yaml.safe_load((REPO / "params.yaml").read_text())


def test_repository_params_are_valid_and_match_schema_defaults():
    params = load_params(REPO / "params.yaml")
    assert isinstance(params, Params)
    assert params.llm.backend == "offline"
    assert params.muep.scenes.selected() == list(ALL_FLOORPLANS)
    assert tuple(params.muep.scenes.unseen) == DEFAULT_UNSEEN
    # params.yaml spells out every key of the schema: nothing relies on a hidden default.
    from tasks.params import flatten

    assert set(flatten(_base())) == set(flatten(Params().model_dump()))


@pytest.mark.parametrize(
    ("dotted", "value", "expected"),
    [
        ("muep.generate.task_per_request", 3, "muep.generate.task_per_request: unknown key"),
        ("muep.generate.tasks_per_request", "many", "muep.generate.tasks_per_request: Input should be a valid integer"),
        ("muep.generate.tasks_per_request", 0, "muep.generate.tasks_per_request: Input should be greater than or equal to 1"),
        ("llm.temperature", 3.5, "llm.temperature: Input should be less than or equal to 2"),
        ("llm.backend", "gpt5-magic", "llm.backend: unknown backend 'gpt5-magic'"),
        ("llm.base_url", "localhost:8000", "llm.base_url: must start with http:// or https://"),
        ("muep.scenes.unseen", [10, 999], "muep.scenes.unseen: FloorPlan999 does not exist"),
        ("muep.scenes.floorplans", "some", "muep.scenes.floorplans"),
        ("muep.metadata.max_instances_per_type", 0, "muep.metadata.max_instances_per_type"),
        ("llm.offline.noise", 1.5, "llm.offline.noise"),
        ("llm.extra", {"a": 1}, "llm.extra: unknown key"),
    ],
)
def test_schema_error_names_the_dotted_key_and_reason(tmp_path, dotted, value, expected):
    data = _base()
    node = data
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    with pytest.raises(ConfigError) as info:
        load_params(_write(tmp_path, data))
    assert expected in str(info.value)


def test_cross_field_rules(tmp_path):
    data = _base()
    data["muep"]["metadata"].update(min_instances_per_type=4, max_instances_per_type=2)
    with pytest.raises(ConfigError, match=r"muep\.metadata: .*max_instances_per_type must be >= min"):
        load_params(_write(tmp_path, data))


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, "llm:\n  backend: offline\n  model: [unclosed\nmuep: {}\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+"):
        load_params(path)


def test_duplicate_key_is_an_error_not_a_silent_override(tmp_path):
    path = _write(tmp_path, "llm:\n  temperature: 0.1\n  temperature: 0.9\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'temperature' \(first at line 2\)"):
        load_params(path)


def test_top_level_must_be_a_mapping(tmp_path):
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_params(_write(tmp_path, "- a\n- b\n"))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "nope.yaml")


def test_room_types_follow_the_floorplan_blocks():
    assert [room_type_of(n) for n in (1, 30, 201, 230, 301, 330, 401, 430)] == [
        "kitchen", "kitchen", "living_room", "living_room", "bedroom", "bedroom", "bathroom", "bathroom"]
    with pytest.raises(ValueError):
        room_type_of(31)
    assert len(ALL_FLOORPLANS) == 120
    # three unseen floorplans per room type
    assert sorted(room_type_of(n) for n in DEFAULT_UNSEEN) == sorted(
        ["kitchen", "living_room", "bedroom", "bathroom"] * 3)


def test_paper_profile_gives_valid_dotted_overrides():
    overrides = profile_overrides("paper")
    assert overrides["muep.generate.requests_per_scene"] > 1
    assert all("." in key for key in overrides)
    with pytest.raises(ConfigError, match="no profile 'nope'"):
        profile_overrides("nope")


def test_bad_params_stop_the_stage_before_anything_is_written(tmp_path):
    """A stage run through its real entry point exits 2 with one paragraph naming the key, and writes nothing."""
    data = _base()
    data["muep"]["generate"]["tasks_per_request"] = -1
    bad = _write(tmp_path, data)
    env = os.environ | {"EMBP_ROOT": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "flows.muep_metadata", "--params", str(bad)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "muep.generate.tasks_per_request" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "reports").exists()
