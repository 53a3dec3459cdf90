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
times the store's own copy of the text, and after a re-index nearly every cited document needs
one. The least recently used views are dropped beyond ``max_view_chars`` characters of text and
rebuilt when needed again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field

from exporter.checks.normalize import FoldedText, fold_with_map
from exporter.records.schema import Chunk, ChunkDeletion

__all__ = ["MAX_VIEW_CHARS", "ChunkStore", "DocumentView", "Placement"]

# Characters of text held in cached document views (about 100-200 MB with their folded text and
# offset maps); one document larger than this is still viewed, alone.
MAX_VIEW_CHARS = 32_000_000

# Joins chunks whose document offsets are unknown: whitespace, so a quote running from one chunk
# into the next is still found (and reported as straddling).
_SEPARATOR = "\n"
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
    _folded: FoldedText | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._starts = tuple(p.start for p in self.placements)
        self._longest = max((len(p.chunk.text) for p in self.placements), default=0)

    @property
    def folded(self) -> FoldedText:
        """The folded text and its offset map, computed on first use."""
        if self._folded is None:
            self._folded = fold_with_map(self.text)
        return self._folded

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

    def __init__(self, max_view_chars: int = MAX_VIEW_CHARS) -> None:
        self._chunks: dict[str, Chunk] = {}
        self._documents: dict[str, dict[str, Chunk]] = {}
        self._versions: dict[str, str] = {}
        self._views: OrderedDict[str, DocumentView] = OrderedDict()
        self._view_chars = 0
        self._max_view_chars = max_view_chars

    def _forget_view(self, doc_id: str) -> None:
        view = self._views.pop(doc_id, None)
        if view is not None:
            self._view_chars -= len(view.text)

    def apply(self, record: Chunk | ChunkDeletion) -> None:
        """Apply one chunk record (an upsert) or deletion."""
        old = self._chunks.pop(record.chunk_id, None)
        if old is not None:
            siblings = self._documents[old.doc_id]
            del siblings[old.chunk_id]
            self._forget_view(old.doc_id)
            if not siblings:
                del self._documents[old.doc_id]
                del self._versions[old.doc_id]
            elif all(c.doc_version != self._versions[old.doc_id] for c in siblings.values()):
                # the newest version's last chunk went: fall back to the latest one written
                self._versions[old.doc_id] = next(reversed(siblings.values())).doc_version
        if isinstance(record, Chunk):
            self._chunks[record.chunk_id] = record
            self._documents.setdefault(record.doc_id, {})[record.chunk_id] = record
            self._versions[record.doc_id] = record.doc_version
            self._forget_view(record.doc_id)

    def chunk(self, chunk_id: str) -> Chunk | None:
        return self._chunks.get(chunk_id)

    def live_version(self, doc_id: str) -> str | None:
        """The document's live version, or None when it has no live chunk."""
        return self._versions.get(doc_id)

    def document(self, doc_id: str) -> DocumentView | None:
        """The live document (chunks of its live version only), built once and cached."""
        view = self._views.get(doc_id)
        if view is not None:
            self._views.move_to_end(doc_id)
            return view
        version = self._versions.get(doc_id)
        if version is None:
            return None
        chunks = [c for c in self._documents[doc_id].values() if c.doc_version == version]
        view = self._views[doc_id] = _assemble(doc_id, version, chunks)
        self._view_chars += len(view.text)
        while self._view_chars > self._max_view_chars and len(self._views) > 1:
            self._forget_view(next(iter(self._views)))
        return view

    @property
    def view_chars(self) -> int:
        """Characters of text held in cached document views."""
        return self._view_chars

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)

    @property
    def document_count(self) -> int:
        return len(self._documents)
