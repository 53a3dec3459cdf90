"""Metrics: exact names, bounded labels, series that start at 0, and the HTTP endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from exporter.checks.verdict import Action, Repair, Status, Verdict
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.state import ExporterState, SweepResult
from exporter.pipeline.outcome import CheckedCitation, DeadLetter, Mode, Origin, Outcome
from exporter.web.server import MetricsServer


def _metrics(**kwargs: object) -> tuple[CollectorRegistry, ExporterMetrics]:
    registry = CollectorRegistry()
    return registry, ExporterMetrics(registry, SourceLabels(**kwargs), "1.2.3")  # type: ignore[arg-type]


def _outcome(
    *verdicts: Verdict,
    mode: Mode = Mode.INLINE,
    topic: str = "rag.answers",
    letter_reason: str | None = None,
) -> Outcome:
    origin = Origin(topic, 0, 1)
    letter = (
        None if letter_reason is None else DeadLetter(origin, b"{}", None, letter_reason, "bad")
    )
    checked = [CheckedCitation(v, seconds=0.0002) for v in verdicts]
    return Outcome(origin, mode, checked, letter)


def _ok(source: str = "acme") -> Verdict:
    return Verdict("c", "a", "d", Status.OK, Action.KEEP, similarity=100.0, source=source)


def test_a_batch_of_outcomes_is_counted_whole() -> None:
    """Inline: checks, events, invalid events and the check time of every citation. In a sweep,
    the checks only (its messages were counted as events when first consumed)."""
    registry, metrics = _metrics()
    invalid = Verdict(None, None, None, Status.INVALID, Action.FIX_RECORD, reason="invalid_record")
    metrics.record(
        [
            _outcome(_ok(), _ok(), invalid, letter_reason="invalid_record"),
            _outcome(),  # a chunk message
            _outcome(_ok(), mode=Mode.SWEEP, letter_reason="invalid_json"),
        ]
    )
    value = registry.get_sample_value
    assert value("citation_checks_total", {"mode": "inline", "source": "acme"}) == 2
    assert value("citation_checks_total", {"mode": "sweep", "source": "acme"}) == 1
    assert value("citation_exporter_events_total", {"topic": "rag.answers"}) == 2
    invalid_events = "citation_exporter_invalid_events_total"
    assert value(invalid_events, {"topic": "rag.answers", "reason": "invalid_record"}) == 1
    assert value(invalid_events, {"topic": "rag.answers", "reason": "invalid_json"}) is None
    assert value("citation_check_duration_seconds_count") == 2
    assert value("citation_quote_similarity_ratio_count", {"mode": "sweep"}) == 1
    last_event = value("citation_exporter_last_event_timestamp_seconds", {"topic": "rag.answers"})
    assert last_event is not None and last_event > 0


def test_state_gauges_are_read_at_scrape_time() -> None:
    state = ExporterState()
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "1", state)
    value = registry.get_sample_value
    assert value("citation_exporter_ready") == 0 and value("citation_store_chunks") == 0
    state.ready = True
    state.set_lag({("rag.answers", 0): 5, ("rag.answers", 1): 7})
    state.forget_lag({("rag.answers", 1)})
    state.sweep_running, state.sweep_progress = True, 0.25
    assert value("citation_exporter_ready") == 1
    lag = "citation_exporter_consumer_lag_messages"
    assert value(lag, {"topic": "rag.answers", "partition": "0"}) == 5
    assert value(lag, {"topic": "rag.answers", "partition": "1"}) is None
    assert (
        value("citation_sweep_in_progress") == 1 and value("citation_sweep_progress_ratio") == 0.25
    )
    state.last_sweep = SweepResult({Status.DRIFT_REPAIRED: 3}, 1000.0, 2.5)
    assert value("citation_sweep_citations", {"status": "drift_repaired"}) == 3
    assert value("citation_sweep_citations", {"status": "ok"}) == 0
    assert value("citation_sweep_last_completed_timestamp_seconds") == 1000.0


def test_known_series_start_at_zero() -> None:
    registry, _ = _metrics(allowed=["acme"])
    value = registry.get_sample_value
    for mode in ("inline", "sweep"):
        assert value("citation_checks_total", {"mode": mode, "source": "acme"}) == 0
        assert value("citation_checks_total", {"mode": mode, "source": "other"}) == 0
        assert (
            value(
                "citation_drift_failures_total",
                {"mode": mode, "source": "other", "outcome": "repaired"},
            )
            == 0
        )
        assert (
            value(
                "citation_failure_reasons_total",
                {"mode": mode, "kind": "superseded", "reason": "quote_mismatch"},
            )
            == 0
        )
    assert value("citation_exporter_build_info", {"version": "1.2.3"}) == 1
    assert value("citation_sweep_citations", {"status": "drift_repaired"}) == 0


def test_drift_and_superseded_are_counted_apart() -> None:
    registry, metrics = _metrics()
    repair = Repair("d#1", 0, 5, 100.0, "exact", -112)
    drifted = Verdict(
        "c",
        "a",
        "d",
        Status.DRIFT_REPAIRED,
        Action.REWRITE_OFFSETS,
        reason="chunk_missing",
        repair=repair,
        source="acme",
    )
    superseded = Verdict(
        "c",
        "a",
        "d",
        Status.SUPERSEDED,
        Action.PIN_ARCHIVED_VERSION,
        reason="quote_mismatch",
        similarity=40.0,
        source="acme",
    )
    metrics.record([_outcome(drifted), _outcome(superseded)])
    value = registry.get_sample_value
    assert value("citation_checks_total", {"mode": "inline", "source": "acme"}) == 2
    assert (
        value(
            "citation_drift_failures_total",
            {"mode": "inline", "source": "acme", "outcome": "repaired"},
        )
        == 1
    )
    assert value("citation_superseded_failures_total", {"mode": "inline", "source": "acme"}) == 1
    assert value("citation_offset_shift_characters_bucket", {"mode": "inline", "le": "-64.0"}) == 1
    assert value("citation_offset_shift_characters_bucket", {"mode": "inline", "le": "-128.0"}) == 0
    # as prometheus_client's own Histogram: a _count, and no _sum for values that can be negative
    assert value("citation_offset_shift_characters_count", {"mode": "inline"}) == 1
    assert value("citation_offset_shift_characters_sum", {"mode": "inline"}) is None
    assert value("citation_quote_similarity_ratio_sum", {"mode": "inline"}) == 0.4
    assert value("citation_quote_similarity_ratio_bucket", {"mode": "inline", "le": "0.4"}) == 1


def test_source_labels_are_bounded() -> None:
    first_two = SourceLabels(limit=2)
    assert [first_two(s) for s in ("a", "b", "c", "a", None)] == ["a", "b", "other", "a", "other"]
    allowed = SourceLabels(allowed=["x"], limit=50)
    assert [allowed(s) for s in ("x", "y")] == ["x", "other"]


def test_http_endpoints() -> None:
    registry, _ = _metrics()
    ready = False
    server = MetricsServer(registry, lambda: ready, "127.0.0.1", 0)
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/metrics") as response:
            assert b"citation_exporter_build_info" in response.read()
        with urllib.request.urlopen(base + "/healthz") as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(base + "/readyz")
        assert not_ready.value.code == 503
        ready = True
        with urllib.request.urlopen(base + "/readyz") as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/nope")
        assert missing.value.code == 404
    finally:
        server.stop()


def test_a_new_source_gets_all_its_series_at_once() -> None:
    registry, metrics = _metrics()
    metrics.record([_outcome(Verdict("c", "a", "d", Status.OK, Action.KEEP, source="fresh"))])
    value = registry.get_sample_value
    for mode in ("inline", "sweep"):
        labels = {"mode": mode, "source": "fresh"}
        assert value("citation_drift_failures_total", labels | {"outcome": "unrepaired"}) == 0
        assert value("citation_superseded_failures_total", labels) == 0
