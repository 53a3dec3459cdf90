"""Metrics: exact names, bounded labels, series that start at 0, and the HTTP endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from exporter.checks.verdict import Action, Repair, Status, Verdict
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.web.server import MetricsServer


def _metrics(**kwargs: object) -> tuple[CollectorRegistry, ExporterMetrics]:
    registry = CollectorRegistry()
    return registry, ExporterMetrics(registry, SourceLabels(**kwargs), "1.2.3")  # type: ignore[arg-type]


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
    metrics.record(
        Verdict(
            "c",
            "a",
            "d",
            Status.DRIFT_REPAIRED,
            Action.REWRITE_OFFSETS,
            reason="chunk_missing",
            repair=repair,
            source="acme",
        ),
        "inline",
    )
    metrics.record(
        Verdict(
            "c",
            "a",
            "d",
            Status.SUPERSEDED,
            Action.PIN_ARCHIVED_VERSION,
            reason="quote_mismatch",
            similarity=40.0,
            source="acme",
        ),
        "inline",
    )
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
    metrics.record(Verdict("c", "a", "d", Status.OK, Action.KEEP, source="fresh"), "inline")
    value = registry.get_sample_value
    for mode in ("inline", "sweep"):
        labels = {"mode": mode, "source": "fresh"}
        assert value("citation_drift_failures_total", labels | {"outcome": "unrepaired"}) == 0
        assert value("citation_superseded_failures_total", labels) == 0
