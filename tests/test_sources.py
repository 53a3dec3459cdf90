"""Where records come from: the source seam, and JSON Lines files behind it.

A source defined here, in memory, goes through the store's load and the whole sweep with no
other file changed: the seam the database sources of the next issue use.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Generator
from pathlib import Path

import orjson
import pytest

from exporter.checks.engine import Policy
from exporter.errors import InputError
from exporter.file_sweep import load_store, run_sweep
from exporter.pipeline.replay import records_of
from exporter.pipeline.summary import SweepSummary
from exporter.records.limits import Oversized
from exporter.sources import ChunkSource, CitationSource, RawRecord, RecordSource
from exporter.sources.jsonl import JsonLines

CHUNK = {"chunk_id": "d#0", "doc_id": "d", "doc_version": "v1", "text": "Refunds take 5 days."}
CITATION = {
    "citation_id": "c1",
    "answer_id": "a1",
    "doc_id": "d",
    "doc_version": "v1",
    "chunk_id": "d#0",
    "chunk_span": [0, 20],
    "quote": "Refunds take 5 days.",
}


class Rows:
    """A source that is not a file: rows held in memory, as a database cursor would yield."""

    def __init__(self, name: str, rows: list[dict[str, object] | bytes]) -> None:
        self.rows = rows
        self._name = name
        self._complete = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def complete(self) -> bool:
        return self._complete

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        self._complete = False
        for number, row in enumerate(self.rows, start=1):
            value = row if isinstance(row, bytes) else orjson.dumps(row)
            yield number, Oversized(len(value)) if len(value) > max_bytes else value
        self._complete = True

    def where(self, number: int) -> str:
        return f"{self._name} row {number}"

    def consumed(self) -> int | None:
        return None

    def size(self) -> int | None:
        return len(self.rows)


def test_a_source_that_is_not_a_file_feeds_the_load_and_the_sweep() -> None:
    chunks = Rows("chunks table", [CHUNK, b"{not json"])
    citations = Rows("citations table", [CITATION, {**CITATION, "citation_id": 7}])
    assert isinstance(chunks, ChunkSource) and isinstance(citations, CitationSource)
    summary = SweepSummary()
    store = load_store(chunks, summary)
    out = io.BytesIO()
    run_sweep(store, citations, Policy(), summary, out=out)
    verdicts = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [v["status"] for v in verdicts] == ["ok", "invalid"]
    assert chunks.complete and citations.complete
    # errors name the source's own records
    assert any(error.startswith("chunks table row 2: ") for error in summary.errors)
    assert any(error.startswith("citations table row 2: ") for error in summary.errors)


def test_json_lines_are_numbered_by_line_and_named_by_path(tmp_path: Path) -> None:
    path = tmp_path / "citations.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"b": 2}\n' + b"x" * 50 + b"\n")
    source = JsonLines(str(path))
    assert isinstance(source, RecordSource)
    assert list(source.records(40)) == [(1, b'{"a": 1}'), (3, b'{"b": 2}'), (4, Oversized(50))]
    assert source.complete
    assert source.where(3) == f"{path}:3"
    assert source.consumed() == source.size() == path.stat().st_size


def test_a_truncated_file_is_an_error_naming_it_and_the_read_is_incomplete(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chunks.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000)[:-20])
    source = JsonLines(str(path))
    read: list[RawRecord] = []
    with pytest.raises(InputError, match=rf"^{path}: truncated"):
        read.extend(source.records(1000))
    assert read and not source.complete
    with pytest.raises(InputError, match=rf"^{path}: truncated"):
        load_store(source, SweepSummary())


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(InputError, match=rf"^{path}: No such file"):
        list(JsonLines(str(path)).records(1000))


class Stopping(Rows):
    """A source whose read stops early without raising: a cursor that ran out of time."""

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        self._complete = False
        yield from list(super().records(max_bytes))[:1]
        self._complete = False


def test_a_read_that_stopped_early_is_an_error_not_a_smaller_archive() -> None:
    """Half a table must not pass the gate as the whole (found by a review: nothing read
    ``complete``)."""
    summary = SweepSummary()
    store = load_store(Rows("chunks", [CHUNK]), summary)
    citations = Stopping("citations table", [CITATION] * 1000)
    with pytest.raises(InputError, match=r"^citations table: the read ended before"):
        run_sweep(store, citations, Policy(), summary)
    with pytest.raises(InputError, match=r"^chunks table: the read ended before"):
        load_store(Stopping("chunks table", [CHUNK, CHUNK]), SweepSummary())


def test_a_read_asked_for_is_not_complete_before_it_begins(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"{}\n")
    source = JsonLines(str(path))
    list(source.records(100))
    assert source.complete
    again = source.records(100)
    assert not source.complete
    list(again)
    assert source.complete


def test_a_replay_whose_source_stopped_early_is_an_error() -> None:
    source = Stopping("answers table", [CITATION] * 10)
    with pytest.raises(InputError, match=r"^answers table: the read ended before"):
        list(records_of(source, "chunks", "answers", 10_000))
