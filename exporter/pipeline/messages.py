"""One Kafka message of citations in, verdicts and dead letters out (no I/O here).

Shared by inline checking and by sweeps over the archive topic, so both judge a message the
same way. Every citation in a message yields a verdict or is listed in the message's one dead
letter: nothing is dropped, and nothing a message holds can stop the process (a check that
raises is reported as ``check_failed``, like a bad record).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from exporter.checks.engine import Policy, check_or_report
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Verdict
from exporter.records.decode import RecordError, decode_citations, parse_json
from exporter.records.limits import bounded
from exporter.records.schema import Citation, InvalidCitation

__all__ = ["CheckedMessage", "DeadLetter", "Origin", "check_message", "oversized"]

# A dead letter lists the errors of at most this many of its invalid citations (all are counted
# in its headers); the error stays one short line however many there are.
_ERRORS_LISTED = 3


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message came from, for dead letters and verdict provenance."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input that could not be used (whole, or some of its citations).

    ``reason`` is a bounded label value; ``citations`` are the invalid citations of a message
    whose other citations were checked (empty when the message as a whole was unusable);
    ``truncated_from`` is the original size of a value cut to its head.
    """

    origin: Origin
    value: bytes | None
    key: bytes | None
    reason: str
    error: str
    citations: tuple[InvalidCitation, ...] = field(default=())
    truncated_from: int | None = None  # the size of ``value`` before it was cut to its head

    @property
    def indexes(self) -> list[int]:
        """Positions of the invalid citations within their answer."""
        return [item.index for item in self.citations if item.index is not None]

    def invalid_citations(self) -> Iterator[InvalidCitation]:
        """One item per citation this letter stands for (one for a whole unusable message)."""
        if self.citations:
            yield from self.citations
        else:
            yield InvalidCitation(self.error, reason=self.reason)


@dataclass(slots=True)
class CheckedMessage:
    verdicts: list[Verdict]
    dead_letters: list[DeadLetter]
    seconds: list[float]


def oversized(origin: Origin, value: bytes, key: bytes | None, max_bytes: int) -> DeadLetter:
    """The dead letter of a message above max_message_bytes, with its head (the whole message
    stays on its source topic; the head is enough to find its producer)."""
    return DeadLetter(
        origin,
        value[:max_bytes],
        key,
        "oversized",
        f"message of {len(value):,} bytes exceeds max_message_bytes={max_bytes:,} "
        "(value truncated in the dead letter)",
        truncated_from=len(value),
    )


def _letter(
    origin: Origin, value: bytes, key: bytes | None, invalid: list[InvalidCitation]
) -> DeadLetter:
    """One dead letter for every invalid citation of a message, however many."""
    listed = "; ".join(
        f"#{item.index}: {item.error}" if item.index is not None else item.error
        for item in invalid[:_ERRORS_LISTED]
    )
    if len(invalid) > 1 or invalid[0].index is not None:
        more = len(invalid) - _ERRORS_LISTED
        listed = f"{len(invalid)} invalid citations: {listed}" + (
            f"; and {more} more" if more > 0 else ""
        )
    return DeadLetter(origin, value, key, invalid[0].reason, bounded(listed), tuple(invalid))


def check_message(
    value: bytes | None,
    key: bytes | None,
    origin: Origin,
    *,
    store: ChunkStore,
    policy: Policy,
) -> CheckedMessage:
    """Decode and check every citation of one message."""
    result = CheckedMessage([], [], [])
    max_bytes = policy.limits.max_message_bytes
    if value is None:
        result.dead_letters.append(
            DeadLetter(origin, value, key, "empty", "message has no value (a tombstone?)")
        )
        return result
    if len(value) > max_bytes:
        result.dead_letters.append(oversized(origin, value, key, max_bytes))
        return result
    try:
        parsed = parse_json(value)
    except RecordError as exc:
        result.dead_letters.append(DeadLetter(origin, value, key, "invalid_json", str(exc)))
        return result
    invalid: list[InvalidCitation] = []
    in_answer = type(parsed) is dict and "citations" in parsed
    for index, item in enumerate(decode_citations(parsed, policy.limits)):
        if type(item) is Citation:
            started = time.perf_counter()
            outcome = check_or_report(item, store, policy, index if in_answer else None)
            if isinstance(outcome, InvalidCitation):
                invalid.append(outcome)
                continue
            result.verdicts.append(outcome)
            result.seconds.append(time.perf_counter() - started)
        else:
            assert isinstance(item, InvalidCitation)
            invalid.append(item)
    if invalid:
        result.dead_letters.append(_letter(origin, value, key, invalid))
    return result
