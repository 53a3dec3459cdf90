"""Lookup mode without a database: the cache, the lookup's logic, and the inline path.

The database is replaced by rows in memory (``RowsLookup`` overrides the one method that runs a
query), so these prove what the lookup asks for, what it holds and what the checks then say:
the same verdicts as a mirror of the whole store, a bounded cache, staleness bounded by the
TTL, and an outage that checks nothing rather than judging against a store it could not read.
tests/test_postgres_lookup.py runs the same against real PostgreSQL and a real broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
import psycopg
import pytest
from aiokafka import TopicPartition
from fake_kafka import FakeBroker, FakeConsumer, FakeProducer
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from exporter.checks.engine import Policy
from exporter.checks.lookup_cache import LookupCache, NotLookedUp
from exporter.checks.store import ChunkStore
from exporter.config.postgres import ChunkLayout
from exporter.errors import SourceUnavailable
from exporter.kafka.answers import AnswerChecker
from exporter.kafka.fetching import Fetcher
from exporter.kafka.publish import Publisher
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.verdicts import verdict_json
from exporter.pipeline.cited import cited_by
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.postgres.layouts import LookupBy
from exporter.postgres.lookup import Fetched, PostgresLookup
from exporter.records.decode import decode_chunk
from exporter.records.limits import DEFAULT_LIMITS
from exporter.records.schema import Chunk

URI = "postgresql://exporter:s3cret@127.0.0.1:1/store"


class RowsLookup(PostgresLookup):
    """PostgresLookup over rows in memory: ``rows`` in key order, as the layout's query
    orders them; ``queries`` records every lookup asked; ``down`` makes each one fail as a
    lost connection does."""

    def __init__(self, rows: list[Chunk], cache: LookupCache, **options: Any) -> None:
        registry = CollectorRegistry()
        self.registry = registry
        metrics = ExporterMetrics(registry, SourceLabels(), "test")
        super().__init__(
            URI, ChunkLayout.of("langchain"), cache, DEFAULT_LIMITS, metrics, **options
        )
        self.rows = rows
        self.queries: list[tuple[str, tuple[str, ...]]] = []
        self.down = False

    def _fetch(self, kind: LookupBy, ids: Sequence[str]) -> Fetched:
        if self.down:
            raise psycopg.OperationalError("connection to server at 127.0.0.1, port 1 failed")
        self.queries.append((kind, tuple(ids)))
        wanted = set(ids)
        field = "doc_id" if kind == "documents" else "chunk_id"
        ordered = sorted(self.rows, key=lambda chunk: chunk.chunk_id)
        return Fetched([row for row in ordered if getattr(row, field) in wanted])


def _chunk(doc_id: str, ordinal: int, text: str, version: str = "v1", **extra: Any) -> Chunk:
    record = {
        "doc_id": doc_id,
        "doc_version": version,
        "chunk_id": extra.pop("chunk_id", f"{doc_id}#{ordinal}"),
        "text": text,
        "ordinal": ordinal,
        **extra,
    }
    chunk = decode_chunk(record)
    assert isinstance(chunk, Chunk)
    return chunk


def _citation(number: int, doc_id: str, chunk_id: str, span: list[int], quote: str) -> bytes:
    return orjson.dumps(
        {
            "citation_id": f"c{number}",
            "answer_id": f"a{number}",
            "doc_id": doc_id,
            "doc_version": "v1",
            "chunk_id": chunk_id,
            "chunk_span": span,
            "quote": quote,
        }
    )


def _records(values: list[bytes]) -> list[LocalRecord]:
    return [LocalRecord("answers", 0, offset, None, value) for offset, value in enumerate(values)]


def _verdicts(pipeline: Pipeline, records: list[LocalRecord]) -> list[bytes]:
    lines = []
    for record in records:
        outcome = pipeline.answer(record)
        lines += [verdict_json(checked.verdict) for checked in outcome.checked]
        if outcome.dead_letter is not None:
            lines.append(outcome.dead_letter.reason.encode())
    return lines


def _mirror(rows: list[Chunk]) -> Pipeline:
    store = ChunkStore()
    for row in sorted(rows, key=lambda chunk: chunk.chunk_id):
        store.apply(row)
    return Pipeline(store, Policy(), publish_all=True)


def _looking_up(rows: list[Chunk], **cache: Any) -> tuple[Pipeline, RowsLookup]:
    store = LookupCache(**cache)
    lookup = RowsLookup(rows, store)
    return Pipeline(store, Policy(), publish_all=True, lookup=lookup), lookup


WORDS = ["refund", "window", "thirty", "days", "annual", "plan", "renews", "tax", "the", "of"]


@st.composite
def stores_and_citations(draw: st.DrawFn) -> tuple[list[Chunk], list[bytes]]:
    """A few documents (some with two versions' chunks, some gone), and citations of them:
    quotes at their span, moved, of a chunk that moved to another document, of documents
    that are not there."""
    rows: list[Chunk] = []
    texts: dict[str, str] = {}
    for number in range(draw(st.integers(1, 4))):
        doc_id = f"doc{number}"
        for ordinal in range(draw(st.integers(1, 3))):
            text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12)))
            version = draw(st.sampled_from(["v1", "v1", "v2"]))
            chunk = _chunk(doc_id, ordinal, text, version)
            rows.append(chunk)
            texts[chunk.chunk_id] = text
    if draw(st.booleans()):  # a chunk id that now belongs to another document
        rows.append(_chunk("doc0", 9, "moved text here", chunk_id="docX#0"))
        texts["docX#0"] = "moved text here"
    citations = []
    chunk_ids = [*texts, "doc0#7", "gone#0"]
    for number in range(draw(st.integers(1, 8))):
        chunk_id = draw(st.sampled_from(chunk_ids))
        text = texts.get(chunk_id, "the refund window")
        start = draw(st.integers(0, max(0, len(text) - 3)))
        end = draw(st.integers(start + 1, len(text))) if len(text) > start else start + 1
        quote = text[start:end] or "x"
        shift = draw(st.sampled_from([0, 0, 1, 3]))
        doc_id = chunk_id.split("#", 1)[0]
        citations.append(_citation(number, doc_id, chunk_id, [start + shift, end + shift], quote))
    return rows, citations


@settings(max_examples=150)
@given(stores_and_citations())
def test_a_lookup_judges_every_citation_as_the_mirror_does(
    case: tuple[list[Chunk], list[bytes]],
) -> None:
    rows, values = case
    records = _records(values)
    mirror = _mirror(rows)
    pipeline, _ = _looking_up(rows)
    asyncio.run(pipeline.prepare(records))
    assert _verdicts(pipeline, records) == _verdicts(mirror, records)


def test_one_query_a_batch_and_none_while_what_it_cites_is_fresh() -> None:
    rows = [_chunk(f"d{n}", 0, "The refund window is thirty days.") for n in range(50)]
    values = [
        _citation(n, f"d{n % 50}", f"d{n % 50}#0", [4, 17], "refund window") for n in range(200)
    ]
    now = [0.0]
    store = LookupCache(ttl_seconds=30.0)
    lookup = RowsLookup(rows, store, clock=lambda: now[0])
    pipeline = Pipeline(store, Policy(), lookup=lookup)
    records = _records(values)
    asyncio.run(pipeline.prepare(records))
    assert [kind for kind, _ in lookup.queries] == ["documents"]
    assert len(lookup.queries[0][1]) == 50  # each document once
    asyncio.run(pipeline.prepare(records))
    assert len(lookup.queries) == 1  # all fresh: no query
    now[0] = 31.0
    asyncio.run(pipeline.prepare(records[:1]))
    assert lookup.queries[-1] == ("documents", ("d0",))  # stale: fetched again, alone
    ok = lookup.registry.get_sample_value(
        "citation_lookups_total", {"kind": "documents", "result": "ok"}
    )
    assert ok == 2


def test_a_change_in_the_database_is_seen_once_the_ttl_has_passed() -> None:
    rows = [_chunk("d", 0, "The refund window is thirty days.")]
    now = [0.0]
    store = LookupCache(ttl_seconds=10.0)
    lookup = RowsLookup(rows, store, clock=lambda: now[0])
    pipeline = Pipeline(store, Policy(), publish_all=True, lookup=lookup)
    records = _records([_citation(1, "d", "d#0", [4, 17], "refund window")])

    def status() -> str:
        asyncio.run(pipeline.prepare(records))
        return pipeline.answer(records[0]).checked[0].verdict.status

    assert status() == "ok"
    lookup.rows = [_chunk("d", 0, "## The refund window is thirty days.")]
    now[0] = 9.0
    assert status() == "ok"  # still the text fetched at 0
    now[0] = 10.0
    assert status() == "drift_repaired"


def test_a_document_that_is_gone_is_missing_and_one_never_looked_up_is_no_verdict() -> None:
    pipeline, _ = _looking_up([_chunk("d", 0, "The refund window is thirty days.")])
    gone = _records([_citation(1, "nowhere", "nowhere#0", [0, 3], "The")])
    asyncio.run(pipeline.prepare(gone))
    assert pipeline.answer(gone[0]).checked[0].verdict.status == "document_missing"
    # a check of a batch no lookup prepared: check_failed, never a false document_missing
    unprepared = _records([_citation(2, "d", "d#0", [4, 17], "refund window")])
    outcome = pipeline.answer(unprepared[0])
    assert outcome.dead_letter is not None and outcome.dead_letter.reason == "check_failed"
    assert "not looked up" in outcome.dead_letter.error
    assert all(c.verdict.status != "document_missing" for c in outcome.checked)


def test_the_cache_stays_within_its_bound_but_never_drops_what_a_batch_being_checked_cites() -> (
    None
):
    text = "The refund window is thirty days. " * 30  # about 1 KiB a document
    rows = [_chunk(f"d{n}", 0, text) for n in range(40)]
    pipeline, _ = _looking_up(rows, max_bytes=8 * 1024)
    cache = pipeline.store
    assert isinstance(cache, LookupCache)

    def batch(numbers: range) -> list[LocalRecord]:
        return _records(
            [_citation(n, f"d{n}", f"d{n}#0", [4, 17], "refund window") for n in numbers]
        )

    for n in range(40):
        one = batch(range(n, n + 1))
        release = asyncio.run(pipeline.prepare(one))
        assert pipeline.answer(one[0]).checked[0].verdict.status == "ok"
        release()
        assert cache.held_bytes <= 8 * 1024
    assert cache.held_documents < 10
    # a batch citing more than the bound holds is held whole while it is checked, and a
    # second batch prepared meanwhile (a sweep beside the inline checks) takes none of it
    first, second = batch(range(20)), batch(range(20, 40))
    release_first = asyncio.run(pipeline.prepare(first))
    release_second = asyncio.run(pipeline.prepare(second))
    assert [pipeline.answer(r).checked[0].verdict.status for r in first] == ["ok"] * 20
    assert [pipeline.answer(r).checked[0].verdict.status for r in second] == ["ok"] * 20
    assert cache.held_documents == 40 and cache.pinned_documents == 40
    release_first()
    release_second()
    release_second()  # a second release is nothing
    assert cache.pinned_documents == 0
    asyncio.run(pipeline.prepare([]))()
    assert cache.held_bytes <= 8 * 1024


def test_an_outage_raises_names_the_database_without_its_password_and_counts() -> None:
    pipeline, lookup = _looking_up([_chunk("d", 0, "The refund window is thirty days.")])
    lookup.down = True
    records = _records([_citation(1, "d", "d#0", [4, 17], "refund window")])
    with pytest.raises(SourceUnavailable) as raised:
        asyncio.run(pipeline.prepare(records))
    message = str(raised.value)
    assert "s3cret" not in message and "127.0.0.1" in message and "\n" not in message
    errors = lookup.registry.get_sample_value(
        "citation_lookups_total", {"kind": "documents", "result": "error"}
    )
    assert errors == 1
    with pytest.raises(NotLookedUp):
        pipeline.store.live_version("d")  # nothing was held: nothing can be judged
    lookup.down = False
    asyncio.run(pipeline.prepare(records))
    assert pipeline.answer(records[0]).checked[0].verdict.status == "ok"


def test_an_outage_checks_nothing_of_the_batch_and_the_next_poll_checks_all_of_it() -> None:
    broker = FakeBroker()
    for topic in ("answers", "verdicts", "dlq"):
        broker.create_topic(topic, 1)
    for n in range(5):
        broker.append("answers", _citation(n, "d", "d#0", [4, 17], "refund window"))
    consumer = FakeConsumer(broker, group_id="g")
    consumer.assign([TopicPartition("answers", 0)])
    store = LookupCache()
    lookup = RowsLookup([_chunk("d", 0, "The refund window is thirty days.")], store)
    pipeline = Pipeline(store, Policy(), publish_all=True, lookup=lookup)
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "test")
    publisher = Publisher(FakeProducer(broker), "verdicts", "dlq")
    checker = AnswerChecker(
        consumer, "answers", pipeline=pipeline, metrics=metrics, publisher=publisher
    )
    lookup.down = True
    with pytest.raises(SourceUnavailable):
        asyncio.run(checker.poll(timeout_ms=10))
    assert broker.records("verdicts") == [] and broker.records("dlq") == []
    assert broker.committed("g") == {}
    lookup.down = False
    assert asyncio.run(checker.poll(timeout_ms=10)) == 5
    assert len(broker.records("verdicts")) == 5
    assert broker.records("dlq") == []
    assert broker.committed("g") == {TopicPartition("answers", 0): 5}


def test_cited_ids_are_read_leniently_and_bounded() -> None:
    values = [
        b"not json",
        b"[1, 2]",
        orjson.dumps({"citations": [{"doc_id": "a", "chunk_id": "a#0"}, 7, {"doc_id": 3}]}),
        orjson.dumps({"doc_id": "b", "chunk_id": "b#1"}),
        orjson.dumps({"doc_id": "x" * 10_000, "chunk_id": ""}),
        orjson.dumps(
            {"citations": [{"doc_id": "c"}] * (DEFAULT_LIMITS.max_citations_per_answer + 1)}
        ),
        None,
    ]
    cited = cited_by(values, DEFAULT_LIMITS)
    assert list(cited.doc_ids) == ["a", "b"]
    assert list(cited.chunk_ids) == ["a#0", "b#1"]


def test_a_fetched_batch_holds_its_documents_until_the_next_fetch() -> None:
    broker = FakeBroker()
    broker.create_topic("answers", 1)
    for n in range(3):
        broker.append("answers", _citation(n, f"d{n}", f"d{n}#0", [4, 17], "refund window"))
    consumer = FakeConsumer(broker, group_id="g")
    consumer.assign([TopicPartition("answers", 0)])
    rows = [_chunk(f"d{n}", 0, "The refund window is thirty days.") for n in range(3)]
    pipeline, _ = _looking_up(rows)
    cache = pipeline.store
    assert isinstance(cache, LookupCache)
    registry = CollectorRegistry()
    fetcher = Fetcher(consumer, ExporterMetrics(registry, SourceLabels(), "t"), pipeline.prepare)
    got = asyncio.run(fetcher.getmany(timeout_ms=10, max_records=100))
    assert sum(len(records) for records in got.values()) == 3
    assert cache.pinned_documents == 3
    assert asyncio.run(fetcher.getmany(timeout_ms=10, max_records=100)) == {}
    assert cache.pinned_documents == 0
    broker.append("answers", _citation(9, "d0", "d0#0", [4, 17], "refund window"))
    asyncio.run(fetcher.getmany(timeout_ms=10, max_records=100))
    assert cache.pinned_documents == 1
    del fetcher  # a fetcher that is gone holds nothing
    assert cache.pinned_documents == 0
