"""One read of Postgres as a record source: a read-only REPEATABLE READ transaction and a
server-side cursor, with every failure one line naming the database without its password.

A sweep must see one state of the store while ingest goes on, and memory must not grow with
the table: the rows come through a server-side (named) cursor, :data:`ROWS_PER_FETCH` at a
time, inside a read-only transaction at REPEATABLE READ (one snapshot for the whole read, and
a query that can write nothing). The connection is libpq's: a URI, the ``PG*`` variables and a
service file as libpq reads them, ``sslmode`` and ``sslrootcert`` honoured.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.datetime import DateLoader, TimestampLoader, TimestamptzLoader

from exporter.config.postgres import redacted_uri
from exporter.errors import ExporterError, InputError
from exporter.sources import RawRecord

__all__ = ["CONNECT_TIMEOUT", "ROWS_PER_FETCH", "PostgresRead", "connect", "one_line"]

#: Rows fetched per round trip: memory is this many rows, never the table.
ROWS_PER_FETCH = 2_000
# A connection that cannot be made within this many seconds fails (unless the URI or
# PGCONNECT_TIMEOUT says otherwise): a sweep must not hang on a host that drops packets.
CONNECT_TIMEOUT = 10
_MAX_MESSAGE = 300


class PostgresRead:
    """What every Postgres source shares: its name, its connection and transaction, how far
    its read came and whether it reached the end. Subclasses yield the rows' records from
    :meth:`_rows` and say what their rows are (:meth:`describe`)."""

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._name = redacted_uri(uri)
        self._complete = False
        self._rows = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def complete(self) -> bool:
        return self._complete

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        # not complete from the moment a read is asked for, not from its first record
        self._complete = False
        self._rows = 0
        return self._read(max_bytes)

    def consumed(self) -> int | None:
        """Rows read so far."""
        return self._rows

    def size(self) -> int | None:
        return None

    def describe(self) -> str:
        """The rows, as messages name them after the database."""
        raise NotImplementedError

    def _rows_of(self, connection: psycopg.Connection[Any], max_bytes: int) -> Iterator[RawRecord]:
        raise NotImplementedError

    def _counted(self) -> int:
        self._rows += 1
        return self._rows

    def _read(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        with self._snapshot() as connection:
            yield from self._rows_of(connection, max_bytes)
        self._complete = True

    @contextmanager
    def _snapshot(self) -> Iterator[psycopg.Connection[Any]]:
        connection = connect(self._uri, InputError)
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
        where = f"{self._name} {self.describe()}"
        if self._rows:
            return f"{where}: the read stopped after row {self._rows:,}: {one_line(exc)}"
        return f"{where}: {one_line(exc)}"

    def _require_table(self, connection: psycopg.Connection[Any], table: str, hint: str) -> None:
        found = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if found is None or found[0] is None:
            raise InputError(f"{self._name}: no table {table} ({hint})")


def connect(uri: str, error: type[ExporterError], **options: Any) -> psycopg.Connection[Any]:
    """A connection as libpq makes it from ``uri`` (the ``PG*`` variables, a service file),
    named ``citation-exporter``, given CONNECT_TIMEOUT unless the URI or PGCONNECT_TIMEOUT
    says otherwise; a failure is ``error`` in one line naming the database without its
    password."""
    name = redacted_uri(uri)
    try:
        given = conninfo_to_dict(uri)
    except psycopg.ProgrammingError:
        # libpq's message quotes what it could not parse, the password among it
        raise error(f"{name}: not a connection URI libpq can read (check its escaping)") from None
    if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
        options.setdefault("connect_timeout", CONNECT_TIMEOUT)
    try:
        connection = psycopg.connect(uri, application_name="citation-exporter", **options)
    except psycopg.Error as exc:
        reason = one_line(exc).removeprefix("connection failed: ")
        raise error(f"{name}: cannot connect: {reason}") from None
    for type_name, loader in _LENIENT_LOADERS:
        connection.adapters.register_loader(type_name, loader)
    return connection


def _lenient(loader: type[Loader]) -> type[Loader]:
    """``loader``, giving a value Python cannot hold (``infinity``, a year past 9999) as the
    server's text: a row's value is the record's to refuse, never the whole read's end."""

    class Lenient(loader):  # type: ignore[valid-type, misc]
        def load(self, data: Buffer) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError:
                return bytes(data).decode("utf-8", "replace")

    Lenient.__name__ = f"Lenient{loader.__name__}"
    return Lenient


_LENIENT_LOADERS = tuple(
    (type_name, _lenient(loader))
    for type_name, loader in (
        ("date", DateLoader),
        ("timestamp", TimestampLoader),
        ("timestamptz", TimestamptzLoader),
    )
)


def one_line(exc: BaseException) -> str:
    """An error of libpq or the server as one short line (they span several)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        text = " ".join(exc.diag.message_primary.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
