"""The exporter without Kafka: the demo, and replaying a file through the same pipeline."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from kafka_support import free_port

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.demo.traffic import run_demo
from exporter.pipeline.core import Pipeline
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario


def test_demo_pages_at_the_chunk_size_change_and_not_at_the_refresh(tmp_path: Path) -> None:
    port = free_port()
    report = tmp_path / "demo.html"
    scraped: list[bytes] = []

    def scrape_once_running() -> None:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    scraped.append(r.read())
                    return
            except OSError:
                time.sleep(0.1)

    scraper = threading.Thread(target=scrape_once_running)
    scraper.start()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter.cli",
            "demo",
            "--seconds-per-phase",
            "2",
            "--answers",
            "1500",
            "--metrics-port",
            str(port),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    scraper.join()
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("\n\n")
    phase2 = [b for b in blocks if b.startswith("phase 2 of 3")]
    phase3 = [b for b in blocks if b.startswith("phase 3 of 3")]
    assert phase2 and phase3
    assert "CitationDriftRateHigh would PAGE" in phase2[-1]
    assert "would PAGE" not in phase3[-1]
    assert "CitationContentRefreshDetected" in phase3[-1]
    assert "shift clusters of repaired drift: none yet" not in phase2[-1]
    # half the citations carry doc_span: repeated quotes after the chunk-size change are repaired
    hinted = re.search(r"repaired by their position hint \(doc_span\): ([\d,]+)", phase2[-1])
    assert hinted and int(hinted[1].replace(",", "")) > 0
    # coverage: a few claims go uncited all along, below the ticket line
    assert re.search(r"uncited +\d\.\d\d%  of [\d,]+ claims", phase3[-1])
    assert "CitationUncitedClaimsHigh" not in done.stdout
    # entailment: the scenario misstates a number in 2% of claims; the lexical judge flags them
    flags = re.search(r"entailment +([\d,]+) of ([\d,]+) claims not entailed", phase3[-1])
    assert flags and 0 < int(flags[1].replace(",", "")) < int(flags[2].replace(",", "")) / 10
    assert re.search(r"uncited ratio +\d\.\d\d%   [\d,]+ claims without a citation", done.stdout)
    assert scraped and b"citation_checks_total" in scraped[0]
    assert b"citation_entailment_checks_total" in scraped[0]
    # the report of what it ran: the chunk-size change's cluster, with examples
    page = report.read_text()
    assert "Citation drift demo report" in page and "<svg" in page
    assert "Cluster A:" in page and "stored quote" in page and "<script" not in page


@pytest.fixture
def mixed_file(tmp_path: Path) -> tuple[Path, int]:
    """Chunks, answers, a re-index, more answers: one JSONL file in event order."""
    paths = write_scenario(build_scenario(ScenarioConfig(seed=4, answers=400)), tmp_path)
    before = paths["chunks_before"].read_bytes().splitlines()
    live = paths["chunks"].read_bytes().splitlines()
    answers = paths["citations"].read_bytes().splitlines()
    half = len(answers) // 2
    lines = before + answers[:half] + live[len(before) :] + answers[half:] + [b"{broken"]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    citations = paths["expected"].read_bytes().count(b"\n")
    return path, citations


def test_run_source_replays_a_file_through_the_pipeline(
    mixed_file: tuple[Path, int], tmp_path: Path
) -> None:
    path, citations = mixed_file
    out = tmp_path / "verdicts.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter.cli",
            "run",
            "--source",
            str(path),
            "--out",
            str(out),
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"replay: {citations + 1:,} citations checked" in done.stderr
    assert "invalid                    1" in done.stderr
    verdicts = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert verdicts and all(v["status"] != "ok" for v in verdicts)
    assert any(v["status"] == "drift_repaired" for v in verdicts), "drift after the re-index"


@pytest.mark.parametrize(
    ("source", "out", "error"),
    [
        ("missing.jsonl", None, "cannot replay --source {tmp}/missing.jsonl: No such file"),
        ("events.jsonl", "no-folder/v.jsonl", "--out {tmp}/no-folder/v.jsonl: "),
    ],
)
def test_run_source_checks_its_files_before_it_opens_anything(
    source: str, out: str | None, error: str, tmp_path: Path
) -> None:
    (tmp_path / "events.jsonl").write_bytes(b"{}\n")
    command = [sys.executable, "-m", "exporter.cli", "run", "--source", str(tmp_path / source)]
    command += ["--out", str(tmp_path / out)] if out else []
    done = subprocess.run(
        [*command, "--metrics-port", "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    # one line (naming a missing source once), and no metrics server was started for it
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("citation-exporter: error: " + error.format(tmp=tmp_path)), line
    assert out or line.count(str(tmp_path)) == 1
    assert "metrics on" not in done.stderr


def test_run_source_reads_a_pipe_whole_after_checking_it(mixed_file: tuple[Path, int]) -> None:
    # a pipe can be read once: checking it before the replay must not take its first bytes
    path, citations = mixed_file
    command = [sys.executable, "-m", "exporter.cli", "run", "--source", "/dev/stdin"]
    done = subprocess.run(
        [*command, "--metrics-port", "0"],
        input=path.read_bytes(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"replay: {citations + 1:,} citations checked".encode() in done.stderr


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("out", "in_place"), [(Terminal(), True), (io.StringIO(), False)])
def test_the_demo_redraws_in_place_on_a_terminal_and_appends_when_piped(
    out: io.StringIO, in_place: bool
) -> None:
    run_demo(
        Pipeline(ChunkStore(), Policy()),
        out,
        record=lambda outcomes: None,
        url="http://127.0.0.1:9877/metrics",
        chunks_topic="rag.chunks",
        answers_topic="rag.answers",
        seconds_per_phase=0.05,
        answers=90,
    )
    shown = out.getvalue()
    assert ("\x1b[H\x1b[J" in shown) is in_place, "cleared and redrawn only on a terminal"
    views = [block for block in shown.split("\n\n") if block.lstrip("\x1b[HJ").startswith("phase")]
    assert in_place or len(views) >= 3, "piped, every view is kept, one after the other"
