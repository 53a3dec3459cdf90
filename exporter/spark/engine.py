"""The sweep as a Spark plan: chunk and citation records in, one verdict per citation out.

1. Chunk lines are decoded; each chunk's records, in input order, say which document gains it
   and which loses it (a deletion, or a chunk re-indexed under another document), so every
   document's store can be rebuilt from its own events alone.
2. Citation lines are exploded into their citations: invalid ones get their verdicts at once;
   the others are keyed by ``doc_id`` and split into groups of about ``citations_per_task``
   (hashed on their line), so no task holds all the citations of a very large document.
3. Each group gets its document's chunk events (shared by the groups, copied to each), and a
   Python worker streams through its partition sorted by group: a store of one document, then
   its citations checked against it by the in-process sweep's own check.

Nothing is collected at the driver but small aggregates (:meth:`SparkSweep.summary`); the
verdicts are a DataFrame to write anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

from exporter.checks.engine import Policy
from exporter.pipeline.summary import SweepSummary
from exporter.spark.columns import CHUNKS, CITATIONS, EXPLODED, VERDICTS, WORK
from exporter.spark.inputs import table_records
from exporter.spark.summary import chunk_counts, verdict_counts
from exporter.spark.workers import (
    CHUNK_EVENT,
    CITATION,
    check_batches,
    chunk_batches,
    citation_batches,
)

__all__ = ["DEFAULT_CITATIONS_PER_TASK", "SparkSweep", "sweep", "sweep_tables"]

# Citations of one document checked by one task, about: a few seconds of checks, so a large
# document spreads over many tasks while a small one still costs one store.
DEFAULT_CITATIONS_PER_TASK = 10_000
# Check-stage partitions per core Spark offers, for tasks of unequal length to even out.
_PARTITIONS_PER_CORE = 4
_NOT_JUDGED = "needs the in-process engine"


@dataclass(frozen=True)
class SparkSweep:
    """A planned sweep. ``verdicts`` has one row per input citation (see
    :data:`exporter.spark.rows.VERDICT_FIELDS`; ``verdict`` is the JSON line the in-process
    sweep writes); ``groups`` says how documents were split into tasks (one row per document
    group: its citations and the chunk events it was given). Nothing runs until they are used;
    the decoded inputs and the verdicts are persisted on first use (:meth:`unpersist`)."""

    verdicts: DataFrame
    groups: DataFrame
    chunks: DataFrame
    _persisted: tuple[DataFrame, ...]

    def summary(
        self, chunks_name: str = "chunks", citations_name: str = "citations"
    ) -> SweepSummary:
        """The in-process sweep's summary of these verdicts (coverage and entailment not
        judged), errors named ``chunks_name:line`` and ``citations_name:line``."""
        summary = SweepSummary(
            coverage_judged=False, coverage_off=_NOT_JUDGED, entailment_off=_NOT_JUDGED
        )
        chunk_counts(self.chunks, summary, chunks_name)
        verdict_counts(self.verdicts, summary, citations_name)
        return summary

    def unpersist(self) -> None:
        for frame in self._persisted:
            frame.unpersist()


def _chunk_events(chunks: DataFrame) -> DataFrame:
    """Per document, the chunk records that change it: every record of one of its chunks,
    and a deletion where a chunk left it (deleted, or re-indexed under another document)."""
    by_chunk = Window.partitionBy("chunk_id").orderBy("seq")
    history = chunks.filter(sf.col("error").isNull()).withColumn(
        "left", sf.lag("doc_id").over(by_chunk)
    )
    kept = [name for name in CHUNKS.names if name != "error"]
    upserts = history.filter(sf.col("doc_id").isNotNull()).select(
        *kept, sf.lit(False).alias("deleted")
    )
    removals = history.filter(
        sf.col("left").isNotNull()
        & (sf.col("doc_id").isNull() | (sf.col("doc_id") != sf.col("left")))
    ).select(sf.col("left").alias("doc_id"), "seq", "chunk_id", sf.lit(True).alias("deleted"))
    return upserts.unionByName(removals, allowMissingColumns=True)


def _work(chunks: DataFrame, pending: DataFrame, citations_per_task: int) -> DataFrame:
    """Citations keyed by document group, each group with its document's chunk events."""
    groups = pending.groupBy("doc_id").agg(
        sf.ceil(sf.count(sf.lit(1)) / citations_per_task).cast("int").alias("groups")
    )
    citations = (
        pending.join(groups, "doc_id")
        .withColumn("grp", sf.pmod(sf.xxhash64("line", "position"), sf.col("groups")).cast("int"))
        .withColumn("kind", sf.lit(CITATION))
    )
    events = (
        _chunk_events(chunks)
        .join(groups, "doc_id")  # only documents something cites
        .withColumn("grp", sf.explode(sf.sequence(sf.lit(0), sf.col("groups") - 1)))
        .withColumn("kind", sf.lit(CHUNK_EVENT))
    )
    work = events.unionByName(citations, allowMissingColumns=True)
    return work.select(*(sf.col(name).cast(WORK.spark[name].dataType) for name in WORK.names))


def sweep(
    chunk_records: DataFrame,
    citation_records: DataFrame,
    policy: Policy | None = None,
    *,
    citations_per_task: int = DEFAULT_CITATIONS_PER_TASK,
    partitions: int | None = None,
) -> SparkSweep:
    """Plan the sweep of numbered records (``line``, ``value``: see
    :func:`~exporter.spark.inputs.numbered_lines` and
    :func:`~exporter.spark.inputs.table_records`) under ``policy``.

    ``partitions`` is the number of check tasks (default: four per core Spark offers).
    """
    if citations_per_task < 1:
        raise ValueError(f"citations_per_task must be at least 1, got {citations_per_task}")
    policy = policy if policy is not None else Policy()
    spark = citation_records.sparkSession
    partitions = partitions or spark.sparkContext.defaultParallelism * _PARTITIONS_PER_CORE
    level = StorageLevel.MEMORY_AND_DISK
    chunks = chunk_records.mapInArrow(
        partial(chunk_batches, limits=policy.limits), CHUNKS.spark
    ).persist(level)
    exploded = citation_records.mapInArrow(
        partial(citation_batches, limits=policy.limits), EXPLODED.spark
    ).persist(level)
    finished = exploded.filter(sf.col("finished")).select(*VERDICTS.names)
    pending = exploded.filter(~sf.col("finished")).select(*CITATIONS.names)
    work = _work(chunks, pending, citations_per_task)
    checked = (
        work.repartition(partitions, "doc_id", "grp")
        .sortWithinPartitions("doc_id", "grp", "kind", "seq", "line", "position")
        .mapInArrow(partial(check_batches, policy=policy), VERDICTS.spark)
    )
    verdicts = finished.unionByName(checked).persist(level)
    groups = work.groupBy("doc_id", "grp").agg(
        sf.sum((sf.col("kind") == CITATION).cast("long")).alias("citations"),
        sf.sum((sf.col("kind") == CHUNK_EVENT).cast("long")).alias("chunk_events"),
    )
    return SparkSweep(verdicts, groups, chunks, (chunks, exploded, verdicts))


def sweep_tables(
    chunks: DataFrame,
    citations: DataFrame,
    policy: Policy | None = None,
    *,
    chunk_order: str | None = None,
    citation_order: str | None = None,
    citations_per_task: int = DEFAULT_CITATIONS_PER_TASK,
) -> DataFrame:
    """The verdicts of a table of citations (records and answer events) against a table of
    chunk records: any DataFrame whose rows are the records' fields, read from Parquet, JSON,
    Delta or Iceberg. ``chunk_order`` names the column that orders the chunk records (the last
    record of a chunk wins), ``citation_order`` the one that numbers the citation records (the
    verdicts' ``line``); see :func:`~exporter.spark.inputs.table_records`. The decoded
    inputs and the verdicts stay cached until the session ends: :func:`sweep` returns them
    with ``unpersist`` (and the summary)."""
    return sweep(
        table_records(chunks, chunk_order),
        table_records(citations, citation_order),
        policy,
        citations_per_task=citations_per_task,
    ).verdicts
