"""Messages from a file instead of Kafka: ``citation-exporter run --source FILE``.

Replays a JSONL file of chunk records and answer events (mixed, in the order they happened)
through the same pipeline as the Kafka loops, for calibrating thresholds on archived traffic.
A line is a chunk record when it has ``text`` or ``"deleted": true`` and none of the fields
that make a citation or an answer event (``quote``, ``chunk_span``, ``citations``): a citation
carrying extra fields must never be applied to the store as a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.messages import unread
from exporter.pipeline.outcome import Origin, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.records.chunk_messages import chunk_message
from exporter.records.limits import Oversized
from exporter.sources import RecordSource, require_complete

__all__ = ["BATCH", "SkippedLine", "records_of", "replay"]

# Outcomes handed on at a time: counted once per batch, as the Kafka loops count theirs.
BATCH = 1000


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line above ``max_message_bytes``: not read, so not even its topic is known."""

    number: int
    size: int

    @property
    def error(self) -> str:
        return Oversized(self.size).describe()


def records_of(
    source: RecordSource, chunks_topic: str, answers_topic: str, max_bytes: int
) -> Iterator[LocalRecord | SkippedLine]:
    """Every record of ``source`` as a record of the topic it would have come from.

    A record above ``max_bytes`` is not read: it is yielded as a :class:`SkippedLine`. Raises
    InputError, naming the source, when its read stops before its end.
    """
    for number, line in source.records(max_bytes):
        if isinstance(line, Oversized):
            yield SkippedLine(number, line.size)
            continue
        message = chunk_message(line)
        if message is not None:
            yield LocalRecord(chunks_topic, 0, number, *message)
        else:
            yield LocalRecord(answers_topic, 0, number, None, line)
    require_complete(source)


def replay(
    records: Iterator[LocalRecord | SkippedLine],
    pipeline: Pipeline,
    chunks_topic: str,
    on_batch: Callable[[Sequence[Outcome]], None],
) -> SweepSummary:
    """Feed records through the pipeline; returns a summary of the answers' verdicts.

    ``on_batch`` gets the outcomes every :data:`BATCH` records and at the end (to count them
    and write their verdicts), as a Kafka loop gets them once per fetched batch.
    """
    summary = SweepSummary()
    batch: list[Outcome] = []
    for record in records:
        if isinstance(record, SkippedLine):
            # not read, so not even its topic is known: in the summary, not in the metrics
            summary.add_outcome(
                unread(Origin("", 0, record.number), record.error), f"line {record.number}"
            )
            continue
        if record.topic == chunks_topic:
            outcome = pipeline.chunk(record)
            if outcome.dead_letter is not None:
                error = outcome.dead_letter.error
                summary.invalid_chunks(1, [f"line {record.offset}: {error}"])
        else:
            outcome = pipeline.answer(record)
            summary.add_outcome(outcome, f"line {record.offset}")
        batch.append(outcome)
        if len(batch) >= BATCH:
            on_batch(batch)
            batch = []
    if batch:
        on_batch(batch)
    summary.store_loaded(pipeline.store.chunk_count, pipeline.store.document_count)
    return summary
