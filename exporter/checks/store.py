"""The live chunk store, and a per-document view built once for many relocations.

Chunks arrive one record at a time (a file now, a compacted topic later); the last record per
``chunk_id`` wins and a deletion removes it. A document's *live version* is the version of the
chunk most recently written for it, so a re-ingest that bumps the version takes effect as soon as
its first chunk lands.

Relocation needs the whole document, not one chunk: a quote may have moved into a neighbouring
chunk or now lie across two. :class:`DocumentView` reassembles the document from its live chunks
(placing them at ``doc_offset`` when every chunk has one, so overlapping chunks collapse into one
text; otherwise joining them in ``ordinal`` order) and folds it once, lazily, on first use.

Views are a cache, bounded: with the folded text and its offset map a view costs two to three
times the store's own copy of the text (more for text crafted to fold badly), and after a
re-index nearly every cited document needs one. The least recently used views are dropped
beyond ``max_view_bytes`` of memory (text, folded text and map, as measured) and rebuilt when
needed again. A chunk update marks its document's view stale rather than dropping it: the next
view is folded from the stale one (:func:`~exporter.checks.normalize.refold`), so a stream of
updates to a long document costs what changed, not the document, each time.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from exporter.checks.normalize import FoldedText, fold_with_map, refold
from exporter.records.fingerprint import document_fingerprint
from exporter.records.schema import Chunk, ChunkDeletion

__all__ = ["MAX_VIEW_BYTES", "ChunkStore", "DocumentView", "Placement"]

# Memory held by cached document views; one document larger than this is still viewed, alone.
MAX_VIEW_BYTES = 256 * 1024 * 1024

# Joins chunks whose document offsets are unknown: whitespace, so a quote running from one chunk
# into the next is still found (and reported as straddling).
_SEPARATOR = "\n"
# A Placement, its slot in the view's tuples and its entry in the view's dict by chunk.
_PLACEMENT_BYTES = 136
# Padding between chunks placed by offset is allowed up to the chunks' own text (or this much).
_MIN_PADDING_ALLOWED = 4096


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one chunk sits in its document view."""

    chunk: Chunk
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.chunk.text)


@dataclass(slots=True)
class DocumentView:
    """One live document as a single text, with its chunks placed in it."""

    doc_id: str
    version: str
    text: str
    placements: tuple[Placement, ...]
    has_doc_offsets: bool
    _starts: tuple[int, ...] = field(init=False)
    _longest: int = field(init=False)
    _by_chunk: dict[str, Placement] = field(init=False)
    _folded: FoldedText | None = field(default=None, init=False)
    _fingerprint: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._starts = tuple(p.start for p in self.placements)
        self._longest = max((len(p.chunk.text) for p in self.placements), default=0)
        self._by_chunk = {p.chunk.chunk_id: p for p in self.placements}

    def placement(self, chunk_id: str) -> Placement | None:
        """Where the chunk ``chunk_id`` sits in this view (None: not a chunk of it)."""
        return self._by_chunk.get(chunk_id)

    @property
    def folded(self) -> FoldedText:
        """The folded text and its offset map, computed on first use."""
        if self._folded is None:
            self._folded = fold_with_map(self.text)
        return self._folded

    @property
    def fingerprint(self) -> str:
        """The text's fingerprint (what a citation's ``doc_sha256`` holds), on first use."""
        if self._fingerprint is None:
            self._fingerprint = document_fingerprint(self.text)
        return self._fingerprint

    def fold_from(self, previous: DocumentView) -> None:
        """Fold this view reusing ``previous`` (an earlier view of the same document)."""
        if previous._folded is not None and self._folded is None:
            self._folded = refold(previous._folded, previous.text, self.text)

    @property
    def nbytes(self) -> int:
        """Memory this view holds: its text, its folded text and map, its placements."""
        folded = self._folded.nbytes if self._folded is not None else 0
        return sys.getsizeof(self.text) + folded + _PLACEMENT_BYTES * len(self.placements)

    def chunks_holding(self, start: int, end: int) -> list[Placement]:
        """The chunks that contain the whole document span ``[start, end)``."""
        holding = []
        for i in range(bisect_right(self._starts, start) - 1, -1, -1):
            placement = self.placements[i]
            if placement.start + self._longest < end:
                break  # no earlier chunk is long enough to reach the span's end
            if placement.end >= end:
                holding.append(placement)
        holding.reverse()
        return holding


def _assemble(doc_id: str, version: str, chunks: list[Chunk]) -> DocumentView:
    if chunks and all(c.doc_offset is not None for c in chunks):
        view = _assemble_by_offset(doc_id, version, chunks)
        if view is not None:
            return view
    ordered = sorted(chunks, key=lambda c: (c.ordinal if c.ordinal is not None else -1, c.chunk_id))
    parts: list[str] = []
    placements: list[Placement] = []
    at = 0
    for chunk in ordered:
        if parts:
            parts.append(_SEPARATOR)
            at += len(_SEPARATOR)
        placements.append(Placement(chunk, at))
        parts.append(chunk.text)
        at += len(chunk.text)
    return DocumentView(doc_id, version, "".join(parts), tuple(placements), False)


def _padding(ordered: list[Chunk]) -> int:
    """Characters of padding that placing ``ordered`` at their offsets needs."""
    padding = at = 0
    for chunk in ordered:
        offset = chunk.doc_offset
        assert offset is not None
        if offset > at:
            padding += offset - at
        at = max(at, offset + len(chunk.text))
    return padding


def _assemble_by_offset(doc_id: str, version: str, chunks: list[Chunk]) -> DocumentView | None:
    """Place chunks at their document offsets; None when that is not a faithful document.

    Gaps between chunks (a chunker that drops whitespace at its cuts) are filled with spaces so
    document offsets stay true. None when the texts disagree where chunks overlap, or when the
    gaps would hold more padding than the chunks hold text: offsets that far apart are not a
    chunker dropping whitespace but a broken (or hostile) producer, and building them would let
    one record allocate whatever its ``doc_offset`` says.
    """
    ordered = sorted(chunks, key=lambda c: (c.doc_offset, c.ordinal or 0, c.chunk_id))
    if _padding(ordered) > max(_MIN_PADDING_ALLOWED, sum(len(c.text) for c in ordered)):
        return None
    parts: list[str] = []
    at = 0
    for chunk in ordered:
        offset = chunk.doc_offset
        assert offset is not None
        if offset > at:
            parts.append(" " * (offset - at))
            at = offset
        tail = chunk.text[at - offset :]
        parts.append(tail)
        at += len(tail)
    text = "".join(parts)
    placements = []
    for chunk in ordered:
        offset = chunk.doc_offset
        assert offset is not None
        if text[offset : offset + len(chunk.text)] != chunk.text:
            return None
        placements.append(Placement(chunk, offset))
    return DocumentView(doc_id, version, text, tuple(placements), True)


class ChunkStore:
    """Chunks by id, documents by id, and each document's live version."""

    def __init__(self, max_view_bytes: int = MAX_VIEW_BYTES) -> None:
        self._chunks: dict[str, Chunk] = {}
        self._documents: dict[str, dict[str, Chunk]] = {}
        self._versions: dict[str, str] = {}
        # per document, how many live chunks each version has
        self._version_counts: dict[str, dict[str, int]] = {}
        # doc_id -> (view, bytes it holds, stale: its document changed since it was built)
        self._views: OrderedDict[str, tuple[DocumentView, int, bool]] = OrderedDict()
        self._view_bytes = 0
        self._max_view_bytes = max_view_bytes

    def _forget_view(self, doc_id: str) -> None:
        cached = self._views.pop(doc_id, None)
        if cached is not None:
            self._view_bytes -= cached[1]

    def _stale_view(self, doc_id: str) -> None:
        cached = self._views.get(doc_id)
        if cached is not None and not cached[2]:
            self._views[doc_id] = (cached[0], cached[1], True)

    def apply(self, record: Chunk | ChunkDeletion) -> None:
        """Apply one chunk record (an upsert) or deletion, in constant time."""
        old = self._chunks.pop(record.chunk_id, None)
        if old is not None:
            siblings = self._documents[old.doc_id]
            del siblings[old.chunk_id]
            counts = self._version_counts[old.doc_id]
            counts[old.doc_version] -= 1
            if not counts[old.doc_version]:
                del counts[old.doc_version]
            self._stale_view(old.doc_id)
            if not siblings:
                del self._documents[old.doc_id]
                del self._versions[old.doc_id]
                del self._version_counts[old.doc_id]
            elif self._versions[old.doc_id] not in counts:
                # the newest version's last chunk went: fall back to the latest one written
                self._versions[old.doc_id] = next(reversed(siblings.values())).doc_version
        if isinstance(record, Chunk):
            self._chunks[record.chunk_id] = record
            self._documents.setdefault(record.doc_id, {})[record.chunk_id] = record
            counts = self._version_counts.setdefault(record.doc_id, {})
            counts[record.doc_version] = counts.get(record.doc_version, 0) + 1
            self._versions[record.doc_id] = record.doc_version
            self._stale_view(record.doc_id)
        if old is not None and old.doc_id not in self._documents:
            self._forget_view(old.doc_id)  # the document is gone, not changed

    def chunk(self, chunk_id: str) -> Chunk | None:
        return self._chunks.get(chunk_id)

    def live_version(self, doc_id: str) -> str | None:
        """The document's live version, or None when it has no live chunk."""
        return self._versions.get(doc_id)

    def document(self, doc_id: str) -> DocumentView | None:
        """The live document (chunks of its live version only), folded, built once and cached."""
        cached = self._views.get(doc_id)
        if cached is not None and not cached[2]:
            self._views.move_to_end(doc_id)
            return cached[0]
        version = self._versions.get(doc_id)
        if version is None:
            return None
        chunks = [c for c in self._documents[doc_id].values() if c.doc_version == version]
        view = _assemble(doc_id, version, chunks)
        if cached is not None:
            view.fold_from(cached[0])  # only what changed since is folded again
            self._forget_view(doc_id)
        view.folded  # noqa: B018 - folded now, so the cache can count what the view holds
        size = view.nbytes
        self._views[doc_id] = (view, size, False)
        self._view_bytes += size
        while self._view_bytes > self._max_view_bytes and len(self._views) > 1:
            self._forget_view(next(iter(self._views)))
        return view

    def viewed(self, doc_id: str) -> DocumentView | None:
        """The live document's view only if one is built and current (folded, as every view
        is once built): for a reader that can use a fold but must not pay for one."""
        cached = self._views.get(doc_id)
        if cached is None or cached[2]:
            return None
        self._views.move_to_end(doc_id)
        return cached[0]

    @property
    def view_bytes(self) -> int:
        """Memory held by cached document views."""
        return self._view_bytes

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)

    @property
    def document_count(self) -> int:
        return len(self._documents)

    def chunkers(self) -> Counter[str | None]:
        """Live chunks per ``chunker`` (the fingerprint a re-index changes; None: a record
        that names none), counted when asked: a pass over the chunks, no upkeep per record."""
        return Counter(chunk.chunker for chunk in self._chunks.values())
