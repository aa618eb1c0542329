"""The leakage test: on the data the default pipeline builds, train, seen_test and unseen_test -- and ALFWorld's
evaluation games, alfworld_seen and alfworld_unseen -- never share an initial state; #Seen floorplans are training
floorplans, #Unseen floorplans are not (MuEP section 4.2: #Seen is familiar rooms with different instantiations of
object locations and quantities)."""

from __future__ import annotations

from itertools import combinations

import pandas as pd
import pytest

pytestmark = [pytest.mark.dvc, pytest.mark.prefect]

SPLITS = ("train", "seen_test", "unseen_test", "alfworld_seen", "alfworld_unseen")


@pytest.fixture(scope="module")
def built(default_data):
    data = default_data / "data" / "muep"
    episodes = pd.concat([pd.read_parquet(data / "demos" / "episodes.parquet"),
                          pd.read_parquet(data / "alfworld" / "episodes.parquet")], ignore_index=True)
    scenes = pd.concat([pd.read_parquet(data / "metadata" / "scenes.parquet"),
                        pd.read_parquet(data / "alfworld" / "metadata" / "scenes.parquet")], ignore_index=True)
    return episodes, scenes


def test_every_split_is_there_and_names_its_initial_states(built):
    episodes, scenes = built
    assert set(episodes[episodes.status == "ok"].split) == set(SPLITS)
    state_of = dict(zip(scenes.scene, scenes.initial_state, strict=True))
    assert episodes.initial_state.str.fullmatch(r"[0-9a-f]{16}").all()
    assert (episodes.initial_state == episodes.scene.map(state_of)).all()  # the episode's state is its scene's
    split_of = dict(zip(scenes.scene, scenes.state_split, strict=True))
    assert (episodes.split == episodes.scene.map(split_of)).all()  # the split is decided per initial state


def test_no_initial_state_is_in_two_splits(built):
    episodes, scenes = built
    for rows in (episodes, pd.DataFrame({"split": scenes.state_split, "initial_state": scenes.initial_state})):
        states = {s: set(rows[rows.split == s].initial_state) for s in SPLITS}
        for a, b in combinations(SPLITS, 2):
            assert not states[a] & states[b], (a, b, sorted(states[a] & states[b])[:3])


def test_seen_floorplans_are_training_floorplans_and_unseen_ones_are_not(built):
    episodes, scenes = built
    train = set(scenes[scenes.state_split == "train"].floorplan)
    assert len(train) == 108
    for split in ("seen_test", "alfworld_seen"):
        assert set(episodes[episodes.split == split].floorplan) <= train, split
        assert set(scenes[scenes.state_split == split].floorplan) <= train, split
    for split in ("unseen_test", "alfworld_unseen"):
        assert not set(scenes[scenes.state_split == split].floorplan) & train, split
