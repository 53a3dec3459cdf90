"""Line-oriented JSON files: plain, gzip-compressed, or standard streams (``-``)."""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

__all__ = ["Input", "input_size", "open_input", "open_output", "read_lines"]


def input_size(path: str) -> int | None:
    """Size in bytes of a regular input file (for progress), else None."""
    if path == "-":
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


@dataclass
class Input:
    """An open input: the decoded byte stream, and how far into the file on disk we are."""

    stream: IO[bytes]
    raw: IO[bytes]

    def position(self) -> int:
        """Bytes of the underlying file consumed so far (compressed bytes for ``.gz``)."""
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0


@contextmanager
def open_input(path: str) -> Iterator[Input]:
    """Open a ``.jsonl``/``.jsonl.gz`` file or ``-`` (stdin) for reading bytes.

    Raises OSError when the file cannot be opened; a corrupt ``.gz`` raises
    ``gzip.BadGzipFile`` (an OSError) on the first read.
    """
    raw: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield Input(unzipped, raw)  # type: ignore[arg-type]
        else:
            yield Input(raw, raw)
    finally:
        if path != "-":
            raw.close()


def read_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, line) for every non-blank line."""
    for number, line in enumerate(stream, start=1):
        if not line.isspace():
            yield number, line


@contextmanager
def open_output(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` (``.gz`` compresses, ``-`` is stdout) for writing bytes."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if path.endswith(".gz"):
        with gzip.open(path, "wb", compresslevel=5) as zipped:
            yield zipped  # type: ignore[misc]
        return
    with open(path, "wb", buffering=1 << 20) as plain:
        yield plain
