"""RoboScript episode pages from ``reports/roboscript/eval_details.json``: one page per (task, repeat) -- the code
with the line of the tool call being run, each call with its arguments and its result or error, the items checked
at the end, top views of the world before and after (inline SVG, no image files) -- and an index per code writer;
and the one-file book of them all that the run's MLflow run carries (:mod:`tasks.viewer.book`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from core.errors import DataError
from tasks.viewer import book
from tasks.viewer.pages import esc, json_script, page, select_filter, slug, write_text

SVG_PX = 300


def _top_view(table: Sequence[float], models: dict, boxes: dict[str, Sequence[float]], title: str) -> str:
    """A top view as SVG: up is +x (away from the robot), left is +y, as tasks/roboscript/render.py draws worlds."""
    x0, y0, x1, y1 = table
    pad = 0.05
    scale = SVG_PX / max(x1 - x0 + 2 * pad, y1 - y0 + 2 * pad)

    def rect(bx0: float, by0: float, bx1: float, by1: float) -> tuple[float, float, float, float]:
        return ((y1 + pad - by1) * scale, (x1 + pad - bx1) * scale, (by1 - by0) * scale, (bx1 - bx0) * scale)

    width, height = (y1 - y0 + 2 * pad) * scale, (x1 - x0 + 2 * pad) * scale
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'role="img" aria-label="{esc(title)}">',
             '<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="#d9c7a3" stroke="#7a6a4a"/>'.format(
                 *rect(x0, y0, x1, y1))]
    order = sorted(boxes, key=lambda n: (models.get(n, {}).get("kind") not in ("cabinet", "container"), n))
    for name in order:
        box = boxes[name]
        info = models.get(name, {})
        rx, ry, rw, rh = rect(box[0], box[1], box[3], box[4])
        parts.append(f'<rect x="{rx:.1f}" y="{ry:.1f}" width="{rw:.1f}" height="{rh:.1f}" '
                     f'fill="{esc(info.get("colour", "#b0b0b0"))}" fill-opacity="0.85" stroke="#222" '
                     f'stroke-width="{1.4 if info.get("kind") in ("cabinet", "container") else 0.6}">'
                     f"<title>{esc(name)}</title></rect>")
        if info.get("kind") != "part":
            parts.append(f'<text x="{rx + rw / 2:.1f}" y="{ry + rh / 2:.1f}" font-size="8" text-anchor="middle">'
                         f"{esc(name.replace('_', ' '))}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _flag(text: str, kind: str) -> str:
    return f'<span class="flag {kind}">{esc(text)}</span>'


def steps_data(detail: dict, repeat: dict) -> list[dict]:
    """The start, one entry per tool call, then the end with the items checked."""
    calls = repeat.get("calls") or []
    n = len(calls)
    out = [{"label": f"start (0 of {n} calls)", "action": "(the code starts)", "observation": "",
            "flags": _flag("start", "ok"), "cls": "valid", "line": None, "image": None}]
    for call in calls:
        ok = call.get("ok", True)
        flags = _flag("ok" if ok else "raised", "ok" if ok else "bad")
        if call.get("line") is not None:
            flags += _flag(f"line {call['line']}", "warn")
        out.append({"label": f"call {call['step']} of {n}", "action": f"{call['tool']}({call.get('args', '')})",
                    "observation": call.get("result", "") if ok else call.get("error", ""), "flags": flags,
                    "cls": "valid" if ok else "invalid", "line": call.get("line"), "image": None})
    if repeat.get("steps", n) > n:
        out[-1]["flags"] += _flag(f"{repeat['steps'] - n} later calls not kept", "warn")
    items = "\n".join(f"{'OK ' if i.get('ok') else 'NO '} {i.get('detail') or i.get('description')}"
                      for i in repeat.get("items", []))
    ended = repeat.get("status", "?") + (f": {repeat['error']}" if repeat.get("error") else "")
    success = repeat.get("success")
    out.append({"label": f"end ({n} calls)", "action": "(the code ended)", "observation": items or "(no items)",
                "flags": _flag(f"ended: {ended}", "ok" if repeat.get("status") == "ok" else "bad")
                + _flag("task done" if success else "task not done", "ok" if success else "bad"),
                "cls": "won" if success else "invalid", "line": _error_line(repeat.get("error")), "image": None})
    return out


def _error_line(error: str | None) -> int | None:
    import re

    found = re.search(r"\(line (\d+)\)", error or "")
    return int(found.group(1)) if found else None


def outcome(repeat: dict) -> str:
    return "success" if repeat.get("success") else "failure"


def episode_file(task_id: str, index: int) -> str:
    return f"{slug(task_id)}_r{index}.html"


def episode_body(model: str, task_id: str, detail: dict, index: int, repeat: dict) -> str:
    """What an episode page shows: its facts, the world before and after, the step navigation, the code."""
    code = detail.get("code") or ""
    scene = detail.get("world") or {}
    pictures = ""
    if scene.get("table"):
        before = {n: m["box"] for n, m in scene.get("models", {}).items()}
        pictures = ("<div class='pictures'><figure>" + _top_view(scene["table"], scene["models"], before, "before")
                    + "<figcaption>before the code runs</figcaption></figure><figure>"
                    + _top_view(scene["table"], scene["models"], repeat.get("after") or before, "after")
                    + "<figcaption>after (the simulator's final state)</figcaption></figure></div>")
    facts = (f"<table><tr><th>code writer</th><td>{esc(model)}</td><th>task</th><td>{esc(task_id)}</td></tr>"
             f"<tr><th>instruction</th><td colspan=3 id='instruction'>{esc(detail.get('instruction', ''))}</td></tr>"
             f"<tr><th>outcome</th><td id='outcome'>{outcome(repeat)} ({esc(repeat.get('status', '?'))})</td>"
             f"<th>repeat</th><td>{index + 1}</td></tr>"
             f"<tr><th>items checked</th><td colspan=3>{esc('; '.join(detail.get('items', [])))}</td></tr></table>")
    return (facts + pictures
            + '<div class="step-nav"><button id="prev">&larr; prev</button><button id="next">next &rarr;</button> '
            '<b id="step-no"></b> <span class="muted">keys: &larr; &rarr; (or j k, space), Home, End</span></div>'
            '<div class="strip" id="strip"></div><div id="step-flags"></div>'
            '<p><b>tool call</b>: <code id="step-action"></code></p><p><b>result</b></p>'
            '<pre id="step-observation"></pre><p><b>code</b> (the line of the call highlighted)</p>'
            '<div class="code" id="code">' + "".join(f"<div>{esc(line) or ' '}</div>" for line in code.splitlines())
            + "</div>")


def episode_title(model: str, task_id: str, index: int) -> str:
    return f"{task_id} (repeat {index + 1}) - {model}"


def episode_page(model: str, task_id: str, detail: dict, index: int, repeat: dict) -> str:
    return page(episode_title(model, task_id, index), episode_body(model, task_id, detail, index, repeat)
                + json_script("episode-data", {"steps": steps_data(detail, repeat)}), up="index.html")


def index_body(tasks: dict, href: Callable[[int, str, int], str]) -> str:
    """The filters and the table of a code writer's index; ``href(n, task id, repeat)`` links the n-th listed
    episode."""
    rows = []
    n = 0
    for task_id, detail in tasks.items():
        level = task_id.split("_")[0]
        for k, repeat in enumerate(detail.get("repeats", [])):
            rows.append(f'<tr class="{"win" if repeat.get("success") else "fail"}" data-outcome="{outcome(repeat)}" '
                        f'data-type="{esc(level)}" data-end="{esc(repeat.get("status", "?"))}">'
                        f'<td><a href="{esc(href(n, task_id, k))}">{esc(task_id)} #{k + 1}</a></td>'
                        f'<td class="outcome">{outcome(repeat)}</td><td>{esc(repeat.get("status", "?"))}</td>'
                        f'<td>{esc(level)}</td><td>{repeat.get("steps", 0)}</td>'
                        f'<td>{esc(detail.get("instruction", ""))}</td></tr>')
            n += 1
        if not detail.get("repeats"):
            rows.append(f"<tr><td>{esc(task_id)}</td><td colspan=5>not run: {esc(detail.get('error') or '?')}</td>"
                        "</tr>")
    statuses = sorted({r.get("status", "?") for d in tasks.values() for r in d.get("repeats", [])})
    return ("<div class='filters'>" + select_filter("outcome", "outcome", ["failure", "success"])
            + select_filter("type", "level", sorted({t.split("_")[0] for t in tasks}))
            + select_filter("end", "end reason", statuses) + "<span id='shown' class='muted'></span></div>"
            "<table id='episodes'><tr><th>episode</th><th>outcome</th><th>end reason</th><th>level</th>"
            "<th>tool calls</th><th>instruction</th></tr>" + "".join(rows) + "</table>")


def index_page(model: str, tasks: dict) -> str:
    return page(f"{model}: RoboScript episodes", index_body(tasks, lambda n, task_id, k: episode_file(task_id, k)))


def model_link(model: str) -> str:
    """The index of a code writer relative to the RoboScript viewer's root."""
    return f"{slug(model)}/index.html"


def _check(details: dict) -> None:
    if not isinstance(details.get("tasks"), dict) or "model" not in details:
        raise DataError("the RoboScript details have no 'model' or no 'tasks' mapping (eval_details.json).")


def build(root: Path, details: dict) -> Path:
    """The pages of one evaluation's ``eval_details.json`` (``details``) under ``root/<code writer>/`` (emptied
    first; other code writers' pages are kept). Returns that folder."""
    import shutil

    _check(details)
    model = details["model"]
    folder = root / slug(model)
    shutil.rmtree(folder, ignore_errors=True)
    for task_id, detail in details["tasks"].items():
        for k, repeat in enumerate(detail.get("repeats", [])):
            write_text(folder / episode_file(task_id, k), episode_page(model, task_id, detail, k, repeat))
    write_text(folder / "index.html", index_page(model, details["tasks"]))
    return folder


def stage_artifact(details: dict, target: Path) -> tuple[Path, dict]:
    """``target/viewer/episodes.html``: every page of ``details`` (eval_details.json) in one self-contained file, to
    log as the run's ``viewer/`` artifact (MLflow's artifact view shows it; the pages of reports/viewer/ would lose
    their links there). Returns the ``viewer`` folder and the book's summary."""
    _check(details)
    model, tasks = details["model"], details["tasks"]
    episodes = [{"title": episode_title(model, task_id, k), "body": episode_body(model, task_id, detail, k, repeat),
                 "steps": steps_data(detail, repeat)}
                for task_id, detail in tasks.items() for k, repeat in enumerate(detail.get("repeats", []))]
    html, summary = book.book(f"{model}: RoboScript episodes", index_body(tasks, lambda n, *_: f"#episode-{n}"),
                              episodes)
    return book.stage(target, html), summary
