"""The sweep on Spark, for archives beyond one machine (the ``spark`` extra: PySpark 4).

::

    from exporter.spark import sweep_tables

    chunks = spark.read.parquet("s3a://rag/chunks/")
    citations = spark.read.json("s3a://rag/answers/2026-11/")
    verdicts = sweep_tables(chunks, citations, chunk_order="seq")
    verdicts.filter("status != 'ok'").write.parquet("s3a://rag/verdicts/2026-11/")

Every citation is checked by the in-process sweep's own engine, one document at a time; the
verdicts are the ones ``citation-exporter sweep`` writes (its ``--engine spark`` runs this).
Only this subpackage imports PySpark: the base install never does.
"""

from __future__ import annotations

from exporter.spark.engine import DEFAULT_CITATIONS_PER_TASK, SparkSweep, sweep, sweep_tables
from exporter.spark.inputs import numbered_lines, table_records

__all__ = [
    "DEFAULT_CITATIONS_PER_TASK",
    "SparkSweep",
    "numbered_lines",
    "sweep",
    "sweep_tables",
    "table_records",
]
