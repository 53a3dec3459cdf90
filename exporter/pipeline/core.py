"""What happens to every message, whatever brought it: Kafka, a replayed file, or the demo.

Chunk messages update the store; answer messages are checked, counted and turned into the
verdicts to publish and the dead letters to write. The Kafka loops, ``run --source`` and
``demo`` all go through these two methods, so they count and judge alike.

Neither method raises for anything a message holds: whatever goes wrong while handling one
message (a bad record, a limit exceeded, a bug in a check) becomes that message's dead letter,
with a bounded reason, so the caller can commit past it and go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.messages import (
    CheckedMessage,
    DeadLetter,
    Origin,
    check_message,
    oversized,
)
from exporter.pipeline.reindex import ReindexWatch
from exporter.records.decode import RecordError, decode_chunk, parse_json
from exporter.records.limits import failure
from exporter.records.schema import Chunk, ChunkDeletion

__all__ = ["Checked", "LocalRecord", "Pipeline", "Record"]


class Record(Protocol):
    """The parts of a Kafka record the pipeline reads (aiokafka's ConsumerRecord has them)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class LocalRecord:
    """A record that did not come from Kafka (a file line, a demo event)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(slots=True)
class Checked:
    """The outcome of one answer message."""

    origin: Origin
    verdicts: list[Verdict] = field(default_factory=list)
    publish: list[Verdict] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class Pipeline:
    """The store, the policy and the metrics, applied to one message at a time."""

    def __init__(
        self,
        store: ChunkStore,
        policy: Policy,
        metrics: ExporterMetrics,
        *,
        publish_all: bool = False,
        watch: ReindexWatch | None = None,
    ) -> None:
        self.store = store
        self._policy = policy
        self._metrics = metrics
        self._publish_all = publish_all
        self._watch = watch

    def chunk(self, record: Record) -> DeadLetter | None:
        """Apply one chunk message (an upsert, a deletion record, or a tombstone).

        A record that cannot be used is returned as a dead letter. The chunk topic is re-read
        from the start at every start-up, so such a record is dead-lettered again each time.
        """
        self._metrics.events.labels(record.topic).inc()
        if self._watch is not None:
            self._watch.touched()
        try:
            letter = self._apply_chunk(record)
        except Exception as exc:  # nothing one record holds may stop the store's loading
            origin = Origin(record.topic, record.partition, record.offset)
            letter = DeadLetter(
                origin, record.value, record.key, "check_failed", failure("handling", exc)
            )
        if letter is not None:
            self._metrics.invalid(record.topic, letter.reason)
        return letter

    def _apply_chunk(self, record: Record) -> DeadLetter | None:
        if record.value is None:
            if record.key:
                self.store.apply(ChunkDeletion(record.key.decode("utf-8", "replace")))
            return None
        origin = Origin(record.topic, record.partition, record.offset)
        limit = self._policy.limits.max_message_bytes
        if len(record.value) > limit:
            return oversized(origin, record.value, record.key, limit)
        try:
            chunk = decode_chunk(parse_json(record.value), self._policy.limits)
        except RecordError as exc:
            reason = "invalid_json" if str(exc).startswith("not valid JSON") else "invalid_record"
            return DeadLetter(origin, record.value, record.key, reason, str(exc))
        self.store.apply(chunk)
        if isinstance(chunk, Chunk) and chunk.chunker and self._watch is not None:
            self._watch.saw(chunk.chunker)
        return None

    def answer(self, record: Record, mode: str = "inline") -> Checked:
        """Check every citation of one answer message and count it.

        Inline, invalid inputs become dead letters and are counted; a sweep re-reads inputs
        that were dead-lettered when first consumed, so it reports them in its verdicts only.
        """
        origin = Origin(record.topic, record.partition, record.offset)
        try:
            checked = check_message(
                record.value, record.key, origin, store=self.store, policy=self._policy
            )
        except Exception as exc:  # nothing one message holds may stop the checks
            letter = DeadLetter(
                origin, record.value, record.key, "check_failed", failure("handling", exc)
            )
            checked = CheckedMessage([], [letter], [])
        result = Checked(origin, checked.verdicts)
        inline = mode == "inline"
        for verdict, seconds in zip(checked.verdicts, checked.seconds, strict=True):
            self._metrics.record(verdict, mode)
            if inline:
                self._metrics.check_duration.observe(seconds)
            if verdict.status is not Status.OK or (self._publish_all and inline):
                result.publish.append(verdict)
        result.dead_letters = checked.dead_letters
        if inline:
            for letter in checked.dead_letters:
                self._metrics.invalid(record.topic, letter.reason)
            self._metrics.child(self._metrics.events, record.topic).inc()
        return result
