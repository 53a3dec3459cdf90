"""Chunk records read from Postgres: one read-only REPEATABLE READ transaction, one cursor.

A sweep must see one state of the store while ingest goes on, and memory must not grow with
the table: the rows come through a server-side (named) cursor, :data:`ROWS_PER_FETCH` at a
time, inside a read-only transaction at REPEATABLE READ (one snapshot for the whole read). The
connection is libpq's: a URI, the ``PG*`` variables and a service file as libpq reads them,
``sslmode`` and ``sslrootcert`` honoured. The password is never shown: the source is named by
its URI without it.

Every failure is one line naming the database and why, raised as
:class:`~exporter.errors.InputError`: cannot connect (host and reason), authentication
failed, no such table or collection, a column the layout needs is missing, a query the server
refuses (its message). A row that is no valid chunk is the decoder's to count, named by its
key (``id='...'``) and the metadata keys it lacked.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from exporter.config.postgres import ChunkLayout, redacted_uri
from exporter.errors import InputError
from exporter.postgres.layouts import LayoutQuery, layout_query, query_record, row_record
from exporter.sources import RawRecord

__all__ = ["ROWS_PER_FETCH", "PostgresChunks"]

#: Rows fetched per round trip: memory is this many rows, never the table.
ROWS_PER_FETCH = 2_000
# A connection that cannot be made within this many seconds fails (unless the URI or
# PGCONNECT_TIMEOUT says otherwise): a sweep must not hang on a host that drops packets.
CONNECT_TIMEOUT = 10
_MAX_MESSAGE = 300


class PostgresChunks:
    """The chunk records of a layout's rows. Satisfies :class:`~exporter.sources.ChunkSource`;
    each call of :meth:`records` is a new connection and a new snapshot."""

    def __init__(self, uri: str, layout: ChunkLayout) -> None:
        self._uri = uri
        self.layout = layout
        self._name = redacted_uri(uri)
        self._complete = False
        self._rows = 0
        self._last: tuple[int, str | None, tuple[str, ...]] = (0, None, ())

    def __repr__(self) -> str:
        return f"PostgresChunks({self._name!r}, {self.layout.name!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def complete(self) -> bool:
        return self._complete

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        self._complete = False
        self._rows = 0
        return self._read(max_bytes)

    def where(self, number: int) -> str:
        row, key, missing = self._last
        place = f"{self._name} {self.layout.describe()} row {number:,}"
        if row != number or key is None:
            return place
        column = "chunk_id" if self.layout.name == "query" else self._key_column()
        lacking = ""
        if missing:
            names = ", ".join(repr(name) for name in missing)
            lacking = f" (its {self._metadata_column()} has no {names})"
        return f"{place} ({column}={key!r}){lacking}"

    def consumed(self) -> int | None:
        """Rows read so far."""
        return self._rows

    def size(self) -> int | None:
        return None

    def _key_column(self) -> str:
        return layout_query(self.layout, 0).key_column

    def _metadata_column(self) -> str:
        return layout_query(self.layout, 0).metadata_column

    def _read(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        with self._snapshot() as connection:
            if self.layout.name == "query":
                yield from self._query_rows(connection, max_bytes)
            else:
                yield from self._layout_rows(connection, max_bytes)
        self._complete = True

    @contextmanager
    def _snapshot(self) -> Iterator[psycopg.Connection[Any]]:
        options: dict[str, Any] = {"application_name": "citation-exporter"}
        try:
            given = conninfo_to_dict(self._uri)
        except psycopg.ProgrammingError as exc:
            raise InputError(f"{self._name}: not a connection URI: {_line(exc)}") from None
        if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
            options["connect_timeout"] = CONNECT_TIMEOUT
        try:
            connection = psycopg.connect(self._uri, **options)
        except psycopg.Error as exc:
            reason = _line(exc).removeprefix("connection failed: ")
            raise InputError(f"{self._name}: cannot connect: {reason}") from None
        try:
            connection.read_only = True
            connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with connection.transaction():
                yield connection
        except psycopg.Error as exc:
            raise InputError(self._failure(exc)) from None
        finally:
            connection.close()

    def _failure(self, exc: psycopg.Error) -> str:
        where = f"{self._name} {self.layout.describe()}"
        if self._rows:
            return f"{where}: the read stopped after row {self._rows:,}: {_line(exc)}"
        if isinstance(exc, psycopg.errors.UndefinedColumn) and self.layout.name != "query":
            return (
                f"{where}: {_line(exc)}: not a {self.layout.name} layout's table "
                "(--chunks-layout; any other schema: --chunks-query)"
            )
        return f"{where}: {_line(exc)}"

    def _layout_rows(
        self, connection: psycopg.Connection[Any], max_bytes: int
    ) -> Iterator[RawRecord]:
        query = layout_query(self.layout, max_bytes)
        self._require_tables(connection, query)
        if self.layout.name == "langchain":
            self._require_collection(connection)
        with connection.cursor(name="citation_exporter_chunks") as cursor:
            cursor.itersize = ROWS_PER_FETCH
            cursor.execute(query.statement, query.params)
            for row in cursor:
                self._rows += 1
                made = row_record(self.layout, row, max_bytes)
                self._last = (self._rows, made.key, made.missing)
                yield self._rows, made.record

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
                self._rows += 1
                record, key = query_record(names, row, max_bytes)
                self._last = (self._rows, key, ())
                yield self._rows, record

    def _require_tables(self, connection: psycopg.Connection[Any], query: LayoutQuery) -> None:
        for table in query.tables:
            found = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
            if found is None or found[0] is None:
                raise InputError(
                    f"{self._name}: no table {table} (is this a {self.layout.name} store, in "
                    "this database and schema? --chunks-layout; any other schema: "
                    "--chunks-query)"
                )

    def _require_collection(self, connection: psycopg.Connection[Any]) -> None:
        names = [
            str(row[0])
            for row in connection.execute(
                "SELECT name FROM langchain_pg_collection ORDER BY name LIMIT 21"
            )
        ]
        if self.layout.collection in names:
            return
        found = connection.execute(
            "SELECT 1 FROM langchain_pg_collection WHERE name = %s", (self.layout.collection,)
        ).fetchone()
        if found is not None:
            return
        there = ", ".join(repr(name) for name in names[:20]) or "none"
        more = ", ..." if len(names) > 20 else ""
        raise InputError(
            f"{self._name}: no collection {self.layout.collection!r} in "
            f"langchain_pg_collection (there: {there}{more}; --collection NAME)"
        )


def _line(exc: BaseException) -> str:
    """An error of libpq or the server as one short line (they span several)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        text = " ".join(exc.diag.message_primary.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
