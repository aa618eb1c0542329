"""SmolLM2-135M's learning curve on MuEP (issue #34, item 3): Q-LoRA on nested subsets of the SFT export, one per
size of ``ladder.curve.sizes`` (0 = zero-shot), each played on the same fixed ALFWorld games (a stratified subset of
ladder-muep's) by the ``hf`` agent; one MLflow run per point and split in the muep-eval experiment (tag
``ladder_stage: ladder-curve``), ``reports/ladder/curve.json`` and ``curve.md``. Off in the default run (sizes: []);
the ladder profile runs it. docs/ladder-muep.md."""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace

from prefect import flow

from flows._imports import code_digest
from flows._runtime import main
from tasks import paths
from tasks.ladder_curve import (
    AGENT,
    MODELS,
    REPORT,
    TABLE,
    TIMED_TABLE,
    TRAJECTORIES,
    curve_games,
    off_report,
    run_curve,
    table_md,
)
from tasks.ladder_muep import log_split_runs, read_alfworld_games
from tasks.muep import layout
from tasks.muep.eval.agents import AGENTS
from tasks.muep.eval.store import file_digest, fingerprint
from tasks.params import load_params
from tasks.progress import StageLog

STAGE = "ladder-curve"
log = logging.getLogger("embp")


@flow(name=STAGE)
def ladder_curve(params_file: str | None = None) -> dict:
    """SmolLM2-135M's learning curve: Q-LoRA on nested subsets of the SFT export, each played on the same games."""
    params = load_params(params_file)
    ladder = params.ladder
    curve = ladder.curve
    with StageLog(STAGE) as slog:
        if not curve.sizes:
            log.info("[%s] ladder.curve.sizes is empty: the curve is off (the ladder profile runs it)", STAGE)
            shutil.rmtree(TRAJECTORIES, ignore_errors=True)
            shutil.rmtree(MODELS, ignore_errors=True)
            TRAJECTORIES.mkdir(parents=True, exist_ok=True)
            MODELS.mkdir(parents=True, exist_ok=True)
            slog.write(REPORT, off_report())
            slog.write(TABLE, "# Learning curve\n\nOff: `ladder.curve.sizes` is empty (the ladder profile runs it; "
                       "docs/ladder-muep.md).\n")
            return {}
        alf = read_alfworld_games("the learning curve")
        table, index, version, episodes_sha = alf.table, alf.index, alf.version, alf.episodes_sha
        slog.read(table, f"{len(index)} games")
        specs, games = curve_games(index, ladder.muep, curve.games_per_split)
        sft_train = layout.SFT / "train.jsonl"
        slog.read(sft_train)
        data = file_digest([table, sft_train, *sorted(layout.ALFWORLD_METADATA.glob("*.parquet"))])
        code = code_digest("flows.ladder_curve")
        grammar = ",".join(sorted({s.grammar for s in specs}))
        log.info("[%s] %d points (%s records) x %d games (%s) as the hf agent [%s]", STAGE, len(curve.sizes),
                 ", ".join(map(str, curve.sizes)), len(specs),
                 ", ".join(f"{s}: {c['chosen']}" for s, c in games.items()), curve.action_selection)
        shutil.rmtree(TRAJECTORIES, ignore_errors=True)
        shutil.rmtree(MODELS, ignore_errors=True)             # no subset or adapter of other sizes stays
        done = run_curve(curve, ladder.muep, ladder.seed, params.real_model.train, params.tracking, sft_train, specs,
                         games, layout.METADATA, layout.ALFWORLD_METADATA, params.muep.sft.history_window,
                         on_point=lambda p: log.info("[%s] %d records: %s", STAGE, p.size, p.facts))
        for point, point_row in zip(done.points, done.report["rows"], strict=True):
            info = replace(AGENTS.load(AGENT).describe(point.ev), label=point.label)
            point_fp = fingerprint(code, data, version, point_row, point.ev.model_dump(mode="json"))
            log_split_runs(params.tracking, STAGE, info, point.ev, point.results, ladder.muep.splits,
                           TRAJECTORIES / f"n{point.size}", version, episodes_sha, grammar, point_fp,
                           {"action_selection": curve.action_selection, "dtype": curve.dtype,
                            "curve_records": point.size, "train_steps": point_row["steps"],
                            "train_tokens": point_row["tokens"]}, log=log.info)
        slog.write(REPORT, done.report)
        slog.write(TABLE, table_md(done.report))
        TIMED_TABLE.parent.mkdir(parents=True, exist_ok=True)
        TIMED_TABLE.write_text(table_md(done.report, done.facts), encoding="utf-8")
        slog.run_facts(points=done.facts, table=paths.rel(TIMED_TABLE),
                       note="seconds measured in this run; the DVC outputs hold none")
        return {str(r["records"]): {k: r[k] for k in ("sr", "gcs", "episodes", "steps")}
                for r in done.report["rows"]}


if __name__ == "__main__":
    main(STAGE, ladder_curve)
