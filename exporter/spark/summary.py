"""The sweep summary of a Spark sweep, from aggregates collected at the driver.

The counts are :class:`~exporter.outputs.report.SweepSummary`'s own, added by count rather than
one verdict at a time: one row per (status, reason, repair method, shift) comes back, and the
first few errors in input order, never the verdicts themselves.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

from exporter.checks.verdict import Status
from exporter.pipeline.summary import MAX_CHUNKERS, SweepSummary

__all__ = ["chunk_counts", "verdict_counts"]

# Errors kept in a summary (it keeps no more, however many are noted).
_ERRORS_NOTED = 20


def chunk_counts(chunks: DataFrame, summary: SweepSummary, name: str) -> None:
    """What load_store counts: live chunks and documents (after the last record of each chunk),
    and the records that could not be used, with the first errors."""
    latest = Window.partitionBy("chunk_id").orderBy("seq")
    alive = (
        chunks.filter(sf.col("error").isNull())
        .withColumn("next", sf.lead("seq").over(latest))
        .filter(sf.col("next").isNull() & sf.col("doc_id").isNotNull())
    )
    live = alive.agg(
        sf.count(sf.lit(1)).alias("chunks"), sf.count_distinct("doc_id").alias("documents")
    ).first()
    assert live is not None  # a global aggregate has one row
    summary.store_loaded(live["chunks"], live["documents"])
    # the largest chunkers only: a store's chunkers are few, a hostile one's need not be
    largest = (
        alive.groupBy("chunker")
        .count()
        .orderBy(sf.desc("count"), sf.asc_nulls_last("chunker"))
        .limit(MAX_CHUNKERS)
        .collect()
    )
    chunkers = {row["chunker"]: row["count"] for row in largest}
    summary.store_read(chunkers, datetime.now(UTC), live["chunks"])
    errors = chunks.filter(sf.col("error").isNotNull())
    first = errors.orderBy("seq").limit(_ERRORS_NOTED).collect()
    summary.invalid_chunks(errors.count(), (f"{name}:{r['seq']}: {r['error']}" for r in first))


def verdict_counts(verdicts: DataFrame, summary: SweepSummary, name: str) -> None:
    """What SweepSummary.add_outcome adds for every verdict, added by count."""
    counts = (
        verdicts.groupBy("status", "reason", "repair_method", "repair_how", "shift")
        .count()
        .collect()
    )
    for row in counts:
        summary.add_counted(
            Status(row["status"]),
            row["count"],
            reason=row["reason"],
            method=row["repair_method"],
            how=row["repair_how"],
            shift=row["shift"],
        )
    invalid = verdicts.filter(sf.col("status") == Status.INVALID.value)
    first = invalid.orderBy("line", "position").limit(_ERRORS_NOTED).collect()
    for row in first:
        where = f"{name}:{row['line']}"
        at = where if row["index"] is None else f"{where} citation #{row['index']}"
        summary.note_error(f"{at}: {row['error']}")
