"""The sweep summary of a Spark sweep, from aggregates collected at the driver.

The counts are :class:`~exporter.outputs.report.SweepSummary`'s own, added by count rather than
one verdict at a time: one row per (status, reason, repair method, shift) comes back, and the
first few errors in input order, never the verdicts themselves.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

from exporter.checks.verdict import Status
from exporter.outputs.report import SweepSummary

__all__ = ["chunk_counts", "verdict_counts"]

# Errors kept in a summary (it keeps no more, however many are noted).
_ERRORS_NOTED = 20


def chunk_counts(chunks: DataFrame, summary: SweepSummary, name: str) -> None:
    """What load_store counts: live chunks and documents (after the last record of each chunk),
    and the records that could not be used, with the first errors."""
    latest = Window.partitionBy("chunk_id").orderBy("seq")
    live = (
        chunks.filter(sf.col("error").isNull())
        .withColumn("next", sf.lead("seq").over(latest))
        .filter(sf.col("next").isNull() & sf.col("doc_id").isNotNull())
        .agg(sf.count(sf.lit(1)).alias("chunks"), sf.count_distinct("doc_id").alias("documents"))
        .first()
    )
    assert live is not None  # a global aggregate has one row
    summary.chunks_loaded = live["chunks"]
    summary.documents_loaded = live["documents"]
    errors = chunks.filter(sf.col("error").isNotNull())
    summary.invalid_chunk_records += errors.count()
    for row in errors.orderBy("seq").limit(_ERRORS_NOTED).collect():
        summary.note_error(f"{name}:{row['seq']}: {row['error']}")


def verdict_counts(verdicts: DataFrame, summary: SweepSummary, name: str) -> None:
    """What SweepSummary.add_outcome adds for every verdict, added by count."""
    counts = (
        verdicts.groupBy("status", "reason", "repair_method", "repair_how", "shift")
        .count()
        .collect()
    )
    for row in counts:
        status, count = Status(row["status"]), row["count"]
        summary.statuses[status] += count
        if status is Status.OK:
            continue
        if row["reason"] is not None:
            summary.reasons[(status.value, row["reason"])] += count
        if row["repair_method"] is not None:
            summary.methods[row["repair_method"]] += count
            summary.decided_by[row["repair_how"]] += count
            if row["shift"] is None:
                summary.unknown_shifts += count
            else:
                summary.shifts[row["shift"]] += count
    invalid = verdicts.filter(sf.col("status") == Status.INVALID.value)
    first = invalid.orderBy("line", "position").limit(_ERRORS_NOTED).collect()
    for row in first:
        where = f"{name}:{row['line']}"
        at = where if row["index"] is None else f"{where} citation #{row['index']}"
        summary.note_error(f"{at}: {row['error']}")
