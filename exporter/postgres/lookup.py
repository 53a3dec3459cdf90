"""Lookup mode: the chunks a batch cites, read from Postgres just before it is checked.

Instead of a mirror of the whole store (about 1.1 GiB a million chunks in every replica), the
service asks the database, once per fetched batch, for every chunk of the documents the batch
cites that it does not hold fresh (:class:`~exporter.checks.lookup_cache.LookupCache`), and
for cited chunks found in none of them, by id: at most two queries a batch, none when the
cache holds everything. The rows are the layout's, as a sweep from Postgres reads them, and
become chunk records the same way, so a lookup's verdict is the sweep's.

One connection, kept open, in autocommit with read-only transactions and a statement timeout;
the queries run in a worker thread, so the event loop (heartbeats, scrapes) goes on meanwhile.
Anything that goes wrong with the database (it is away, the connection broke, a statement
timed out, the table is gone) raises :class:`~exporter.errors.SourceUnavailable` naming the
database without its password: the caller checks nothing of the batch, and fetches it again
with backoff. The connection is made again on the next lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from exporter.checks.lookup_cache import LookupCache
from exporter.config.postgres import ChunkLayout, redacted_uri
from exporter.errors import RecordError, SourceUnavailable
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.cited import Cited
from exporter.postgres.layouts import LookupBy, lookup_query, query_record, row_record
from exporter.postgres.reading import connect, one_line
from exporter.records.decode import decode_chunk, parse_json
from exporter.records.limits import Limits, Oversized
from exporter.records.schema import Chunk

__all__ = ["IDS_PER_QUERY", "STATEMENT_TIMEOUT_MS", "PostgresLookup"]

# Ids per statement: a batch citing more documents is looked up in several.
IDS_PER_QUERY = 1_000
# A lookup query that takes longer fails (the database is struggling): checking pauses rather
# than falling behind without a word.
STATEMENT_TIMEOUT_MS = 10_000


class PostgresLookup:
    """Fills a :class:`LookupCache` with what each batch cites, from ``layout``'s rows.
    Satisfies :class:`~exporter.pipeline.core.ChunkLookup`."""

    def __init__(
        self,
        uri: str,
        layout: ChunkLayout,
        cache: LookupCache,
        limits: Limits,
        metrics: ExporterMetrics | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
    ) -> None:
        self._uri = uri
        self.name = redacted_uri(uri)
        self.layout = layout
        self.cache = cache
        self._limits = limits
        self._metrics = metrics
        self._clock = clock
        self._timeout_ms = statement_timeout_ms
        self._connection: psycopg.Connection[Any] | None = None
        self._containment = False
        # the worker thread and the event loop never use the connection at once
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresLookup({self.name!r}, {self.layout.name!r})"

    async def check(self) -> None:
        """Connect and make sure the layout's rows can be read (readiness: the database
        answers); raises SourceUnavailable saying why not."""
        await asyncio.to_thread(self._locked, self._verify)

    async def prepare(self, cited: Cited) -> Callable[[], None]:
        """Fetch what ``cited`` needs and the cache lacks, and keep it until the returned
        function is called (the batch is checked); SourceUnavailable when the database
        cannot answer."""
        lease = self.cache.pin(cited.doc_ids)
        try:
            await self._fetch_missing(cited)
        except BaseException:
            lease.release()
            raise
        self.cache.trim()
        return lease.release

    async def _fetch_missing(self, cited: Cited) -> None:
        now = self._clock()
        documents = self.cache.stale_documents(cited.doc_ids, now)
        if documents:
            fetched = await self._timed("documents", documents)
            by_document: dict[str, list[Chunk]] = {}
            for chunk in fetched:
                by_document.setdefault(chunk.doc_id, []).append(chunk)
            self.cache.hold_documents(documents, by_document, now)
        chunks = self.cache.unknown_chunks(cited.chunk_ids, now)
        if chunks:
            found = await self._timed("chunks", chunks)
            self.cache.hold_chunks(chunks, {chunk.chunk_id: chunk for chunk in found}, now)

    def close(self) -> None:
        with self._lock:
            self._disconnect()

    async def _timed(self, kind: LookupBy, ids: Sequence[str]) -> list[Chunk]:
        started = time.perf_counter()
        try:
            fetched: tuple[list[Chunk], int] = await asyncio.to_thread(
                self._locked, lambda: self._fetch(kind, ids)
            )
            chunks, bad = fetched
        except SourceUnavailable:
            if self._metrics is not None:
                self._metrics.looked_up(kind, time.perf_counter() - started, ok=False)
            raise
        if self._metrics is not None:
            seconds = time.perf_counter() - started
            self._metrics.looked_up(kind, seconds, ok=True, chunks=len(chunks), bad=bad)
        return chunks

    def _locked(self, work: Callable[[], Any]) -> Any:
        with self._lock:
            try:
                return work()
            except psycopg.Error as exc:
                self._disconnect()  # made again by the next lookup
                raise SourceUnavailable(f"{self.name}: {self._reason(exc)}") from None

    @staticmethod
    def _reason(exc: psycopg.Error) -> str:
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return f"a lookup query was cancelled ({one_line(exc)})"
        return one_line(exc).removeprefix("connection failed: ")

    def _connected(self) -> psycopg.Connection[Any]:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        connection = connect(self._uri, SourceUnavailable, autocommit=True)
        connection.execute("SET default_transaction_read_only = on")
        connection.execute(f"SET statement_timeout = {int(self._timeout_ms)}")
        # a lookup is many short probes the planner costs as one large query: compiling it
        # (JIT) took ten times what running it did
        connection.execute("SET jit = off")
        self._connection = connection
        return connection

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                connection.close()

    def _verify(self) -> None:
        connection = self._connected()
        for table in lookup_query(self.layout, 0, "documents").tables:
            found = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
            if found is None or found[0] is None:
                raise SourceUnavailable(
                    f"{self.name}: no table {table} (is this a {self.layout.name} store, in "
                    "this database and schema?)"
                )
        if self.layout.name == "langchain":
            kind = connection.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_name = "
                "'langchain_pg_embedding' AND column_name = 'cmetadata' "
                "AND table_schema = ANY(current_schemas(false))"
            ).fetchone()
            self._containment = kind is not None and kind[0] == "jsonb"
        # the statement itself, on no ids: a missing column or a broken query shows now
        try:
            self._fetch("documents", ())
        except psycopg.errors.UndefinedColumn as exc:
            if self.layout.name != "query":
                raise
            raise SourceUnavailable(
                f"{self.name}: chunks_query: {one_line(exc)} (lookup mode filters the query's "
                "rows on its doc_id and chunk_id columns: name them so)"
            ) from None

    def _fetch(self, kind: LookupBy, ids: Sequence[str]) -> tuple[list[Chunk], int]:
        """The chunks of ``ids`` (documents or chunk ids) in the layout's order, and how
        many rows were no valid chunk."""
        connection = self._connected()
        wanted = list(ids)
        if kind == "chunks" and self.layout.name == "langchain-v2":
            wanted = [i for i in wanted if _is_uuid_text(i)]  # no other id can be a key
        max_bytes = self._limits.max_message_bytes
        query = lookup_query(self.layout, max_bytes, kind, containment=self._containment)
        chunks: list[Chunk] = []
        bad = 0
        for part in _parts(wanted) if wanted else [[]]:
            cursor = connection.execute(query.statement, {**query.params, "ids": part})
            names = tuple(column.name for column in cursor.description or ())
            for row in cursor:
                chunk = self._chunk(names, row, max_bytes)
                if chunk is None:
                    bad += 1
                else:
                    chunks.append(chunk)
        return chunks, bad

    def _chunk(self, names: tuple[str, ...], row: tuple[Any, ...], max_bytes: int) -> Chunk | None:
        if self.layout.name == "query":
            record, _ = query_record(names, row, max_bytes)
        else:
            record = row_record(self.layout, row, max_bytes).record
        if isinstance(record, Oversized):
            return None
        try:
            chunk = decode_chunk(parse_json(record), self._limits)
        except RecordError:
            return None
        return chunk if isinstance(chunk, Chunk) else None


def _parts(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), IDS_PER_QUERY):
        yield ids[start : start + IDS_PER_QUERY]


def _is_uuid_text(value: str) -> bool:
    """Whether ``value`` is a UUID as Postgres writes one (what ``uuid::text`` gives)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False
