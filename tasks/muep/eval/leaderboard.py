"""The leaderboard, from MLflow runs (never from files): paper-style tables (Table 3: SR / IS / GCS / LC / RDI per
agent for #Seen and #Unseen; Tables 2 and 4: per task type), as Markdown and as a static HTML page with bar charts
(matplotlib PNGs embedded as base64).

Two test sets get their own main table: ALFWorld's 140 #Seen + 134 #Unseen test games (what the paper evaluates,
splits ``alfworld_seen`` / ``alfworld_unseen``) and MuEP's generated test episodes (``seen_test`` / ``unseen_test``).

Which runs: for each (agent label, protocol, split), the newest finished run -- of the newest data version of its
dataset (among that dataset's runs), unless ``all_versions`` (then each label's newest run of any version). An agent
evaluated under both protocols gets a row for each (the ``alfworld`` one labelled ``<label> (alfworld)``). Overall figures
are the splits' tallies added up, so they are exact, not averages of averages. The header names the protocol and
stop rules the runs played by (``protocol=muep-released``: MuEP's released client's grammar and repeat stop); an
invalid-action streak stop (not in the paper) is named with the agents it applied to.

Error bars: SR, GCS, PR and LC cells carry their 95 % bootstrap interval over episodes (overall figures resampled within
each split), computed from each run's per-episode outcomes (:func:`attach_outcomes`) with :mod:`tasks.stats`; rows
of fewer than 30 episodes are marked indicative (``†``). Under each test set, every pair of agents that played the
same episodes is compared on per-episode success with McNemar's exact test.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field, replace

from collections.abc import Callable

from tasks import stats
from tasks.muep.eval.metrics import INTERVAL_RATES, EpisodeMetrics, Tally, intervals
from tasks.muep.eval.protocol import DEFAULT_PROTOCOL
from tasks.muep.eval.runs import RunSummary
from tasks.muep.vocab import TASK_TYPES

#: (title, dataset tag, its splits), in the order the tables come.
TEST_SETS = (("ALFWorld's test games (the paper's test set; cf. Table 3)", "muep-alfworld",
              ("alfworld_seen", "alfworld_unseen")),
             ("MuEP's generated test episodes", "muep-demos", ("seen_test", "unseen_test", "train")))
SPLIT_NAMES = {"alfworld_seen": "#Seen", "alfworld_unseen": "#Unseen", "seen_test": "#Seen", "unseen_test": "#Unseen",
               "train": "#Train"}
SPLIT_TITLES = {"alfworld_seen": "ALFWorld #Seen", "alfworld_unseen": "ALFWorld #Unseen",
                "seen_test": "generated #Seen", "unseen_test": "generated #Unseen", "train": "generated #Train"}
COLUMNS = (("sr", "SR"), ("is_success", "IS"), ("gcs", "GCS"), ("gcs_alfworld", "GCS-A"), ("lc", "LC"),
           ("rdi", "RDI"))
DETAIL = COLUMNS + (("is_all", "IS (all)"), ("pr", "PR"))
PERCENT = {"sr", "gcs", "gcs_alfworld", "lc", "rdi", "pr"}
_ORDER = [s for _, _, splits in TEST_SETS for s in splits]


@dataclass
class Board:
    labels: list[str]
    splits: list[str]
    dataset_versions: list[str]
    cells: dict[tuple[str, str], Tally] = field(default_factory=dict)                 # (label, split)
    types: dict[tuple[str, str, str], Tally] = field(default_factory=dict)           # (label, split, type)
    runs: list[RunSummary] = field(default_factory=list)
    outcomes: dict[tuple[str, str], dict[str, EpisodeMetrics]] = field(default_factory=dict)   # (label, split)

    def interval(self, label: str, splits: list[str] | tuple[str, ...], name: str) -> stats.Interval | None:
        """The bootstrap interval of ``name`` (sr, gcs, pr, lc) for ``label`` over ``splits`` (resampled per split);
        None unless every split has its per-episode outcomes."""
        if not all((label, s) in self.outcomes for s in splits):
            return None
        episodes = [m for s in splits for _, m in sorted(self.outcomes[(label, s)].items())]
        strata = [s for s in splits for _ in self.outcomes[(label, s)]]
        return intervals(episodes, strata if len(splits) > 1 else None)[name]

    def paired(self, a: str, b: str, splits: list[str] | tuple[str, ...]) -> stats.McNemar | None:
        """McNemar's test of ``a`` against ``b`` on per-episode success, when both played exactly the same episodes
        of every split (None otherwise)."""
        pairs_a, pairs_b = [], []
        for s in splits:
            oa, ob = self.outcomes.get((a, s)), self.outcomes.get((b, s))
            if oa is None or ob is None or set(oa) != set(ob):
                return None
            pairs_a += [oa[e].success for e in sorted(oa)]
            pairs_b += [ob[e].success for e in sorted(ob)]
        return stats.mcnemar(pairs_a, pairs_b) if pairs_a else None

    def overall(self, label: str, splits: list[str] | tuple[str, ...] | None = None) -> Tally:
        splits = self.splits if splits is None else splits
        return sum((self.cells[(label, s)] for s in splits if (label, s) in self.cells), Tally())

    def test_sets(self) -> list[tuple[str, list[str]]]:
        """(title, splits present) of every test set with runs, then any split of no known test set."""
        out = [(title, [s for s in splits if s in self.splits]) for title, _, splits in TEST_SETS]
        other = [s for s in self.splits if s not in _ORDER]
        return [t for t in out if t[1]] + ([("Other splits", other)] if other else [])

    def task_types(self) -> list[str]:
        present = {k[2] for k in self.types}
        return [t for t in TASK_TYPES if t in present] + sorted(present - set(TASK_TYPES))

    def by_type(self, label: str, splits: list[str], kind: str) -> Tally | None:
        parts = [self.types[(label, s, kind)] for s in splits if (label, s, kind) in self.types]
        return sum(parts, Tally()) if parts else None

    def stop_rules(self) -> dict[str, list[str]]:
        """Stop rules -> the agent labels whose chosen runs played by them."""
        out: dict[str, set[str]] = {}
        for r in self.runs:
            out.setdefault(r.stop_rules or "unknown", set()).add(r.label)
        return {rules: sorted(labels) for rules, labels in sorted(out.items())}


def build(runs: list[RunSummary], all_versions: bool = False) -> Board:
    runs = sorted(runs, key=lambda r: r.start_time, reverse=True)
    if runs and not all_versions:
        newest: dict[str, str] = {}
        for r in runs:
            newest.setdefault(r.dataset, r.dataset_version)
        runs = [r for r in runs if r.dataset_version == newest[r.dataset]]
    chosen = _rows(runs)
    order = {s: i for i, s in enumerate(_ORDER)}
    splits = sorted({s for _, s in chosen}, key=lambda s: (order.get(s, 99), s))
    board = Board(labels=[], splits=splits, dataset_versions=sorted({r.dataset_version for r in chosen.values()}),
                  runs=list(chosen.values()))
    for (label, split), r in chosen.items():
        board.cells[(label, split)] = r.total
        for kind, t in r.by_type.items():
            board.types[(label, split, kind)] = t
    first = board.test_sets()[0][1] if board.test_sets() else []
    board.labels = sorted({label for label, _ in chosen},
                          key=lambda lb: (-(board.overall(lb, first).rates()["sr"] or 0.0), lb))
    return board


def _rows(runs: list[RunSummary]) -> dict[tuple[str, str], RunSummary]:
    """(row label, split) -> the newest of ``runs`` (newest first) per (agent label, protocol, split). An agent
    evaluated under more than one protocol gets a row per protocol: the default protocol's keeps the label, the
    others' are labelled ``<label> (<protocol>)`` -- so Table 3 shows both protocols side by side."""
    newest: dict[tuple[str, str, str], RunSummary] = {}
    for r in runs:
        newest.setdefault((r.label, r.protocol, r.split), r)
    protocols: dict[str, set[str]] = {}
    for label, protocol, _ in newest:
        protocols.setdefault(label, set()).add(protocol)
    out: dict[tuple[str, str], RunSummary] = {}
    for (label, protocol, split), r in newest.items():
        if len(protocols[label]) > 1 and protocol != DEFAULT_PROTOCOL:
            r = replace(r, label=f"{label} ({protocol or 'protocol unknown'})")
        out[(r.label, split)] = r
    return out


def attach_outcomes(board: Board, load: Callable[[RunSummary], dict[str, EpisodeMetrics] | None]) -> Board:
    """Fetch the per-episode outcomes of every chosen run (``load``: e.g. :func:`tasks.muep.eval.runs.load_outcomes`
    on the MLflow client); a run without them keeps its point estimates only."""
    for run in board.runs:
        outcomes = load(run)
        if outcomes is not None:
            board.outcomes[(run.label, run.split)] = outcomes
    return board


INDICATIVE = "†"


def fmt(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}" if name in PERCENT else f"{value:.2f}"


def cell(board: Board, label: str, splits: list[str], name: str, value: float | None) -> str:
    """A main-table cell: SR / GCS / PR / LC with their interval where the runs' outcomes are there, else the rate."""
    if name in INTERVAL_RATES and value is not None:
        interval = board.interval(label, splits, name)
        if interval is not None:
            return stats.fmt_interval(interval)
    return fmt(name, value)


PAIRED_HEADER = ["Agent A", "Agent B", "Episodes", "Only A solved", "Only B solved", "McNemar p",
                 f"Differ at {stats.ALPHA:g}"]


def paired_rows(board: Board, splits: list[str]) -> list[list[str]]:
    """One row per pair of agents (in table order) that played the same episodes of every split of the test set."""
    rows = []
    for i, a in enumerate(board.labels):
        for b in board.labels[i + 1:]:
            test = board.paired(a, b, splits)
            if test is not None:
                rows.append([a, b, str(test.episodes), str(test.only_a), str(test.only_b), stats.fmt_p(test.p),
                             "yes" if test.differ else "no"])
    return rows


def _type_label(kind: str) -> str:
    return TASK_TYPES[kind].label if kind in TASK_TYPES else kind


def tables(board: Board) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table, for both renderings: per test set a main table, then per split (and per
    test set, all its splits) the per-task-type table."""
    out = []
    for title, splits in board.test_sets():
        header = ["Agent"]
        for s in splits:
            header += [f"{SPLIT_NAMES.get(s, s)} {name}" for _, name in COLUMNS]
        header += ["Overall SR", "Overall PR", "Episodes"]
        rows = []
        for label in board.labels:
            if not any((label, s) in board.cells for s in splits):
                continue
            episodes = board.overall(label, splits).episodes
            row = [label]
            for s in splits:
                rates = board.cells[(label, s)].rates() if (label, s) in board.cells else {}
                row += [cell(board, label, [s], name, rates.get(name)) for name, _ in COLUMNS]
            present = [s for s in splits if (label, s) in board.cells]
            overall = board.overall(label, splits).rates()
            row += [cell(board, label, present, "sr", overall["sr"]), cell(board, label, present, "pr", overall["pr"]),
                    f"{episodes} {INDICATIVE}" if episodes < stats.INDICATIVE_BELOW else str(episodes)]
            rows.append(row)
        out.append((f"Main results: {title}", header, rows))
    for title, splits in board.test_sets():
        comparisons = paired_rows(board, splits)
        if comparisons:
            out.append((f"Paired comparisons: {title}", PAIRED_HEADER, comparisons))
    detail_header = ["Agent", "Task type", "Episodes"] + [name for _, name in DETAIL]
    for title, splits in board.test_sets():
        groups = [([s], SPLIT_TITLES.get(s, s)) for s in splits]
        if len(splits) > 1:
            groups.append((splits, f"{title.split(' (')[0]}, all splits"))
        for group, name in groups:
            rows = []
            for label in board.labels:
                for kind in board.task_types():
                    t = board.by_type(label, group, kind)
                    if t is not None:
                        rates = t.rates()
                        rows.append([label, _type_label(kind), str(t.episodes)] + [fmt(n, rates[n]) for n, _ in DETAIL])
            out.append((f"Per task type, {name} (cf. the paper's Tables 2 and 4)", detail_header, rows))
    return out


#: Agents that are programs, not models: named as such under every table they appear in.
SCRIPTED = {"oracle": "replays the expert plan of the FF planner (or ALFWorld's walkthrough)",
            "random": "sends a uniformly random admissible command"}


def scripted_note(board: Board, rows: list[list[str]]) -> str | None:
    """The line under a table naming its rule-based / scripted agents (a program is never presented as a model)."""
    shown = {r[0] for r in rows} | {r[1] for r in rows if len(r) == len(PAIRED_HEADER)}   # a pair names two agents
    named = {run.label: run.agent for run in board.runs if run.agent in SCRIPTED and run.label in shown}
    if not named:
        return None
    return "Scripted programs, not models: " + "; ".join(f"`{label}` {SCRIPTED[agent]}"
                                                        for label, agent in sorted(named.items())) + "."


#: The protocols in words, for the header (docs/muep-eval.md, "Protocols", quotes the released client's lines).
PROTOCOL_WORDS = {
    "muep-released": "MuEP's released test client (github.com/kanxueli/MuEP, testing_environment/): its grammar "
                     "(put X in/on Y) and texts, its object-list order and location numbers, at most 30 actions, the "
                     "episode ends before the first repeated action (A-A or A-B-A-B, actions alone)",
    "alfworld": "ALFWorld's: grammar alfworld-0.4 (move X to Y), at most 30 actions, no loop stop",
}


def _preamble(board: Board, source: str) -> str:
    versions = ", ".join(f"`{v}`" for v in board.dataset_versions) or "none"
    rules = []
    for spelled, labels in board.stop_rules().items():
        extra = " -- the invalid-action streak stop is NOT a rule of the paper" if "invalid_streak" in spelled else ""
        rules.append(f"`{spelled}` ({', '.join(labels)}){extra}")
    shown = sorted({r.protocol for r in board.runs} & set(PROTOCOL_WORDS))
    protocols = "".join(f" `{p}`: {PROTOCOL_WORDS[p]}." for p in shown)
    return (f"{len(board.runs)} MLflow runs from {source}; dataset versions {versions}. Protocol and stop rules: "
            f"{'; '.join(rules) or 'none'}.{protocols} SR, GCS (the paper's sub-goals, finding the object included), GCS-A "
            "(ALFWorld's goal conditions), LC, RDI and PR (progress rate) in %; IS = mean steps of the successful "
            "episodes, IS (all) = of all episodes. \"-\" = undefined (no successful / failed episode). SR, GCS and "
            f"PR in the main tables with their {stats.LEVEL:.0%} bootstrap interval over episodes "
            f"[low, high] ({stats.RESAMPLES} seeded resamples; overall figures resampled within each split); "
            f"{INDICATIVE} = fewer than {stats.INDICATIVE_BELOW} episodes, indicative only. Paired comparisons: "
            "McNemar's exact test on per-episode success, for agents that played the same episodes. Definitions: "
            "docs/muep-eval.md.")


def to_markdown(board: Board, source: str) -> str:
    lines = ["# MuEP leaderboard", "", _preamble(board, source), ""]
    if not board.labels:
        return "\n".join(lines + ["No evaluation runs yet: run `dvc repro muep-eval`.", ""])
    for title, header, rows in tables(board):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
        if (note := scripted_note(board, rows)) is not None:
            lines += [note, ""]
    lines += ["Charts: reports/leaderboard.html.", ""]
    return "\n".join(lines)


def charts(board: Board) -> list[tuple[str, bytes]]:
    """(caption, PNG) bar charts: SR / GCS / LC per agent and split; SR and GCS per task type and agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    def png(fig) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        return buf.getvalue()

    out = []
    labels = board.labels
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    width = 0.8 / max(1, len(board.splits))
    x = np.arange(len(labels))
    for ax, (name, title) in zip(axes, (("sr", "SR"), ("gcs", "GCS"), ("lc", "LC")), strict=True):
        for k, split in enumerate(board.splits):
            values = [100 * ((board.cells[(lb, split)].rates()[name] or 0.0) if (lb, split) in board.cells else 0.0)
                      for lb in labels]
            ax.bar(x + k * width, values, width, label=SPLIT_TITLES.get(split, split))
        ax.set_title(f"{title} (%)")
        ax.set_xticks(x + width * (len(board.splits) - 1) / 2, labels, rotation=20, ha="right")
        ax.set_ylim(0, 105)
    axes[0].legend(fontsize=8)
    out.append(("SR, GCS and LC per agent and split", png(fig)))

    kinds = board.task_types()
    fig, axes = plt.subplots(2, 1, figsize=(12, 6.4), sharex=True)
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(kinds))
    for ax, (name, title) in zip(axes, (("sr", "SR"), ("gcs", "GCS")), strict=True):
        for k, label in enumerate(labels):
            values = [100 * ((t.rates()[name] or 0.0) if (t := board.by_type(label, board.splits, kind)) else 0.0)
                      for kind in kinds]
            ax.bar(x + k * width, values, width, label=label)
        ax.set_ylabel(f"{title} (%)")
        ax.set_ylim(0, 105)
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(x + width * (len(labels) - 1) / 2, [_type_label(t) for t in kinds], rotation=15, ha="right")
    out.append(("SR and GCS per task type (all splits)", png(fig)))
    return out


def to_html(board: Board, source: str, links: dict[str, list[tuple[str, str]]] | None = None) -> str:
    """``links``: agent label -> (text, href) of its episode pages (tasks/viewer), shown in its rows' first cell."""
    e = html.escape
    links = links or {}

    def first_cell(label: str) -> str:
        found = links.get(label, [])
        return e(label) + ("" if not found else " <small>episodes: " + " ".join(
            f"<a class='episodes' href='{e(href)}'>{e(text)}</a>" for text, href in found) + "</small>")

    parts = ["<!doctype html>", "<html><head><meta charset='utf-8'><title>MuEP leaderboard</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "margin-bottom:1.5em;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}th{background:#f0f2f5}img{max-width:100%}</style>",
             "</head><body>", "<h1>MuEP leaderboard</h1>", f"<p>{e(_preamble(board, source))}</p>"]
    if not board.labels:
        parts.append("<p>No evaluation runs yet: run <code>dvc repro muep-eval</code>.</p>")
    else:
        for caption, data in charts(board):
            parts.append(f"<figure><img alt='{e(caption)}' src='data:image/png;base64,"
                         f"{base64.b64encode(data).decode('ascii')}'><figcaption>{e(caption)}</figcaption></figure>")
        for title, header, rows in tables(board):
            parts += [f"<h2>{e(title)}</h2>", "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"]
            parts += ["<tr><td>" + first_cell(r[0]) + "</td>" + "".join(f"<td>{e(c)}</td>" for c in r[1:]) + "</tr>"
                      for r in rows]
            parts.append("</table>")
            if (note := scripted_note(board, rows)) is not None:
                parts.append(f"<p>{e(note)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
