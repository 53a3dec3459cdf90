"""One Kafka message of citations in, verdicts and dead letters out (no I/O here).

Shared by inline checking and by sweeps over the archive topic, so both judge a message the
same way. Every citation in a message yields a verdict or a dead letter: nothing is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from exporter.checks.engine import Policy, check_citation
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Verdict
from exporter.records.decode import RecordError, decode_citations, parse_json
from exporter.records.schema import Citation, InvalidCitation

__all__ = ["CheckedMessage", "DeadLetter", "Origin", "check_message"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message came from, for dead letters and verdict provenance."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input that could not be used; ``reason`` is a bounded label value."""

    origin: Origin
    value: bytes | None
    key: bytes | None
    reason: str
    error: str
    index: int | None = None


@dataclass(slots=True)
class CheckedMessage:
    verdicts: list[Verdict]
    dead_letters: list[DeadLetter]
    seconds: list[float]


def check_message(
    value: bytes | None,
    key: bytes | None,
    origin: Origin,
    *,
    store: ChunkStore,
    policy: Policy,
    max_bytes: int,
) -> CheckedMessage:
    """Decode and check every citation of one message."""
    result = CheckedMessage([], [], [])
    if value is None:
        result.dead_letters.append(
            DeadLetter(origin, value, key, "empty", "message has no value (a tombstone?)")
        )
        return result
    if len(value) > max_bytes:
        # the head is kept so the producer can be found; the whole value would not fit the DLQ
        result.dead_letters.append(
            DeadLetter(
                origin,
                value[:max_bytes],
                key,
                "oversized",
                f"message of {len(value)} bytes exceeds max_message_bytes={max_bytes} "
                "(value truncated in the dead letter)",
            )
        )
        return result
    items: Iterable[Citation | InvalidCitation]
    try:
        items = decode_citations(parse_json(value))
    except RecordError as exc:
        result.dead_letters.append(DeadLetter(origin, value, key, "invalid_json", str(exc)))
        return result
    for item in items:
        if type(item) is Citation:
            started = time.perf_counter()
            result.verdicts.append(check_citation(item, store, policy))
            result.seconds.append(time.perf_counter() - started)
        else:
            assert isinstance(item, InvalidCitation)
            result.dead_letters.append(
                DeadLetter(origin, value, key, "invalid_record", item.error, item.index)
            )
    return result
