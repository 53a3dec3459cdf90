"""The record contract: the live chunks and the stored citations, as typed values.

Offsets are Unicode code points (Python ``str`` indices) with an exclusive end. These types carry
no behaviour; decoding and validation live in :mod:`exporter.records.decode`. The per-citation
types are plain (not frozen) slotted dataclasses: a frozen one costs several microseconds more to
build, on the hottest path of a sweep. Treat them as read-only all the same.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AnswerSentences", "Chunk", "ChunkDeletion", "Citation", "InvalidCitation"]


@dataclass(slots=True)
class Chunk:
    """One live chunk; the last record per ``chunk_id`` wins."""

    doc_id: str
    doc_version: str
    chunk_id: str
    text: str
    ordinal: int | None = None
    doc_offset: int | None = None
    source: str | None = None
    chunker: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkDeletion:
    """``{"chunk_id": ..., "deleted": true}``: the chunk is gone from the live store."""

    chunk_id: str


@dataclass(slots=True)
class Citation:
    """One stored citation: where an answer said its evidence was, and what it read there."""

    citation_id: str
    answer_id: str
    doc_id: str
    doc_version: str
    chunk_id: str
    start: int
    end: int
    quote: str
    prefix: str | None = None
    suffix: str | None = None
    emitted_at: str | None = None
    topic: str | None = None
    source: str | None = None
    sentence_index: int | None = None
    claim: str | None = None  # the sentence this citation supports, for the entailment judge
    # ``doc_span``: where the quote was in the whole document at answer time, and
    # ``doc_sha256``: the document's fingerprint then (together, a position hint)
    doc_start: int | None = None
    doc_end: int | None = None
    doc_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class InvalidCitation:
    """A citation (or a whole input record) that could not be decoded or checked, and why.

    It still yields a verdict: every input citation is accounted for. ``reason`` is a bounded
    label value: ``invalid_json``, ``invalid_record``, ``oversized`` (a limit was exceeded) or
    ``check_failed`` (checking it raised: a bug, reported rather than fatal).
    """

    error: str
    citation_id: str | None = None
    answer_id: str | None = None
    doc_id: str | None = None
    index: int | None = None
    reason: str = "invalid_record"
    # with check_failed: the class of what the check raised (for the DLQ's Connect headers)
    exception: str | None = None


@dataclass(slots=True)
class AnswerSentences:
    """What coverage reads from an answer event that carried ``sentences``.

    ``sentences`` is None when they could not be used; ``error`` says why, and ``reason`` is a
    bounded label value (``invalid_record`` or ``oversized``). The answer's citations are
    decoded apart, and checked whatever this holds. One is made per answer on the sweep's hot
    path: plain, not frozen (read-only by convention), and the list is the decoded one, not a
    copy. ``refused`` is the event's ``refused_citation_sentences``: the sentences named by
    citations that the answer's capture could not record, so neither covered nor uncited.
    """

    answer_id: str | None
    topic: str | None
    sentences: list[str] | None
    error: str | None = None
    reason: str = "invalid_record"
    refused: list[int] | None = None
