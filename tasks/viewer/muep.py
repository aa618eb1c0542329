"""MuEP episode pages: one page per (agent, split, episode), an index per agent and split, a front page; and per
(agent, split) the one-file book its MLflow run carries (:mod:`tasks.viewer.book`).

Everything comes from the trajectory file (``data/muep/eval/<agent>/<split>.jsonl``), as the harness recorded each
step: the action, the game's answer (the text state the agent sees next), whether it was valid and among the
admissible commands, the sub-goals and goal conditions met so far, and the name of the small schematic image of the
state (saved content-addressed in the evaluation's work directory, ``EvalSettings.images_dir``; the viewer copies
each image it shows once into its ``images/``). Where the RDI loop rule first holds is computed from the trajectory
(whether or not the loop stop was on), and where the episode ended is its end reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from tasks.muep.eval.metrics import disoriented
from tasks.muep.eval.records import EpisodeResult
from tasks.viewer import book
from tasks.viewer.pages import IMAGES, ImageStore, esc, index_link, json_script, page, select_filter, slug, write_text

log = logging.getLogger("embp")

END_REASONS = {"won": "the game's goal holds: won", "max_steps": "the step cap (max_steps) was reached",
               "loop": "the loop stop fired (an A-A or A-B-A-B repeat under the same feedback)",
               "invalid_streak": "the invalid-action streak stop fired", "call_budget": "the agent's call budget ran out",
               "agent_error": "the agent could not start the episode"}


def first_loop(result: EpisodeResult) -> int | None:
    """The first step at which the RDI loop rule holds (whether or not the loop stop was on), or None."""
    observations = [result.initial_observation] + [s.observation for s in result.steps]
    actions = [s.action for s in result.steps]
    for t in range(1, len(actions) + 1):
        if disoriented(observations[:t + 1], actions[:t]):
            return t
    return None


def _flag(text: str, kind: str) -> str:
    return f'<span class="flag {kind}">{esc(text)}</span>'


def steps_data(result: EpisodeResult, image: Callable[[str | None], str | None]) -> list[dict]:
    """One entry per state for the page's JS: the start, then every action with the game's answer; ``image`` maps
    an image's name (or None) to what the step names: a relative link, or the name itself in a book."""
    loop = first_loop(result)
    n = len(result.steps)
    out = []

    def goals(done: int) -> str:
        return f"{done} / {result.goals_total}"

    def conditions(done: int) -> str:
        return f"{done} / {result.conditions_total}" if result.conditions_total else "-"

    start_flags = _flag("start", "ok")
    if n == 0:
        start_flags += _flag(f"ended: {END_REASONS.get(result.end_reason, result.end_reason)}", "bad")
        if result.error:
            start_flags += _flag(result.error, "bad")
    out.append({"label": f"start (0 of {n})", "action": "(none yet)", "observation": result.initial_observation,
                "goals": goals(result.initial_goals_met), "conditions": conditions(result.initial_conditions_met),
                "image": image(result.initial_image), "flags": start_flags, "cls": "valid", "line": None})
    for k, step in enumerate(result.steps):
        flags = _flag("valid" if step.valid else "invalid (nothing happened)", "ok" if step.valid else "bad")
        if step.admissible is not None:
            flags += _flag("admissible" if step.admissible else "not admissible", "ok" if step.admissible else "bad")
        if step.error:
            flags += _flag(f"agent error: {step.error}", "bad")
        if step.raw:
            flags += _flag(f"agent said: {step.raw[:200]}", "warn")
        if loop == step.step:
            flags += _flag("loop rule fires here (RDI)" + (" - episode stopped" if result.end_reason == "loop"
                                                            else ""), "warn")
        if step.won:
            flags += _flag("won", "ok")
        if k == n - 1:
            flags += _flag(f"ended: {END_REASONS.get(result.end_reason, result.end_reason)}",
                           "ok" if result.success else "bad")
        cls = "won" if step.won else ("valid" if step.valid else "invalid")
        out.append({"label": f"step {step.step} of {n}", "action": step.action or "(empty)",
                    "observation": step.observation, "goals": goals(step.goals_met),
                    "conditions": conditions(step.conditions_met), "image": image(step.image), "flags": flags,
                    "cls": cls + (" loop" if loop == step.step else ""), "line": None})
    return out


def episode_body(result: EpisodeResult, split: str) -> str:
    """What an episode page shows: its facts, the step navigation and the elements the JS fills per step."""
    outcome = "success" if result.success else f"failure ({result.end_reason})"
    facts = (f"<table><tr><th>agent</th><td>{esc(result.agent)}</td><th>split</th><td>{esc(split)}</td></tr>"
             f"<tr><th>task type</th><td>{esc(result.task_type)}</td><th>scene</th><td>{esc(result.scene)}</td></tr>"
             f"<tr><th>instruction</th><td colspan=3 id='instruction'>{esc(result.instruction)}</td></tr>"
             f"<tr><th>outcome</th><td id='outcome'>{esc(outcome)}</td><th>steps</th><td>{len(result.steps)}</td>"
             f"</tr></table>")
    return (facts + '<div class="step-nav"><button id="prev">&larr; prev</button><button id="next">next &rarr;'
            '</button> <b id="step-no"></b> <span class="muted">keys: &larr; &rarr; (or j k, space), Home, End'
            '</span></div><div class="strip" id="strip"></div>'
            '<div class="episode"><div class="image"><img id="step-image" alt="rendered state"></div>'
            '<div class="text"><div id="step-flags"></div>'
            '<p><b>action</b>: <code id="step-action"></code></p>'
            '<p><b>observation</b> (the text state the agent sees next)</p><pre id="step-observation"></pre>'
            '<p><b>sub-goals met</b>: <span id="step-goals"></span> &nbsp; <b>goal conditions met</b>: '
            '<span id="step-conditions"></span></p></div></div>')


def episode_page(result: EpisodeResult, images: ImageStore, split: str, up: str = "../../") -> str:
    def image(name: str | None) -> str | None:
        rel = images.add(name)
        return f"{up}{rel}" if rel else None

    return page(episode_title(result), episode_body(result, split)
                + json_script("episode-data", {"steps": steps_data(result, image)}), up="index.html")


def episode_title(result: EpisodeResult) -> str:
    return f"{result.episode_id} - {result.agent}"


def episode_file(result: EpisodeResult) -> str:
    return f"{slug(result.episode_id)}.html"


def listed(results: Sequence[EpisodeResult]) -> list[EpisodeResult]:
    """The episodes in the index's order."""
    return sorted(results, key=lambda r: r.episode_id)


def index_body(results: Sequence[EpisodeResult], href: Callable[[int, EpisodeResult], str]) -> str:
    """The filters and the table of an index; ``href`` links the k-th listed episode."""
    rows = []
    for k, r in enumerate(listed(results)):
        outcome = "success" if r.success else "failure"
        rows.append(f'<tr class="{"win" if r.success else "fail"}" data-outcome="{outcome}" '
                    f'data-type="{esc(r.task_type)}" data-end="{esc(r.end_reason)}">'
                    f'<td><a href="{esc(href(k, r))}">{esc(r.episode_id)}</a></td>'
                    f'<td class="outcome">{outcome}</td><td>{esc(r.end_reason)}</td><td>{esc(r.task_type)}</td>'
                    f'<td>{len(r.steps)}</td><td>{r.goals_met} / {r.goals_total}</td><td>{esc(r.instruction)}</td>'
                    "</tr>")
    failures = sum(not r.success for r in results)
    return (f"<p>{len(results)} episodes, {failures} failed. Filter:</p><div class='filters'>"
            + select_filter("outcome", "outcome", ["failure", "success"])
            + select_filter("type", "task type", sorted({r.task_type for r in results}))
            + select_filter("end", "end reason", sorted({r.end_reason for r in results}))
            + "<span id='shown' class='muted'></span></div>"
            "<table id='episodes'><tr><th>episode</th><th>outcome</th><th>end reason</th><th>task type</th>"
            "<th>steps</th><th>sub-goals</th><th>instruction</th></tr>" + "".join(rows) + "</table>")


def index_page(label: str, split: str, results: Sequence[EpisodeResult]) -> str:
    return page(f"{label} on {split}: episodes", index_body(results, lambda k, r: episode_file(r)),
                up="../../index.html")


def write_split(root: Path, agent: str, label: str, split: str, results: Sequence[EpisodeResult],
                images: ImageStore) -> set[str]:
    """The pages of one (agent, split): every episode, then its index. Returns the images the pages show (paths
    relative to ``root``)."""
    folder = root / slug(agent) / slug(split)
    for result in results:
        write_text(folder / episode_file(result), episode_page(result, images, split))
    write_text(folder / "index.html", index_page(label, split, results))
    names = {n for r in results for n in (r.initial_image, *(s.image for s in r.steps)) if n}
    return {f"{IMAGES}/{n}" for n in names - images.missing}


def book_page(label: str, split: str, results: Sequence[EpisodeResult], images_dir: Path | str,
              budget: int = book.PAGE_BYTES) -> tuple[str, dict]:
    """One (agent, split)'s index and episodes in one self-contained file (:mod:`tasks.viewer.book`), the images
    from ``images_dir`` inlined: the HTML and its summary."""
    shown = listed(results)
    episodes = [{"title": episode_title(r), "body": episode_body(r, split), "steps": steps_data(r, lambda n: n)}
                for r in shown]
    return book.book(f"{label} on {split}: episodes", index_body(shown, lambda k, r: f"#episode-{k}"), episodes,
                     images_dir, budget)


def stage_artifact(label: str, split: str, results: Sequence[EpisodeResult], images_dir: Path | str,
                   target: Path) -> tuple[Path, dict]:
    """``target/viewer/episodes.html``: the book of one (agent, split), to log as its MLflow run's ``viewer/``
    artifact (MLflow's artifact view shows it; the pages of reports/viewer/ would lose their images and links
    there). Returns the ``viewer`` folder and the book's summary."""
    html, summary = book_page(label, split, results, images_dir)
    return book.stage(target, html), summary


def front_page(entries: Sequence[tuple[str, str, str, int, int]]) -> str:
    """(agent, label, split, episodes, failures) of every index."""
    rows = "".join(f"<tr><td>{esc(label)}</td><td><a href='{esc(index_link(agent, split))}'>{esc(split)}</a></td>"
                   f"<td>{n}</td><td>{failed}</td></tr>" for agent, label, split, n, failed in entries)
    return page("MuEP episodes", "<table><tr><th>agent</th><th>split</th><th>episodes</th><th>failed</th></tr>"
                + rows + "</table>")


def sweep_images(images_dir: Path | str, runs: Sequence[tuple[str, str, str, Sequence[EpisodeResult]]]) -> int:
    """Delete the files of ``images_dir`` that no result of ``runs`` names (drawings of an earlier version, a
    writer's leftovers), so the folder -- part of a DVC output -- holds what this evaluation drew and nothing else.
    Returns how many went."""
    named = {n for *_, results in runs for r in results for n in (r.initial_image, *(s.image for s in r.steps)) if n}
    folder = Path(images_dir)
    stale = [p for p in folder.iterdir() if p.name not in named] if folder.is_dir() else []
    for path in stale:
        path.unlink()
    return len(stale)


def build(root: Path, runs: Sequence[tuple[str, str, str, Sequence[EpisodeResult]]], images_dir: Path | str
          ) -> tuple[dict, dict[tuple[str, str], set[str]]]:
    """The whole MuEP viewer under ``root`` (emptied first): ``runs`` are (agent name, label, split, results), the
    images come from ``images_dir`` (where the evaluation saved them). Returns a summary (pages, images, missing
    images, bytes) for the log, and the images of each (agent, split)."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    images = ImageStore(root, images_dir)
    entries, pages, used = [], 0, {}
    for agent, label, split, results in runs:
        used[(agent, split)] = write_split(root, agent, label, split, results, images)
        entries.append((agent, label, split, len(results), sum(not r.success for r in results)))
        pages += len(results) + 1
    write_text(root / "index.html", front_page(entries))
    if images.missing:
        log.warning("episode viewer: %d images named by the trajectories are not in %s (e.g. %s); their steps show "
                    "none (played on a worker with another file system?)", len(images.missing), images_dir,
                    sorted(images.missing)[0])
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {"pages": pages + 1, "images": len(images.written), "missing_images": len(images.missing),
            "bytes": size}, used
