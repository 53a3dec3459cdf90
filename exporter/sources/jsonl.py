"""JSON Lines as a source: a file (plain or gzip, by its magic bytes) or standard input."""

from __future__ import annotations

from collections.abc import Generator

from exporter.errors import InputError
from exporter.files.jsonl import Input, input_size, open_input, read_lines
from exporter.sources import RawRecord

__all__ = ["JsonLines"]


class JsonLines:
    """The non-blank lines of a JSONL file, numbered by line; ``-`` reads standard input.

    Satisfies both :class:`~exporter.sources.ChunkSource` and
    :class:`~exporter.sources.CitationSource`. Each call of :meth:`records` opens the file
    anew.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._input: Input | None = None
        self._complete = False
        self._consumed = 0  # where the last read stopped

    def __repr__(self) -> str:
        return f"JsonLines({self.path!r})"

    @property
    def name(self) -> str:
        return self.path

    @property
    def complete(self) -> bool:
        return self._complete

    def records(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        # not complete from the moment a read is asked for, not from its first record
        self._complete = False
        self._consumed = 0
        return self._read(max_bytes)

    def _read(self, max_bytes: int) -> Generator[RawRecord, None, None]:
        with open_input(self.path) as opened:
            self._input = opened
            try:
                yield from read_lines(opened.stream, max_bytes)
            except InputError as exc:
                raise InputError(f"{self.path}: {exc}") from None
            finally:
                self._consumed = opened.position()
                self._input = None
        self._complete = True

    def where(self, number: int) -> str:
        return f"{self.path}:{number}"

    def consumed(self) -> int | None:
        """Bytes of the file on disk read so far (compressed bytes of a ``.gz``)."""
        return self._consumed if self._input is None else self._input.position()

    def size(self) -> int | None:
        return input_size(self.path)
