"""What happens to every message, whatever brought it: Kafka, a replayed file, or the demo.

Chunk messages update the store; answer messages are checked and turned into an
:class:`~exporter.pipeline.outcome.Outcome`: the verdicts to count and publish and the dead
letter to write. The Kafka loops, sweeps over the answer topic, ``run --source`` and ``demo``
all go through these two methods, so they judge alike; what they do with the outcomes (count
them, publish them, add them to a summary) is theirs. No I/O and no metrics here: in lookup
mode the store is filled, before each batch, by a :class:`ChunkLookup` the caller passes in.

Neither method raises for anything a message holds: whatever goes wrong while handling one
message (a bad record, a limit exceeded, a bug in a check) becomes that message's dead letter,
with a bounded reason, so the caller can commit past it and go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.entailment.drawing import Drawing
from exporter.pipeline.cited import Cited, cited_by
from exporter.pipeline.messages import check_message, oversized
from exporter.pipeline.outcome import DeadLetter, Mode, Origin, Outcome
from exporter.pipeline.reindex import ReindexWatch
from exporter.pipeline.sweep import SweepStep, publish_verdicts
from exporter.records.change_events import (
    ChangeColumns,
    change_event_chunk,
    is_change_event,
    tombstone_chunk_id,
)
from exporter.records.decode import InvalidJson, RecordError, decode_chunk, parse_json
from exporter.records.schema import Chunk, ChunkDeletion

__all__ = ["ChunkLookup", "LocalRecord", "Pipeline", "Record"]


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


class ChunkLookup(Protocol):
    """Fetches what a batch cites into the store before it is checked (lookup mode: the
    store holds only that) and keeps it there until the function it returns is called;
    raises :class:`~exporter.errors.SourceUnavailable` when it cannot, and then nothing of
    the batch may be checked."""

    async def prepare(self, cited: Cited) -> Callable[[], None]: ...


def _nothing() -> None:
    """What a mirror's batch releases once checked."""


DEFAULT_CHANGE_COLUMNS = ChangeColumns()


class Pipeline:
    """The store and the policy, applied to one message at a time."""

    def __init__(
        self,
        store: ChunkStore,
        policy: Policy,
        *,
        publish_all: bool = False,
        watch: ReindexWatch | None = None,
        sweep_judge_rate: float = 0.0,
        change_columns: ChangeColumns = DEFAULT_CHANGE_COLUMNS,
        lookup: ChunkLookup | None = None,
    ) -> None:
        self.store = store
        self._lookup = lookup
        # how a Debezium change event of the chunks table becomes a chunk record
        self._change_columns = change_columns
        self._policy = policy
        # a sweep drawing a sample for the judge keeps the claim and evidence of every
        # judgeable citation (the sample is drawn from all of them); inline, judge_rate's share
        self._sweep_policy = dataclasses.replace(policy, judge_rate=sweep_judge_rate)
        self._publish_all = publish_all
        self._watch = watch

    @property
    def looks_up(self) -> bool:
        """Whether the store holds only what :meth:`prepare` fetched (lookup mode)."""
        return self._lookup is not None

    @property
    def prefetch(self) -> Callable[[Iterable[Record]], Awaitable[Callable[[], None]]] | None:
        """What a fetcher runs on each batch before handing it out: :meth:`prepare` in lookup
        mode, None with a mirror (nothing to do, so nothing run per fetch)."""
        return self.prepare if self._lookup is not None else None

    async def prepare(self, records: Iterable[Record]) -> Callable[[], None]:
        """Before a batch is checked: in lookup mode, fetch what it cites into the store
        (raises :class:`~exporter.errors.SourceUnavailable` when the store cannot answer);
        with a mirror, nothing. Call what it returns once the batch is checked."""
        if self._lookup is None:
            return _nothing
        values = (record.value for record in records)
        return await self._lookup.prepare(cited_by(values, self._policy.limits))

    def chunk(self, record: Record) -> Outcome:
        """Apply one chunk message (an upsert, a deletion record, or a tombstone).

        A record that cannot be used comes back as the outcome's dead letter. The chunk topic
        is re-read from the start at every start-up, so such a record is dead-lettered again
        each time.
        """
        origin = Origin(record.topic, record.partition, record.offset)
        if self._watch is not None:
            self._watch.touched()
        try:
            letter = self._apply_chunk(record, origin)
        except Exception as exc:  # nothing one record holds may stop the store's loading
            letter = DeadLetter.raised(origin, record.value, record.key, exc)
        return Outcome(origin, dead_letter=letter)

    def _apply_chunk(self, record: Record, origin: Origin) -> DeadLetter | None:
        if record.value is None:
            chunk_id = tombstone_chunk_id(record.key) if record.key else None
            if chunk_id is not None:
                self.store.apply(ChunkDeletion(chunk_id))
            return None
        limit = self._policy.limits.max_message_bytes
        if len(record.value) > limit:
            return oversized(origin, record.value, record.key, limit)
        try:
            parsed = parse_json(record.value)
            if is_change_event(parsed):
                parsed = change_event_chunk(parsed, record.key, self._change_columns)
            chunk = decode_chunk(parsed, self._policy.limits)
        except RecordError as exc:
            reason = "invalid_json" if isinstance(exc, InvalidJson) else "invalid_record"
            return DeadLetter(origin, record.value, record.key, reason, str(exc))
        self.store.apply(chunk)
        if isinstance(chunk, Chunk) and chunk.chunker and self._watch is not None:
            self._watch.saw(chunk.chunker)
        return None

    def answer(self, record: Record, mode: Mode = Mode.INLINE) -> Outcome:
        """Check every citation of one answer message; say what to publish."""
        origin = Origin(record.topic, record.partition, record.offset)
        if mode is Mode.SWEEP:
            return self.sweep_step().check(record.value, origin, record.key)
        outcome = check_message(
            record.value, record.key, origin, store=self.store, policy=self._policy, mode=mode
        )
        publish_verdicts(outcome, self._publish_all)
        return outcome

    def sweep_step(self, drawing: Drawing | None = None) -> SweepStep:
        """The per-record step of a sweep over this store: the sweep's policy (it keeps the
        judge input of every judgeable citation when a sample is drawn), ``drawing`` its part
        of the sample."""
        return SweepStep(self.store, self._sweep_policy, drawing)
