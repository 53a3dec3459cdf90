"""Sweeps the consumer group shares: each request carried out once, across the group.

Every instance reads every sweep request and follows the progress topic
(:mod:`exporter.kafka.sweep_progress`), so all keep the same :class:`SweepBook`. An instance
sweeps only the answer partitions it owns in the group, from where the book says each got to
its target, and writes each partition's progress after every batch whose verdicts were
delivered. A partition that changes owner is resumed by the new one from that position; one
whose owner died is reassigned by the group and resumed the same way: every citation is checked
at least once, the batch in hand at a kill twice. See docs/group-sweep.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from aiokafka import TopicPartition

from exporter.entailment.drawing import Drawing, PackedCandidate
from exporter.entailment.judging import SampleJudging
from exporter.entailment.sampling import StratifiedSample
from exporter.kafka.clients import close
from exporter.kafka.control import SweepRequest, sweep_request
from exporter.kafka.fetching import Fetcher, assign_from_start
from exporter.kafka.protocols import Consumer
from exporter.kafka.publish import Publisher
from exporter.kafka.sweep_progress import (
    PartitionProgress,
    ProgressRecord,
    SweepBook,
    SweepRecord,
    decode_progress,
    encode_progress,
)
from exporter.kafka.topic_sweep import ArchiveBatch, judge_sweep_sample
from exporter.outputs.metrics import ExporterMetrics
from exporter.outputs.state import SweepResult
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import DeadLetter, Origin, Outcome
from exporter.pipeline.sweep import SweepBatch
from exporter.records.decode import RecordError
from exporter.records.limits import preview

__all__ = ["GroupSweeper", "ProgressFollower", "ProgressWriter", "RequestListener"]

log = logging.getLogger(__name__)

# Messages of one partition checked between two progress records.
_BATCH_RECORDS = 2_000
# How long the sweeper rests when no owned partition has a part to do.
_IDLE_SECONDS = 0.5
# A part that failed is resumed after this, doubling while it fails, up to the most.
_FIRST_RETRY_SECONDS = 1.0
_MAX_RETRY_SECONDS = 60.0


class ProgressWriter(Protocol):
    """Writes a progress record and returns once the broker has it."""

    async def __call__(self, key: bytes, value: bytes) -> None: ...


class ProgressFollower:
    """Reads the progress topic into the book, from its start and then as it grows.

    A record that is not a usable one (anyone with write access may write anything) is logged
    and counted as an invalid event of the topic, and skipped.
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        book: SweepBook,
        metrics: ExporterMetrics,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._book = book
        self._metrics = metrics
        self._on_change = on_change
        self._fetcher = Fetcher(consumer, metrics)

    async def assign(self, partitions: set[int]) -> None:
        await assign_from_start(self._consumer, self._topic, partitions)

    async def load(self) -> None:
        """Read up to the end offsets seen now: what the group knew before this instance."""
        assigned = sorted(self._consumer.assignment())
        targets = await self._consumer.end_offsets(assigned)
        while [tp for tp in assigned if await self._consumer.position(tp) < targets[tp]]:
            await self.poll()

    async def poll(self, timeout_ms: int = 200) -> int:
        """Apply what one fetch brings; how many records it brought."""
        batches = await self._fetcher.getmany(timeout_ms=timeout_ms, max_records=1_000)
        applied = 0
        outcomes: list[Outcome] = []
        for records in batches.values():
            for record in records:
                try:
                    self._book.apply(decode_progress(record.key, record.value))
                    applied += 1
                except RecordError as exc:
                    origin = Origin(record.topic, record.partition, record.offset)
                    log.warning("%s: not a sweep progress record, skipped: %s", origin, exc)
                    letter = DeadLetter(origin, None, None, "invalid_record", str(exc))
                    outcomes.append(Outcome(origin, dead_letter=letter))
        if outcomes:
            self._metrics.record(outcomes)
        if applied:
            self._on_change()
        return applied

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll(timeout_ms=500)


class GroupSweeper:
    """Carries out the parts of the group's sweeps that belong to this instance's partitions.

    ``owned`` says which answer partitions this instance owns now (the inline consumer's
    assignment); ``write`` persists a progress record; ``make_consumer`` makes a consumer of
    its own (outside any group) for reading the archive.
    """

    def __init__(
        self,
        *,
        book: SweepBook,
        answers_topic: str,
        make_consumer: Callable[[], Consumer],
        owned: Callable[[], set[int]],
        partitions: Callable[[], Awaitable[set[int]]],
        write: ProgressWriter,
        pipeline: Callable[[], Pipeline],
        metrics: ExporterMetrics,
        publisher: Publisher,
        owner: str,
        judging: SampleJudging | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.book = book
        self._judging = judging
        # per sweep, the sample this instance draws from the batches it checks
        self._samples: dict[str, tuple[StratifiedSample[PackedCandidate], Drawing]] = {}
        self.judge_tasks: set[asyncio.Task[None]] = set()
        self._topic = answers_topic
        self._make_consumer = make_consumer
        self._owned = owned
        self._partitions = partitions
        self._write = write
        self._pipeline = pipeline
        self._metrics = metrics
        self._publisher = publisher
        self._owner = owner
        self._clock = clock
        self._completed: set[str] = set()  # sweeps seen complete (and their share judged)

    async def request(self, sweep_id: str, reason: str, requested_at: float) -> bool:
        """Make a sweep known to the group, unless it is already; whether it was new."""
        if self.book.knows(sweep_id):
            log.info("sweep %s requested again (%s): known, not repeated", sweep_id, reason)
            return False
        partitions = len(await self._partitions())
        sweep = SweepRecord(sweep_id, reason, requested_at, max(1, partitions))
        await self._persist(sweep)
        log.info("sweep %s requested (%s) over %d partitions", sweep_id, reason, partitions)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep owned partitions' parts, oldest sweep first, until ``stop``. A part that
        fails (a verdict not delivered, the broker away) is resumed from its last persisted
        batch after a backoff: it must not end the service."""
        try:
            await self._run(stop)
        finally:
            await self.stop()

    async def _run(self, stop: asyncio.Event) -> None:
        backoff = _FIRST_RETRY_SECONDS
        while not stop.is_set():
            work = self._next_part()
            wait = _IDLE_SECONDS
            if work is None:
                self.refresh()
            else:
                try:
                    await self._sweep_with_own_consumer(*work, stop)
                    backoff = _FIRST_RETRY_SECONDS
                    continue
                except Exception:
                    log.exception(
                        "partition %d of sweep %s failed; resuming it in %.0f s",
                        work[1],
                        work[0].sweep_id,
                        backoff,
                    )
                    wait, backoff = backoff, min(_MAX_RETRY_SECONDS, backoff * 2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)

    async def _sweep_with_own_consumer(
        self, sweep: SweepRecord, partition: int, stop: asyncio.Event
    ) -> None:
        consumer = self._make_consumer()
        try:
            await consumer.start()
            await self._sweep_part(consumer, sweep, partition, stop)
        finally:
            await close(consumer)
            self._metrics.state.sweep_running = False

    async def stop(self) -> None:
        """Cancel the judging still running (the producer it publishes with is closing)."""
        for task in list(self.judge_tasks):
            task.cancel()
        await asyncio.gather(*self.judge_tasks, return_exceptions=True)

    def _next_part(self) -> tuple[SweepRecord, int] | None:
        for partition in sorted(self._owned()):
            pending = self.book.pending(partition)
            if pending:
                return pending[0], partition
        return None

    async def _persist(self, record: ProgressRecord) -> None:
        """Write a record; a part's applied here at once (it only moves forward, so reading
        it back changes nothing), a sweep's only when the follower reads it: the first sweep
        record of an id in the topic's order stands in every instance's book alike."""
        await self._write(*encode_progress(record))
        if isinstance(record, PartitionProgress):
            self.book.apply(record)
            self.refresh()

    async def _sweep_part(
        self, consumer: Consumer, sweep: SweepRecord, partition: int, stop: asyncio.Event
    ) -> None:
        """Check one partition's part of a sweep from where it got, batch by batch, writing
        its progress after each; stop early when the partition is no longer ours."""
        tp = TopicPartition(self._topic, partition)
        consumer.assign([tp])
        first = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        part = self.book.part(sweep.sweep_id, partition)
        if part is None:
            start = min(first, end)
            part = PartitionProgress(
                sweep.sweep_id, partition, start, end, start, False, {}, self._owner
            )
            await self._persist(part)
        if part.target > end:  # a record no owner wrote (the log cannot shrink): what exists
            log.warning(
                "partition %d of sweep %s: target %d is past the end offset %d; sweeping to it",
                partition,
                sweep.sweep_id,
                part.target,
                end,
            )
            part = dataclasses.replace(part, target=end, position=min(part.position, end))
        position = max(part.position, min(first, part.target))
        consumer.seek(tp, position)
        counts: Counter[str] = Counter(part.counts)
        fetcher = Fetcher(consumer, self._metrics, self._pipeline().prefetch)
        self._metrics.state.sweep_running = True
        log.info(
            "sweeping partition %d for sweep %s from offset %d to %d",
            partition,
            sweep.sweep_id,
            position,
            part.target,
        )
        while position < part.target:
            if stop.is_set() or partition not in self._owned():
                log.info(
                    "partition %d left at offset %d of sweep %s",
                    partition,
                    position,
                    sweep.sweep_id,
                )
                return
            position = await self._batch(consumer, fetcher, part, counts, position)
            part = dataclasses.replace(
                part, position=position, counts=dict(counts), owner=self._owner
            )
            if position < part.target:
                await self._persist(part)
        # the part is done: with its own time, which every instance reads as the sweep's end
        await self._persist(
            dataclasses.replace(part, done=True, owner=self._owner, done_at=self._clock())
        )

    async def _batch(
        self,
        consumer: Consumer,
        fetcher: Fetcher,
        part: PartitionProgress,
        counts: Counter[str],
        position: int,
    ) -> int:
        """Check one fetch of the part's partition, up to its target; deliver its failing
        verdicts, count it, draw the judge's sample from it; the position reached (only then
        is it safe to persist)."""
        tp, target = TopicPartition(self._topic, part.partition), part.target
        sweep = self.book.sweep(part.sweep_id)
        drawn = None if sweep is None else self._sample(sweep)
        batch = ArchiveBatch(
            self._pipeline().sweep_step(None if drawn is None else drawn[1]),
            SweepBatch({} if drawn is None else drawn[0].thresholds()),
        )
        fetched = await fetcher.getmany(tp, timeout_ms=500, max_records=_BATCH_RECORDS)
        reached = max(position, fetcher.skipped_to.get(tp, position))
        checked = await batch.check(fetched.get(tp, []), target, self._publisher)
        # the position, not the last record: the range may end in a transaction marker
        reached = min(target, max(reached, checked, await consumer.position(tp)))
        await self._publisher.delivered(batch.sent)
        self._metrics.record(batch.outcomes)
        # the batch's summary counted its statuses already
        counts.update({str(status): n for status, n in batch.sweep.summary.statuses.items()})
        if drawn is not None:
            drawn[0].add(batch.sweep.counts, batch.sweep.candidates)
        return reached

    def _sample(
        self, sweep: SweepRecord
    ) -> tuple[StratifiedSample[PackedCandidate], Drawing] | None:
        """The sample this instance draws for a sweep (None: no judging); made at its first
        batch here. It is memory: a restart loses what was drawn before it."""
        if self._judging is None:
            return None
        if sweep.sweep_id not in self._samples:
            sample: StratifiedSample[PackedCandidate] = StratifiedSample(
                self._judging.size, self._judging.seed
            )
            # answers' ages as of the request (or now, should a record claim a later time)
            now = datetime.fromtimestamp(min(sweep.requested_at, self._clock()), UTC)
            self._samples[sweep.sweep_id] = (sample, Drawing(now, sample.seed, sample.capacity))
        return self._samples[sweep.sweep_id]

    def _judge_share(self, sweep: SweepRecord) -> None:
        """Once a sweep is complete, judge the share of its sample this instance drew: in
        proportion to the partitions it checked (the group's shares add up to the sample)."""
        drawn = self._samples.pop(sweep.sweep_id, None)
        if self._judging is None or drawn is None:
            return
        sample = drawn[0]
        swept = {
            p
            for p in range(sweep.partitions)
            if (part := self.book.part(sweep.sweep_id, p)) is not None and part.owner == self._owner
        }
        sample.size = max(1, round(self._judging.size * len(swept) / sweep.partitions))
        task = asyncio.get_running_loop().create_task(self._judge(self._judging, sample))
        self.judge_tasks.add(task)
        task.add_done_callback(self.judge_tasks.discard)

    async def _judge(
        self, judging: SampleJudging, sample: StratifiedSample[PackedCandidate]
    ) -> None:
        try:
            await judge_sweep_sample(
                judging,
                sample,
                store=self._pipeline().store,
                metrics=self._metrics,
                publisher=self._publisher,
                topic=self._topic,
            )
        except Exception:  # the sweep is complete: judging its sample is best effort
            log.exception("judging this instance's share of a shared sweep's sample failed")

    def refresh(self) -> None:
        """Judge this instance's share of every sweep newly complete; set the sweep gauges
        from the book for the latest sweep and the partitions this instance owns: summed over
        the group, they are the whole sweep's, each partition counted by its owner."""
        for sweep in self.book.sweeps():
            if sweep.sweep_id not in self._completed and self.book.complete(sweep.sweep_id):
                self._completed.add(sweep.sweep_id)
                log.info(
                    "sweep %s complete across the group (%s)",
                    sweep.sweep_id,
                    preview(sweep.reason),
                )
                self._judge_share(sweep)
        latest = self.book.latest()
        if latest is None:
            return
        state = self._metrics.state
        owned = self._owned()
        state.sweep_partitions = self.book.states(latest.sweep_id, owned)
        progress = self.book.progress(latest.sweep_id, owned)
        if progress is not None:
            state.sweep_progress = progress
        completed_at = self.book.completed_at(latest.sweep_id)
        if completed_at is not None:
            state.last_sweep = SweepResult(
                self.book.counts(latest.sweep_id, owned),
                completed_at,
                max(0.0, completed_at - latest.requested_at),
            )


class RequestListener:
    """Every sweep request on the control topic, read by every instance of the group (no
    consumer group: each reads every partition from its start) and handed to the sweeper,
    which makes a request the group does not know yet known to it.

    A request older than ``max_age_seconds`` when read is logged and not carried out: the
    topic is read from its start at every start-up, and a request from before sweeps were
    shared (or one long answered) must not sweep the archive again. A message that is not a
    request is logged and counted as an invalid event of the topic (by every instance; it is
    not dead-lettered N times).
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        sweeper: GroupSweeper,
        metrics: ExporterMetrics,
        *,
        max_age_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._sweeper = sweeper
        self._metrics = metrics
        self._max_age = max_age_seconds
        self._clock = clock
        self._fetcher = Fetcher(consumer, metrics)

    async def assign(self, partitions: set[int]) -> None:
        await assign_from_start(self._consumer, self._topic, partitions)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batches = await self._fetcher.getmany(timeout_ms=500, max_records=100)
            outcomes: list[Outcome] = []
            for records in batches.values():
                for record in records:
                    origin = Origin(record.topic, record.partition, record.offset)
                    try:
                        request = sweep_request(record.value, origin)
                    except RecordError as exc:
                        log.warning("%s: not a sweep request, ignored: %s", origin, exc)
                        letter = DeadLetter(origin, None, None, "invalid_record", str(exc))
                        outcomes.append(Outcome(origin, dead_letter=letter))
                        continue
                    outcomes.append(Outcome(origin))
                    # the producer's time, unless it claims the future
                    sent_at = min(record.timestamp / 1000, self._clock())
                    await self._take(request, sent_at, origin)
            self._metrics.record(outcomes)

    async def _take(self, request: SweepRequest, sent_at: float, origin: Origin) -> None:
        age = self._clock() - sent_at
        if age > self._max_age and not self._sweeper.book.knows(request.sweep_id):
            log.info(
                "%s: sweep request %s (%s) is %.0f s old, past sweep_request_max_age_seconds: "
                "not carried out",
                origin,
                request.sweep_id,
                preview(request.reason),
                age,
            )
            return
        await self._sweeper.request(request.sweep_id, request.reason, sent_at)
