"""The sweep report in a real browser: Debian's Chromium, headless, opens the page from its
file, takes a screenshot (kept under build/test-artifacts), logs no console error, and the
page asks for nothing over the network (Chromium's NetLog: the requests a page starts carry
its origin; Chromium's own background requests carry none).

A control page with a console error and an image from 127.0.0.1 goes through the same checks
first, so that neither can pass by seeing nothing.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
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
