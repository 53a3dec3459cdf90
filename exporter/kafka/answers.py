"""Checks the citations of the answer topic, at least once, in a consumer group.

Offsets are committed only after every verdict and dead letter of a batch was acknowledged by
the broker, per partition, and again for revoked partitions on a rebalance. A batch whose
outputs could not be delivered is not committed: its partitions are rewound to the batch start
so it is checked again (counters may count those citations twice; nothing is lost).

Checking is CPU work on the event loop that also runs the group's heartbeats, so it yields to
the loop every :data:`YIELD_SECONDS`, and a batch stops after :data:`BATCH_SECONDS`: the
messages it did not reach are fetched again by the next poll, and the consumer never goes
longer than that between polls, whatever the messages cost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from exporter.entailment.background import BackgroundJudge
from exporter.errors import SourceUnavailable
from exporter.kafka.clients import lags
from exporter.kafka.fetching import Fetcher
from exporter.kafka.protocols import Consumer
from exporter.kafka.publish import Publisher
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import Outcome

__all__ = ["BATCH_SECONDS", "FILL_SECONDS", "POLL_MESSAGES", "YIELD_SECONDS", "AnswerChecker"]

log = logging.getLogger(__name__)

# Messages per fetch, and per poll (all of a poll's outputs are awaited once, then committed).
_MAX_RECORDS = 1000
POLL_MESSAGES = 20_000
# A poll takes more of what is already fetched while it has run less than this.
FILL_SECONDS = 0.5
# Longest stretch of checking without letting heartbeats, fetches and scrapes run.
YIELD_SECONDS = 0.05
# Longest time one poll spends checking before it commits and polls again.
BATCH_SECONDS = 5.0


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
        consumer: Consumer,
        topic: str,
        *,
        pipeline: Pipeline,
        metrics: ExporterMetrics,
        publisher: Publisher,
        judging: BackgroundJudge | None = None,
    ) -> None:
        self._consumer = consumer
        self._judging = judging
        self._topic = topic
        self._pipeline = pipeline
        self._metrics = metrics
        self._publisher = publisher
        # in lookup mode a batch is handed out once what it cites is in the store
        self._fetcher = Fetcher(consumer, metrics, pipeline.prefetch)
        self._uncommitted: dict[TopicPartition, int] = {}
        self._lag_reported: set[tuple[str, int]] = set()
        self._last_yield = time.monotonic()

    def subscribe(self) -> None:
        self._consumer.subscribe([self._topic], listener=_CommitOnRevoke(self))

    async def poll(self, timeout_ms: int = 500) -> int:
        """Check what one poll fetches, end to end; returns the number of messages it checked.

        A poll goes on taking what the consumer has already fetched (up to
        :data:`POLL_MESSAGES` messages or :data:`FILL_SECONDS`), so one wait for the broker's
        acknowledgements and one commit serve all of them: waiting for both after every fetch
        left the process idle for most of its time at high rates.
        """
        batches: dict[TopicPartition, list[Any]] = {}
        skipped: dict[TopicPartition, int] = {}
        sent: list[Any] = []
        reached: dict[TopicPartition, int] = {}
        outcomes: list[Outcome] = []
        started = time.monotonic()
        try:
            wait = timeout_ms
            while True:
                fetched = await self._fetcher.getmany(timeout_ms=wait, max_records=_MAX_RECORDS)
                for tp, skipped_to in self._fetcher.skipped_to.items():
                    skipped[tp] = max(skipped.get(tp, 0), skipped_to)
                if not fetched:
                    break
                for tp, records in fetched.items():
                    batches.setdefault(tp, []).extend(records)
                finished = await self._check(fetched, started, sent, reached, outcomes)
                if (
                    not finished
                    or len(outcomes) >= POLL_MESSAGES
                    or time.monotonic() - started > FILL_SECONDS
                ):
                    break
                wait = 0  # only what is already fetched: never wait for more
            await self._publisher.delivered(sent)
        except (KafkaError, SourceUnavailable):
            # the whole poll again (a lookup that failed moved its own batch back already)
            self._rewind(batches, {})
            raise
        # counted once delivered: a batch rewound after a failed delivery is counted when it
        # is checked again, not twice
        self._metrics.record(outcomes)
        if self._judging is not None:  # behind the response: offered, never waited for
            self._judging.offer(outcomes)
        self._rewind(batches, reached)
        self._uncommitted.update(reached)
        for tp, skipped_to in skipped.items():
            fetched_tp = batches.get(tp)
            if fetched_tp is None or reached.get(tp) == fetched_tp[-1].offset + 1:
                # a bad batch after everything checked: commit past it, or it is read again
                self._uncommitted[tp] = max(self._uncommitted.get(tp, 0), skipped_to)
        await self.commit()
        await self._report_lag()
        return sum(
            offset - records[0].offset
            for tp, records in batches.items()
            if (offset := reached.get(tp)) is not None
        )

    async def _check(
        self,
        fetched: dict[TopicPartition, list[Any]],
        started: float,
        sent: list[Any],
        reached: dict[TopicPartition, int],
        outcomes: list[Outcome],
    ) -> bool:
        """Check and publish fetched records; False when the poll's time ran out first."""
        for tp, records in fetched.items():
            for record in records:
                now = time.monotonic()
                if reached and now - started > BATCH_SECONDS:
                    return False  # the rest is fetched again by the next poll
                if now - self._last_yield > YIELD_SECONDS:
                    await asyncio.sleep(0)
                    self._last_yield = time.monotonic()
                outcome = self._pipeline.answer(record)
                outcomes.append(outcome)
                if outcome.publish or outcome.dead_letter is not None:
                    sent += await self._publisher.outcome(outcome)
                reached[tp] = record.offset + 1
        return True

    def _rewind(self, batches: dict[TopicPartition, list[Any]], reached: dict[Any, int]) -> None:
        """Seek each partition back to its first record this batch did not finish."""
        assigned = self._consumer.assignment()
        for tp, records in batches.items():
            position = reached.get(tp, records[0].offset)
            if position <= records[-1].offset and tp in assigned:
                self._consumer.seek(tp, position)

    async def _report_lag(self) -> None:
        reported = await lags(self._consumer)
        self._metrics.state.set_lag(reported)
        self._lag_reported |= set(reported)

    def forget_lag(self, keep: set[TopicPartition]) -> None:
        """Drop the lag series of partitions another member now owns (it reports them)."""
        kept = {(tp.topic, tp.partition) for tp in keep}
        self._metrics.state.forget_lag(self._lag_reported - kept)
        self._lag_reported &= kept

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
        except KafkaError:
            if only is not None:
                # revoked partitions are not ours to commit later: keeping them would make the
                # next commit name a partition no longer assigned, and fail for the rest
                for tp in offsets:
                    self._uncommitted.pop(tp, None)
            raise
        for tp in offsets:
            self._uncommitted.pop(tp, None)
