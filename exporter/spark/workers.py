"""The functions ``mapInArrow`` runs in the Python workers: Arrow batches in, Arrow batches out.

Each turns its batch into rows, hands them to :mod:`exporter.spark.rows`, and builds a batch
of its layout from what comes back; a batch in is at most one batch out, so a worker holds one
batch of rows at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from exporter.checks.engine import Policy
from exporter.records.limits import Limits
from exporter.spark.columns import CHUNKS, EXPLODED, VERDICTS
from exporter.spark.rows import DocumentChecker, Row, chunk_row, citation_rows

__all__ = ["CHUNK_EVENT", "CITATION", "check_batches", "chunk_batches", "citation_batches"]

# The kinds of rows of the check stage, in the order a document group needs them.
CHUNK_EVENT = 0
CITATION = 1


def _lines(batch: pa.RecordBatch) -> Iterator[tuple[int, bytes]]:
    return zip(batch.column("line").to_pylist(), batch.column("value").to_pylist(), strict=True)


def chunk_batches(batches: Iterator[pa.RecordBatch], limits: Limits) -> Iterator[pa.RecordBatch]:
    """Numbered chunk lines -> CHUNKS rows (blank lines dropped)."""
    for batch in batches:
        rows = [
            row for seq, raw in _lines(batch) if (row := chunk_row(seq, raw, limits)) is not None
        ]
        yield pa.RecordBatch.from_pylist(rows, schema=CHUNKS.arrow)


def citation_batches(batches: Iterator[pa.RecordBatch], limits: Limits) -> Iterator[pa.RecordBatch]:
    """Numbered citation lines -> EXPLODED rows, one per citation."""
    for batch in batches:
        rows: list[Row] = []
        for line, raw in _lines(batch):
            for row, finished in citation_rows(line, raw, limits):
                row["finished"] = finished
                rows.append(row)
        yield pa.RecordBatch.from_pylist(rows, schema=EXPLODED.arrow)


def check_batches(batches: Iterator[pa.RecordBatch], policy: Policy) -> Iterator[pa.RecordBatch]:
    """WORK rows sorted by (doc_id, grp, kind, seq, line, position) -> VERDICTS rows."""
    checker = DocumentChecker(policy)
    for batch in batches:
        verdicts: list[Row] = []
        for row in batch.to_pylist():
            group = (row["doc_id"], row["grp"])
            if row["kind"] == CHUNK_EVENT:
                checker.apply(group, row)
            else:
                verdicts.append(checker.check(group, row))
        yield pa.RecordBatch.from_pylist(verdicts, schema=VERDICTS.arrow)
