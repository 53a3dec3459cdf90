"""An earlier sweep's files read back: its summary JSON (``sweep --format json``), for the
store it read and its counts, or its verdict file (``sweep --out``), for each citation's status.

Unlike the verdict files a report is drawn from, these are refused whole at their first bad
line, one short reason naming the file and line: a comparison with half a file would call every
citation of the other half new. Read a bounded line at a time (a summary whole, up to
:data:`MAX_SUMMARY_BYTES`); of a verdict file only each citation's id and status are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from exporter.checks.verdict import Status
from exporter.files.jsonl import open_input, read_lines
from exporter.outputs.verdict_reader import verdict_from_record
from exporter.pipeline.changes import PreviousSummary, PreviousVerdicts
from exporter.pipeline.summary import MAX_CHUNKERS, SweepSummary
from exporter.records.decode import InvalidJson, parse_json
from exporter.records.limits import DEFAULT_LIMITS, Oversized

__all__ = ["MAX_SUMMARY_BYTES", "SweepFileError", "read_previous", "read_summary", "store_from"]

# a sweep's summary is a few kilobytes; a file far larger is no summary
MAX_SUMMARY_BYTES = 16 << 20
_STATUSES = {status.value: status for status in Status}
_TEXT_KEPT = 500  # of a chunker's name, as of any text a verdict file gives
_Lines = Iterator[tuple[int, bytes | Oversized]]


class SweepFileError(ValueError):
    """What is wrong with the file, as ``path:line: why``."""


def read_previous(path: str) -> PreviousSummary | PreviousVerdicts:
    """The earlier sweep in ``path``: a summary JSON, or a verdict file (JSON Lines, gzip or
    not), told apart by the first record. Raises SweepFileError, or InputError."""
    max_bytes = DEFAULT_LIMITS.max_message_bytes
    with open_input(path) as source:
        lines = read_lines(source.stream, max_bytes)
        first = next(lines, None)
        if first is None:
            raise SweepFileError(f"{path}: empty: neither a sweep's summary nor its verdicts")
        record = _first_record(path, first, lines)
        if _is_summary(record):
            return PreviousSummary(_statuses(path, record))
        return _verdicts(path, first[0], record, lines)


def read_summary(path: str) -> dict[str, Any]:
    """The sweep summary JSON in ``path``. Raises SweepFileError, or InputError."""
    with open_input(path) as source:
        lines = read_lines(source.stream, DEFAULT_LIMITS.max_message_bytes)
        first = next(lines, None)
        if first is None:
            raise SweepFileError(f"{path}: empty: no sweep summary")
        record = _first_record(path, first, lines)
        if not _is_summary(record):
            raise SweepFileError(f"{path}:{first[0]}: not a sweep summary (sweep --format json)")
        _statuses(path, record)
        return record  # type: ignore[no-any-return]


def _is_summary(record: object) -> bool:
    return type(record) is dict and type(record.get("statuses")) is dict


def _first_record(path: str, first: tuple[int, bytes | Oversized], lines: _Lines) -> Any:
    """The first record; a summary printed on many lines (``jq .``) read whole, bounded."""
    number, line = first
    if isinstance(line, Oversized):
        raise SweepFileError(f"{path}:{number}: {line.describe(DEFAULT_LIMITS.max_message_bytes)}")
    try:
        record = parse_json(line)
    except InvalidJson as exc:
        if line.strip() != b"{":
            raise SweepFileError(f"{path}:{number}: {exc}") from None
        record = _whole(path, line, lines)
    else:
        if _is_summary(record):
            _nothing_after(path, lines)
    return record


def _whole(path: str, head: bytes, lines: _Lines) -> Any:
    """A JSON document spread over lines, read to its end (at most MAX_SUMMARY_BYTES)."""
    parts, size = [head], len(head)
    for number, line in lines:
        if isinstance(line, Oversized) or size > MAX_SUMMARY_BYTES:
            raise SweepFileError(f"{path}:{number}: larger than any sweep summary")
        parts.append(line)
        size += len(line) + 1
    try:
        record = parse_json(b"\n".join(parts))
    except InvalidJson as exc:
        raise SweepFileError(f"{path}: {exc}") from None
    if not _is_summary(record):
        raise SweepFileError(f"{path}:1: a JSON document, but no sweep summary (no 'statuses')")
    return record


def _nothing_after(path: str, lines: _Lines) -> None:
    for number, _ in lines:
        raise SweepFileError(f"{path}:{number}: a sweep summary is one JSON document; more follows")


def _statuses(path: str, record: dict[str, Any]) -> Counter[str]:
    """The summary's counts per status (a status a newer version adds is left out)."""
    counts: Counter[str] = Counter()
    for name, count in record["statuses"].items():
        if type(count) is not int or count < 0:
            raise SweepFileError(f"{path}:1: 'statuses.{str(name)[:40]}' is not a count")
        if name in _STATUSES:
            counts[name] = count
    return counts


def _verdicts(path: str, first: int, record: Any, lines: _Lines) -> PreviousVerdicts:
    previous = PreviousVerdicts()
    _add_verdict(previous, path, first, record)
    max_bytes = DEFAULT_LIMITS.max_message_bytes
    for number, line in lines:
        if isinstance(line, Oversized):
            raise SweepFileError(f"{path}:{number}: {line.describe(max_bytes)}")
        try:
            record = parse_json(line)
        except InvalidJson as exc:
            raise SweepFileError(f"{path}:{number}: {exc}") from None
        _add_verdict(previous, path, number, record)
    return previous


def _add_verdict(previous: PreviousVerdicts, path: str, number: int, record: Any) -> None:
    """One record of a verdict file: a citation's verdict, or a plug-in check's (passed by)."""
    if type(record) is dict and "check" in record:
        return
    try:
        verdict, _ = verdict_from_record(record)
    except ValueError as exc:
        raise SweepFileError(f"{path}:{number}: not a verdict nor a sweep summary: {exc}") from None
    previous.add(verdict.citation_id, verdict.status)


def store_from(path: str, record: dict[str, Any], summary: SweepSummary) -> None:
    """The store's chunker fingerprint and read time a summary recorded, into ``summary``
    (a summary of an older version has none: left unrecorded)."""
    chunkers, read_at = record.get("chunkers"), record.get("store_read_at")
    if chunkers is None or read_at is None:
        return
    if type(chunkers) is not list or not all(_chunker(item) for item in chunkers):
        raise SweepFileError(f"{path}:1: 'chunkers' is not a list of chunkers and their chunks")
    try:
        at = datetime.strptime(str(read_at), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SweepFileError(
            f"{path}:1: 'store_read_at' is not a time as a sweep writes it"
        ) from None
    unlisted = record.get("chunkers_unlisted", 0)
    counts = {_name(item["chunker"]): item["chunks"] for item in chunkers[:MAX_CHUNKERS]}
    total = sum(counts.values()) + (unlisted if type(unlisted) is int and unlisted > 0 else 0)
    summary.store_read(counts, at, total)


def _name(chunker: str | None) -> str | None:
    return None if chunker is None else chunker[:_TEXT_KEPT]


def _chunker(item: object) -> bool:
    if type(item) is not dict:
        return False
    name, chunks = item.get("chunker"), item.get("chunks")
    return (name is None or type(name) is str) and type(chunks) is int and chunks >= 0
