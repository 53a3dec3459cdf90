"""An in-memory Kafka broker, with a consumer and a producer that satisfy exporter/kafka/protocols.

What it models:

- topics of N partitions, each an append-only log of aiokafka ``ConsumerRecord``\\ s (key, value,
  headers, offset) with a log start offset (:meth:`FakeBroker.delete_before`: retention);
  offsets that hold no record (:meth:`FakeBroker.append_marker`: a transaction marker, which
  consumers step over as aiokafka steps over control batches); unreadable offsets
  (:meth:`FakeBroker.poison`: the fetch that reaches one raises ``UnsupportedCodecError``, and
  the records it drained from partitions before it are lost to the caller, as in aiokafka);
- committed offsets per consumer group, and a ``max_message_bytes`` the producer is held to;
- :class:`FakeConsumer`: ``assign()`` (positions from the group's commits, else the log start:
  ``auto_offset_reset="earliest"``); ``subscribe(listener=...)`` joins a group of one, whose
  first ``getmany()`` assigns every partition; :meth:`FakeConsumer.rebalance` awaits the
  listener's ``on_partitions_revoked`` while the old assignment holds (so it may commit), then
  ``on_partitions_assigned``, as aiokafka's eager protocol does, the new assignment starting
  from the group's commits; ``getmany()`` honours positions, ``max_records`` (in total, as
  aiokafka), the partitions filter and ``fetch_max_records``, fetches partitions in the order
  assigned, lets the loop run (a round trip), and waits up to ``timeout_ms`` (at most
  :data:`MAX_WAIT_MS`) for an append when there is nothing; a position below the log start is
  reset to it; ``highwater()`` is known once fetched; ``commit()`` of a partition not assigned
  raises ``IllegalStateError``, without a group ``IllegalOperation``, and
  :meth:`FakeConsumer.fail_commits` queues errors for the next commits;
- :class:`FakeProducer`: ``send()`` appends and returns a future already resolved to a
  ``RecordMetadata`` (delivered), or failed: the next N sends (:meth:`FakeProducer.fail_next`),
  a topic until healed (:meth:`FakeProducer.fail_topic`), a value above ``max_message_bytes``.

Not modelled: the group protocol (other members, heartbeats, generations, ``CommitFailedError``),
cooperative rebalancing (unless a test passes a narrower ``revoked``), record batches,
compression, fetch sizes in bytes, timestamps (0 unless appended with one), acks, transactions
(markers aside), delivery delays, metadata delays, topic auto-creation (an unknown topic raises
``UnknownTopicOrPartitionError``), murmur2 partitioning (keys spread by CRC-32, else round-robin).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import TypeAlias

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import (
    ConsumerStoppedError,
    IllegalOperation,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedCodecError,
)
from aiokafka.structs import ConsumerRecord, RecordMetadata

__all__ = ["MAX_WAIT_MS", "FakeBroker", "FakeConsumer", "FakeProducer", "Record"]

log = logging.getLogger(__name__)

Record: TypeAlias = ConsumerRecord[bytes, bytes]
Headers: TypeAlias = Sequence[tuple[str, bytes]]
# The longest getmany() waits for an append, whatever timeout_ms asks: polling loops stay fast.
MAX_WAIT_MS = 20
_MAX_POLL_RECORDS = 500  # aiokafka's default max_poll_records


class FakeBroker:
    """Topics, their logs and the groups' committed offsets."""

    def __init__(self, *, max_message_bytes: int = 1_048_588) -> None:
        self.max_message_bytes = max_message_bytes
        self._logs: dict[TopicPartition, list[Record | None]] = {}  # None: a marker
        self._starts: dict[TopicPartition, int] = {}
        self._topics: dict[str, int] = {}
        self._committed: dict[str, dict[TopicPartition, int]] = {}
        self._poisoned: set[tuple[TopicPartition, int]] = set()
        self._round_robin: dict[str, int] = {}
        self._waiters: list[asyncio.Future[None]] = []

    def create_topic(self, topic: str, partitions: int = 1) -> list[TopicPartition]:
        self._topics[topic] = partitions
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        for tp in tps:
            self._logs[tp], self._starts[tp] = [], 0
        return tps

    def partitions(self, topic: str) -> set[int]:
        if topic not in self._topics:
            raise UnknownTopicOrPartitionError(topic)
        return set(range(self._topics[topic]))

    def append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        headers: Headers = (),
        timestamp_ms: int = 0,
    ) -> Record:
        """Write one record (as an acknowledged producer would); returns it."""
        count = len(self.partitions(topic))
        if partition is None and key is not None:
            partition = zlib.crc32(key) % count
        elif partition is None:
            partition = self._round_robin.get(topic, 0) % count
            self._round_robin[topic] = partition + 1
        tp = TopicPartition(topic, partition)
        sizes = (-1 if key is None else len(key), -1 if value is None else len(value))
        offset = len(self._logs[tp])
        record: Record = ConsumerRecord(
            topic, partition, offset, timestamp_ms, 0, key, value, None, *sizes, tuple(headers)
        )
        self._grow(tp, record)
        return record

    def append_marker(self, tp: TopicPartition) -> None:
        """A transaction marker: it takes an offset, and consumers step over it."""
        self._grow(tp, None)

    def _grow(self, tp: TopicPartition, entry: Record | None) -> None:
        self._logs[tp].append(entry)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def records(self, topic: str, partition: int = 0) -> list[Record]:
        """The live records of a partition (from its log start)."""
        tp = TopicPartition(topic, partition)
        return [r for r in self._logs[tp][self._starts[tp] :] if r is not None]

    def delete_before(self, tp: TopicPartition, offset: int) -> None:
        """Retention: the records before ``offset`` are gone; the log now starts there."""
        self._starts[tp] = max(self._starts[tp], min(offset, len(self._logs[tp])))

    def poison(self, tp: TopicPartition, *offsets: int) -> None:
        """Make these offsets unreadable (a codec the client lacks)."""
        self._poisoned |= {(tp, offset) for offset in offsets}

    def log_start(self, tp: TopicPartition) -> int:
        return self._starts[tp]

    def log_end(self, tp: TopicPartition) -> int:
        return len(self._logs[tp])

    def committed(self, group: str) -> dict[TopicPartition, int]:
        return dict(self._committed.get(group, {}))

    async def _appended(self, seconds: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait({waiter}, timeout=seconds)
        finally:
            self._waiters.remove(waiter)


class FakeConsumer:
    """An ``AIOKafkaConsumer`` of a :class:`FakeBroker`; ``fetches`` counts getmany() calls."""

    def __init__(
        self, broker: FakeBroker, *, group_id: str | None = None, fetch_max_records: int = 10**9
    ) -> None:
        self.broker = broker
        self.group_id = group_id
        self.fetch_max_records = fetch_max_records
        self.fetches = 0
        self._positions: dict[TopicPartition, int] = {}  # the assignment, in fetch order
        self._highwater: dict[TopicPartition, int] = {}
        self._topics: list[str] = []
        self._listener: ConsumerRebalanceListener | None = None
        self._joined = self._stopped = False
        self._commit_failures: list[KafkaError] = []

    async def start(self) -> None:
        self._stopped = False

    async def stop(self) -> None:
        self._stopped = True

    def subscribe(
        self, topics: Sequence[str], *, listener: ConsumerRebalanceListener | None = None
    ) -> None:
        self._topics, self._listener, self._joined = list(topics), listener, False

    def assign(self, partitions: Collection[TopicPartition]) -> None:
        self._topics, self._listener, self._highwater = [], None, {}
        self._positions = {tp: self._initial(tp) for tp in partitions}

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    async def rebalance(
        self,
        *,
        assigned: Collection[TopicPartition],
        revoked: Iterable[TopicPartition] | None = None,
    ) -> None:
        """The group moved: ``revoked`` (default: everything, the eager protocol) is taken away
        after the listener was told; partitions kept and not revoked keep their positions."""
        revoked = set(self._positions) if revoked is None else set(revoked)
        await self._tell("on_partitions_revoked", revoked)
        kept = {tp: p for tp, p in self._positions.items() if tp in assigned and tp not in revoked}
        self._positions = {tp: kept.get(tp, self._initial(tp)) for tp in sorted(assigned)}
        self._highwater = {tp: h for tp, h in self._highwater.items() if tp in kept}
        await self._tell("on_partitions_assigned", set(assigned))

    async def _tell(self, method: str, partitions: set[TopicPartition]) -> None:
        if self._listener is None:
            return
        try:  # aiokafka logs what a listener raises and goes on
            result = getattr(self._listener, method)(partitions)
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("listener %s failed", method)

    def _initial(self, tp: TopicPartition) -> int:
        committed = self.broker.committed(self.group_id).get(tp) if self.group_id else None
        return committed if committed is not None else self.broker.log_start(tp)

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Record]]:
        if self._stopped:
            raise ConsumerStoppedError()
        if self._topics and not self._joined:
            self._joined = True
            topics = [TopicPartition(t, p) for t in self._topics for p in self.broker.partitions(t)]
            await self.rebalance(assigned=topics)
        self.fetches += 1
        await asyncio.sleep(0)
        limit = min(max_records or _MAX_POLL_RECORDS, self.fetch_max_records)
        fetched = self._fetch(partitions, limit)
        if not fetched and timeout_ms > 0:
            await self.broker._appended(min(timeout_ms, MAX_WAIT_MS) / 1000)
            fetched = self._fetch(partitions, limit)
        return fetched

    def _fetch(
        self, partitions: tuple[TopicPartition, ...], limit: int
    ) -> dict[TopicPartition, list[Record]]:
        fetched: dict[TopicPartition, list[Record]] = {}
        for tp in [tp for tp in self._positions if not partitions or tp in partitions]:
            entries = self.broker._logs[tp]
            self._highwater[tp] = len(entries)
            position = max(self._positions[tp], self.broker.log_start(tp))
            records: list[Record] = []
            while position < len(entries) and len(records) < limit:
                if (tp, position) in self.broker._poisoned:
                    raise UnsupportedCodecError("Libraries for snappy compression codec not found")
                if (entry := entries[position]) is not None:
                    records.append(entry)
                position += 1
            self._positions[tp] = position
            if records:
                fetched[tp] = records
                limit -= len(records)
        return fetched

    def _assigned(self, tp: TopicPartition) -> TopicPartition:
        if tp not in self._positions:
            raise IllegalStateError(f"Partition {tp} is not assigned")
        return tp

    async def position(self, partition: TopicPartition) -> int:
        return self._positions[self._assigned(partition)]

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError("Offset must be a positive integer")
        self._positions[self._assigned(partition)] = offset

    async def seek_to_beginning(self, *partitions: TopicPartition) -> bool:
        for tp in partitions or tuple(self._positions):
            self._positions[self._assigned(tp)] = self.broker.log_start(tp)
        return True

    async def beginning_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: self.broker.log_start(tp) for tp in partitions}

    async def end_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: self.broker.log_end(tp) for tp in partitions}

    def highwater(self, partition: TopicPartition) -> int | None:
        assert partition in self._positions, "Partition is not assigned"  # as aiokafka asserts
        return self._highwater.get(partition)

    def fail_commits(self, *errors: KafkaError) -> None:
        """The next commits raise these errors, one each, and commit nothing."""
        self._commit_failures += errors

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        if self.group_id is None:
            raise IllegalOperation("Requires group_id")
        if not self._positions:
            raise IllegalStateError("No partitions assigned")
        offsets = dict(self._positions if offsets is None else offsets)
        for tp in offsets:
            self._assigned(tp)
        if self._commit_failures:
            raise self._commit_failures.pop(0)
        self.broker._committed.setdefault(self.group_id, {}).update(offsets)


class FakeProducer:
    """An ``AIOKafkaProducer`` of a :class:`FakeBroker`; deliveries can be made to fail."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self._fail_next: list[KafkaError] = []
        self._failing_topics: dict[str, type[KafkaError]] = {}
        # what topic_partitions reads to tell a missing topic from a broker that lists none
        self.client = SimpleNamespace(cluster=SimpleNamespace(brokers=lambda: {"fake broker"}))

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def fail_next(self, count: int, error: type[KafkaError] = KafkaTimeoutError) -> None:
        """The next ``count`` sends fail (and write nothing) with ``error``."""
        self._fail_next += [error() for _ in range(count)]

    def fail_topic(self, topic: str, error: type[KafkaError] | None = RequestTimedOutError) -> None:
        """Every send to ``topic`` fails with ``error`` until this is called with None."""
        if error is None:
            self._failing_topics.pop(topic, None)
        else:
            self._failing_topics[topic] = error

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        headers: Headers | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        delivery: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        if self._fail_next:
            delivery.set_exception(self._fail_next.pop(0))
        elif topic in self._failing_topics:
            delivery.set_exception(self._failing_topics[topic]())
        elif len(value or b"") + len(key or b"") > self.broker.max_message_bytes:
            delivery.set_exception(MessageSizeTooLargeError())
        else:
            record = self.broker.append(topic, value, key, headers=headers or ())
            tp = TopicPartition(topic, record.partition)
            delivery.set_result(RecordMetadata(topic, tp.partition, tp, record.offset, 0, 0, 0))
        return delivery

    async def partitions_for(self, topic: str) -> set[int]:
        return self.broker.partitions(topic)
