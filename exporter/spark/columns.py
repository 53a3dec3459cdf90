"""The tables between the Spark sweep's stages, each declared once for Spark and for Arrow.

A layout lists its columns with their Spark SQL types; the Python workers build Arrow record
batches of exactly that schema, which is what ``mapInArrow`` checks them against.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from exporter.spark.rows import CHUNK_FIELDS, CITATION_FIELDS, VERDICT_FIELDS

__all__ = ["CHUNKS", "CITATIONS", "EXPLODED", "VERDICTS", "WORK", "Layout"]

_TYPES: dict[str, tuple[DataType, pa.DataType]] = {
    "long": (LongType(), pa.int64()),
    "int": (IntegerType(), pa.int32()),
    "string": (StringType(), pa.string()),
    "boolean": (BooleanType(), pa.bool_()),
}


@dataclass(frozen=True)
class Layout:
    """Named, typed columns (every one nullable)."""

    fields: tuple[tuple[str, str], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.fields]

    @cached_property
    def spark(self) -> StructType:
        return StructType([StructField(name, _TYPES[kind][0]) for name, kind in self.fields])

    @cached_property
    def arrow(self) -> pa.Schema:
        return pa.schema([(name, _TYPES[kind][1]) for name, kind in self.fields])

    def __add__(self, other: Layout) -> Layout:
        """Both layouts' columns; a column in both (same name, same type) once."""
        seen = dict(self.fields)
        extra = tuple((name, kind) for name, kind in other.fields if name not in seen)
        clashes = [name for name, kind in other.fields if seen.get(name, kind) != kind]
        if clashes:
            raise ValueError(f"columns {clashes} differ in type between the layouts")
        return Layout(self.fields + extra)


# decoded chunk lines (a chunk, a deletion, or an error)
CHUNKS = Layout(CHUNK_FIELDS)
# citations waiting for their document
CITATIONS = Layout(CITATION_FIELDS)
# one verdict per input citation
VERDICTS = Layout(VERDICT_FIELDS)
# an input line's citations: finished (invalid: a verdict) or waiting (a citation)
EXPLODED = Layout((("finished", "boolean"),)) + VERDICTS + CITATIONS
# the check stage's input: a document group's chunk events, then its citations
# (chunk events carry no error: only usable records make them)
WORK = (
    Layout((("grp", "int"), ("kind", "int"), ("deleted", "boolean")))
    + Layout(tuple(field for field in CHUNK_FIELDS if field[0] != "error"))
    + CITATIONS
)
