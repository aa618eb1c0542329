"""MuEP SFT export: instruction-following records (task, history, observation, image ref -> next action) per split."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows._runtime import main
from tasks import paths
from tasks.muep import layout
from tasks.muep.demos import SPLITS
from tasks.muep.sft import export_sft
from tasks.params import SFTParams, load_params
from tasks.progress import StageLog

STAGE = "muep-sft"
DEMOS = layout.DEMOS
SFT = layout.SFT


@task(name="export-sft", cache_policy=NO_CACHE)
def export(params: SFTParams, slog: StageLog) -> dict:
    slog.read(DEMOS / "episodes.parquet")
    slog.read(DEMOS / "splits.json")
    report = export_sft(DEMOS, SFT, params.history_window, paths.ROOT)
    for split in SPLITS:
        slog.wrote(SFT / f"{split}.jsonl", report["records_by_split"][split])
    slog.write(layout.REPORTS / "sft.json", report)
    return report


@flow(name=STAGE)
def muep_sft(params_file: str | None = None) -> dict:
    """MuEP SFT export: instruction-following records (task, history, observation, image ref -> next action)."""
    params = load_params(params_file).muep.sft
    with StageLog(STAGE) as slog:
        return export(params, slog)


if __name__ == "__main__":
    main(STAGE, muep_sft)
