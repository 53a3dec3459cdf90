"""The shared sweep's progress records and the book every instance keeps of them."""

from __future__ import annotations

import contextlib
import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.kafka.sweep_progress import (
    MAX_PROGRESS_RECORD_BYTES,
    Deleted,
    PartitionProgress,
    SweepBook,
    SweepRecord,
    decode_progress,
    encode_progress,
)
from exporter.records.decode import RecordError

STATUSES = ["ok", "drift_repaired", "drift_unrepaired", "superseded", "document_missing"]

ids = st.text(min_size=1, max_size=40).filter(str.isprintable)  # as a request may name one
sweeps = st.builds(
    SweepRecord,
    ids,
    st.text(max_size=40),
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
    st.integers(1, 64),
)


@st.composite
def parts(draw: st.DrawFn) -> PartitionProgress:
    start = draw(st.integers(0, 10**12))
    target = draw(st.integers(start, start + 10**6))
    position = draw(st.integers(start, target))
    counts = draw(st.dictionaries(st.sampled_from(STATUSES), st.integers(0, 10**9)))
    return PartitionProgress(
        draw(ids),
        draw(st.integers(0, 63)),
        start,
        target,
        position,
        draw(st.booleans()),
        counts,
        draw(st.text(max_size=20)),
    )


@given(st.one_of(sweeps, parts()))
def test_a_record_reads_back_as_written(record: SweepRecord | PartitionProgress) -> None:
    key, value = encode_progress(record)
    assert decode_progress(key, value) == record


def _dumps(value: object) -> bytes:
    """JSON as anyone may write it: integers past 64 bits, NaN and Infinity included."""
    return json.dumps(value).encode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@given(
    key=st.one_of(st.none(), st.binary(max_size=50), json_values.map(_dumps)),
    value=st.one_of(
        st.none(),
        st.binary(max_size=200),
        json_values.map(_dumps),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["sweep", "partition"]), "sweep_id": json_values},
            optional={
                "partition": json_values,
                "start": json_values,
                "target": json_values,
                "position": json_values,
                "done": json_values,
                "counts": json_values,
                "owner": json_values,
                "reason": json_values,
                "requested_at": json_values,
                "partitions": json_values,
            },
        ).map(_dumps),
    ),
)
def test_anything_else_on_the_topic_is_a_record_error(
    key: bytes | None, value: bytes | None
) -> None:
    """Anyone who may write to the topic may write anything: it is refused, never raised."""
    with contextlib.suppress(RecordError):
        decode_progress(key, value)


def test_what_a_record_may_not_say() -> None:
    part = PartitionProgress("s", 0, 10, 20, 15, False, {"ok": 3}, "a")
    key, value = encode_progress(part)
    bad = {
        "position before start": {"position": 9},
        "position past target": {"position": 21},
        "target before start": {"target": 5},
        "an unknown status": {"counts": {"fine": 1}},
        "a negative count": {"counts": {"ok": -1}},
        "a count that is not a whole number": {"counts": {"ok": 1.5}},
        "done as a string": {"done": "yes"},
        "an offset of a bool": {"start": True},
    }
    for why, change in bad.items():
        changed = orjson.dumps({**orjson.loads(value), **change})
        with pytest.raises(RecordError):
            decode_progress(key, changed)
        assert why
    for forged in ("a\nb", "i" * 201):  # the ids a request may not name either
        forged_key, forged_value = encode_progress(SweepRecord(forged, "r", 1.0, 1))
        with pytest.raises(RecordError, match="'id'"):
            decode_progress(forged_key, forged_value)
    with pytest.raises(RecordError, match="key does not match"):
        decode_progress(orjson.dumps(["partition", "s", 1]), value)
    with pytest.raises(RecordError, match="small"):
        decode_progress(key, b" " * (MAX_PROGRESS_RECORD_BYTES + 1))
    with pytest.raises(RecordError, match="seconds since the epoch"):
        sweep_key, sweep_value = encode_progress(SweepRecord("s", "r", 1.0, 3))
        decode_progress(sweep_key, sweep_value.replace(b"1.0", b"-1.0"))


def _part(position: int, done: bool = False, owner: str = "a", **counts: int) -> PartitionProgress:
    return PartitionProgress("s1", 0, 0, 100, position, done, counts, owner)


def test_a_part_moves_forward_only_and_a_handover_counts_each_citation_once() -> None:
    book = SweepBook()
    book.apply(SweepRecord("s1", "re-index", 10.0, 2))
    book.apply(_part(40, ok=38, drift_repaired=2))  # owner a, then a rebalance
    book.apply(_part(70, owner="b", ok=66, drift_repaired=4))  # b resumed at 40
    book.apply(_part(55, owner="a", ok=52, drift_repaired=3))  # a's late write: behind
    part = book.part("s1", 0)
    assert part is not None and (part.position, part.owner) == (70, "b")
    assert sum(part.counts.values()) == 70
    book.apply(_part(100, done=True, owner="b", ok=95, drift_repaired=5))
    assert not book.complete("s1"), "partition 1 has not started"
    assert book.states("s1", {0, 1}) == {"pending": 1, "running": 0, "done": 1}
    assert [s.sweep_id for s in book.pending(1)] == ["s1"] and book.pending(0) == []
    book.apply(PartitionProgress("s1", 1, 0, 0, 0, True, {}, "c"))  # an empty partition
    assert book.complete("s1")
    assert book.counts("s1", {0, 1}) == {"ok": 95, "drift_repaired": 5}
    assert book.counts("s1", {1}) == {}  # what the owner of partition 1 alone reports


def test_an_instance_s_progress_is_the_mean_of_its_partitions_parts() -> None:
    book = SweepBook()
    assert book.progress("s1", {0}) is None, "no such sweep"
    book.apply(SweepRecord("s1", "re-index", 10.0, 3))
    assert book.progress("s1", set()) is None, "owning none of its partitions"
    assert book.progress("s1", {0, 1}) == 0.0
    book.apply(_part(40))  # partition 0: 40 of 100
    assert book.progress("s1", {0, 1}) == 0.2
    book.apply(PartitionProgress("s1", 1, 0, 0, 0, True, {}, "c"))  # empty, and done
    assert book.progress("s1", {0, 1}) == 0.7
    assert book.progress("s1", {0, 1, 7}) == 0.7, "a partition the sweep does not cover"
    book.apply(_part(100, done=True))
    assert book.progress("s1", {0, 1}) == 1.0


def test_a_sweep_s_first_record_stands_and_sweeps_run_in_the_topic_s_order() -> None:
    """The topic's order, the same in every instance's book, not the times records claim
    (found by review: a forged far-future time stayed the latest sweep for good)."""
    book = SweepBook()
    book.apply(SweepRecord("s1", "re-index", 30.0, 3))
    book.apply(SweepRecord("later", "control", 20.0, 3))
    book.apply(SweepRecord("s1", "the same request, seen by another instance", 11.0, 4))
    first = book.sweep("s1")
    assert first is not None and (first.reason, first.partitions) == ("re-index", 3)
    assert [s.sweep_id for s in book.pending(2)] == ["s1", "later"]
    assert book.pending(3) == [], "partition 3 did not exist when either was requested"
    latest = book.latest()
    assert latest is not None and latest.sweep_id == "later"


def test_a_sweep_completes_at_its_last_part_s_own_time() -> None:
    book = SweepBook()
    book.apply(SweepRecord("s1", "re-index", 10.0, 2))
    book.apply(PartitionProgress("s1", 0, 0, 5, 5, True, {"ok": 5}, "a", done_at=40.0))
    assert book.completed_at("s1") is None
    book.apply(PartitionProgress("s1", 1, 0, 5, 5, True, {"ok": 5}, "b", done_at=35.0))
    assert book.completed_at("s1") == 40.0


def test_tombstones_forget_an_old_sweep() -> None:
    book = SweepBook()
    book.apply(SweepRecord("old", "x", 1.0, 1))
    book.apply(PartitionProgress("old", 0, 0, 5, 5, True, {"ok": 5}, "a"))
    for record in (SweepRecord("old", "x", 1.0, 1), PartitionProgress("old", 0, 0, 5, 5, True)):
        key, _ = encode_progress(record)
        deleted = decode_progress(key, None)
        assert isinstance(deleted, Deleted)
        book.apply(deleted)
    assert not book.knows("old") and book.part("old", 0) is None
    with pytest.raises(RecordError):
        decode_progress(b'["nothing"]', None)
