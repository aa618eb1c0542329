"""MuEP evaluation splits from ALFWorld's own test games (alfworld_seen / alfworld_unseen), and ALFWorld's training
games as in-context examples."""

from __future__ import annotations

import logging
import time

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from core.io import atomic_dir, write_parquet
from flows._runtime import main
from tasks.muep import alfworld_games, layout
from tasks.muep.alfworld_splits import (
    PlaySettings,
    TrainGameRecord,
    clear_scene_cache,
    game_metadata,
    play_game,
    select_games,
    summarise,
    train_game_records,
)
from tasks.muep.demos import EpisodeRecord
from tasks.muep.metadata import write_tables
from tasks.muep.planner import PlannerWorker
from tasks.muep.textworld_env import GameEngine
from tasks.params import load_params
from tasks.progress import Progress, StageLog
from tasks.records import to_frame

STAGE = "muep-alfworld"
log = logging.getLogger("embp")


@task(name="play-alfworld-games", cache_policy=NO_CACHE)
def play_games(games: list, metadata_dir: str, settings: PlaySettings) -> tuple[list[EpisodeRecord], dict]:
    clear_scene_cache()
    records, costs = [], {"load_s": 0.0, "plan_s": 0.0}
    engine = GameEngine()
    with PlannerWorker() as planner, Progress(len(games), f"{STAGE}: games", unit="games") as progress:
        for game in games:
            record, cost = play_game(game, metadata_dir, settings, engine, planner)
            records.append(record)
            for k, v in cost.items():
                costs[k] += v
            progress.advance()
    return records, costs


@flow(name=STAGE)
def muep_alfworld(params_file: str | None = None) -> dict:
    """MuEP evaluation splits from ALFWorld's own test games, and its training games as in-context examples."""
    params = load_params(params_file).muep
    demos = params.demos
    with StageLog(STAGE) as slog:
        start = time.perf_counter()
        slog.read(alfworld_games.VALID_ARCHIVE, "ALFWorld's evaluation games")
        games = alfworld_games.read_games(alfworld_games.VALID_ARCHIVE)
        alfworld_games.check_counts(games, alfworld_games.VALID_ARCHIVE, ("valid_seen", "valid_unseen"))
        slog.read(alfworld_games.TRAIN_ARCHIVE, "ALFWorld's training games (in-context examples)")
        train = alfworld_games.read_tasks(alfworld_games.TRAIN_ARCHIVE)
        alfworld_games.check_counts(train, alfworld_games.TRAIN_ARCHIVE, ("train",))
        parse_s = time.perf_counter() - start

        selected = select_games(games, params.alfworld.games)
        settings = PlaySettings(grammar=demos.grammar, search=demos.search, plan_timeout_s=demos.plan_timeout_s,
                                max_plan_length=demos.max_plan_length)
        with atomic_dir(layout.ALFWORLD) as staging:  # built aside, swapped in whole: never half-written
            write_tables([game_metadata(g) for g in selected], staging / "metadata")
            start = time.perf_counter()
            records, costs = play_games(selected, str(staging / "metadata"), settings)
            play_s = time.perf_counter() - start
            index = to_frame(records, EpisodeRecord)
            write_parquet(staging / "episodes.parquet", index)
            examples = train_game_records(train, demos.grammar)
            write_parquet(staging / "train_games.parquet", to_frame(examples, TrainGameRecord))
        clear_scene_cache()
        slog.wrote(layout.ALFWORLD_METADATA, len(selected))
        slog.wrote(layout.ALFWORLD_EPISODES, len(index))
        slog.wrote(layout.ALFWORLD_TRAIN_GAMES, len(examples))
        available = {s: sum(g.split == s for g in games) for s in ("valid_seen", "valid_unseen")}
        report = summarise(index, available, examples) | {"grammar": demos.grammar, "seconds": {
            "parse": round(parse_s, 2), "play": round(play_s, 2), "load_and_replay": round(costs["load_s"], 2),
            "plan": round(costs["plan_s"], 2)}}
        slog.write(layout.REPORTS / "alfworld.json", report)
        log.info("[%s] %s episodes ok; %d excluded", STAGE, report["episodes"], len(report["excluded"]))
        return report


if __name__ == "__main__":
    main(STAGE, muep_alfworld)
