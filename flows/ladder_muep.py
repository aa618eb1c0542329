"""The model ladder on MuEP (Table 3): each local model of ``ladder.models``, served by llama.cpp, plays ALFWorld's
test games (#Seen / #Unseen; ``ladder.muep.games_per_split`` of them, stratified by task type) zero-shot as the
evaluation's ``openai`` agent (the same prompt for every model, greedy) on the evaluation harness; one MLflow run per
model and split in the muep-eval experiment (label ``llama.cpp:<model>``), so the MuEP leaderboard shows a row per
model with intervals and McNemar against the other rows on the same games; ``reports/ladder/muep.json``.
docs/ladder.md."""

from __future__ import annotations

import logging
import shutil

from prefect import flow

from flows._imports import code_digest
from flows._runtime import main
from tasks.ladder import answer_cache, model_label, served_llm, server_log
from tasks.ladder_muep import (
    AGENT,
    CACHE,
    REPORT,
    TRAJECTORIES,
    ServedAgent,
    TimedServer,
    choose_games,
    eval_params,
    ladder_report,
    log_split_runs,
    model_report,
    play,
    protocol,
    read_alfworld_games,
    speed,
)
from tasks.llm import build_client
from tasks.models import files
from tasks.models.llama_server import OnDemandBackend
from tasks.muep import layout
from tasks.muep.eval.agents import AgentContext, AgentInfo
from tasks.muep.eval.harness import EvalSettings
from tasks.muep.eval.store import file_digest, fingerprint
from tasks.params import load_params
from tasks.progress import Progress, StageLog

STAGE = "ladder-muep"
log = logging.getLogger("embp")


@flow(name=STAGE)
def ladder_muep(params_file: str | None = None) -> dict:
    """The model ladder on MuEP: each local model plays ALFWorld's test games as the zero-shot openai agent."""
    params = load_params(params_file)
    ladder = params.ladder
    lm = ladder.muep
    with StageLog(STAGE) as slog:
        alf = read_alfworld_games("the ladder")
        table, index, version, episodes_sha = alf.table, alf.index, alf.version, alf.episodes_sha
        slog.read(table, f"{len(index)} games")
        specs, games = choose_games(index, lm.splits, lm.games_per_split)
        if not ladder.models:
            log.info("[%s] ladder.models is empty: the ladder is off (the ladder profile runs it)", STAGE)
            shutil.rmtree(TRAJECTORIES, ignore_errors=True)
            TRAJECTORIES.mkdir(parents=True, exist_ok=True)
            CACHE.mkdir(parents=True, exist_ok=True)                       # kept: the models' answers
            slog.write(REPORT, ladder_report({}, ladder, games, specs, version))
            return {}
        for name in ladder.models:            # every model's file before the first answer: a missing one fails now
            files.gguf_path(files.get(name), "ladder.models")
        data = file_digest([table, *sorted(layout.ALFWORLD_METADATA.glob("*.parquet"))])
        code = code_digest("flows.ladder_muep")
        grammar = ",".join(sorted({s.grammar for s in specs}))
        rules = protocol(ladder)
        context = AgentContext(seed=ladder.seed)
        log.info("[%s] %d models x %d games (%s) as the zero-shot openai agent through llama.cpp", STAGE,
                 len(ladder.models), len(specs), ", ".join(f"{s}: {c['chosen']} of {c['games']}"
                                                           for s, c in games.items()))
        shutil.rmtree(TRAJECTORIES, ignore_errors=True)
        reports, facts = {}, {}
        for name in ladder.models:
            label = model_label(name)
            spec = files.get(name)
            server = TimedServer(name, ladder.serve, server_log(STAGE, name))
            ev = eval_params(ladder, name, server.base_url)
            settings = EvalSettings(metadata_dir=str(layout.METADATA), params=ev, context=context,
                                    alfworld_metadata_dir=str(layout.ALFWORLD_METADATA))
            client = build_client(served_llm(ladder, name, server.base_url), answer_cache(CACHE, name, ladder.serve))
            client.backend = OnDemandBackend(client.backend, server)
            agent = ServedAgent(ev, context, client)
            try:
                with Progress(len(specs), f"{STAGE}: {name}", unit="games") as progress:
                    results, timings = play(specs, agent, label, settings, server.log,
                                            on_game=lambda _: progress.advance())
            finally:
                agent.close()
                server.stop()
            facts[name] = speed(timings, client.calls, client.cache_hits, server.start_s)
            log.info("[%s] %s: %d games, %d steps, %d LLM calls (%d cached), %s s per step, %s s per game", STAGE,
                     name, len(results), facts[name]["steps"], client.calls, client.cache_hits,
                     facts[name]["s_per_step"], facts[name]["s_per_game"])
            info = AgentInfo(name=AGENT, label=label, model=name)
            model_fp = fingerprint(code, data, version, rules, spec.sha256, ev.model_dump(mode="json",
                                                                                          exclude={"openai"}),
                                   ev.openai.model_dump(mode="json", exclude={"base_url"}))
            log_split_runs(params.tracking, STAGE, info, ev, results, lm.splits, TRAJECTORIES / name, version,
                           episodes_sha, grammar, model_fp, {
                               "base_url": f"{ladder.serve.host} (llama.cpp server started by {STAGE})",
                               "agent_kind": "openai generation agent, zero-shot, through llama.cpp's server",
                               "gguf_sha256": spec.sha256, "packages": " ".join(spec.requirements),
                               "server_threads": ladder.serve.threads, "n_ctx": ladder.serve.n_ctx,
                               "server_n_batch": ladder.serve.n_batch,
                               "games_per_split": "all" if lm.games_per_split is None else lm.games_per_split},
                           timings, log.info)
            reports[name] = model_report(name, results, files.provenance(spec))
        slog.write(REPORT, ladder_report(reports, ladder, games, specs, version))
        slog.run_facts(models=facts, note="seconds measured in this run (cached answers take no model time)")
        return {name: r["overall"] for name, r in reports.items()}


if __name__ == "__main__":
    main(STAGE, ladder_muep)
