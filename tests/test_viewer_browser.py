"""Browser test of the episode viewer: headless Chromium (Debian's `chromium`, driven over its DevTools protocol on a
pipe -- no network, no driver) opens a leaderboard built from a small evaluation in a temporary root, follows an
agent row's link to its episodes, filters the failures, opens one, steps through it with the keyboard and checks
what the page shows. A screenshot is kept under the test's tmp path."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.textworld, pytest.mark.browser]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """Headless Chromium with ``--remote-debugging-pipe``: DevTools commands as NUL-terminated JSON on fd 3, answers
    and events on fd 4 (events are kept in ``events``, in the order they came)."""

    def __init__(self, profile: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:
            """In the child: the two pipe ends at fds 3 and 4, as Chromium expects them, inheritable (copied first:
            either may be 3 or 4 already, and dup2 onto itself would keep its close-on-exec flag). close_fds stays
            off, as it would close them again after this hook."""
            ends = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--allow-file-access-from-files",
             f"--user-data-dir={profile}", "--window-size=1200,900", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.session = None
        self.events: list[dict] = []

    def send(self, method: str, session: bool | str = True, timeout: float = 30.0, **params) -> dict:
        """A command to the page's session (``session`` True), the browser (False) or the session of that id."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if isinstance(session, str):
            message["sessionId"] = session
        elif session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buffer:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"Chromium closed its pipe during {method}")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(line)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)
        raise TimeoutError(method)

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", session=False, url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable")
        self.send("Page.navigate", url=url)
        self.wait_for(url)

    def js(self, expression: str, session: bool | str = True):
        result = self.send("Runtime.evaluate", session=session, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, url_part: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.js("document.readyState") == "complete" and url_part in self.js("location.href"):
                return
            time.sleep(0.1)
        raise TimeoutError(f"no page {url_part} (at {self.js('location.href')})")

    def key(self, key: str, code: int, session: bool | str = True) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", session=session, type=kind, key=key, code=key,
                      windowsVirtualKeyCode=code)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    """A small evaluation (oracle + random on the fixture's test episodes), its viewer and its leaderboard page."""
    from test_viewer import evaluate_small, write_leaderboard

    root = tmp_path_factory.mktemp("viewer-run")
    runs, specs, settings = evaluate_small()
    write_leaderboard(root, runs, specs, settings)
    return root


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (the Makefile's SYS_PKGS has it)")
def test_leaderboard_links_to_episodes_stepped_with_the_keyboard(run_root, tmp_path):
    browser = Chromium(tmp_path / "profile")
    try:
        browser.open((run_root / "reports/leaderboard.html").as_uri())
        links = browser.js("Array.from(document.querySelectorAll('a.episodes')).map(a => a.closest('tr')"
                           ".cells[0].textContent.split(' ')[0] + '|' + a.getAttribute('href'))")
        assert any(link.startswith("random|viewer/muep/random/") for link in links), links
        # follow the random agent's first link (a click, as a reader would)
        browser.js("Array.from(document.querySelectorAll('a.episodes')).find(a => a.closest('tr').cells[0]"
                   ".textContent.startsWith('random')).click()")
        browser.wait_for("/viewer/muep/random/")
        assert "random on" in browser.js("document.querySelector('h1').textContent")
        total = browser.js("document.querySelectorAll('tr[data-outcome]').length")
        browser.js("const s = document.getElementById('filter-outcome'); s.value = 'failure';"
                   "s.dispatchEvent(new Event('change'))")
        visible = browser.js("Array.from(document.querySelectorAll('tr[data-outcome]'))"
                             ".filter(r => r.style.display !== 'none').map(r => r.dataset.outcome)")
        assert visible and set(visible) == {"failure"} and len(visible) <= total
        assert browser.js("document.getElementById('shown').textContent") == f"{len(visible)} of {total} shown"
        browser.js("Array.from(document.querySelectorAll('tr[data-outcome]')).find(r => r.style.display !== 'none')"
                   ".querySelector('a').click()")
        browser.wait_for(".html")
        assert browser.js("document.getElementById('outcome').textContent").startswith("failure")
        assert browser.js("document.getElementById('step-no').textContent").startswith("start (0 of ")
        steps = browser.js("document.querySelectorAll('#strip span').length")
        assert steps > 3
        browser.key("ArrowRight", 39)
        browser.key("ArrowRight", 39)
        assert browser.js("document.getElementById('step-no').textContent") == f"step 2 of {steps - 1}"
        assert browser.js("document.querySelector('#strip span.current').dataset.step") == "2"
        action = browser.js("document.getElementById('step-action').textContent")
        assert action and action != "(none yet)"
        assert browser.js("document.getElementById('step-observation').textContent").strip()
        assert "/" in browser.js("document.getElementById('step-goals').textContent")
        flags = browser.js("document.getElementById('step-flags').textContent")
        assert "valid" in flags and "admissible" in flags
        deadline = time.monotonic() + 10
        while not browser.js("document.getElementById('step-image').complete") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert browser.js("document.getElementById('step-image').naturalWidth") > 0, "the step's image did not load"
        browser.key("ArrowLeft", 37)
        assert browser.js("document.getElementById('step-no').textContent") == f"step 1 of {steps - 1}"
        browser.key("End", 35)
        assert browser.js("document.getElementById('step-no').textContent") == f"step {steps - 1} of {steps - 1}"
        assert "ended:" in browser.js("document.getElementById('step-flags').textContent")
        shot = browser.screenshot(tmp_path / "episode.png")
        assert shot.stat().st_size > 10_000
    finally:
        browser.close()
