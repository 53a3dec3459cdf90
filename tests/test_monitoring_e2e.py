"""The whole monitoring path, for real: Kafka -> exporter -> Prometheus with the shipped rules
-> Alertmanager -> a webhook receiver on 127.0.0.1; then every board query against that
Prometheus. Only the rules' ``for:`` durations are shortened, in a generated test copy.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_support import (
    ExporterProcess,
    answer_messages,
    chunk_messages,
    create_topics,
    produce,
)
from monitoring_support import MonitoringStack, grafana_substitute

from exporter import alerting
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from mixin.config import DEFAULT
from mixin.dashboards import panel_queries

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason="Prometheus and Alertmanager not installed"
    ),
]

REPO = Path(__file__).resolve().parent.parent
BOARD = json.loads((REPO / "grafana" / "dashboards" / "citation-drift.json").read_text())


def _scenario(directory: Path, **shares: float) -> dict[str, Path]:
    changes = {
        "resize_share": 0.0,
        "retypeset_share": 0.0,
        "refresh_share": 0.0,
        "silent_edit_share": 0.0,
        "delete_share": 0.0,
        **shares,
    }
    config_ = ScenarioConfig(seed=31, answers=1500, documents=40, invalid_lines=5, **changes)
    return write_scenario(build_scenario(config_), directory)


@pytest.fixture
def stack_for(tmp_path: Path) -> Iterator[object]:
    stacks: list[MonitoringStack] = []

    def start(exporter: ExporterProcess) -> MonitoringStack:
        stack = MonitoringStack(tmp_path, exporter.port, DEFAULT.job)
        stacks.append(stack)
        stack.wait_ready()
        return stack

    yield start
    for stack in stacks:
        stack.stop()


def _run_reindex_story(
    bootstrap: str, scenario: dict[str, Path], exporter: ExporterProcess
) -> None:
    """Baseline traffic on the original store, then the change, then more traffic."""
    topics = exporter.topics
    before = chunk_messages(scenario["chunks_before"])
    answers = answer_messages(scenario["citations"])
    half = len(answers) // 2
    produce(bootstrap, topics.chunks, before)
    exporter.wait_ready()
    produce(bootstrap, topics.answers, answers[:half])
    exporter.wait_for("citation_exporter_events_total", half, topic=topics.answers)
    time.sleep(3)  # a few scrapes of healthy traffic
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"])[len(before) :])
    exporter.wait_for("citation_store_last_chunker_change_timestamp_seconds", 1)
    produce(bootstrap, topics.answers, answers[half:])
    exporter.wait_for("citation_exporter_events_total", len(answers), topic=topics.answers)


def test_a_chunk_size_change_pages_and_every_board_query_returns_data(
    bootstrap: str, tmp_path: Path, stack_for: object
) -> None:
    scenario = _scenario(tmp_path / "scenario", resize_share=1.0)
    topics = create_topics(bootstrap)
    exporter = ExporterProcess(
        bootstrap, topics, tmp_path / "exporter.log", sweep_quiet_seconds="2"
    )
    try:
        stack = stack_for(exporter)  # type: ignore[operator]
        _run_reindex_story(bootstrap, scenario, exporter)
        pages = stack.wait_for_alert("CitationDriftRateHigh", seconds=90)
        assert pages, f"no page reached the receiver; got {stack.webhook.alerts()}"
        page = pages[0]
        assert page["status"] == "firing"
        assert page["labels"]["severity"] == "critical"
        assert page["labels"]["job"] == DEFAULT.job
        assert page["annotations"]["runbook_url"] == DEFAULT.runbook("CitationDriftRateHigh")
        assert "of the inline citation checks" in page["annotations"]["description"]
        assert not stack.wait_for_alert("CitationContentRefreshDetected", seconds=1)

        # the re-index sweep has run by now; let Prometheus scrape its gauges
        exporter.wait_for("citation_sweep_last_completed_timestamp_seconds", 1)
        time.sleep(3)
        empty = []
        for title, expr in panel_queries(BOARD):
            if not stack.query(grafana_substitute(expr, BOARD, range_="5m")):
                empty.append(f"{title}: {expr}")
        assert not empty, "board queries without data:\n" + "\n".join(empty)
    finally:
        assert exporter.stop() == 0


def test_a_content_refresh_opens_a_ticket_and_never_pages(
    bootstrap: str, tmp_path: Path, stack_for: object
) -> None:
    scenario = _scenario(tmp_path / "scenario", refresh_share=0.9)
    topics = create_topics(bootstrap)
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log")
    try:
        stack = stack_for(exporter)  # type: ignore[operator]
        _run_reindex_story(bootstrap, scenario, exporter)
        tickets = stack.wait_for_alert("CitationContentRefreshDetected", seconds=90)
        assert tickets and tickets[0]["labels"]["severity"] == "warning"
        assert "not drift" in tickets[0]["annotations"]["description"]
        time.sleep(15)  # longer than the shortened for: of the drift alert
        assert not [
            a for a in stack.webhook.alerts() if a["labels"]["alertname"] == "CitationDriftRateHigh"
        ]
        superseded = stack.query("job:citation_superseded_failures_per_check:ratio_rate15m")
        drift = stack.query("job:citation_drift_failures_per_check:ratio_rate15m")
        assert float(superseded[0]["value"][1]) > 0.1
        assert float(drift[0]["value"][1]) < alerting.DRIFT_RATIO_PAGE
    finally:
        assert exporter.stop() == 0
