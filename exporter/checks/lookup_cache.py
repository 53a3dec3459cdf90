"""A chunk store that holds only the documents recent messages cited: the lookup mode's.

A mirror of the whole store costs about 1.1 GiB a million chunks in every replica. In lookup
mode the service asks the database, before it checks a batch, for the documents the batch
cites, and keeps them here, bounded. The unit is the document, not the chunk: a document's
live version is the version of its latest chunk, and relocating a quote needs the whole text,
so a document is held whole (every chunk of it, in the order the database gives them) or not
at all. A cited chunk that is in none of the documents fetched (re-indexed away, or moved to
another document) is looked up by its id and held on the side, so that a check sees exactly
what it would see in the mirror.

What was fetched is fresh for ``ttl_seconds``; after that a citation of it fetches it again.
Beyond ``max_bytes`` the least recently cited documents are dropped, never one that a batch
still being checked cites: :meth:`LookupCache.pin` holds a batch's documents until the batch
is done (inline checks and a sweep look up at once, and one's trim must not take what the
other is checking). A check that asks about a document no lookup fetched is a bug, not a missing
document: :class:`NotLookedUp` is raised (the message's dead letter says ``check_failed``),
so a gap in the lookup can never become a false ``document_missing``.

Pure: the lookup itself (:mod:`exporter.postgres.lookup`) fetches; this decides what to fetch
and holds it.
"""

from __future__ import annotations

import sys
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from exporter.checks.store import MAX_VIEW_BYTES, ChunkStore, DocumentView
from exporter.errors import ExporterError
from exporter.records.schema import Chunk, ChunkDeletion

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_TTL_SECONDS", "Lease", "LookupCache", "NotLookedUp"]

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
DEFAULT_TTL_SECONDS = 30.0
# What a held chunk costs besides its text: the record, its slots in the store's dicts.
_CHUNK_OVERHEAD_BYTES = 400
# Cited chunks held on the side (not in a document fetched): at most this many, the oldest
# dropped first.
MAX_STRAY_CHUNKS = 100_000
_REFUSED_KEPT = 4096


class NotLookedUp(ExporterError):  # noqa: N818 - a condition, named as reasons are
    """A check asked about a document that no lookup fetched for its batch."""


class Lease:
    """Documents pinned for one batch: :meth:`release` once it is checked (again: nothing)."""

    __slots__ = ("_cache", "_doc_ids")

    def __init__(self, cache: LookupCache, doc_ids: tuple[str, ...]) -> None:
        self._cache: LookupCache | None = cache
        self._doc_ids = doc_ids

    def release(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            cache._unpin(self._doc_ids)


@dataclass(slots=True)
class _Held:
    """One document held: when it was fetched, its chunks' ids, what they cost."""

    fetched_at: float
    chunk_ids: tuple[str, ...]
    nbytes: int


class LookupCache(ChunkStore):
    """The documents recent batches cited, each whole, fresh for a while, bounded in bytes."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_view_bytes: int = MAX_VIEW_BYTES,
    ) -> None:
        super().__init__(max_view_bytes)
        self._held: OrderedDict[str, _Held] = OrderedDict()  # least recently cited first
        self._strays: OrderedDict[str, tuple[Chunk | None, float]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._ttl = ttl_seconds
        self._pins: Counter[str] = Counter()  # documents a batch being checked cites
        # documents a lookup gave up (too large to hold), and why: the last few thousand
        self._refused: OrderedDict[str, str] = OrderedDict()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    def refuse(self, doc_ids: Iterable[str], why: str) -> None:
        """Documents a lookup found but cannot hold: their citations are not checked (a
        check of one raises :class:`NotLookedUp` saying ``why``), never judged missing."""
        for doc_id in doc_ids:
            self._release(doc_id)
            self._refused.pop(doc_id, None)
            self._refused[doc_id] = why
        while len(self._refused) > _REFUSED_KEPT:
            self._refused.popitem(last=False)

    def pin(self, doc_ids: Iterable[str]) -> Lease:
        """Keep ``doc_ids`` from being dropped until the lease is released."""
        pinned = tuple(dict.fromkeys(doc_ids))
        self._pins.update(pinned)
        return Lease(self, pinned)

    def _unpin(self, doc_ids: tuple[str, ...]) -> None:
        self._pins.subtract(doc_ids)
        for doc_id in doc_ids:
            if self._pins[doc_id] <= 0:
                del self._pins[doc_id]

    def stale_documents(self, doc_ids: Iterable[str], now: float) -> list[str]:
        """Of ``doc_ids``, those to fetch: never fetched, or fetched longer than the TTL ago.
        Those still fresh count as just cited (the last to be dropped)."""
        wanted = []
        for doc_id in dict.fromkeys(doc_ids):
            held = self._held.get(doc_id)
            if held is not None and now - held.fetched_at < self._ttl:
                self._held.move_to_end(doc_id)
            else:
                wanted.append(doc_id)
        return wanted

    def hold_documents(
        self, asked: Sequence[str], fetched: Mapping[str, Sequence[Chunk]], now: float
    ) -> None:
        """Hold what a lookup of ``asked`` found: ``fetched`` by document, each document's
        chunks in the database's order (the last one's version is the live one); a document
        asked for and not found is held as missing."""
        for doc_id in asked:
            self._release(doc_id)
            chunks = fetched.get(doc_id, ())
            for chunk in chunks:
                self.apply(chunk)
            ids = tuple(chunk.chunk_id for chunk in chunks)
            nbytes = sum(sys.getsizeof(c.text) + _CHUNK_OVERHEAD_BYTES for c in chunks)
            self._held[doc_id] = _Held(now, ids, nbytes)
            self._refused.pop(doc_id, None)
            self._bytes += nbytes
            for chunk_id in ids:
                self._strays.pop(chunk_id, None)  # held in its document now

    def unknown_chunks(self, chunk_ids: Iterable[str], now: float) -> list[str]:
        """Of ``chunk_ids``, those neither in a document held nor looked up on their own
        within the TTL: the ones a lookup by id must find."""
        wanted = []
        for chunk_id in dict.fromkeys(chunk_ids):
            if super().chunk(chunk_id) is not None:
                continue
            stray = self._strays.get(chunk_id)
            if stray is not None and now - stray[1] < self._ttl:
                self._strays.move_to_end(chunk_id)
                continue
            wanted.append(chunk_id)
        return wanted

    def hold_chunks(self, asked: Sequence[str], found: Mapping[str, Chunk], now: float) -> None:
        """Hold what a lookup of chunks by id found (None for an id found nowhere)."""
        for chunk_id in asked:
            self._strays.pop(chunk_id, None)
            self._strays[chunk_id] = (found.get(chunk_id), now)
        while len(self._strays) > MAX_STRAY_CHUNKS:
            self._strays.popitem(last=False)

    def trim(self) -> None:
        """Drop the least recently cited documents while more than ``max_bytes`` are held,
        except those pinned (batches still being checked cite them)."""
        if self._bytes <= self._max_bytes:
            return
        for doc_id in list(self._held):
            if self._bytes <= self._max_bytes:
                break
            if doc_id not in self._pins:
                self._release(doc_id)

    def _release(self, doc_id: str) -> None:
        held = self._held.pop(doc_id, None)
        if held is None:
            return
        self._bytes -= held.nbytes
        for chunk_id in held.chunk_ids:
            chunk = super().chunk(chunk_id)
            if chunk is not None and chunk.doc_id == doc_id:
                self.apply(ChunkDeletion(chunk_id))

    # what the checks read: the mirror's answers, for what was looked up

    def chunk(self, chunk_id: str) -> Chunk | None:
        chunk = super().chunk(chunk_id)
        if chunk is not None:
            return chunk
        stray = self._strays.get(chunk_id)
        return None if stray is None else stray[0]

    def live_version(self, doc_id: str) -> str | None:
        self._require(doc_id)
        return super().live_version(doc_id)

    def document(self, doc_id: str) -> DocumentView | None:
        self._require(doc_id)
        return super().document(doc_id)

    def _require(self, doc_id: str) -> None:
        if doc_id not in self._held:
            why = self._refused.get(doc_id, "was not looked up for this batch")
            raise NotLookedUp(f"document {doc_id[:80]!r} {why}")

    @property
    def held_bytes(self) -> int:
        """What the documents held cost (their texts and records), as counted for the bound."""
        return self._bytes

    @property
    def pinned_documents(self) -> int:
        """Documents that batches being checked cite (never dropped meanwhile)."""
        return len(self._pins)

    @property
    def held_documents(self) -> int:
        """Documents held, a missing one (looked up, not found) included."""
        return len(self._held)
