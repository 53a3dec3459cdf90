"""Line-oriented JSON files: plain, gzip-compressed, or standard streams (``-``).

Inputs are read a bounded line at a time: a line longer than the limit is skipped (and reported
as :class:`Oversized`) without ever being held in memory whole. A file that cannot be read to its
end (a truncated or corrupt ``.gz``, a closed standard input) raises :class:`InputError`, one
line saying why, never a traceback.

Outputs are never half-written and never destroy an input: a file is written under a temporary
name in its own folder and renamed into place only when complete, and an output that is the same
file as an input (compared by device and inode, so links and other spellings count) is refused.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from exporter.errors import InputError, OutputError
from exporter.records.limits import Oversized

__all__ = [
    "Input",
    "InputError",
    "OutputError",
    "input_size",
    "open_input",
    "open_output",
    "read_lines",
    "refuse_overwriting_inputs",
]

# Read size while skipping the rest of an oversized line.
_SKIP_CHUNK = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"


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


def _stdin() -> IO[bytes]:
    if sys.stdin is None or sys.stdin.closed:
        raise InputError("-: standard input is closed")
    return sys.stdin.buffer


def _is_gzip(raw: IO[bytes]) -> bool:
    """Whether the stream starts with gzip's magic bytes (looked at, not consumed)."""
    peek = getattr(raw, "peek", None)
    return peek is not None and bytes(peek(2)[:2]) == _GZIP_MAGIC


@contextmanager
def open_input(path: str) -> Iterator[Input]:
    """Open a JSONL file, plain or gzip-compressed, or ``-`` (stdin) for reading bytes.

    Compression is recognised by gzip's magic bytes, whatever the name says: a ``.gz`` piped
    into stdin, or a compressed file without the suffix, reads as what it is. Raises
    :class:`InputError` naming ``path`` and why, when it cannot be opened.
    """
    try:
        raw: IO[bytes] = _stdin() if path == "-" else open(path, "rb")  # noqa: SIM115
    except InputError:
        raise
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    try:
        if _is_gzip(raw) or (path.endswith(".gz") and not _is_empty(raw)):
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield Input(unzipped, raw)  # type: ignore[arg-type]
        else:
            yield Input(raw, raw)
    finally:
        if path != "-":
            raw.close()


def _is_empty(raw: IO[bytes]) -> bool:
    peek = getattr(raw, "peek", None)
    return peek is not None and not peek(1)


def _readline(stream: IO[bytes], limit: int) -> bytes:
    """One line (at most ``limit`` bytes), with decompression errors as InputError."""
    try:
        return stream.readline(limit)
    except EOFError as exc:  # gzip's "compressed file ended before the end-of-stream marker"
        raise InputError(f"truncated: {exc}") from None
    except zlib.error as exc:
        raise InputError(f"corrupt compressed data: {exc}") from None
    except gzip.BadGzipFile as exc:
        raise InputError(f"not a gzip file: {exc}") from None


def read_lines(
    stream: IO[bytes], max_bytes: int | None = None
) -> Iterator[tuple[int, bytes | Oversized]]:
    """Yield (1-based line number, line without its line break) for every non-blank line.

    A line of more than ``max_bytes`` bytes (its newline not counted) is yielded as
    :class:`Oversized`; only ``max_bytes`` of it are ever held in memory.
    """
    limit = -1 if max_bytes is None else max_bytes + 1
    number = 0
    while True:
        line = _readline(stream, limit)
        if not line:
            return
        number += 1
        if max_bytes is not None and len(line) > max_bytes and not _ends_within(line, max_bytes):
            yield number, Oversized(_skip_rest(stream, line))
        elif not line.isspace():
            # without its line break, so a line of max_bytes is a message of max_bytes
            yield number, line[:-2] if line.endswith(b"\r\n") else line.rstrip(b"\n")


def _ends_within(line: bytes, max_bytes: int) -> bool:
    """A line of ``max_bytes`` bytes plus its newline is still within the limit."""
    return len(line) == max_bytes + 1 and line.endswith(b"\n")


def _skip_rest(stream: IO[bytes], head: bytes) -> int:
    """Read past the rest of a line whose ``head`` was read; returns the line's size."""
    size = len(head)
    tail = head
    while not tail.endswith(b"\n"):
        tail = _readline(stream, _SKIP_CHUNK)
        if not tail:
            break
        size += len(tail)
    return size - 1 if tail.endswith(b"\n") else size


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _stdin_identity() -> tuple[int, int] | None:
    try:
        info = os.fstat(0)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def refuse_overwriting_inputs(path: str, inputs: Iterable[str], option: str = "--out") -> None:
    """Raise OutputError when ``path`` is the very file of one of ``inputs`` (``-`` is stdin)."""
    if path == "-":
        return
    target = _identity(path)
    if target is None:
        return
    for source in inputs:
        identity = _stdin_identity() if source == "-" else _identity(source)
        if identity == target:
            shown = "standard input" if source == "-" else source
            raise OutputError(
                f"{option} {path} is the same file as the input {shown}: refusing to overwrite it"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _replacing(path: str) -> Iterator[IO[bytes]]:
    """A temporary file next to ``path``, renamed onto it only when the block completes."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed or removed below
            "wb",
            buffering=1 << 20,
            dir=folder,
            prefix=f".{os.path.basename(path)}.",
            suffix=".partial",
            delete=False,
        )
    except OSError as exc:
        raise OutputError(f"cannot create a file in {folder}: {exc.strerror or exc}") from None
    try:
        try:
            with handle:
                yield handle
        except OSError as exc:  # what the file system said when the last bytes went out
            if isinstance(exc, InputError | OutputError):  # the caller's own, already named
                raise
            raise OutputError(f"cannot write the file: {exc.strerror or exc}") from None
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(handle.name, mode)
        os.replace(handle.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise


@contextmanager
def open_output(path: str, inputs: Iterable[str] = ()) -> Iterator[IO[bytes]]:
    """Open ``path`` (``.gz`` compresses, ``-`` is stdout) for writing bytes.

    A regular file is written under a temporary name and renamed into place when the block ends
    without an exception; an existing device or pipe (``/dev/null``, a FIFO) is written directly.
    ``inputs`` are the files this output must not overwrite.
    """
    refuse_overwriting_inputs(path, inputs)
    if path == "-":
        if sys.stdout is None or sys.stdout.closed:
            raise OutputError("standard output is closed")
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    caller_error: BaseException | None = None
    try:
        target = open(path, "wb") if special else None  # noqa: SIM115
        with target or _replacing(path) as raw:
            stream: IO[bytes] = raw
            if path.endswith(".gz"):
                # the name in the gzip header is the output's, not the temporary file's
                stream = gzip.GzipFile(path, mode="wb", compresslevel=5, fileobj=raw)  # type: ignore[assignment]
            with stream:
                try:
                    yield stream
                except BaseException as exc:
                    caller_error = exc
                    raise
    except OSError as exc:
        if caller_error is not None and exc is not caller_error:
            # closing failed after the caller did (a full disk: what a failed write left in
            # the buffer is refused again): the caller's error says what happened
            raise caller_error  # noqa: B904 - the closing error is its consequence
        if caller_error is not None or isinstance(exc, InputError | OutputError):
            raise
        # a device or pipe refusing the last bytes, when they are flushed on close
        raise OutputError(f"cannot write the file: {exc.strerror or exc}") from None
