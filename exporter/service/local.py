"""Messages from a file instead of Kafka: ``citation-exporter run --source FILE``.

Replays a JSONL file of chunk records and answer events (mixed, in the order they happened)
through the same pipeline as the Kafka loops, for calibrating thresholds on archived traffic.
A line is a chunk record when it has ``text`` or ``deleted``, else an answer event or citation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from exporter.checks.engine import invalid_verdict
from exporter.outputs.report import SweepSummary
from exporter.records.jsonl import open_input, read_lines
from exporter.records.schema import InvalidCitation
from exporter.service.messages import DeadLetter
from exporter.service.pipeline import Checked, LocalRecord, Pipeline

__all__ = ["chunk_key", "records_of", "replay"]


def chunk_key(line: bytes) -> bytes | None:
    """The ``chunk_id`` of a chunk record (its Kafka key), or None for any other line."""
    try:
        value: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(value) is dict and ("text" in value or value.get("deleted") is True):
        return str(value.get("chunk_id")).encode()
    return None


def records_of(path: str, chunks_topic: str, answers_topic: str) -> Iterator[LocalRecord]:
    """Every line of ``path`` as a record of the topic it would have come from."""
    with open_input(path) as source:
        for number, line in read_lines(source.stream):
            key = chunk_key(line)
            if key is not None:
                yield LocalRecord(chunks_topic, 0, number, key, line)
            else:
                yield LocalRecord(answers_topic, 0, number, None, line)


def replay(
    records: Iterator[LocalRecord],
    pipeline: Pipeline,
    chunks_topic: str,
    on_checked: Callable[[Checked], None],
    on_dead_letter: Callable[[DeadLetter], None],
) -> SweepSummary:
    """Feed records through the pipeline; returns a summary of the answers' verdicts."""
    summary = SweepSummary()
    for record in records:
        if record.topic == chunks_topic:
            letter = pipeline.chunk(record)
            if letter is not None:
                summary.invalid_chunk_records += 1
                summary.note_error(f"line {record.offset}: {letter.error}")
                on_dead_letter(letter)
            continue
        checked = pipeline.answer(record)
        for verdict in checked.verdicts:
            summary.add(verdict)
        for letter in checked.dead_letters:
            summary.add(invalid_verdict(InvalidCitation(letter.error, index=letter.index)))
            summary.note_error(f"line {record.offset}: {letter.error}")
            on_dead_letter(letter)
        on_checked(checked)
    summary.chunks_loaded = pipeline.store.chunk_count
    summary.documents_loaded = pipeline.store.document_count
    return summary
