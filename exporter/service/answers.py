"""Checks the citations of the answer topic, at least once, in a consumer group.

Offsets are committed only after every verdict and dead letter of a batch was acknowledged by
the broker, per partition, and again for revoked partitions on a rebalance. A batch whose
outputs could not be delivered is not committed: its partitions are rewound to the batch start
so it is checked again (counters may count those citations twice; nothing is lost).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from exporter.outputs.metrics import ExporterMetrics
from exporter.service.clients import report_lag
from exporter.service.pipeline import Pipeline
from exporter.service.publish import Publisher

__all__ = ["AnswerChecker"]

log = logging.getLogger(__name__)

_MAX_RECORDS = 1000


class _CommitOnRevoke(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, checker: AnswerChecker) -> None:
        self._checker = checker

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._checker.commit(only=revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("answer partitions assigned: %s", sorted(tp.partition for tp in assigned))
        self._checker.forget_lag(keep=assigned)


class AnswerChecker:
    """Consumes answer events and citations, checks them inline, publishes, commits."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        *,
        pipeline: Pipeline,
        metrics: ExporterMetrics,
        publisher: Publisher,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._pipeline = pipeline
        self._metrics = metrics
        self._publisher = publisher
        self._uncommitted: dict[TopicPartition, int] = {}
        self._lag_reported: set[TopicPartition] = set()

    def subscribe(self) -> None:
        self._consumer.subscribe([self._topic], listener=_CommitOnRevoke(self))

    async def poll(self, timeout_ms: int = 500) -> int:
        """Check one batch end to end; returns the number of messages it held."""
        batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=_MAX_RECORDS)
        if not batches:
            self._lag_reported |= await report_lag(self._consumer, self._metrics)
            return 0
        sent: list[Any] = []
        count = 0
        try:
            for records in batches.values():
                for record in records:
                    checked = self._pipeline.answer(record)
                    for verdict in checked.publish:
                        sent.append(
                            await self._publisher.verdict(verdict, checked.origin, "inline")
                        )
                    for letter in checked.dead_letters:
                        sent.append(await self._publisher.dead_letter(letter))
                count += len(records)
            await self._publisher.delivered(sent)
        except KafkaError:
            for tp, records in batches.items():
                if tp in self._consumer.assignment():
                    self._consumer.seek(tp, records[0].offset)
            raise
        self._metrics.last_event.labels(self._topic).set(time.time())
        for tp, records in batches.items():
            self._uncommitted[tp] = records[-1].offset + 1
        await self.commit()
        self._lag_reported |= await report_lag(self._consumer, self._metrics)
        return count

    def forget_lag(self, keep: set[TopicPartition]) -> None:
        """Drop the lag series of partitions another member now owns (it reports them)."""
        for tp in self._lag_reported - keep:
            with contextlib.suppress(KeyError):
                self._metrics.consumer_lag.remove(tp.topic, str(tp.partition))
        self._lag_reported &= keep

    async def commit(self, only: set[TopicPartition] | None = None) -> None:
        """Commit the delivered offsets (of ``only`` those partitions, on a revoke)."""
        offsets = {
            tp: offset for tp, offset in self._uncommitted.items() if only is None or tp in only
        }
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # the group moved on: the new owner re-checks from the last commit (at least once)
            log.warning("commit of %s failed, will be re-checked elsewhere: %s", offsets, exc)
        for tp in offsets:
            self._uncommitted.pop(tp, None)
