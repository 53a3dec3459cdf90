"""Citation records (and answer events) read from an application's own table in Postgres.

A table is read whole (``SELECT *``, columns renamed field by field by ``--citations-column``),
in the order of its primary key (else of its citation id column): a sweep of the same table
twice numbers its rows the same. Its columns are checked against the record before the read:
a table that cannot give a citation's required fields is one line naming those it lacks. A
query of the user's own is read as it returns its rows. Failures are one line
(:mod:`exporter.postgres.reading`); a row that is no valid citation is an ``invalid`` verdict,
as a bad line of a file is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

from exporter.config.postgres import (
    CITATION_FIELDS,
    REQUIRED_CITATION_FIELDS,
    SPAN_COLUMNS,
    WHOLE_RECORD,
    CitationTable,
)
from exporter.errors import InputError
from exporter.postgres.layouts import citation_record
from exporter.postgres.reading import ROWS_PER_FETCH, PostgresRead
from exporter.sources import RawRecord

__all__ = ["PostgresCitations"]


class PostgresCitations(PostgresRead):
    """The citations of a table or a query. Satisfies
    :class:`~exporter.sources.CitationSource`; each read is a new connection and snapshot."""

    def __init__(self, uri: str, mapping: CitationTable) -> None:
        super().__init__(uri)
        self.mapping = mapping

    def __repr__(self) -> str:
        return f"PostgresCitations({self.name!r}, {self.mapping.describe()!r})"

    def describe(self) -> str:
        return self.mapping.describe()

    def where(self, number: int) -> str:
        """Row ``number`` of the read (worker processes ask too, so by its number alone)."""
        return f"{self.name} {self.describe()} row {number:,}"

    def _rows_of(self, connection: psycopg.Connection[Any], max_bytes: int) -> Iterator[RawRecord]:
        statement: bytes | sql.Composed
        if self.mapping.table is None:
            assert self.mapping.query is not None
            # as bytes: the user's text is sent as written, never parsed for placeholders
            statement, renamed = self.mapping.query.encode("utf-8"), None
        else:
            statement, renamed = self._table_statement(connection, self.mapping.table)
        with connection.cursor(name="citation_exporter_citations") as cursor:
            cursor.itersize = ROWS_PER_FETCH
            cursor.execute(statement)
            names: tuple[str, ...] | None = renamed
            for row in cursor:
                if names is None:
                    names = tuple(column.name for column in cursor.description or ())
                yield self._counted(), citation_record(names, row, max_bytes)

    def _table_statement(
        self, connection: psycopg.Connection[Any], table: str
    ) -> tuple[sql.Composed, tuple[str, ...]]:
        """The table's query, and its columns' names as record fields; refused, naming what
        is missing, when its columns cannot make a citation."""
        self._require_table(
            connection, table, "in this database and schema? any other shape: --citations-query"
        )
        identifier = sql.Identifier(*table.split(".", 1))
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(identifier))
            columns = tuple(column.name for column in cursor.description or ())
        renames = dict(self.mapping.columns)
        absent = [f"{f}={c}" for f, c in renames.items() if c not in columns]
        if absent:
            raise InputError(
                f"{self.name}: table {table} has no column {', '.join(absent)} "
                f"(its columns: {_listed(columns)})"
            )
        if WHOLE_RECORD in renames:
            column = renames[WHOLE_RECORD]
            return (
                sql.SQL("SELECT {} FROM {}{}").format(
                    sql.Identifier(column), identifier, self._order(connection, table, ())
                ),
                (WHOLE_RECORD,),
            )
        # each field from its mapped column, else from the column named like it; a column
        # named like a field that is mapped to another column is not read (the mapping wins)
        known = (*CITATION_FIELDS, *SPAN_COLUMNS)
        chosen = {
            field: renames.get(field, field)
            for field in known
            if renames.get(field, field) in columns
        }
        present = set(chosen)
        if {*SPAN_COLUMNS} <= present:
            present.add("chunk_span")
        lacking = [field for field in REQUIRED_CITATION_FIELDS if field not in present]
        if lacking:
            raise InputError(
                f"{self.name}: table {table} has no column for {', '.join(lacking)} (name "
                f"them: --citations-column FIELD=COLUMN or a --citations-mapping file's "
                f"[columns], or one JSON column: record=COLUMN; its columns: "
                f"{_listed(columns)})"
            )
        fields = tuple(chosen)
        return (
            sql.SQL("SELECT {} FROM {}{}").format(
                sql.SQL(", ").join(sql.Identifier(chosen[field]) for field in fields),
                identifier,
                self._order(connection, table, fields),
            ),
            fields,
        )

    def _order(
        self, connection: psycopg.Connection[Any], table: str, fields: tuple[str, ...]
    ) -> sql.Composable:
        """ORDER BY the table's primary key, else its citation id column, else nothing."""
        key = [
            str(row[0])
            for row in connection.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) "
                "AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
                (table,),
            )
        ]
        if not key and "citation_id" in fields:
            key = [dict(self.mapping.columns).get("citation_id", "citation_id")]
        if not key:
            return sql.SQL("")
        return sql.SQL(" ORDER BY {}").format(
            sql.SQL(", ").join(sql.Identifier(column) for column in key)
        )


def _listed(columns: tuple[str, ...]) -> str:
    shown = ", ".join(columns[:20])
    return shown + (", ..." if len(columns) > 20 else "") if columns else "none"
