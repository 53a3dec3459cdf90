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

from exporter.kafka.answers import YIELD_SECONDS
from exporter.kafka.clients import report_lag
from exporter.kafka.fetching import Fetcher
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.core import Pipeline
from exporter.pipeline.messages import DeadLetter

__all__ = ["ChunkFollower"]

log = logging.getLogger(__name__)


class ChunkFollower:
    """Applies chunk records to the store; ``ready`` is set once caught up."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        pipeline: Pipeline,
        metrics: ExporterMetrics,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._pipeline = pipeline
        self._metrics = metrics
        self._fetcher = Fetcher(consumer, metrics)
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
            self._pipeline.store.chunk_count,
            self._pipeline.store.document_count,
        )

    async def poll(self, timeout_ms: int = 500) -> list[DeadLetter]:
        """Fetch and apply one batch; returns the records that could not be used."""
        batches = await self._fetcher.getmany(timeout_ms=timeout_ms, max_records=5000)
        count = 0
        dead: list[DeadLetter] = []
        last_yield = time.monotonic()
        for records in batches.values():
            for record in records:
                letter = self._pipeline.chunk(record)
                if letter is not None:
                    dead.append(letter)
                if time.monotonic() - last_yield > YIELD_SECONDS:
                    await asyncio.sleep(0)  # large records: let checks and heartbeats run
                    last_yield = time.monotonic()
            count += len(records)
        if count:
            self._metrics.last_event.labels(self._topic).set(time.time())
        await self._check_caught_up()
        await report_lag(self._consumer, self._metrics)
        return dead
