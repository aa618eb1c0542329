"""The episode viewer in MLflow's artifact view: each evaluation run carries ``viewer/episodes.html``, one
self-contained file (tasks/viewer/book.py), because MLflow's UI previews an HTML artifact as a ``blob:`` document in
``<iframe sandbox="allow-scripts">``, where a page's relative links and images resolve to nothing.

Code tests of the book (its images within a byte budget, every episode and image inside, the RoboScript book), and a
browser test: a small evaluation logged to a temporary sqlite store as muep-eval logs it, `embp ui` on that store,
headless Chromium on the run's artifact page; inside MLflow's iframe the test opens a failed episode from the index,
checks that its image is drawn, steps with the keyboard, goes to the next episode and back to the list. The same run's
file-system page (reports/viewer/'s layout, logged beside it as a control) shows no image there."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from robot.pool import stop_process
from tasks.viewer import book

VENV_BIN = Path(sys.executable).parent


def _png(seed: int, side: int = 160) -> bytes:
    """A noisy drawing (noise does not compress: its size is what the budget has to hold)."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _book_data(html: str) -> dict:
    found = re.search(r'<script id="book-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "the page has no book data"
    return json.loads(found.group(1))


def test_images_shrink_then_the_later_ones_are_left_out_to_stay_within_the_budget(tmp_path):
    names = [f"{k}.png" for k in range(4)]
    for k, name in enumerate(names):
        (tmp_path / name).write_bytes(_png(k))
    full = sum(len(book._uri((tmp_path / n).read_bytes())) + len(n) + 6 for n in names)
    uris, summary = book.inline_images(tmp_path, names + names[:1] + ["gone.png"], full)
    assert summary == {"images": 4, "left_out": 0, "missing": 1, "scale": 1.0, "image_bytes": full}
    assert uris[names[0]] == book._uri((tmp_path / names[0]).read_bytes())   # at full size: the file as it is
    uris, summary = book.inline_images(tmp_path, names, full * 6 // 10)
    assert summary["scale"] < 1.0 and summary["left_out"] == 0 and summary["image_bytes"] <= full * 6 // 10
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(uris[names[0]].split(",", 1)[1]))) as image:
        assert image.width == round(160 * summary["scale"])
    small = max(len(book._uri(book._scaled((tmp_path / n).read_bytes(), book.SCALES[-1]))) + len(n) + 6
                for n in names)
    uris, summary = book.inline_images(tmp_path, names, 2 * small)
    assert summary["scale"] == book.SCALES[-1] and 2 <= summary["images"] < 4
    assert list(uris) == names[:summary["images"]] and summary["left_out"] == 4 - summary["images"]
    assert book.inline_images(tmp_path, names, 0)[1]["images"] == 0


def _inline_every_image(folder, names, budget):
    """The book's rule spelled out the slow way: every image at every scale, then the first scale at which all fit,
    else the longest prefix that fits at the smallest scale."""
    found = {n: (folder / n).read_bytes() for n in dict.fromkeys(names)}
    for scale in book.SCALES:
        uris = {n: book._uri(book._scaled(png, scale)) for n, png in found.items()}
        cost = {n: len(u) + len(n) + 6 for n, u in uris.items()}
        if sum(cost.values()) <= budget:
            return uris, scale
    kept, used = {}, 0
    for n, u in uris.items():
        if used + cost[n] > budget:
            break
        kept[n], used = u, used + cost[n]
    return kept, scale


def test_a_scale_that_cannot_hold_every_image_stops_shrinking_at_the_first_that_does_not_fit(tmp_path, monkeypatch):
    """At the paper profile a split has tens of thousands of images and its book room for a few hundred: shrinking
    all of them at each scale took minutes per run, single-threaded (13 min of muep-eval). The book must shrink only
    up to the first image that overflows, and choose exactly what the exhaustive rule chooses."""
    names = [f"{k}.png" for k in range(40)]
    for k, name in enumerate(names):
        (tmp_path / name).write_bytes(_png(k, side=64))
    one = len(book._uri((tmp_path / names[0]).read_bytes())) + len(names[0]) + 6
    calls = []
    scaled = book._scaled
    monkeypatch.setattr(book, "_scaled", lambda png, scale: calls.append(scale) or scaled(png, scale))
    for budget in (0, one // 3, 2 * one, 7 * one, 39 * one, 10 ** 9):
        calls.clear()
        uris, summary = book.inline_images(tmp_path, names, budget)
        made = list(calls)
        expected, scale = _inline_every_image(tmp_path, names, budget)
        assert uris == expected and summary["scale"] == scale, budget
        assert summary["image_bytes"] == sum(len(u) + len(n) + 6 for n, u in uris.items()) <= budget
        # each scale tried shrinks only the images that fit at it, plus the one that overflowed
        for tried in set(made):
            used, fit = 0, 0
            for n in names:
                used += len(book._uri(scaled((tmp_path / n).read_bytes(), tried))) + len(n) + 6
                if used > budget:
                    break
                fit += 1
            assert made.count(tried) == min(len(names), fit + 1), (budget, tried)
    small = len(book._uri(scaled((tmp_path / names[0]).read_bytes(), book.SCALES[-1]))) + len(names[0]) + 6
    calls.clear()
    _, summary = book.inline_images(tmp_path, names, 3 * small)
    assert summary["images"] <= 4 and len(calls) <= len(book.SCALES) * 5, "every image was shrunk although a few fit"


def test_a_book_over_budget_says_what_it_left_out(tmp_path):
    (tmp_path / "a.png").write_bytes(_png(0))
    episodes = [{"title": "e", "body": "", "steps": [{"label": "start", "image": "a.png"}]}]
    bare, _ = book.book("t", "<table></table>", episodes)   # the text alone (the viewer's CSS and JS: ~10 kB)
    budget = len(bare.encode()) + 1_000                      # no room for the image, even at half its side
    html, summary = book.book("t", "<table></table>", episodes, tmp_path, budget=budget)
    assert summary["left_out"] == 1 and summary["scale"] == book.SCALES[-1] and summary["bytes"] <= budget
    assert "1 images of the later episodes left out" in html and not _book_data(html)["images"]
    html, summary = book.book("t", "<table></table>", episodes, tmp_path)
    assert summary["images"] == 1 and "book-note" not in html and _book_data(html)["images"]["a.png"]


@pytest.mark.textworld
def test_the_muep_book_holds_the_index_every_episode_and_each_image_once(tmp_path):
    from test_viewer import evaluate_small

    from tasks.viewer.muep import listed, stage_artifact
    from tasks.viewer.pages import esc

    runs, _, settings = evaluate_small()
    name, label, split, results = next(r for r in runs if r[0] == "random")
    folder, summary = stage_artifact(label, split, results, settings.images_dir, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in folder.rglob("*")] == ["viewer/episodes.html"]
    html = (folder / "episodes.html").read_text()
    data = _book_data(html)
    names = {n for r in results for n in (r.initial_image, *(s.image for s in r.steps))}
    assert set(data["images"]) == names and summary["images"] == len(names) and summary["left_out"] == 0
    assert summary["bytes"] == len(html.encode()) < book.PAGE_BYTES
    for episode, r in zip(data["episodes"], listed(results), strict=True):
        assert r.episode_id in episode["title"] and f"id='instruction'>{esc(r.instruction)}<" in episode["body"]
        assert [s["image"] for s in episode["steps"]] == [r.initial_image, *(s.image for s in r.steps)]
    assert all(uri.startswith("data:image/png;base64,") for uri in data["images"].values())
    assert [f"#episode-{k}" for k in range(len(results))] == re.findall(r'href="(#episode-\d+)"', html)
    # nothing that needs a base URL: no file links, no image files
    assert not re.search(r'(?:href|src)="(?!#|data:)', html.split('<script id="book-data"')[0])


def test_the_roboscript_book_holds_every_repeat_with_its_code_and_top_views(tmp_path):
    from tasks.viewer import roboscript

    world = {"table": [0.0, -0.4, 0.6, 0.4], "models": {"apple": {"kind": "object", "box": [0.2, 0.0, 0.8, 0.25,
                                                                                              0.05, 0.85]}}}
    calls = [{"step": 1, "tool": "detect_objects", "args": "['apple']", "ok": True, "result": "ok", "line": 1},
             {"step": 2, "tool": "grasp", "args": "'plum'", "ok": False, "error": "no plum", "line": 2}]
    details = {"model": "rules:template-coder", "tasks": {
        "Simple_0": {"instruction": "pick the apple", "code": "detect_objects(['apple'])\ngrasp('plum')\n",
                     "items": ["apple lifted"], "world": world,
                     "repeats": [{"status": "ok", "success": True, "steps": 1, "calls": calls[:1], "items": []},
                                 {"status": "code_error", "success": False, "steps": 2, "calls": calls,
                                  "error": "no plum (line 2)", "items": []}]},
        "Hard_1": {"instruction": "open", "error": "no code", "repeats": []}}}
    folder, summary = roboscript.stage_artifact(details, tmp_path)
    html = (folder / "episodes.html").read_text()
    data = _book_data(html)
    assert summary["episodes"] == 2 and summary["images"] == 0
    assert [e["title"] for e in data["episodes"]] == ["Simple_0 (repeat 1) - rules:template-coder",
                                                      "Simple_0 (repeat 2) - rules:template-coder"]
    assert all(e["body"].count("<svg") == 2 and 'id="code"' in e["body"] for e in data["episodes"])
    assert data["episodes"][1]["steps"][-2]["line"] == 2 and "not run: no code" in html
    assert re.findall(r'href="(#episode-\d+)"', html) == ["#episode-0", "#episode-1"]


# ---- MLflow's UI in headless Chromium ----------------------------------------------------------------------------

def _serve_ui(store: Path, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """`embp ui` on ``store`` (as a user runs it): the process and the UI's base URL, once /health answers."""
    from test_cli_tools import _free_port

    params = tmp_path / "ui-params.yaml"
    params.write_text(f"tracking:\n  uri: sqlite:///{store}\n  experiment_prefix: embp\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {"HOME": str(tmp_path)}
    proc = subprocess.Popen([str(VENV_BIN / "embp"), "ui", "--port", str(port), "--params", str(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.5)
    stop_process(proc, grace_s=30)
    pytest.fail(f"embp ui did not serve MLflow on port {port}:\n{proc.stdout.read().decode(errors='replace')[-3000:]}")


class ArtifactView:
    """MLflow's run page on one artifact, in a new tab, and the document in its preview iframe (an out-of-process
    frame: reached through its own DevTools session)."""

    def __init__(self, browser, base: str, experiment_id: str, run_id: str, path: str):
        self.browser = browser
        seen = len(browser.events)
        browser.open(f"{base}/#/experiments/{experiment_id}/runs/{run_id}/artifactPath/{path}")
        browser.send("Target.setAutoAttach", autoAttach=True, waitForDebuggerOnStart=False, flatten=True)
        self.frame = self._wait(lambda: browser.js("(() => { const f = document.querySelector("
                                                   "'iframe.mlflow-html-iframe'); return f && "
                                                   "[f.getAttribute('sandbox'), f.getAttribute('src'), "
                                                   "f.hasAttribute('srcdoc')]; })()"), f"MLflow's preview of {path}")
        def attached() -> str | None:
            browser.js("0")   # events arrive while the browser answers a command
            return next((e["params"]["sessionId"] for e in browser.events[seen:][::-1]
                         if e["method"] == "Target.attachedToTarget"
                         and e["params"]["targetInfo"]["type"] == "iframe"), None)

        self.session = self._wait(attached, "the preview iframe's target")
        self._wait(lambda: self.js("document.readyState === 'complete' && document.body !== null"), "its document")

    @staticmethod
    def _wait(probe, what: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            time.sleep(0.2)
        raise TimeoutError(f"no {what} after {timeout:.0f} s")

    def js(self, expression: str):
        return self.browser.js(expression, session=self.session)

    def image_width(self) -> int:
        self._wait(lambda: self.js("document.getElementById('step-image').complete"), "loaded step image", 10)
        return self.js("document.getElementById('step-image').naturalWidth")

    def click(self, selector: str) -> None:
        """A real mouse click (it also gives the iframe the keyboard's focus) on ``selector`` inside the iframe.

        MLflow's page may still be laying itself out (its side panels load after the preview), which moves the
        iframe: the click waits until two readings of where the target is agree and both documents' hit tests at
        that point find the iframe and the target, so that it lands where a reader's would."""
        sel = json.dumps(selector)
        self.js(f"document.querySelector({sel}).scrollIntoView({{block: 'center'}})")

        def where() -> list[float]:
            frame = self.browser.js("(() => { const r = document.querySelector('iframe.mlflow-html-iframe')"
                                    ".getBoundingClientRect(); return [r.x, r.y]; })()")
            box = self.js(f"(() => {{ const r = document.querySelector({sel}).getBoundingClientRect();"
                          " return [r.x, r.y, r.width, r.height]; })()")
            return frame + box

        last: list[float] = []

        def settled():
            nonlocal last
            now, before = where(), last
            last = now
            if now != before:
                return None
            fx, fy, bx, by, bw, bh = now
            ix, iy = bx + min(bw / 2, 20), by + bh / 2
            inner = self.js(f"(() => {{ const t = document.querySelector({sel}), "
                            f"e = document.elementFromPoint({ix}, {iy}); return !!e && (e === t || t.contains(e)); }})()")
            outer = self.browser.js(f"(() => {{ const e = document.elementFromPoint({fx + ix}, {fy + iy}); "
                                    "return !!e && e.matches('iframe.mlflow-html-iframe'); })()")
            return (fx + ix, fy + iy) if inner and outer else None

        x, y = self._wait(settled, f"a settled place to click {selector}", 30)
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A small evaluation's (random agent, one split) run logged to a sqlite store as muep-eval logs it, with the
    file-system pages of the same split logged beside the book as a control."""
    from mlflow import MlflowClient
    from test_viewer import evaluate_small

    from tasks.muep.eval.runs import log_run, write_results
    from tasks.params import TrackingParams
    from tasks.viewer import muep as viewer

    root = tmp_path_factory.mktemp("viewer-mlflow")
    runs, _, settings = evaluate_small()
    name, label, split, results = next(r for r in runs if r[0] == "random")
    tracking = TrackingParams(uri=f"sqlite:///{root / 'mlflow.db'}")
    trajectories = write_results(root / f"{split}.jsonl", results)
    pages, summary = viewer.stage_artifact(label, split, results, settings.images_dir, root / "staging")
    tags = {"dataset_version": "dvc:x", "dataset": "muep-demos", "eval_fingerprint": ""}
    run_id, _, _ = log_run(tracking, label, split, {"agent": name}, tags, results, trajectories, viewer=pages)
    client = MlflowClient(tracking.uri)
    assert [a.path for a in client.list_artifacts(run_id, "viewer")] == ["viewer/episodes.html"]
    viewer.build(root / "filesystem", [(name, label, split, results)], settings.images_dir)
    client.log_artifacts(run_id, str(root / "filesystem"), "filesystem")
    failed = next(r for r in viewer.listed(results) if not r.success)
    control = f"filesystem/{name}/{split}/{viewer.episode_file(failed)}"
    return root, client.get_run(run_id).info.experiment_id, run_id, results, control


@pytest.mark.browser
@pytest.mark.network
@pytest.mark.textworld
def test_mlflows_artifact_view_shows_the_episodes_images_and_steps(logged_run, tmp_path):
    from test_viewer_browser import CHROMIUM, Chromium

    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (the Makefile's SYS_PKGS has it)")
    if not (VENV_BIN / "embp").exists():
        pytest.skip(f"no embp script next to {sys.executable} (the package is not installed into this Python)")
    root, experiment_id, run_id, results, control = logged_run
    server, base = _serve_ui(root / "mlflow.db", tmp_path)
    browser = Chromium(tmp_path / "profile")
    try:
        view = ArtifactView(browser, base, experiment_id, run_id, "viewer/episodes.html")
        sandbox, src, srcdoc = view.frame
        # the conditions the book is made for (tasks/viewer/book.py): if MLflow changes them, this says so first
        assert (sandbox, src.startswith("blob:"), srcdoc) == ("allow-scripts", True, False), view.frame
        assert view.js("self.origin") == "null" and view.js("location.href").startswith("blob:")

        assert view.js("document.querySelector('h1').textContent").startswith("random on ")
        assert view.js("document.querySelectorAll('#book-index tr[data-outcome]').length") == len(results)
        view.js("const s = document.getElementById('filter-outcome'); s.value = 'failure';"
                "s.dispatchEvent(new Event('change'))")
        failures = sum(not r.success for r in results)
        assert view.js("document.getElementById('shown').textContent") == f"{failures} of {len(results)} shown"
        view.click("#book-index tr[data-outcome]:not([style*='none']) a")
        view._wait(lambda: view.js("!document.getElementById('book-episode').hidden"), "an episode in place", 30)
        first = view.js("document.getElementById('book-title').textContent")
        assert view.js("document.getElementById('outcome').textContent").startswith("failure")
        assert view.js("document.getElementById('step-no').textContent").startswith("start (0 of ")
        assert view.image_width() > 0, "the episode's first image is not drawn in MLflow's preview"
        steps = view.js("document.querySelectorAll('#strip span').length")
        view.click("#book-title")                               # the keyboard's focus, as a reader's click gives
        browser.key("ArrowRight", 39)
        browser.key("ArrowRight", 39)
        assert view.js("document.getElementById('step-no').textContent") == f"step 2 of {steps - 1}"
        assert view.js("document.querySelector('#strip span.current').dataset.step") == "2"
        assert view.js("document.getElementById('step-action').textContent") not in ("", "(none yet)")
        assert view.image_width() > 0, "step 2's image is not drawn"
        assert view.js("location.hash") == "#episode-" + view.js(
            "String([...document.querySelectorAll('#book-index a')].findIndex(a => a.closest('tr').style.display "
            "!== 'none'))") + "-step-2"
        browser.key("End", 35)
        assert "ended:" in view.js("document.getElementById('step-flags').textContent")
        browser.screenshot(tmp_path / "mlflow-episode.png")
        if failures > 1:
            browser.key("n", 78)                                # the next failure, the filter kept
            assert view.js("document.getElementById('book-title').textContent") != first
            assert view.js("document.getElementById('outcome').textContent").startswith("failure")
        browser.key("Escape", 27)
        assert view.js("[document.getElementById('book-index').hidden, document.getElementById('book-episode')"
                       ".hidden]") == [False, True]

        # the control: reports/viewer/'s own page, previewed the same way, loses its image
        page = ArtifactView(browser, base, experiment_id, run_id, control)
        assert page.js("document.getElementById('step-no').textContent").startswith("start (0 of ")
        assert page.image_width() == 0
    finally:
        browser.close()
        stop_process(server, grace_s=30)
