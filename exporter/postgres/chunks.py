"""Chunk records read from Postgres, in the layout of the library that wrote them.

Every failure is one line naming the database and why, raised as
:class:`~exporter.errors.InputError` (:mod:`exporter.postgres.reading`): cannot connect (host
and reason), authentication failed, no such table or collection, a column the layout needs is
missing, a query the server refuses (its message). A row that is no valid chunk is the
decoder's to count, named by its key (``id='...'``) and the metadata keys it lacked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg

from exporter.config.postgres import ChunkLayout
from exporter.errors import InputError
from exporter.postgres.layouts import layout_query, query_record, row_record
from exporter.postgres.reading import ROWS_PER_FETCH, PostgresRead, one_line
from exporter.sources import RawRecord

__all__ = ["PostgresChunks"]


class PostgresChunks(PostgresRead):
    """The chunk records of a layout's rows. Satisfies :class:`~exporter.sources.ChunkSource`;
    each call of :meth:`records` is a new connection and a new snapshot."""

    def __init__(self, uri: str, layout: ChunkLayout) -> None:
        super().__init__(uri)
        self.layout = layout
        self._last: tuple[int, str | None, tuple[str, ...]] = (0, None, ())

    def __repr__(self) -> str:
        return f"PostgresChunks({self.name!r}, {self.layout.name!r})"

    def describe(self) -> str:
        return self.layout.describe()

    def where(self, number: int) -> str:
        """Row ``number``, with its key and the metadata keys it lacked (the chunks load in
        this process: the last row read is the one asked about)."""
        row, key, missing = self._last
        place = f"{self.name} {self.describe()} row {number:,}"
        if row != number or key is None:
            return place
        if self.layout.name == "query":
            return f"{place} (chunk_id={key!r})"
        query = layout_query(self.layout, 0)
        lacking = ""
        if missing:
            names = ", ".join(repr(name) for name in missing)
            lacking = f" (its {query.metadata_column} has no {names})"
        return f"{place} ({query.key_column}={key!r}){lacking}"

    def _failure(self, exc: psycopg.Error) -> str:
        if (
            not self._rows
            and isinstance(exc, psycopg.errors.UndefinedColumn)
            and self.layout.name != "query"
        ):
            return (
                f"{self.name} {self.describe()}: {one_line(exc)}: not a {self.layout.name} "
                "layout's table (--chunks-layout; any other schema: --chunks-query)"
            )
        return super()._failure(exc)

    def _rows_of(self, connection: psycopg.Connection[Any], max_bytes: int) -> Iterator[RawRecord]:
        if self.layout.name == "query":
            yield from self._query_rows(connection, max_bytes)
            return
        query = layout_query(self.layout, max_bytes)
        hint = (
            f"is this a {self.layout.name} store, in this database and schema? "
            "--chunks-layout; any other schema: --chunks-query"
        )
        for table in query.tables:
            self._require_table(connection, table, hint)
        if self.layout.name == "langchain":
            self._require_collection(connection)
        with connection.cursor(name="citation_exporter_chunks") as cursor:
            cursor.itersize = ROWS_PER_FETCH
            cursor.execute(query.statement, query.params)
            for row in cursor:
                number = self._counted()
                made = row_record(self.layout, row, max_bytes)
                self._last = (number, made.key, made.missing)
                yield number, made.record

    def _query_rows(
        self, connection: psycopg.Connection[Any], max_bytes: int
    ) -> Iterator[RawRecord]:
        assert self.layout.query is not None
        with connection.cursor(name="citation_exporter_chunks") as cursor:
            cursor.itersize = ROWS_PER_FETCH
            # as bytes: the user's text is sent as written, never parsed for placeholders
            cursor.execute(self.layout.query.encode("utf-8"))
            names: tuple[str, ...] | None = None
            for row in cursor:
                if names is None:
                    names = tuple(column.name for column in cursor.description or ())
                number = self._counted()
                record, key = query_record(names, row, max_bytes)
                self._last = (number, key, ())
                yield number, record

    def _require_collection(self, connection: psycopg.Connection[Any]) -> None:
        wanted = self.layout.collection
        found = connection.execute(
            "SELECT 1 FROM langchain_pg_collection WHERE name = %s", (wanted,)
        ).fetchone()
        if found is not None:
            return
        names = [
            str(row[0])
            for row in connection.execute(
                "SELECT name FROM langchain_pg_collection ORDER BY name LIMIT 21"
            )
        ]
        there = ", ".join(repr(name) for name in names[:20]) or "none"
        more = ", ..." if len(names) > 20 else ""
        raise InputError(
            f"{self.name}: no collection {wanted!r} in langchain_pg_collection (there: "
            f"{there}{more}; --collection NAME)"
        )
