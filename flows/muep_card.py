"""MuEP dataset card: statistics, figures and a Markdown page describing the expert demonstrations."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import paths
from tasks.muep import layout
from tasks.muep.card import build_card
from tasks.params import load_params
from tasks.progress import StageLog

STAGE = "muep-card"
DEMOS = layout.DEMOS


@task(name="build-card", cache_policy=NO_CACHE)
def build(slog: StageLog) -> dict:
    slog.read(DEMOS / "episodes.parquet")
    slog.read(DEMOS / "splits.json")
    slog.read(layout.ALFWORLD_TRAIN_GAMES, "ALFWorld's walkthroughs, for the episode-length comparison")
    out = build_card(DEMOS, layout.REPORTS, paths.ROOT, walkthroughs=layout.ALFWORLD_TRAIN_GAMES)
    for figure in out["figures"].values():
        slog.wrote(figure)
    slog.wrote(out["card"])
    total = out["stats"].total
    lengths = out["lengths"]
    return {"episodes": total.episodes, "image_text_pairs": total.pairs, "example": out["example"],
            "pairs_per_episode": round(lengths.pairs, 3), "actions_per_episode": round(lengths.actions, 3)}


@flow(name=STAGE)
def muep_card(params_file: str | None = None) -> dict:
    """MuEP dataset card: statistics, figures and a Markdown page describing the expert demonstrations."""
    load_params(params_file)  # reads no key, but a stage never runs on an invalid params file
    with StageLog(STAGE) as slog:
        return build(slog)


if __name__ == "__main__":
    main(STAGE, muep_card)
