"""The sweep summary a person reads: clusters, histogram, drift and superseded apart."""

from __future__ import annotations

from collections import Counter

from exporter.checks.verdict import Action, Repair, Status, Verdict
from exporter.outputs.report import summary_json, summary_text
from exporter.pipeline.gate import Gate
from exporter.pipeline.shifts import shift_clusters
from exporter.pipeline.summary import SweepSummary


def _repaired(shift: int | None) -> Verdict:
    repair = Repair("d#1", 0, 10, 100.0, "exact", shift)
    return Verdict(
        "c",
        "a",
        "d",
        Status.DRIFT_REPAIRED,
        Action.REWRITE_OFFSETS,
        reason="chunk_missing",
        repair=repair,
    )


def test_a_chunker_change_shows_as_one_tight_cluster() -> None:
    shifts = Counter({-112: 40, -113: 5, -111: 5, 7: 1, 900: 1})
    [main] = shift_clusters(shifts)
    assert (main.center, main.low, main.high, main.count) == (-112, -113, -111, 50)
    assert main.share == 50 / 52


def test_scattered_shifts_have_no_main_cluster() -> None:
    shifts = Counter({value: 1 for value in range(-3000, 3000, 150)})
    assert shift_clusters(shifts) == []


def test_summary_keeps_drift_and_superseded_apart() -> None:
    summary = SweepSummary()
    for _ in range(3):
        summary.add(_repaired(-40))
    summary.add(
        Verdict(
            "c", "a", "d", Status.SUPERSEDED, Action.PIN_ARCHIVED_VERSION, reason="quote_mismatch"
        )
    )
    for _ in range(95):
        summary.add(Verdict("c", "a", "d", Status.OK, Action.KEEP))
    summary.add(Verdict(None, None, None, Status.INVALID, Action.FIX_RECORD, error="bad"))
    assert summary.valid == 99
    assert summary.drift_ratio == 3 / 99
    assert summary.superseded_ratio == 1 / 99
    assert not summary.passed(Gate()) and summary.passed(Gate(drift_above=0.05))
    text = summary_text(summary, Gate())
    assert "drift ratio         3.03%" in text
    assert "superseded ratio    1.01%" in text
    assert "-> FAIL" in text
    assert "[-64, -32)" in text and "main shift clusters: -40" in text


def test_merge_adds_partial_summaries() -> None:
    whole, first, second = SweepSummary(), SweepSummary(), SweepSummary()
    for summary, shift in ((first, 5), (second, None)):
        summary.add(_repaired(shift))
        summary.note_error(f"error {shift}")
    whole.merge(first)
    whole.merge(second)
    assert whole.statuses[Status.DRIFT_REPAIRED] == 2
    assert whole.shifts == Counter({5: 1}) and whole.unknown_shifts == 1
    assert whole.errors == ["error 5", "error None"]


def test_empty_sweep_reports_zero_ratios() -> None:
    summary = SweepSummary()
    assert summary.drift_ratio == 0.0 and summary.passed(Gate(drift_above=0.0, missing_above=0.0))
    assert summary_json(summary, Gate())["citations"] == 0
    assert "no chunk was loaded" in summary_text(summary, Gate())
    summary.chunks_loaded = 10
    assert "no valid citations were read" in summary_text(summary, Gate())


def test_the_summary_records_the_store_s_chunkers_and_when_it_was_read() -> None:
    from datetime import UTC, datetime

    from exporter.checks.store import ChunkStore
    from exporter.records.schema import Chunk

    store = ChunkStore()
    for i, chunker in enumerate(["cut-v2", "cut-v2", "cut-v1", None]):
        store.apply(Chunk("d", "v1", f"d#{i}", "text", i, None, None, chunker))
    store.apply(Chunk("d", "v1", "d#2", "text", 2, None, None, "cut-v2"))  # re-cut: last wins
    summary = SweepSummary()
    assert summary_json(summary, Gate())["chunkers"] is None  # not recorded
    summary.store_read(store.chunkers(), datetime(2026, 6, 1, 8, 0, 5, tzinfo=UTC))
    report = summary_json(summary, Gate())
    assert report["chunkers"] == [
        {"chunker": "cut-v2", "chunks": 3},
        {"chunker": None, "chunks": 1},
    ]
    assert report["chunkers_unlisted"] == 0
    assert report["store_read_at"] == "2026-06-01T08:00:05Z"
