"""The streaming exporter against a real Kafka broker, observed through real /metrics scrapes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka_support import (
    ExporterProcess,
    Topics,
    answer_messages,
    chunk_messages,
    consume,
    consume_values,
    create_topics,
    expected_verdicts,
    produce,
    total,
)

from exporter.checks.engine import Policy
from exporter.cli import main
from exporter.file_sweep import load_store, run_sweep
from exporter.pipeline.summary import SweepSummary
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from exporter.sources.jsonl import JsonLines

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=17, answers=800, invalid_lines=5)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("kafka-scenario"))


def _sweep_verdicts(scenario: dict[str, Path]) -> list[dict[str, Any]]:
    summary = SweepSummary()
    out = io.BytesIO()
    run_sweep(
        load_store(JsonLines(str(scenario["chunks"])), summary),
        JsonLines(str(scenario["citations"])),
        Policy(),
        summary,
        out=out,
    )
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def _has_connect_headers(headers: dict[str, bytes], connector: bytes) -> None:
    """The same as our own headers, and more, under Kafka Connect's names."""
    assert headers["__connect.errors.topic"] == headers["source_topic"]
    assert headers["__connect.errors.partition"] == headers["source_partition"]
    assert headers["__connect.errors.offset"] == headers["source_offset"]
    assert headers["__connect.errors.exception.message"] == headers["error"]
    assert headers["__connect.errors.connector.name"] == connector
    assert headers["__connect.errors.task.id"]
    # the scenario's bad lines are malformed records
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.exception.class.name"] in {
        b"exporter.errors.InvalidJson",
        b"exporter.errors.RecordError",
    }


def _assert_published(
    bootstrap: str,
    topics: Topics,
    failing: list[dict[str, Any]],
    uncited: list[dict[str, Any]],
    misclaims: Path,
) -> None:
    """Every failing citation's verdict and every uncited answer's coverage verdict, once.

    The judge behind the response samples 1% of citations by where they landed (partitions
    are the producer's choice), so an entailment verdict for a misstated claim may come too:
    those are set apart and must each flag a claim the scenario misstated.
    """
    published = consume(bootstrap, topics.verdicts, len(failing) + len(uncited) + 1, seconds=15)
    records = [(r.key.decode(), orjson.loads(r.value)) for r in published]
    by_id = {key: value for key, value in records if "check" not in value}
    by_answer = {key: value for key, value in records if value.get("check") == "coverage"}
    judged = [value for _, value in records if value.get("check") == "entailment"]
    assert len(published) - len(judged) == len(failing) + len(uncited), "each once, clean run"
    assert len(by_id) == len(failing) and len(by_answer) == len(uncited)
    misstated = {m["citation_id"] for m in map(orjson.loads, misclaims.read_bytes().splitlines())}
    assert all(
        v["entailment"]["result"] == "not_entailed" and v["citation_id"] in misstated
        for v in judged
    )
    for want in failing:
        got = by_id[want["citation_id"]]
        assert (got["status"], got["reason"]) == (want["status"], want["reason"])
        assert got["mode"] == "inline" and got["topic"] == topics.answers
    _assert_coverage_published(by_answer, uncited, topics.answers)


def _assert_dead_letters(bootstrap: str, topics: Topics, count: int) -> None:
    letters = consume(bootstrap, topics.dlq, count)
    assert len(letters) == count
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["source_topic"].decode() == topics.answers
        assert int(headers["source_offset"]) >= 0 and headers["error"]
        _has_connect_headers(headers, connector=b"it")


def _assert_coverage_counted(inline: Callable[..., float], coverage: list[dict[str, Any]]) -> None:
    """Every answer event's sentences counted by kind, its uncited claims by topic."""
    assert inline("citation_answers_checked_total") == len(coverage)
    assert inline("citation_answer_sentences_total", kind="claim") == sum(
        len(c["claims"]) for c in coverage
    )
    assert inline("citation_answer_sentences_total", kind="framing") == sum(
        len(c["framing"]) for c in coverage
    )
    uncited_by_topic = Counter[str]()
    for answer in coverage:
        uncited_by_topic[answer["topic"]] += len(answer["uncited"])
    assert len(uncited_by_topic) > 1
    for topic, count in uncited_by_topic.items():
        assert inline("citation_uncited_claims_total", topic=topic) == count


def _assert_coverage_published(
    by_answer: dict[str, dict[str, Any]], uncited: list[dict[str, Any]], source: str
) -> None:
    """Only answers with uncited claims are published, keyed by answer, as generated."""
    assert set(by_answer) == {c["answer_id"] for c in uncited}
    for want in uncited:
        got = by_answer[want["answer_id"]]
        assert got["status"] == "uncited_claims" and got["action"] == "mark_uncited"
        assert (got["claims"], got["framing"], got["uncited"], got["topic"]) == (
            want["claims"],
            want["framing"],
            want["uncited"],
            want["topic"],
        )
        assert got["mode"] == "inline" and got["source_topic"] == source


def _once_lag_is_reported(exporter: ExporterProcess, topic: str) -> dict[Any, float]:
    """A scrape taken once the answer consumer has reported its lag: a poll counts its checks
    first, then commits, then reports the lag, so a scrape in between has counts and no lag."""
    deadline = time.monotonic() + 15
    while True:
        samples = exporter.scrape()
        reported = any(
            name == "citation_exporter_consumer_lag_messages" and dict(labels)["topic"] == topic
            for name, labels in samples
        )
        if reported or time.monotonic() > deadline:
            return samples
        time.sleep(0.25)


def test_scenario_through_kafka_gives_exact_counters_and_verdicts(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    statuses = Counter(e["status"] for e in expected)

    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log", client_id="it")
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_exporter_events_total", answers, topic=topics.answers)
        exporter.wait_for("citation_checks_total", len(expected), mode="inline")
        samples = _once_lag_is_reported(exporter, topics.answers)
    finally:
        assert exporter.stop() == 0

    def inline(name: str, **labels: str) -> float:
        return total(samples, name, mode="inline", **labels)

    assert inline("citation_checks_total") == len(expected)
    assert inline("citation_drift_failures_total", outcome="repaired") == statuses["drift_repaired"]
    assert (
        inline("citation_drift_failures_total", outcome="unrepaired")
        == statuses["drift_unrepaired"]
    )
    assert inline("citation_superseded_failures_total") == statuses["superseded"]
    assert inline("citation_document_missing_total") == statuses["document_missing"]
    assert total(samples, "citation_checks_total", mode="sweep") == 0
    known_shifts = sum(
        1 for e in expected if e["repair"] is not None and e["repair"]["shift"] is not None
    )
    assert inline("citation_offset_shift_characters_count") == known_shifts
    assert total(samples, "citation_exporter_invalid_events_total", topic=topics.answers) == 5
    assert total(samples, "citation_exporter_ready") == 1

    coverage = expected_verdicts(scenario["expected_coverage"])
    uncited = [c for c in coverage if c["uncited"]]
    _assert_coverage_counted(inline, coverage)
    failing = [e for e in expected if e["status"] != "ok"]
    _assert_published(bootstrap, topics, failing, uncited, scenario["misclaims"])

    _assert_dead_letters(bootstrap, topics, 5)

    lags = [
        value
        for (name, labels), value in samples.items()
        if name == "citation_exporter_consumer_lag_messages"
        and dict(labels)["topic"] == topics.answers
    ]
    assert lags and all(lag == 0 for lag in lags)
    # one similarity observation per citation whose span could be read, as the sweep reports
    swept = _sweep_verdicts(scenario)
    assert inline("citation_quote_similarity_ratio_count") == sum(
        1 for v in swept if v["similarity"] is not None
    )

    # SIGTERM committed everything in hand: a successor in the group has nothing left to check
    successor = ExporterProcess(bootstrap, topics, tmp_path / "successor.log")
    try:
        successor.wait_ready()
        time.sleep(4)
        assert total(successor.scrape(), "citation_checks_total", mode="inline") == 0
    finally:
        assert successor.stop() == 0


def test_malformed_messages_go_to_the_dead_letter_topic_and_the_exporter_keeps_going(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics: Topics = create_topics(bootstrap)
    broken_chunk = (b"broken#0", b'{"chunk_id": "broken#0", "text": 5}')
    produce(bootstrap, topics.chunks, [broken_chunk, *chunk_messages(scenario["chunks"])])
    good = answer_messages(scenario["citations"])[:50]
    bad: list[tuple[bytes | None, bytes | None]] = [
        (None, b'{"answer_id": "a", "citations": [{"citation_id": '),  # truncated
        (None, b'{"citation_id": "c", "answer_id": "a", "doc_id": 5}'),  # wrong type
        (None, b"x" * 5000),  # oversized for the limit below
        (b"k", None),  # no value at all
        (None, b"[]"),  # not an object
    ]
    produce(bootstrap, topics.answers, bad[:3] + good[:25] + bad[3:] + good[25:])

    exporter = ExporterProcess(
        bootstrap, topics, tmp_path / "exporter.log", max_message_bytes="4096"
    )
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_exporter_events_total", 55, topic=topics.answers)
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0

    invalid = {
        dict(labels)["reason"]: value
        for (name, labels), value in samples.items()
        if name == "citation_exporter_invalid_events_total"
        and dict(labels)["topic"] == topics.answers
    }
    assert invalid == {"invalid_json": 1, "invalid_record": 2, "oversized": 1, "empty": 1}
    assert total(samples, "citation_exporter_invalid_events_total", topic=topics.chunks) == 1
    letters = consume(bootstrap, topics.dlq, 6)
    reasons = Counter(
        dict(letter.headers)["reason"].decode()
        for letter in letters
        if dict(letter.headers)["source_topic"].decode() == topics.answers
    )
    assert reasons == Counter(invalid)
    [chunk_letter] = [r for r in letters if r.key == b"broken#0"]
    assert b"'text' must be a string" in dict(chunk_letter.headers)["error"]
    oversized = next(r for r in letters if dict(r.headers)["reason"] == b"oversized")
    assert len(oversized.value) == 4096
    assert dict(oversized.headers)["value_truncated"] == b"5000", "the original size"
    good_citations = sum(
        len(orjson.loads(v).get("citations", [1])) for _, v in good if v is not None
    )
    assert total(samples, "citation_checks_total", mode="inline") == good_citations


def _sweep_gauges(samples: dict[Any, float]) -> dict[str, float]:
    return {
        dict(labels)["status"]: value
        for (name, labels), value in samples.items()
        if name == "citation_sweep_citations"
    }


def _judged_by_a_file_sweep(scenario: dict[str, Path], out: Path) -> list[dict[str, Any]]:
    """Every judgeable citation of the scenario, judged by the lexical judge."""
    files = ["--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    main(["sweep", *files, "--judge-sample", "10000", "--judge-out", str(out), "--jobs", "1"])
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def test_a_control_message_starts_a_sweep_whose_gauges_are_right(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    judgeable = _judged_by_a_file_sweep(scenario, tmp_path / "judged.jsonl")
    assert len(judgeable) <= 2_000, "the service's default sample takes every one"
    misstated = {j["citation_id"] for j in judgeable if j["entailment"]["result"] == "not_entailed"}
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log")
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_checks_total", len(expected), mode="inline")
        assert total(exporter.scrape(), "citation_sweep_last_completed_timestamp_seconds") == 0
        produce(
            bootstrap,
            topics.control,
            [
                (None, b'{"type": "sweep", "reason": "after the 2026-11 re-index"}'),
                (None, b'{"type": "reboot"}'),
            ],
        )
        exporter.wait_for("citation_sweep_last_completed_timestamp_seconds", 1)
        # then the sweep's sample is judged: all of it, as the file sweep judged it
        exporter.wait_for("citation_entailment_checks_total", len(judgeable), mode="sweep")
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0
    flagged = consume_values(
        bootstrap,
        topics.verdicts,
        len(misstated),
        lambda v: v.get("check") == "entailment" and v["mode"] == "sweep",
        seconds=30,
    )
    assert sorted(v["citation_id"] for v in flagged) == sorted(misstated) != []
    assert total(samples, "citation_entailment_checks_total", mode="sweep") == len(judgeable)
    statuses = Counter(e["status"] for e in expected)
    gauges = _sweep_gauges(samples)
    assert gauges == {
        "ok": statuses["ok"],
        "drift_repaired": statuses["drift_repaired"],
        "drift_unrepaired": statuses["drift_unrepaired"],
        "superseded": statuses["superseded"],
        "document_missing": statuses["document_missing"],
        "invalid": 5,
    }
    assert total(samples, "citation_checks_total", mode="sweep") == len(expected)
    assert total(samples, "citation_drift_failures_total", mode="sweep") == (
        statuses["drift_repaired"] + statuses["drift_unrepaired"]
    )
    assert total(samples, "citation_sweep_in_progress") == 0
    assert total(samples, "citation_sweep_progress_ratio") == 1
    assert total(samples, "citation_sweep_duration_seconds") > 0
    assert total(samples, "citation_exporter_invalid_events_total", topic=topics.control) == 1


def test_a_new_chunker_fingerprint_triggers_a_sweep_once_the_reindex_is_quiet(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap)
    before = chunk_messages(scenario["chunks_before"])
    produce(bootstrap, topics.chunks, before)
    produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    exporter = ExporterProcess(
        bootstrap, topics, tmp_path / "exporter.log", sweep_quiet_seconds="1.5"
    )
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_checks_total", len(expected), mode="inline")
        inline = exporter.scrape()
        assert total(inline, "citation_drift_failures_total", mode="inline") == 0
        assert total(inline, "citation_sweep_last_completed_timestamp_seconds") == 0
        assert total(inline, "citation_store_last_chunker_change_timestamp_seconds") == 0
        # the re-index: new chunks (new chunker fingerprints), deletions
        produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"])[len(before) :])
        exporter.wait_for("citation_sweep_last_completed_timestamp_seconds", 1, seconds=60)
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0
    statuses = Counter(e["status"] for e in expected)
    gauges = _sweep_gauges(samples)
    changed = total(samples, "citation_store_last_chunker_change_timestamp_seconds")
    assert 0 < changed <= total(samples, "citation_sweep_last_completed_timestamp_seconds")
    assert gauges["drift_repaired"] == statuses["drift_repaired"]
    assert gauges["superseded"] == statuses["superseded"]
    assert gauges["document_missing"] == statuses["document_missing"]
    assert total(samples, "citation_drift_failures_total", mode="inline") == 0, (
        "a sweep never moves the inline counters"
    )


def test_produce_replays_a_scenario_and_drift_shows_after_the_reindex(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap)
    expected = expected_verdicts(scenario["expected"])
    exporter = ExporterProcess(bootstrap, topics, tmp_path / "exporter.log")
    try:
        exporter.wait_ready()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter.cli",
                "produce",
                "--scenario",
                str(scenario["chunks"].parent),
                "--bootstrap-servers",
                bootstrap,
                "--sweep",
            ],
            env={**os.environ, **topics.env()},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "reindex chunks" in done.stdout
        exporter.wait_for("citation_checks_total", len(expected), mode="inline")
        exporter.wait_for("citation_sweep_last_completed_timestamp_seconds", 1)
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0
    assert total(samples, "citation_drift_failures_total", mode="inline") > 0
    statuses = Counter(e["status"] for e in expected)
    assert _sweep_gauges(samples)["drift_repaired"] == statuses["drift_repaired"]


def _flagged_offline(scenario: dict[str, Path], tmp_path: Path) -> set[str]:
    """The citations the lexical judge flags when the sweep judges every judgeable one."""
    out = tmp_path / "judged.jsonl"
    main(
        [
            "sweep", "--chunks", str(scenario["chunks"]), "--citations",
            str(scenario["citations"]), "--judge-sample", "10000", "--judge-out", str(out),
            "--jobs", "1", "--format", "json",
        ]
    )  # fmt: skip
    return {
        line["citation_id"]
        for line in map(orjson.loads, out.read_bytes().splitlines())
        if line["entailment"]["result"] == "not_entailed"
    }


def test_a_sample_is_judged_behind_the_response_and_misstated_claims_are_published(
    bootstrap: str, scenario: dict[str, Path], tmp_path: Path
) -> None:
    """With every citation sampled, the live exporter flags what the sweep's lexical judge
    flags, publishes each once as an entailment verdict, and counts the judgements."""
    flagged = _flagged_offline(scenario, tmp_path)
    assert len(flagged) >= 5
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    exporter = ExporterProcess(
        bootstrap,
        topics,
        tmp_path / "exporter.log",
        judge_sample_rate="100%",
        judge_queue_size="100000",  # every citation sampled: room for all of them
    )
    checks = "citation_entailment_checks_total"
    try:
        exporter.wait_ready()
        exporter.wait_for("citation_exporter_events_total", answers, topic=topics.answers)
        exporter.wait_for(checks, len(flagged), result="not_entailed", mode="inline")
        time.sleep(1)  # anything still queued
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0
    assert total(samples, checks, result="not_entailed", judge="lexical") == len(flagged)
    assert total(samples, checks, judge="openai") == 0  # no model configured
    assert total(samples, "citation_entailment_dropped_total") == 0
    published = consume(bootstrap, topics.verdicts, 10_000, seconds=5)
    judged = [r for r in published if orjson.loads(r.value).get("check") == "entailment"]
    assert sorted(r.key.decode() for r in judged) == sorted(flagged)
    for record in judged:
        value = orjson.loads(record.value)
        assert value["entailment"]["result"] == "not_entailed"
        assert value["entailment"]["judge"] == "lexical"
        assert value["mode"] == "inline" and value["topic"] == topics.answers
