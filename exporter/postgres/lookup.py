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
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from exporter.checks.lookup_cache import LookupCache
from exporter.config.postgres import ChunkLayout, redacted_uri
from exporter.errors import SourceUnavailable
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.cited import Cited
from exporter.postgres.layouts import (
    LookupBy,
    containment_probes,
    lookup_query,
    query_record,
    row_record,
)
from exporter.postgres.reading import ROWS_PER_FETCH, connect, one_line
from exporter.records.decode import decode_chunk, parse_json
from exporter.records.limits import Limits, Oversized
from exporter.records.schema import Chunk

__all__ = ["IDS_PER_QUERY", "STATEMENT_TIMEOUT_MS", "Fetched", "PostgresLookup"]

log = logging.getLogger(__name__)

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
        self._fallback = False
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
        documents, absent = _queryable(self.cache.stale_documents(cited.doc_ids, now))
        if absent:
            self.cache.hold_documents(absent, {}, now)
        if documents:
            fetched = await self._timed("documents", documents)
            by_document: dict[str, list[Chunk]] = {}
            for chunk in fetched.chunks:
                by_document.setdefault(chunk.doc_id, []).append(chunk)
            held = [doc_id for doc_id in documents if doc_id not in fetched.too_large]
            self.cache.hold_documents(held, by_document, now)
            if fetched.too_large:
                self.cache.refuse(fetched.too_large, "larger than chunk_lookup_cache_bytes")
                log.warning(
                    "%s: %d cited documents are larger than chunk_lookup_cache_bytes (%s, ...): "
                    "not held, their citations not checked",
                    self.name,
                    len(fetched.too_large),
                    next(iter(fetched.too_large))[:80],
                )
        chunks, unheld = _queryable(self.cache.unknown_chunks(cited.chunk_ids, now))
        if unheld:
            self.cache.hold_chunks(unheld, {}, now)
        if chunks:
            found = await self._timed("chunks", chunks)
            by_id = {chunk.chunk_id: chunk for chunk in found.chunks}
            self.cache.hold_chunks(chunks, by_id, now)

    def close(self) -> None:
        with self._lock:
            self._disconnect()

    async def _timed(self, kind: LookupBy, ids: Sequence[str]) -> Fetched:
        started = time.perf_counter()
        try:
            fetched: Fetched = await asyncio.to_thread(self._locked, lambda: self._fetch(kind, ids))
        except SourceUnavailable:
            if self._metrics is not None:
                self._metrics.looked_up(kind, time.perf_counter() - started, ok=False)
            raise
        if self._metrics is not None:
            seconds = time.perf_counter() - started
            bad = fetched.bad
            self._metrics.looked_up(kind, seconds, ok=True, chunks=len(fetched.chunks), bad=bad)
        return fetched

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
        if self.layout.name == "llamaindex":
            self._fallback = self._names_documents_by_doc_id(connection)
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

    def _names_documents_by_doc_id(self, connection: psycopg.Connection[Any]) -> bool:
        """Whether any row names its document under ``doc_id`` only (an older LlamaIndex's):
        the sweep reads those, so the lookup must too, at the cost of a scan a lookup."""
        assert self.layout.table is not None
        key = self.layout.doc_id_key
        found = connection.execute(
            sql.SQL(
                "SELECT EXISTS (SELECT 1 FROM {} t WHERE COALESCE(t.metadata_ ->> %s, 'None') "
                "= 'None' AND COALESCE(t.metadata_ ->> 'doc_id', 'None') <> 'None')"
            ).format(sql.Identifier(*self.layout.table.split(".", 1))),
            (key,),
        ).fetchone()
        if found is not None and found[0]:
            log.warning(
                "%s: rows of %s name their document under doc_id only: each lookup scans for "
                "them (an index on (metadata_ ->> 'doc_id') serves it)",
                self.name,
                self.layout.table,
            )
            return True
        return False

    def _fetch(self, kind: LookupBy, ids: Sequence[str]) -> Fetched:
        """The chunks of ``ids`` (documents or chunk ids) in the layout's order, read through
        a server-side cursor: rows of other documents dropped, a document above the cache's
        bound given up whole (its rows freed as they come), rows that are no chunk counted."""
        connection = self._connected()
        wanted = list(ids)
        if kind == "chunks" and self.layout.name == "langchain-v2":
            wanted = [i for i in wanted if _is_uuid_text(i)]  # no other id can be a key
        max_bytes = self._limits.max_message_bytes
        query = lookup_query(
            self.layout, max_bytes, kind, containment=self._containment, fallback=self._fallback
        )
        fetched = Fetched()
        for part in _parts(wanted) if wanted else [[]]:
            params = {**query.params, "ids": part}
            if self._containment and kind == "documents":
                params["probes"] = containment_probes(self.layout.doc_id_key, part)
            self._read(connection, query.statement, params, set(part), kind, fetched)
        for doc_id in fetched.too_large:
            fetched.chunks = [chunk for chunk in fetched.chunks if chunk.doc_id != doc_id]
        return fetched

    def _read(  # noqa: PLR0917 - one statement's rows into what a lookup fetched
        self,
        connection: psycopg.Connection[Any],
        statement: sql.Composed | sql.SQL,
        params: dict[str, Any],
        asked: set[str],
        kind: LookupBy,
        fetched: Fetched,
    ) -> None:
        max_bytes = self._limits.max_message_bytes
        cap = self.cache.max_bytes
        sizes: dict[str, int] = {}
        with connection.transaction(), connection.cursor(name="citation_lookup") as cursor:
            cursor.itersize = ROWS_PER_FETCH
            cursor.execute(statement, params)
            names: tuple[str, ...] | None = None
            for row in cursor:
                if names is None:
                    names = tuple(column.name for column in cursor.description or ())
                chunk = self._chunk(names, row, max_bytes)
                if chunk is None:
                    fetched.bad += 1
                    continue
                if chunk.chunk_id not in asked if kind == "chunks" else chunk.doc_id not in asked:
                    continue  # found by a wider filter (a probe, a fallback): not asked for
                if chunk.doc_id in fetched.too_large:
                    continue
                size = sizes.get(chunk.doc_id, 0) + len(chunk.text) * 4
                sizes[chunk.doc_id] = size
                if kind == "documents" and size > cap:
                    fetched.too_large.add(chunk.doc_id)
                    fetched.chunks = [c for c in fetched.chunks if c.doc_id != chunk.doc_id]
                    continue
                fetched.chunks.append(chunk)

    def _chunk(self, names: tuple[str, ...], row: tuple[Any, ...], max_bytes: int) -> Chunk | None:
        """The chunk record of a row, None for a row that is none (whatever it holds)."""
        try:
            if self.layout.name == "query":
                record, _ = query_record(names, row, max_bytes)
            else:
                record = row_record(self.layout, row, max_bytes).record
            if isinstance(record, Oversized):
                return None
            chunk = decode_chunk(parse_json(record), self._limits)
        except Exception:
            return None
        return chunk if isinstance(chunk, Chunk) else None


@dataclass(slots=True)
class Fetched:
    """What one lookup found: its chunks, rows that were no chunk, documents too large."""

    chunks: list[Chunk] = field(default_factory=list)
    bad: int = 0
    too_large: set[str] = field(default_factory=set)


def _queryable(ids: list[str]) -> tuple[list[str], list[str]]:
    """``ids`` split into those a query can look for and those no row can hold (PostgreSQL's
    text has no NUL): missing, without a query."""
    return [i for i in ids if "\x00" not in i], [i for i in ids if "\x00" in i]


def _parts(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), IDS_PER_QUERY):
        yield ids[start : start + IDS_PER_QUERY]


def _is_uuid_text(value: str) -> bool:
    """Whether ``value`` is a UUID as Postgres writes one (what ``uuid::text`` gives)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False
