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

from aiokafka import TopicPartition

from exporter.errors import RestartRequired
from exporter.kafka.answers import YIELD_SECONDS
from exporter.kafka.clients import lags
from exporter.kafka.fetching import Fetcher, assign_from_start
from exporter.kafka.protocols import Consumer
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import DeadLetter, Outcome

__all__ = ["ChunkFollower"]

log = logging.getLogger(__name__)


class ChunkFollower:
    """Applies chunk records to the store; ``caught_up`` is set once it has."""

    def __init__(
        self,
        consumer: Consumer,
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
        self.caught_up = asyncio.Event()

    async def assign(self, partitions: set[int]) -> None:
        """Take every partition of the chunk topic from the beginning; note where 'now' is."""
        if not partitions:
            raise RestartRequired(f"chunk topic {self._topic!r} has no partitions")
        assigned = await assign_from_start(self._consumer, self._topic, partitions)
        self._targets = await self._consumer.end_offsets(assigned)
        log.info("loading chunk store from %s up to %s", self._topic, self._targets)
        await self._check_caught_up()

    async def _check_caught_up(self) -> None:
        if self.caught_up.is_set():
            return
        for tp, target in self._targets.items():
            if await self._consumer.position(tp) < target:
                return
        self.caught_up.set()
        log.info(
            "chunk store loaded: %d chunks of %d documents; checking citations",
            self._pipeline.store.chunk_count,
            self._pipeline.store.document_count,
        )

    async def poll(self, timeout_ms: int = 500) -> list[DeadLetter]:
        """Fetch and apply one batch; returns the records that could not be used."""
        batches = await self._fetcher.getmany(timeout_ms=timeout_ms, max_records=5000)
        outcomes: list[Outcome] = []
        last_yield = time.monotonic()
        for records in batches.values():
            for record in records:
                outcomes.append(self._pipeline.chunk(record))
                if time.monotonic() - last_yield > YIELD_SECONDS:
                    await asyncio.sleep(0)  # large records: let checks and heartbeats run
                    last_yield = time.monotonic()
        self._metrics.record(outcomes)
        await self._check_caught_up()
        self._metrics.state.set_lag(await lags(self._consumer))
        return [o.dead_letter for o in outcomes if o.dead_letter is not None]
