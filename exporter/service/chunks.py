"""Follows the compacted chunk topic into the in-memory store, and says when it caught up.

Every exporter instance reads *all* partitions from the earliest offset (no consumer group):
each needs the whole store. Until its positions reach the high water marks seen at start-up it
is not ready and no citation is checked; otherwise a restart would count every citation of a
not-yet-loaded document as missing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from exporter.checks.store import ChunkStore
from exporter.outputs.metrics import ExporterMetrics
from exporter.records.decode import RecordError, decode_chunk, parse_json
from exporter.records.schema import ChunkDeletion
from exporter.service.clients import report_lag
from exporter.service.messages import DeadLetter, Origin
from exporter.service.sweeps import ReindexWatch

__all__ = ["ChunkFollower"]

log = logging.getLogger(__name__)


class ChunkFollower:
    """Applies chunk records to the store; ``ready`` is set once caught up."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        store: ChunkStore,
        metrics: ExporterMetrics,
        watch: ReindexWatch | None = None,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._store = store
        self._metrics = metrics
        self._watch = watch
        self._targets: dict[TopicPartition, int] = {}
        self.ready = asyncio.Event()

    async def assign(self, partitions: set[int]) -> None:
        """Take every partition of the chunk topic from the beginning; note where 'now' is."""
        if not partitions:
            raise LookupError(f"chunk topic {self._topic!r} has no partitions")
        assigned = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        self._consumer.assign(assigned)
        await self._consumer.seek_to_beginning(*assigned)
        self._targets = await self._consumer.end_offsets(assigned)
        log.info("loading chunk store from %s up to %s", self._topic, self._targets)
        await self._check_caught_up()

    async def _check_caught_up(self) -> None:
        if self.ready.is_set():
            return
        for tp, target in self._targets.items():
            if await self._consumer.position(tp) < target:
                return
        self.ready.set()
        self._metrics.ready.set(1)
        log.info(
            "chunk store loaded: %d chunks of %d documents; checking citations",
            self._store.chunk_count,
            self._store.document_count,
        )

    def apply(self, record: ConsumerRecord) -> DeadLetter | None:
        """Apply one chunk message (an upsert, a deletion record, or a tombstone).

        A record that cannot be used is returned as a dead letter. The chunk topic is re-read
        from the start at every start-up, so such a record is dead-lettered again each time.
        """
        self._metrics.events.labels(self._topic).inc()
        if self._watch is not None:
            self._watch.touched()
        if record.value is None:
            if record.key:
                self._store.apply(ChunkDeletion(record.key.decode("utf-8", "replace")))
            return None
        try:
            chunk = decode_chunk(parse_json(record.value))
        except RecordError as exc:
            origin = Origin(record.topic, record.partition, record.offset)
            reason = "invalid_json" if str(exc).startswith("not valid JSON") else "invalid_record"
            self._metrics.invalid(self._topic, reason)
            return DeadLetter(origin, record.value, record.key, reason, str(exc))
        self._store.apply(chunk)
        chunker = getattr(chunk, "chunker", None)
        if chunker and self._watch is not None:
            self._watch.saw(chunker)
        return None

    async def poll(self, timeout_ms: int = 500) -> list[DeadLetter]:
        """Fetch and apply one batch; returns the records that could not be used."""
        batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=5000)
        count = 0
        dead: list[DeadLetter] = []
        for records in batches.values():
            for record in records:
                letter = self.apply(record)
                if letter is not None:
                    dead.append(letter)
            count += len(records)
        if count:
            self._metrics.last_event.labels(self._topic).set(time.time())
            self._metrics.store_chunks.set(self._store.chunk_count)
            self._metrics.store_documents.set(self._store.document_count)
        await self._check_caught_up()
        await report_lag(self._consumer, self._metrics)
        return dead
