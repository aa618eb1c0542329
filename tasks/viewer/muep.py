"""MuEP episode pages: one page per (agent, split, episode), an index per agent and split, a front page.

The trajectory file (``data/muep/eval/<agent>/<split>.jsonl``) holds what the agent did and what the game answered;
the viewer replays those actions in the episode's game (the evaluation's engine, so the same states) to add what the
file does not keep: the rendered image of every state (the schematic renderer, small, each distinct image stored
once), the commands that were admissible before each action, and where the RDI loop rule first fired. A replay whose
feedback differs from the recorded one is an error, never a silently wrong page.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import DataError
from tasks.muep.eval.metrics import disoriented
from tasks.muep.eval.records import EpisodeResult, EpisodeSpec
from tasks.viewer.pages import ImageStore, esc, index_link, json_script, page, select_filter, slug, write_text

log = logging.getLogger("embp")

#: Side of the viewer's images in pixels (the schematic renderer draws the state at this size directly).
IMAGE_SIZE = 160

END_REASONS = {"won": "the game's goal holds: won", "max_steps": "the step cap (max_steps) was reached",
               "loop": "the loop stop fired (an A-A or A-B-A-B repeat under the same feedback)",
               "invalid_streak": "the invalid-action streak stop fired", "call_budget": "the agent's call budget ran out",
               "agent_error": "the agent could not start the episode"}


@dataclass(frozen=True)
class Frame:
    """What the replay adds to the state before action ``step + 1`` (``step`` 0: the initial state)."""

    image: str | None               # path relative to the viewer's root, or None
    admissible: tuple[str, ...]     # the commands the game accepted in this state


def replay(result: EpisodeResult, spec: EpisodeSpec, metadata_dir: str, renderer, images: ImageStore
           ) -> list[Frame]:
    """The frames of every state of the episode: the initial one, then the one after each recorded action."""
    from tasks.muep.eval.env import EvalEnv

    env = EvalEnv.start(spec, metadata_dir)
    if env.observation != result.initial_observation:
        raise DataError(f"episode {result.episode_id} ({result.agent}): the replayed game starts with another "
                        "observation than the recorded one.", hint="The trajectories come from another version of "
                        "the data or code: rerun `dvc repro muep-eval`.")
    if renderer is not None:
        renderer.begin_scene(env.layout)

    def frame() -> Frame:
        image = images.add(env.image(renderer)) if renderer is not None else None
        return Frame(image, env.admissible())

    frames = [frame()]
    for step in result.steps:
        out = env.step(step.action)
        if out.observation != step.observation:
            raise DataError(f"episode {result.episode_id} ({result.agent}), step {step.step}: replaying "
                            f"{step.action!r} gave {out.observation[:80]!r}, the trajectory recorded "
                            f"{step.observation[:80]!r}.", hint="Rerun `dvc repro muep-eval`.")
        frames.append(frame())
    return frames


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


def steps_data(result: EpisodeResult, frames: Sequence[Frame] | None, up: str) -> list[dict]:
    """One entry per state for the page's JS: the start, then every action with the game's answer."""
    loop = first_loop(result)
    n = len(result.steps)
    frames = frames or [Frame(None, ()) for _ in range(n + 1)]
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
                "image": f"{up}{frames[0].image}" if frames[0].image else None,
                "admissible": ", ".join(frames[0].admissible) or "-", "flags": start_flags, "cls": "valid",
                "line": None})
    for k, step in enumerate(result.steps):
        before = frames[k]
        admissible = step.action in before.admissible if before.admissible else None
        flags = _flag("valid" if step.valid else "invalid (nothing happened)", "ok" if step.valid else "bad")
        if admissible is not None:
            flags += _flag("admissible" if admissible else "not admissible", "ok" if admissible else "bad")
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
        after = frames[k + 1]
        cls = "won" if step.won else ("valid" if step.valid else "invalid")
        out.append({"label": f"step {step.step} of {n}", "action": step.action or "(empty)",
                    "observation": step.observation, "goals": goals(step.goals_met),
                    "conditions": conditions(step.conditions_met),
                    "image": f"{up}{after.image}" if after.image else None,
                    "admissible": ", ".join(before.admissible) or "-", "flags": flags,
                    "cls": cls + (" loop" if loop == step.step else ""), "line": None})
    return out


def episode_page(result: EpisodeResult, frames: Sequence[Frame] | None, split: str, up: str = "../../") -> str:
    outcome = "success" if result.success else f"failure ({result.end_reason})"
    facts = (f"<table><tr><th>agent</th><td>{esc(result.agent)}</td><th>split</th><td>{esc(split)}</td></tr>"
             f"<tr><th>task type</th><td>{esc(result.task_type)}</td><th>scene</th><td>{esc(result.scene)}</td></tr>"
             f"<tr><th>instruction</th><td colspan=3 id='instruction'>{esc(result.instruction)}</td></tr>"
             f"<tr><th>outcome</th><td id='outcome'>{esc(outcome)}</td><th>steps</th><td>{len(result.steps)}</td>"
             f"</tr></table>")
    body = (facts + '<div class="step-nav"><button id="prev">&larr; prev</button><button id="next">next &rarr;'
            '</button> <b id="step-no"></b> <span class="muted">keys: &larr; &rarr; (or j k, space), Home, End'
            '</span></div><div class="strip" id="strip"></div>'
            '<div class="episode"><div class="image"><img id="step-image" alt="rendered state"></div>'
            '<div class="text"><div id="step-flags"></div>'
            '<p><b>action</b>: <code id="step-action"></code></p>'
            '<p><b>observation</b> (the text state the agent sees next)</p><pre id="step-observation"></pre>'
            '<p><b>sub-goals met</b>: <span id="step-goals"></span> &nbsp; <b>goal conditions met</b>: '
            '<span id="step-conditions"></span></p>'
            '<details><summary>admissible commands before this action</summary><pre id="step-admissible"></pre>'
            '</details></div></div>'
            + json_script("episode-data", {"steps": steps_data(result, frames, up)}))
    return page(f"{result.episode_id} - {result.agent}", body, up="index.html")


def episode_file(result: EpisodeResult) -> str:
    return f"{slug(result.episode_id)}.html"


def index_page(label: str, split: str, results: Sequence[EpisodeResult]) -> str:
    rows = []
    for r in sorted(results, key=lambda r: r.episode_id):
        outcome = "success" if r.success else "failure"
        rows.append(f'<tr class="{"win" if r.success else "fail"}" data-outcome="{outcome}" '
                    f'data-type="{esc(r.task_type)}" data-end="{esc(r.end_reason)}">'
                    f'<td><a href="{esc(episode_file(r))}">{esc(r.episode_id)}</a></td>'
                    f'<td class="outcome">{outcome}</td><td>{esc(r.end_reason)}</td><td>{esc(r.task_type)}</td>'
                    f'<td>{len(r.steps)}</td><td>{r.goals_met} / {r.goals_total}</td><td>{esc(r.instruction)}</td>'
                    "</tr>")
    failures = sum(not r.success for r in results)
    body = (f"<p>{len(results)} episodes, {failures} failed. Filter:</p><div class='filters'>"
            + select_filter("outcome", "outcome", ["failure", "success"])
            + select_filter("type", "task type", sorted({r.task_type for r in results}))
            + select_filter("end", "end reason", sorted({r.end_reason for r in results}))
            + "<span id='shown' class='muted'></span></div>"
            "<table id='episodes'><tr><th>episode</th><th>outcome</th><th>end reason</th><th>task type</th>"
            "<th>steps</th><th>sub-goals</th><th>instruction</th></tr>" + "".join(rows) + "</table>")
    return page(f"{label} on {split}: episodes", body, up="../../index.html")


def write_split(root: Path, agent: str, label: str, split: str, results: Sequence[EpisodeResult],
                specs: dict[str, EpisodeSpec], metadata_of, images: ImageStore, renderer) -> set[str]:
    """The pages of one (agent, split): every episode, then its index. ``specs``: episode id -> spec (for the
    replay; an episode without one gets its page without images or admissible commands). Returns the images the
    pages show (paths relative to ``root``)."""
    folder = root / slug(agent) / slug(split)
    used: set[str] = set()
    for result in results:
        spec = specs.get(result.episode_id)
        frames = (replay(result, spec, metadata_of(spec.source), renderer, images)
                  if spec is not None and result.end_reason != "agent_error" else None)
        used |= {f.image for f in frames or () if f.image}
        write_text(folder / episode_file(result), episode_page(result, frames, split))
    write_text(folder / "index.html", index_page(label, split, results))
    return used


def stage_artifact(root: Path, agent: str, split: str, images: set[str], target: Path) -> Path:
    """``target/viewer``: the pages of one (agent, split) and the images they show, in the viewer's own layout (the
    relative links hold), to log as one MLflow run's artifact."""
    import shutil

    out = target / "viewer"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(root / slug(agent) / slug(split), out / slug(agent) / slug(split))
    for name in sorted(images):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / name, out / name)
    return out


def front_page(entries: Sequence[tuple[str, str, str, int, int]]) -> str:
    """(agent, label, split, episodes, failures) of every index."""
    rows = "".join(f"<tr><td>{esc(label)}</td><td><a href='{esc(index_link(agent, split))}'>{esc(split)}</a></td>"
                   f"<td>{n}</td><td>{failed}</td></tr>" for agent, label, split, n, failed in entries)
    return page("MuEP episodes", "<table><tr><th>agent</th><th>split</th><th>episodes</th><th>failed</th></tr>"
                + rows + "</table>")


def build(root: Path, runs: Sequence[tuple[str, str, str, Sequence[EpisodeResult]]],
          specs: Sequence[EpisodeSpec], metadata_of, renderer_name: str = "schematic"
          ) -> tuple[dict, dict[tuple[str, str], set[str]]]:
    """The whole MuEP viewer under ``root`` (emptied first): ``runs`` are (agent name, label, split, results).
    Returns a summary (pages, images, bytes) for the log, and the images of each (agent, split)."""
    import shutil

    from tasks.muep.eval.env import announce, engine
    from tasks.muep.render import build_renderer

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    by_id = {s.episode_id: s for s in specs}
    announce(engine(), [(metadata_of(s.source), s.scene, s.task_type, s.object_type, s.target_type)
                        for s in specs])
    renderer = build_renderer(renderer_name, size=IMAGE_SIZE)
    images = ImageStore(root)
    entries, pages, used = [], 0, {}
    try:
        for agent, label, split, results in runs:
            used[(agent, split)] = write_split(root, agent, label, split, results, by_id, metadata_of, images,
                                               renderer)
            entries.append((agent, label, split, len(results), sum(not r.success for r in results)))
            pages += len(results) + 1
    finally:
        renderer.close()
    write_text(root / "index.html", front_page(entries))
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {"pages": pages + 1, "images": len(images.written), "bytes": size}, used
