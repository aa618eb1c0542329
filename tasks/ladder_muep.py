"""The model ladder on MuEP (docs/ladder.md): which of ALFWorld's test games each model plays, the agent it plays as,
playing them on the evaluation harness, and the report. ``flows/ladder_muep.py`` only orchestrates.

The agent is the evaluation's ``openai`` agent (:class:`~tasks.muep.eval.agents.openai_agent.OpenAIAgent`): a chat
model behind an OpenAI-compatible endpoint, here llama.cpp's server of the ladder model. Its prompt
(``tasks/muep/eval/prompts.yaml``) is the same for every model, zero-shot (no demonstration), answers greedy; the
only change is its client: one with the ladder's response cache (keyed by the hash of model, messages and sampling,
so a rerun asks nothing) whose backend starts the server at the first uncached request. A request that fails is an
error of the stage, naming the server's log; an answer that is garbage is an invalid action, scored as such.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from core.errors import DataError, LLMError
from tasks import paths
from tasks.ladder import SERVER, model_label
from tasks.models.llama_server import LlamaServer
from tasks.muep.eval import metrics
from tasks.muep.eval.agents.base import AgentBudgetExhausted
from tasks.muep.eval.agents.openai_agent import OpenAIAgent
from tasks.muep.eval.env import announce, engine
from tasks.muep.eval.episodes import make_batches, select
from tasks.muep.eval.harness import EpisodeTiming, EvalBatch, EvalSettings, run_episode
from tasks.muep.eval.prompts import PROMPTS_FILE, templates
from tasks.muep.eval.records import EpisodeResult, EpisodeSpec
from tasks.muep.eval.runs import log_run, run_fields, stop_rules, write_results
from tasks.params import EvalParams, LadderParams, OpenAIAgentParams, TrackingParams

CACHE = paths.DATA / "cache" / "llm-ladder-muep"
"""The answers of every model, ``<model>/<2 hex>/<key>.json`` (a DVC ``persist`` output)."""
TRAJECTORIES = paths.DATA / "muep" / "ladder"
"""``<model>/<split>.jsonl``: every game each model played, step by step (also each MLflow run's artifact)."""
REPORT = paths.REPORTS / "ladder" / "muep.json"

AGENT = "openai"
AGENT_KIND = ("the MuEP evaluation's `openai` agent (chat generation, zero-shot: its system prompt and the game so "
              "far, no demonstration; greedy) through llama.cpp's OpenAI-compatible server")
BATCH_SIZE = 4
"""Games announced to the game engine at a time (as ``muep.eval.batch_size``): consecutive games of one scene."""
SELECTION_SALT = "ladder-muep"

SELECTION_RULE = (
    "Per split, from the games muep-alfworld wrote: all of them when games_per_split is null or not smaller. "
    "Otherwise n games stratified by task type: while n allows, each task type first gets one game (types in order "
    "of size, largest first, then by name); the remaining slots are shared in proportion to each type's games not "
    "yet taken, by largest remainder (ties: the larger type, then the name). Within a type the games are taken in "
    f"order of sha256('{SELECTION_SALT}:' + episode id). Deterministic: the same pool gives the same games, "
    "whatever the table's row order, seed or model.")


# ----------------------------------------------------------------------------------------------------------------
# Which games


def _game_order(episode_id: str) -> str:
    return hashlib.sha256(f"{SELECTION_SALT}:{episode_id}".encode()).hexdigest()


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many of ``n`` games each task type gets, from each type's number of games (``sizes``), by the rule of
    :data:`SELECTION_RULE`. The counts add up to ``min(n, total)`` and never exceed a type's size."""
    if n < 0:
        raise ValueError(f"cannot choose {n} games")
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    by_size = sorted((k for k in sizes if sizes[k] > 0), key=lambda k: (-sizes[k], k))
    out = {k: 0 for k in sizes}
    for kind in by_size[:n]:          # one game per type first, while there are slots
        out[kind] = 1
    left = n - sum(out.values())
    if left:
        rest = {k: sizes[k] - out[k] for k in sizes}
        pool = sum(rest.values())
        quotas = {k: left * rest[k] / pool for k in rest}
        floors = {k: int(quotas[k]) for k in rest}
        short = left - sum(floors.values())
        ranked = sorted(rest, key=lambda k: (-(quotas[k] - floors[k]), -sizes[k], k))
        for k in rest:
            out[k] += floors[k]
        for k in ranked[:short]:
            out[k] += 1
    return out


def stratified_subset(games: pd.DataFrame, n: int | None) -> list[str]:
    """The episode ids of ``n`` of ``games`` (columns ``episode_id``, ``task_type``: one split's playable games),
    stratified by task type by the rule of :data:`SELECTION_RULE`; every id when ``n`` is None. Sorted by id."""
    for column in ("episode_id", "task_type"):
        if column not in games.columns:
            raise DataError(f"the games table has no column {column!r}: cannot choose the ladder's games.")
    if games.episode_id.duplicated().any():
        raise DataError(f"the games table lists episode {games.episode_id[games.episode_id.duplicated()].iloc[0]!r} "
                        "twice.")
    if n is None:
        return sorted(games.episode_id)
    ids: dict[str, list[str]] = {}
    for episode_id, kind in zip(games.episode_id, games.task_type, strict=True):
        ids.setdefault(kind, []).append(episode_id)
    counts = allocate({k: len(v) for k, v in ids.items()}, n)
    return sorted(e for kind, members in ids.items() for e in sorted(members, key=_game_order)[:counts[kind]])


DATASET = "muep-alfworld"


@dataclass(frozen=True)
class AlfworldGames:
    """ALFWorld's test games as muep-alfworld wrote them: the index, its dataset version and the table's short hash."""

    table: Path
    index: pd.DataFrame
    version: str
    episodes_sha: str


def read_alfworld_games(who: str) -> AlfworldGames:
    """The games table every ladder stage plays (``who`` says which, in the error when it is missing)."""
    from tasks.muep import layout
    from tasks.muep.eval.episodes import check_index, dataset_version

    table = layout.ALFWORLD_EPISODES
    if not table.exists():
        raise DataError(f"{table} does not exist: {who} plays ALFWorld's test games.",
                        hint="Run the muep-alfworld stage first (`dvc repro muep-alfworld`).")
    index = check_index(pd.read_parquet(table), table)
    return AlfworldGames(table, index, dataset_version(paths.ROOT, layout.ALFWORLD, table, DATASET),
                         hashlib.sha256(table.read_bytes()).hexdigest()[:16])


def choose_games(index: pd.DataFrame, splits: Sequence[str], per_split: int | None
                 ) -> tuple[list[EpisodeSpec], dict[str, dict[str, int]]]:
    """The games the ladder plays (ALFWorld's episodes table ``index``: its ``ok`` rows of ``splits``), and per split
    how many there were and how many were chosen."""
    ok = index[index.status == "ok"]
    chosen, counts = [], {}
    for split in splits:
        pool = ok[ok.split == split]
        if pool.empty:
            raise DataError(f"ALFWorld's episodes table has no playable game in split {split!r} (ladder.muep.splits).",
                            hint="Run the muep-alfworld stage (`dvc repro muep-alfworld`).")
        ids = stratified_subset(pool, per_split)
        chosen += ids
        counts[split] = {"games": len(pool), "chosen": len(ids)}
    specs = select(ok[ok.episode_id.isin(set(chosen))], list(splits), None, 0)
    return specs, counts


# ----------------------------------------------------------------------------------------------------------------
# The agent


def eval_params(ladder: LadderParams, name: str, base_url: str) -> EvalParams:
    """``muep.eval`` as the harness reads it for ladder model ``name`` served at ``base_url``: the ``openai`` agent,
    zero-shot, greedy (``ladder.temperature``), ``ladder.muep``'s answer length and stop rules, never more calls than
    steps, no retry (a failed request fails the stage: :func:`request_failures`). Everything else: the defaults."""
    lm = ladder.muep
    agent = OpenAIAgentParams(model=name, base_url=base_url, temperature=ladder.temperature,
                              max_tokens=lm.max_tokens, max_calls_per_episode=lm.max_steps, few_shot=0,
                              timeout_s=600.0, max_retries=0)
    return EvalParams(agents=[AGENT], splits=list(lm.splits), protocol=lm.protocol, max_steps=lm.max_steps,
                      loop_stop=lm.loop_stop,
                      max_invalid_streak=lm.max_invalid_streak, seed=ladder.seed, openai=agent)


class TimedServer(LlamaServer):
    """A :class:`LlamaServer` that remembers how long its start took (loading the model, until it answers), so the
    seconds per step of a model leave its start-up out (the harness counts it in the first step's agent time)."""

    start_s = 0.0

    def start(self) -> str:
        clock = time.perf_counter()
        try:
            return super().start()
        finally:
            self.start_s += time.perf_counter() - clock


class ServedAgent(OpenAIAgent):
    """The ``openai`` agent, asking through ``client`` (the ladder's cached client whose backend starts the server
    on demand) instead of an uncached one. Prompt, parsing and call budget: the ``openai`` agent's."""

    def __init__(self, params: EvalParams, context, client):
        super().__init__(params, context)
        self.client = client
        self.failure: str | None = None

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self.failure = None

    def act(self, observation):
        """The ``openai`` agent's action; a request that fails ends the game at once (the harness would count it as
        an invalid action and ask again) and is kept in :attr:`failure` for :func:`request_failures`."""
        try:
            return super().act(observation)
        except LLMError as exc:
            self.failure = f"step {observation.step}: {exc}"
            raise AgentBudgetExhausted(f"the request failed: {exc}") from exc


def request_failures(result: EpisodeResult, agent: ServedAgent) -> list[str]:
    """What went wrong asking the model in this game: a failed request (:attr:`ServedAgent.failure`), or any other
    exception of the agent, which the harness records as an invalid action (``StepRecord.error``)."""
    failed = [agent.failure] if agent.failure else []
    failed += [f"step {s.step}: {s.error}" for s in result.steps if s.error]
    return failed + ([f"at the start: {result.error}"] if result.error else [])


def play(specs: Sequence[EpisodeSpec], agent: ServedAgent, label: str, settings: EvalSettings, server_log: Path,
         on_game: Callable[[EpisodeResult], None] | None = None) -> tuple[list[EpisodeResult], list[EpisodeTiming]]:
    """Play ``specs`` in this process with ``agent`` on the harness (:func:`~tasks.muep.eval.harness.run_episode`),
    in muep-eval's batches (games of one scene in a row, each batch's goals announced to the engine first). Stops at
    the first game in which a request failed, with an :class:`LLMError` naming ``server_log``."""
    games = engine()
    results: list[EpisodeResult] = []
    timings: list[EpisodeTiming] = []
    batches: list[EvalBatch] = make_batches(list(specs), [(AGENT, label)], BATCH_SIZE)
    for batch in batches:
        announce(games, [(settings.metadata_of(source), *goal) for source, *goal in batch.scene_goals])
        for spec in batch.episodes:
            result = run_episode(spec, agent, label, settings, timings)
            failures = request_failures(result, agent)
            if failures:
                raise LLMError(f"{label}: a request to the model failed in game {spec.episode_id} "
                               f"({failures[0]}); the server's log is {server_log}.",
                               hint="A failed request is never scored; answers so far are cached, so a rerun "
                               "resumes there.")
            results.append(result)
            if on_game is not None:
                on_game(result)
    return results, timings


# ----------------------------------------------------------------------------------------------------------------
# Reports


def speed(timings: Sequence[EpisodeTiming], calls: int, cache_hits: int, start_s: float = 0.0
          ) -> dict[str, float]:
    """Where a model's time went (run facts, never a DVC output): seconds per step (the agent's share, i.e. the
    server's answer, and the whole step) and per game, without the server's start (``start_s``, given apart)."""
    steps = sum(t.steps for t in timings)
    games = len(timings)
    agent_s = sum(t.agent_s for t in timings) - start_s
    total_s = sum(t.total_s for t in timings) - start_s
    return {"games": games, "steps": steps, "llm_calls": calls, "cache_hits": cache_hits,
            "server_start_s": round(start_s, 2),
            "agent_s_per_step": round(agent_s / steps, 3) if steps else None,
            "agent_s_per_request": round(agent_s / calls, 3) if calls else None,
            "s_per_step": round(total_s / steps, 3) if steps else None,
            "s_per_game": round(total_s / games, 3) if games else None, "total_s": round(total_s, 2)}


def model_report(name: str, results: Sequence[EpisodeResult], provenance: dict) -> dict[str, Any]:
    """One model's block of ``reports/ladder/muep.json``: overall, per split and per task type rates with 95 %
    intervals (:func:`tasks.muep.eval.metrics.report`), how its games ended, and the model's provenance."""
    return {"label": model_label(name), "agent": AGENT, "agent_kind": AGENT_KIND,
            **metrics.report(results),
            "end_reasons": dict(sorted(Counter(r.end_reason for r in results).items())),
            "provenance": provenance}


def protocol(ladder: LadderParams) -> dict[str, Any]:
    """How every model played: the agent, its prompt, decoding, stop rules and the server's settings."""
    lm = ladder.muep
    ev = eval_params(ladder, "-", "http://127.0.0.1/v1")
    return {"agent": AGENT, "agent_kind": AGENT_KIND, "few_shot": 0,
            "prompt": {"file": paths.rel(PROMPTS_FILE), "version": templates()["version"],
                       "sha256": hashlib.sha256(PROMPTS_FILE.read_bytes()).hexdigest()},
            "temperature": ladder.temperature, "max_tokens": lm.max_tokens, "seed": ladder.seed,
            "protocol": lm.protocol, "max_steps": lm.max_steps, "loop_stop": lm.loop_stop, "max_invalid_streak": lm.max_invalid_streak,
            "stop_rules": stop_rules(ev), "server": SERVER,
            "server_settings": ladder.serve.model_dump(exclude={"host", "port", "startup_timeout_s"})}


def ladder_report(reports: dict[str, dict], ladder: LadderParams, games: dict[str, dict[str, int]],
                  specs: Sequence[EpisodeSpec], dataset_version: str) -> dict[str, Any]:
    """``reports/ladder/muep.json``: the protocol, the games (rule, counts, ids) and one block per model. No time
    in it: the same inputs give the same bytes."""
    return {"protocol": protocol(ladder),
            "games": {"rule": SELECTION_RULE, "games_per_split": ladder.muep.games_per_split,
                      "splits": games, "dataset_version": dataset_version,
                      "episodes": {s: sorted(x.episode_id for x in specs if x.split == s) for s in games}},
            "models": reports}


def timing_records(timings: Sequence[EpisodeTiming]) -> list[dict]:
    """The timings as ``tasks.muep.eval.runs.log_run`` takes them (``time/<part>_s`` metrics of the runs)."""
    return [asdict(t) for t in timings]


def log_split_runs(tracking: TrackingParams, stage: str, info, ev: EvalParams, results: Sequence[EpisodeResult],
                   splits: Sequence[str], folder: Path, version: str, episodes_sha: str, grammar: str,
                   base_fingerprint: str, extra_params: dict[str, Any],
                   timings: Sequence[EpisodeTiming] | None = None, log: Callable[..., None] | None = None) -> None:
    """Per split, the games ``info`` (an agent's label and model) played: written to ``<folder>/<split>.jsonl`` and
    logged as one MLflow run in the muep-eval experiment (tags ``ladder`` and ``ladder_stage``), unless a run with
    the same fingerprint exists. ``timings``: also logged, each run with its split's games."""
    from tasks.muep.eval.store import fingerprint

    for split in splits:
        mine = [r for r in results if r.split == split]
        path = write_results(folder / f"{split}.jsonl", mine)
        run_params, tags = run_fields(info.name, info, ev, split, len(mine), version, episodes_sha, grammar, DATASET,
                                      fingerprint(base_fingerprint, split, sorted(r.episode_id for r in mine)))
        ids = {r.episode_id for r in mine}
        run_id, _, new = log_run(tracking, info.label, split, run_params | extra_params,
                                 tags | {"ladder": "true", "ladder_stage": stage}, mine, path,
                                 timing_records([t for t in timings or () if t.episode_id in ids]))
        if log is not None:
            log("[%s] MLflow run %s (%s, %s) %s", stage, run_id, info.label, split,
                "logged" if new else "already logged, kept")
