"""Inputs of the Spark sweep as numbered records: ``(line, value)``, the raw bytes of a record.

JSON lines are read as text, not parsed by Spark: a line that is not JSON, or not a record,
must reach the checks as it is, to become the same ``invalid`` verdict, with the same line
number, as in the in-process sweep. Tables (Parquet, Delta, Iceberg, JSON read by Spark) are
turned back into one JSON record per row.
"""

from __future__ import annotations

from itertools import accumulate

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import LongType, StringType, StructField, StructType

from exporter.files.jsonl import InputError

__all__ = ["numbered_lines", "table_records"]

# Spark's JSON reader (mode PERMISSIVE) puts a line it could not parse here, whole.
_CORRUPT = "_corrupt_record"
_SPLITS = StructType(
    [
        StructField("file", StringType()),
        StructField("block", LongType()),
        StructField("first", LongType()),
        StructField("before", LongType()),
    ]
)


def _unreadable(path: str, exc: AnalysisException) -> InputError:
    if exc.getCondition() == "PATH_NOT_FOUND":
        return InputError(f"{path}: no such file or directory")
    return InputError(f"{path}: {str(exc).splitlines()[0]}")


def numbered_lines(spark: SparkSession, path: str) -> DataFrame:
    """The lines of a JSONL file (plain or compressed, any file system Spark reads) as
    ``(line, value)``: the 1-based line number and the line's bytes without its ``\\n``.

    A directory or glob reads as its files concatenated in path order. Numbering needs the
    count of lines of each split of the input first: this runs one Spark job (a scan that
    splits lines and parses nothing). Raises InputError when Spark cannot read ``path``.
    """
    try:
        text = spark.read.option("lineSep", "\n").text(path)
    except AnalysisException as exc:
        raise _unreadable(path, exc) from None
    scanned = text.select(
        sf.col("value").cast("binary").alias("value"),
        sf.col("_metadata.file_path").alias("file"),
        sf.col("_metadata.file_block_start").alias("block"),
        # consecutive within a partition, whose splits are read whole and in order
        sf.monotonically_increasing_id().alias("row"),
    )
    splits = sorted(
        (row["file"], row["block"], row["first"], row["lines"])
        for row in scanned.groupBy("file", "block")
        .agg(sf.min("row").alias("first"), sf.count(sf.lit(1)).alias("lines"))
        .collect()
    )
    before = [0, *accumulate(lines for *_, lines in splits)]
    offsets = spark.createDataFrame(
        [(file, block, first, before[i]) for i, (file, block, first, _) in enumerate(splits)],
        _SPLITS,
    )
    return scanned.join(sf.broadcast(offsets), ["file", "block"]).select(
        (sf.col("row") - sf.col("first") + sf.col("before") + 1).alias("line"), "value"
    )


def table_records(table: DataFrame, order: str | None = None) -> DataFrame:
    """A table of records (one row per chunk record, citation record or answer event) as
    ``(line, value)``: each row as its JSON record (null columns left out, as absent fields).

    ``line`` is the ``order`` column when given (what the verdicts call the line, and what
    decides which of several records of one chunk is the last), else a unique id increasing in
    the order Spark reads the rows. A ``_corrupt_record`` column (Spark's JSON reader) is the
    record of the rows that have one, so they become ``invalid`` verdicts.
    """
    columns = [name for name in table.columns if name not in (order, _CORRUPT)]
    value: Column = sf.to_json(sf.struct(*columns))
    if _CORRUPT in table.columns:
        value = sf.coalesce(sf.col(_CORRUPT), value)
    line = sf.col(order).cast("long") if order else sf.monotonically_increasing_id() + 1
    return table.select(line.alias("line"), value.cast("binary").alias("value"))
