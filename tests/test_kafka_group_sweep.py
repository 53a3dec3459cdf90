"""One sweep shared by the consumer group, on a real broker: three exporter processes, a
six-partition answer topic, progress on a compacted topic (``sweeps_topic``)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka_support import (
    ExporterProcess,
    Topics,
    answer_messages,
    chunk_messages,
    create_topic,
    create_topics,
    expected_verdicts,
    produce,
    topic_shape,
    total,
)

from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.kafka

PARTITIONS = 6
INVALID_LINES = 4  # each an invalid verdict of a sweep (not counted in citation_checks_total)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=23, answers=1200, invalid_lines=INVALID_LINES)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("group-sweep"))


@contextmanager
def _group(
    bootstrap: str, topics: Topics, tmp_path: Path, count: int = 3, sample: int = 0
) -> Iterator[list[ExporterProcess]]:
    """``count`` exporters sharing sweeps, ready, each owning answer partitions."""
    exporters = [
        ExporterProcess(
            bootstrap,
            topics,
            tmp_path / f"exporter-{i}.log",
            sweeps_topic=topics.sweeps,
            judge_sweep_sample=str(sample),
        )
        for i in range(count)
    ]
    try:
        for exporter in exporters:
            exporter.wait_ready()
        _until(lambda: all(_owned(e, topics) for e in exporters), seconds=120)
        yield exporters
    finally:
        for exporter in exporters:
            exporter.stop()


def _owned(exporter: ExporterProcess, topics: Topics) -> set[str]:
    """The answer partitions an exporter owns in the group: those it reports the lag of."""
    return {
        dict(labels)["partition"]
        for (name, labels), _ in exporter.scrape().items()
        if name == "citation_exporter_consumer_lag_messages"
        and dict(labels).get("topic") == topics.answers
    }


def _sum(exporters: list[ExporterProcess], name: str, **labels: str) -> float:
    return sum(total(e.scrape(), name, **labels) for e in exporters)


def _until(condition: Callable[[], bool], seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError("the group did not get there in time")


def _request(bootstrap: str, topics: Topics, sweep_id: str) -> None:
    request = f'{{"type": "sweep", "id": "{sweep_id}", "reason": "test"}}'.encode()
    produce(bootstrap, topics.control, [(None, request)])


def test_one_request_checks_every_archived_citation_exactly_once_across_the_group(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap, answer_partitions=PARTITIONS)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    citations = len(expected)
    with _group(bootstrap, topics, tmp_path, sample=600) as exporters:
        _until(lambda: _sum(exporters, "citation_checks_total", mode="inline") >= citations)
        _request(bootstrap, topics, "s-1")
        _until(lambda: _sum(exporters, "citation_sweep_partitions", state="done") == PARTITIONS)
        assert _sum(exporters, "citation_checks_total", mode="sweep") == citations
        # each member judges its share of the sample of 600 (two partitions of six: 200)
        judged = "citation_entailment_checks_total"
        _until(lambda: _sum(exporters, judged, mode="sweep") >= 600)
        assert [total(e.scrape(), judged, mode="sweep") for e in exporters] == [200] * 3
        owned = [total(e.scrape(), "citation_sweep_partitions") for e in exporters]
        assert sum(owned) == PARTITIONS, "each reports the partitions it owns, and only those"
        statuses = Counter(e["status"] for e in expected)
        statuses["invalid"] = INVALID_LINES
        for status, count in statuses.items():
            assert _sum(exporters, "citation_sweep_citations", status=status) == count, status
        # the same id again is one sweep; a new one after it is a second
        _request(bootstrap, topics, "s-1")
        _request(bootstrap, topics, "s-2")
        _until(lambda: _sum(exporters, "citation_checks_total", mode="sweep") >= 2 * citations)
        _until(lambda: _sum(exporters, "citation_sweep_partitions", state="done") == PARTITIONS)
        assert _sum(exporters, "citation_checks_total", mode="sweep") == 2 * citations


def test_a_member_killed_mid_sweep_leaves_its_partitions_to_the_others(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap, answer_partitions=PARTITIONS)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    copies = 30  # an archive of about 5,000 messages a partition: several batches each
    answers = answer_messages(scenario["citations"])
    produce(bootstrap, topics.answers, answers * copies)
    citations = copies * len(expected_verdicts(scenario["expected"]))
    with _group(bootstrap, topics, tmp_path) as exporters:
        _until(
            lambda: _sum(exporters, "citation_checks_total", mode="inline") >= citations,
            seconds=180,
        )
        _request(bootstrap, topics, "s-kill")
        victim, survivors = exporters[0], exporters[1:]

        def part_way() -> bool:  # a batch checked and a partition of its own still running
            samples = victim.scrape()
            return (
                total(samples, "citation_checks_total", mode="sweep") > 0
                and total(samples, "citation_sweep_partitions", state="running") > 0
            )

        _until(part_way)
        victim.stop(signal.SIGKILL)
        _until(
            lambda: _sum(survivors, "citation_sweep_partitions", state="done") == PARTITIONS,
            seconds=120,
        )
        assert _sum(survivors, "citation_checks_total", mode="sweep") > 0
        # the persisted counts follow one chain per partition: the sweep's, exactly, though
        # the victim's partitions were checked by others from where it left them
        invalid = _sum(survivors, "citation_sweep_citations", status="invalid")
        assert invalid == copies * INVALID_LINES
        assert _sum(survivors, "citation_sweep_citations") - invalid == citations
    resumed = [
        line
        for log in (tmp_path / "exporter-1.log", tmp_path / "exporter-2.log")
        for line in log.read_text().splitlines()
        if "sweeping partition" in line and "from offset 0 " not in line
    ]
    assert resumed, "a survivor resumed one of the victim's partitions part-way"


def test_the_first_instance_creates_the_sweeps_topic_named_after_its_group(
    bootstrap: str, tmp_path: Path
) -> None:
    topics = create_topics(bootstrap)
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log")
    try:
        exporter.wait_ready()  # ready once its store is loaded; then it sets up shared sweeps
        _until(lambda: _owned(exporter, topics) != set())  # its answer consumer joined after
        assert topic_shape(bootstrap, f"group-{topics.answers}.sweeps") == (1, "compact")
    finally:
        assert exporter.stop() == 0


@pytest.mark.parametrize(
    ("partitions", "policy", "problem"),
    [(2, "compact", "has 2 partitions and needs exactly 1"), (1, "delete", "needs compact")],
)
def test_a_sweeps_topic_that_would_lose_sweeps_keeps_the_exporter_unready_saying_why(
    bootstrap: str, tmp_path: Path, partitions: int, policy: str, problem: str
) -> None:
    topics = create_topics(bootstrap)
    wrong = f"{topics.sweeps}-wrong"
    create_topic(bootstrap, wrong, partitions, cleanup_policy=policy)
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log", sweeps_topic=wrong)
    try:
        _until(lambda: problem in exporter.readiness()[1], seconds=60)
        assert exporter.readiness()[0] == 503
        assert exporter.process.poll() is None, "it retries with backoff, it does not exit"
    finally:
        assert exporter.stop() == 0
