"""Where records come from: the seam between the stores a team keeps and the sweep.

A source yields raw records, numbered, each as the bytes of one JSON object (the decoder in
:mod:`exporter.records.decode` bounds and validates them, whatever the source), or as
:class:`~exporter.records.limits.Oversized` when one was too big to read. It names itself and
each record for error messages, and it says whether its last read reached the end: a sweep
that read half a table must not pass a gate on that half.

JSON Lines files (plain, gzip, standard input) are one implementation,
:class:`~exporter.sources.jsonl.JsonLines`; a database is another behind the same protocol.
Engines and commands take sources, never paths.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol, runtime_checkable

from exporter.errors import InputError
from exporter.records.limits import Oversized

__all__ = ["ChunkSource", "CitationSource", "RawRecord", "RecordSource", "require_complete"]

#: One record as read: its number in the source (1-based) and its bytes, or its size unread.
RawRecord = tuple[int, bytes | Oversized]


@runtime_checkable
class RecordSource(Protocol):
    """Numbered raw records, and what error messages call them."""

    @property
    def name(self) -> str:
        """The source as a person would name it: a path, ``-``, a table."""
        ...

    @property
    def complete(self) -> bool:
        """Whether the last read of :meth:`records` reached the end of the source."""
        ...

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        """Every record, in order; one above ``max_bytes`` comes as ``Oversized``, unread.

        Raises :class:`~exporter.errors.InputError`, naming the source and why, when the read
        cannot go on (a truncated file, a lost connection): what came before was still yielded.
        """
        ...

    def where(self, number: int) -> str:
        """Record ``number`` as error messages name it (``chunks.jsonl:12``)."""
        ...

    def consumed(self) -> int | None:
        """How far the read has come, in the unit of :meth:`size` (None: not known)."""
        ...

    def size(self) -> int | None:
        """How big the whole source is, for a progress bar (None: not known)."""
        ...


class ChunkSource(RecordSource, Protocol):
    """Chunk records (and deletions) of the live store, in the order they were written."""


class CitationSource(RecordSource, Protocol):
    """Citation records and answer events, in the order they were written."""


def require_complete(source: RecordSource) -> None:
    """Raise :class:`~exporter.errors.InputError` when the last read of ``source`` stopped
    before its end without saying why: half a table must not pass a gate as the whole."""
    if not source.complete:
        raise InputError(f"{source.name}: the read ended before the end of the source")
