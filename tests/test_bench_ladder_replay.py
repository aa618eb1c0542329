"""bench/ladder_replay.py: a kept run's cached requests put back in the order each game asked them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "ladder_replay.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_ladder_replay", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entry(root: Path, key: str, messages: list[dict], text: str) -> None:
    path = root / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "text": text, "request": {"messages": messages, "max_tokens": 8}}))


def test_requests_are_grouped_by_game_and_ordered_as_the_game_asked_them(tmp_path):
    system = {"role": "system", "content": "rules"}
    game_b = [system, {"role": "user", "content": "B: you are in a kitchen"}]
    game_a = [system, {"role": "user", "content": "A: you are in a bathroom"}]
    # file names (hashes) in another order than the games' steps
    _entry(tmp_path, "aa01", game_b + [{"role": "assistant", "content": "look"}, {"role": "user", "content": "ok"}],
           "go to sink 1")
    _entry(tmp_path, "ff02", game_b, "look")
    _entry(tmp_path, "bb03", game_a, "inventory")
    games = _bench().games(tmp_path)
    assert [[e["key"] for e in g] for g in games] == [["bb03"], ["ff02", "aa01"]]


def test_an_empty_cache_says_what_is_expected(tmp_path):
    with pytest.raises(SystemExit, match="no cached answers"):
        _bench().games(tmp_path)
