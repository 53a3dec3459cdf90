"""Delivery under trouble, with a real broker: crashes, a shared group, a broker restart."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kafka_support import (
    KAFKA_LOCAL,
    ExporterProcess,
    answer_messages,
    chunk_messages,
    consume_citation_verdicts,
    create_topics,
    expected_verdicts,
    produce,
    total,
)

from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=23, answers=1200, resize_share=0.3, retypeset_share=0.1)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("resilience"))


def _failing_ids(scenario: dict[str, Path]) -> set[str]:
    return {
        e["citation_id"] for e in expected_verdicts(scenario["expected"]) if e["status"] != "ok"
    }


def test_kill_9_in_the_middle_of_a_stream_loses_nothing(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap, answer_partitions=2)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = answer_messages(scenario["citations"])
    half = len(answers) // 2
    produce(bootstrap, topics.answers, answers[:half])

    first = ExporterProcess(bootstrap, topics, tmp_path / "first.log")
    try:
        first.wait_ready()
        first.wait_for("citation_checks_total", 100, mode="inline")
    finally:
        first.stop(signal.SIGKILL)  # no clean shutdown: whatever was not committed is redone
    assert first.process.returncode == -signal.SIGKILL
    produce(bootstrap, topics.answers, answers[half:])
    second_half = sum(len(orjson.loads(v).get("citations", [1])) for _, v in answers[half:] if v)

    second = ExporterProcess(bootstrap, topics, tmp_path / "second.log")
    failing = _failing_ids(scenario)
    try:
        second.wait_ready()
        seen: set[str] = set()
        deadline = time.monotonic() + 90
        while not failing <= seen and time.monotonic() < deadline:
            records = consume_citation_verdicts(bootstrap, topics.verdicts, len(failing), seconds=5)
            seen = {r.key.decode() for r in records}
        checked_after = total(second.scrape(), "citation_checks_total", mode="inline")
    finally:
        assert second.stop() == 0
    assert failing <= seen, f"{len(failing - seen)} failing citations never reached the topic"
    assert seen <= failing, "only failing citations are published by default"
    assert checked_after >= second_half


def test_two_exporters_in_one_group_check_every_citation_exactly_once(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap, answer_partitions=4)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    one = ExporterProcess(bootstrap, topics, tmp_path / "one.log")
    two = ExporterProcess(bootstrap, topics, tmp_path / "two.log")
    expected = expected_verdicts(scenario["expected"])
    try:
        one.wait_ready()
        two.wait_ready()
        time.sleep(6)  # let the group settle on two members before traffic starts
        produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
        deadline = time.monotonic() + 90
        checked = (0.0, 0.0)
        while sum(checked) < len(expected) and time.monotonic() < deadline:
            checked = (
                total(one.scrape(), "citation_checks_total", mode="inline"),
                total(two.scrape(), "citation_checks_total", mode="inline"),
            )
            time.sleep(0.3)
        time.sleep(1)
        scrapes = (one.scrape(), two.scrape())
        checked = tuple(total(x, "citation_checks_total", mode="inline") for x in scrapes)
        lag_partitions = [
            {
                dict(labels)["partition"]
                for (name, labels), _ in x.items()
                if name == "citation_exporter_consumer_lag_messages"
                and dict(labels)["topic"] == topics.answers
            }
            for x in scrapes
        ]
    finally:
        assert one.stop() == 0
        assert two.stop() == 0
    assert sum(checked) == len(expected)
    assert min(checked) > 0, f"both members take a share: {checked}"
    assert not lag_partitions[0] & lag_partitions[1], "each partition's lag comes from its owner"
    assert lag_partitions[0] | lag_partitions[1] == {"0", "1", "2", "3"}
    failing = _failing_ids(scenario)
    records = consume_citation_verdicts(bootstrap, topics.verdicts, len(failing))
    assert Counter(r.key.decode() for r in records) == Counter(failing)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A second broker of our own, so it can be stopped without disturbing the other tests."""
    port = int(os.environ.get("KAFKA_RESTART_PORT", "19292"))
    env = {**os.environ, "KAFKA_PORT": str(port), "KAFKA_STATE": str(tmp_path / "broker")}
    subprocess.run([str(KAFKA_LOCAL), "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([str(KAFKA_LOCAL), "stop"], env=env, check=False)


def test_exporter_recovers_from_a_broker_restart_without_restarting(
    own_broker: tuple[str, dict[str, str]], scenario: dict[str, Path], tmp_path: Path
) -> None:
    bootstrap, env = own_broker
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = answer_messages(scenario["citations"])
    citations = [len(orjson.loads(v).get("citations", [1])) for _, v in answers if v]
    produce(bootstrap, topics.answers, answers[:100])
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log")
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_checks_total", sum(citations[:100]), mode="inline")

        subprocess.run([str(KAFKA_LOCAL), "stop"], env=env, check=True)
        time.sleep(3)
        assert exporter.process.poll() is None, "a broker outage never ends the process"
        assert total(exporter.scrape(), "citation_exporter_build_info") == 1, "/metrics answers"

        subprocess.run([str(KAFKA_LOCAL), "resume"], env=env, check=True, stdout=subprocess.DEVNULL)
        produce(bootstrap, topics.answers, answers[100:])
        exporter.wait_for("citation_checks_total", sum(citations), mode="inline", seconds=120)
    finally:
        assert exporter.stop() == 0
