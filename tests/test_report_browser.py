"""The sweep report in a real browser: Debian's Chromium, headless, opens the page from its
file, takes a screenshot (kept under build/test-artifacts), logs no console error, and the
page asks for nothing over the network (Chromium's NetLog: the requests a page starts carry
its origin; Chromium's own background requests carry none).

A control page with a console error and an image from 127.0.0.1 goes through the same checks
first, so that neither can pass by seeing nothing.

At a phone's width (390 CSS pixels, emulated through the DevTools protocol on a pipe, as a phone
lays a page out) and a desktop's, the page must not scroll sideways: long ids, quotes, tables
and the chart wrap or scroll inside their own box. The measuring runs in DevTools, not in the
page, which still loads no script. A control page too wide for a phone is measured first.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from exporter.cli import main
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

CHROMIUM = shutil.which("chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "build" / "test-artifacts"

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not __import__("os").environ.get("CI"),
    reason="Debian's chromium is not installed (scripts/test installs it in CI)",
)

# the probe's flags: without the background-networking ones, Chromium's own connections are
# refused by this machine's closed network, many at a time
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


def _open(page: Path, work: Path, screenshot: Path) -> tuple[list[str], set[str]]:
    """Open ``page`` in headless Chromium: its console messages, and the URLs it requested."""
    assert CHROMIUM is not None, "chromium is needed in CI: apt-get install chromium"
    netlog = work / "netlog.json"
    done = subprocess.run(
        [
            CHROMIUM,
            *_FLAGS,
            f"--user-data-dir={work / 'profile'}",
            f"--log-net-log={netlog}",
            "--window-size=1200,2400",
            f"--screenshot={screenshot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return console, _page_requests(orjson.loads(netlog.read_bytes()))


def _page_requests(netlog: dict[str, Any]) -> set[str]:
    """URLs of the requests a page started: Chromium's own have no origin ("not an origin")."""
    names = {number: name for name, number in netlog["constants"]["logEventTypes"].items()}
    return {
        params["url"]
        for event in netlog["events"]
        if names.get(event["type"]) == "URL_REQUEST_START_JOB"
        and "url" in (params := event.get("params") or {})
        and params.get("initiator") != "not an origin"
    }


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_the_checks_see_a_console_error_and_a_request(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/control.png">'
        '<script>console.error("control error")</script></body></html>'
    )
    console, requests = _open(control, tmp_path, tmp_path / "control.png")
    assert any("control error" in line for line in console)
    assert requests == {"http://127.0.0.1:9/control.png"}


def test_the_report_opens_offline_with_no_console_error(tmp_path: Path) -> None:
    scenario = write_scenario(build_scenario(ScenarioConfig(seed=5, answers=800)), tmp_path)
    report = tmp_path / "sweep report.html"  # a space: the URI is quoted
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    assert main([*args, "--no-progress", "--judge-sample", "0", "--report", str(report)]) in (0, 1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "sweep-report.png"
    console, requests = _open(report, tmp_path, screenshot)
    assert console == []
    assert requests == set(), "the page asks for nothing: styles inline, the chart in SVG"
    assert _png_size(screenshot) == (1200, 2400)
    assert screenshot.stat().st_size > 50_000, "a page with text and a chart, not a blank"


# -- a phone's width and a desktop's -----------------------------------------------------------

PHONE, DESKTOP = 390, 1100

# What the page looks like to a reader, measured in it: its width against the viewport's, what
# pokes out of it (past the right edge, and not inside a box that scrolls), numbers broken over
# lines, and how much of an example's box its quote gets.
_MEASURE = r"""JSON.stringify((() => {
  const scrolls = e => { for (let a = e.parentElement; a; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true; }
    return false; };
  const out = [...document.querySelectorAll('body *')].filter(e =>
      e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && !scrolls(e));
  const lines = e => { const r = document.createRange(); r.selectNodeContents(e);
    return new Set([...r.getClientRects()].map(c => Math.round(c.top))).size; };
  const broken = [...document.querySelectorAll('td.n')].filter(e => lines(e) > 1);
  const words = e => e.textContent.trim().split(/\s+/).length;
  const split = [...document.querySelectorAll('th, td')].filter(e =>
      !e.querySelector('code') && lines(e) > words(e));
  const quotes = [...document.querySelectorAll('.example dd.quote')].map(d =>
      d.getBoundingClientRect().width / d.closest('.example').getBoundingClientRect().width);
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
      (e.className && typeof e.className === 'string' ? '.' + e.className : '');
  return {scroll: document.documentElement.scrollWidth, inner: document.documentElement.clientWidth,
          out: out.slice(0, 8).map(name), broken: broken.slice(0, 8).map(e => e.textContent),
          split: split.slice(0, 8).map(e => e.textContent),
          quote_share: quotes.length ? Math.min(...quotes) : null};
})())"""


class DevTools:
    """Chromium driven through the DevTools protocol on a pipe (--remote-debugging-pipe: its
    file descriptors 3 and 4), one page."""

    def __init__(self, process: subprocess.Popen[bytes], send: int, receive: int) -> None:
        self.process, self._send, self._receive = process, send, receive
        self._buffer, self._id = b"", 0
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self.session = attached["sessionId"]

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._receive, 1 << 16)
            assert chunk, "chromium closed the pipe"
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)  # type: ignore[no-any-return]

    def call(self, method: str, *, page: bool = False, **params: Any) -> dict[str, Any]:
        self._id += 1
        command: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if page:
            command["sessionId"] = self.session
        os.write(self._send, json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._id:
                assert "error" not in message, message["error"]
                return message["result"]  # type: ignore[no-any-return]

    def open(self, url: str, width: int, height: int) -> None:
        """``url`` laid out at ``width`` CSS pixels (a phone's, below 600: mobile, so the page's
        viewport meta counts), loaded."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            page=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 600,
        )
        self.call("Page.enable", page=True)
        self.call("Page.navigate", page=True, url=url)
        while self._message().get("method") != "Page.loadEventFired":
            pass

    def measure(self) -> dict[str, Any]:
        found = self.call("Runtime.evaluate", page=True, expression=_MEASURE, returnByValue=True)
        return json.loads(found["result"]["value"])  # type: ignore[no-any-return]

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", page=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))


@contextmanager
def _devtools(work: Path) -> Iterator[DevTools]:
    assert CHROMIUM is not None, "chromium is needed in CI: apt-get install chromium"
    commands, ours = os.pipe()  # chromium reads its commands from its fd 3
    theirs, replies = os.pipe()  # and writes its replies to its fd 4

    def descriptors() -> None:
        os.dup2(commands, 3)
        os.dup2(replies, 4)

    process = subprocess.Popen(
        [CHROMIUM, *_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={work / 'devtools'}"],
        preexec_fn=descriptors,  # noqa: PLW1509 - two dup2 calls, no lock taken
        pass_fds=(3, 4),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(commands)
    os.close(replies)
    try:
        yield DevTools(process, ours, theirs)
    finally:
        os.close(ours)
        os.close(theirs)
        process.kill()
        process.wait(30)


def _wide_page(tmp_path: Path) -> Path:
    """The report at its widest: a sweep compared with an earlier one (both change tables), a
    store of long chunker names, and verdicts whose ids, sources and quotes are one long word."""
    scenario = write_scenario(build_scenario(ScenarioConfig(seed=5, answers=800)), tmp_path)
    verdicts, summary = tmp_path / "v.jsonl.gz", tmp_path / "summary.json"
    args = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    args += ["--no-progress", "--judge-sample", "0", "--out", str(verdicts), "--format", "json"]
    with open(summary, "w") as out, __import__("contextlib").redirect_stdout(out):
        assert main(args) in (0, 1)
    record = orjson.loads(summary.read_bytes())
    record["chunkers"] = [{"chunker": "pdfx-" + "9" * 120, "chunks": 7}, *record["chunkers"]]
    summary.write_bytes(orjson.dumps(record))
    word = "x" * 300
    hostile = {
        "citation_id": "cit-" + word,
        "doc_id": "doc-" + word,
        "source": "source-" + word,
        "status": "drift_unrepaired",
        "action": "degrade_to_document",
        "reason": "quote_not_found",
        "evidence": {"quote": word, "recorded": "y" * 300, "found": None},
    }
    with gzip.open(verdicts, "ab") as out:
        out.write(orjson.dumps(hostile) + b"\n")
    previous = tmp_path / "previous.jsonl"
    previous.write_bytes(orjson.dumps({**hostile, "citation_id": "gone"}) + b"\n")
    page = tmp_path / "wide.html"
    report = ["report", str(verdicts), "--summary", str(summary), "--previous", str(previous)]
    assert main([*report, "--out", str(page)]) == 0
    return page


def test_the_measure_sees_a_page_too_wide_for_a_phone(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
        '</head><body><table><tr><td class="n">12,345</td><td>'
        + "w" * 200
        + "</td></tr></table></body></html>"
    )
    with _devtools(tmp_path) as browser:
        browser.open(control.as_uri(), PHONE, 800)
        found = browser.measure()
    assert found["inner"] == PHONE and found["scroll"] > PHONE and found["out"]


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_report_never_scrolls_sideways(tmp_path: Path, width: int) -> None:
    page = _wide_page(tmp_path)
    with _devtools(tmp_path) as browser:
        browser.open(page.as_uri(), width, 900)
        found = browser.measure()
    assert found["inner"] == width
    assert found["scroll"] <= width, f"the page scrolls sideways: {found['out']}"
    assert found["out"] == [], "everything wider than the page scrolls in its own box"
    assert found["broken"] == [], "a number reads on one line"
    assert found["split"] == [], "a table's words are whole (a long id may wrap anywhere)"
    # on a phone an example's texts take the box's width, their labels above them
    assert found["quote_share"] is not None and found["quote_share"] > 0.6


def test_screenshots_of_the_example_at_a_desktop_s_and_a_phone_s_width(tmp_path: Path) -> None:
    """The pictures of the docs (docs/images/sweep-report*.png are these, looked at)."""
    page = tmp_path / "x.html"
    assert main(["sweep", "--example", "--no-progress", "--report", str(page)]) in (0, 1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with _devtools(tmp_path) as browser:
        for width, height, name in ((DESKTOP, 1500, ""), (PHONE, 1700, "-phone")):
            browser.open(page.as_uri(), width, height)
            assert browser.measure()["scroll"] <= width
            shot = ARTIFACTS / f"sweep-report-example{name}.png"
            browser.screenshot(shot)
            assert _png_size(shot) == (width, height)
