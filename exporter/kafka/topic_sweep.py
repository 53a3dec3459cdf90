"""Sweeps inside the service: the whole archive of the answer topic, re-checked on demand.

A sweep starts on a control message (``{"type": "sweep", "reason": "..."}`` on the control
topic) or by itself once chunks cut by a chunker fingerprint not seen before have arrived and
the chunk topic has then been quiet for ``sweep_quiet_seconds`` (a re-index finished). It reads
the answer topic from its earliest offsets up to the high water marks at its start, with a
consumer of its own outside any group, so inline checking goes on meanwhile. One sweep runs at
a time; requests during a sweep are remembered and run once after it. A sweep that fails (the
broker went away) is started again with backoff until it completes: a request is answered by a
completed sweep, and the control listener commits a request only then, so one that a crash or a
SIGTERM interrupted is read again and run at the next start. An attempt that failed is resumed
from where its last delivered batch ended: nothing is checked, counted or published twice.

Its results are counted with ``mode="sweep"`` and summarised in the ``citation_sweep_*``
gauges when it completes; failing verdicts are published with ``"mode": "sweep"``. Invalid
inputs were dead-lettered when first consumed and are only counted here.

A sweep also draws a stratified sample of the archive's judgeable citations
(``judge_sweep_sample``, 2,000 by default) and, once its gauges are set (the post-sweep alert
never waits for a judge), judges it as ``citation-exporter sweep`` does: counted with
``mode="sweep"`` in the ``citation_entailment_*`` metrics, ``not_entailed`` results published
like the judge behind the response's, and a log line with the sample's results and cost. The
sweep is complete before its judging starts: judging that fails, or results not delivered, are
logged, and the archive is not read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition

from exporter.checks.store import ChunkStore
from exporter.entailment.drawing import Drawing, PackedCandidate
from exporter.entailment.judging import SampleJudging
from exporter.entailment.results import EntailmentResult
from exporter.entailment.sampling import StratifiedSample
from exporter.entailment.summary import EntailmentSummary
from exporter.kafka.answers import YIELD_SECONDS
from exporter.kafka.clients import close
from exporter.kafka.fetching import Fetcher
from exporter.kafka.protocols import Consumer
from exporter.kafka.publish import Publisher
from exporter.outputs.metrics import ExporterMetrics
from exporter.outputs.state import SweepResult
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import Mode, Origin, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.pipeline.sweep import SweepBatch, SweepStep

__all__ = ["ArchiveBatch", "SweepRunner", "judge_sweep_sample"]

log = logging.getLogger(__name__)

_FIRST_RETRY_SECONDS = 1.0
# The results a sweep's log line gives besides the sample's size.
_REPORTED = (
    EntailmentResult.NOT_ENTAILED,
    EntailmentResult.UNKNOWN,
    EntailmentResult.ERROR,
    EntailmentResult.SKIPPED,
)
_MAX_RETRY_SECONDS = 60.0


class SweepRunner:
    """Runs sweeps one at a time in a background task."""

    def __init__(
        self,
        make_consumer: Callable[[], Consumer],
        topic: str,
        partitions: Callable[[], Awaitable[set[int]]],
        *,
        pipeline: Callable[[], Pipeline],
        metrics: ExporterMetrics,
        publisher: Publisher,
        judging: SampleJudging | None = None,
    ) -> None:
        self._make_consumer = make_consumer
        self._judging = judging
        self._topic = topic
        self._partitions = partitions
        self._pipeline = pipeline
        self._metrics = metrics
        self._publisher = publisher
        self._task: asyncio.Task[None] | None = None
        self._waiting: list[asyncio.Future[None]] = []
        self._reason = ""
        self.completed = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def request(self, reason: str) -> asyncio.Future[None]:
        """Ask for a sweep; the future is done once a sweep started after this call completes."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(done)
        self._reason = reason
        if self.running:
            log.info("sweep requested (%s) while one runs; it will follow", reason)
        else:
            self._task = asyncio.create_task(self._run())
        return done

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for waiting in self._waiting:
            waiting.cancel()
        self._waiting = []
        self._metrics.state.sweep_running = False

    async def _run(self) -> None:
        while self._waiting:
            answered, self._waiting = self._waiting, []
            try:
                await self._until_complete(self._reason)
            except asyncio.CancelledError:
                for waiting in answered:
                    waiting.cancel()
                raise
            for waiting in answered:
                if not waiting.done():
                    waiting.set_result(None)

    async def _until_complete(self, reason: str) -> None:
        """One sweep, resumed with backoff while it fails (it must not end the service): an
        attempt that failed goes on from where the last batch it delivered ended."""
        backoff = _FIRST_RETRY_SECONDS
        progress = _Progress(self._judging)
        self._metrics.state.sweep_progress = 0.0
        log.info("sweep started: %s", reason)
        while True:
            try:
                await self._sweep(reason, progress)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sweep (%s) failed; resuming it in %.0f s", reason, backoff)
                self._metrics.state.sweep_running = False
            await asyncio.sleep(backoff)
            backoff = min(_MAX_RETRY_SECONDS, backoff * 2)

    async def _sweep(self, reason: str, progress: _Progress) -> None:
        state = self._metrics.state
        state.sweep_running = True
        consumer = self._make_consumer()
        try:
            await consumer.start()
            await self._read_archive(consumer, progress)
        finally:
            await close(consumer)
        summary = progress.summary
        duration = time.monotonic() - progress.started
        # the span checks' results first: the post-sweep alert must not wait for a judge
        state.last_sweep = SweepResult(
            dict(summary.statuses), progress.started_wall + duration, duration
        )
        state.sweep_running, state.sweep_progress = False, 1.0
        log.info(
            "sweep completed in %.1f s (%s): %d citations, drift ratio %.2f%%, superseded "
            "ratio %.2f%%",
            duration,
            reason,
            summary.citations,
            summary.drift_ratio * 100,
            summary.superseded_ratio * 100,
        )
        judging, sample = self._judging, progress.sample
        if judging is not None and sample is not None:
            try:
                await self._judge(judging, sample, summary)
            except Exception:  # the sweep is complete: starting it again would count it twice
                log.exception("judging the sample of the sweep (%s) failed", reason)
        self.completed += 1

    async def _judge(
        self,
        judging: SampleJudging,
        sample: StratifiedSample[PackedCandidate],
        summary: SweepSummary,
    ) -> None:
        summary.entailment = await judge_sweep_sample(
            judging,
            sample,
            store=self._pipeline().store,
            metrics=self._metrics,
            publisher=self._publisher,
            topic=self._topic,
        )

    async def _resume(self, consumer: Consumer, progress: _Progress) -> list[TopicPartition]:
        """Assign the sweep's partitions to ``consumer`` at the positions it reached; at the
        first attempt, plan them: from the earliest offsets to the end offsets now."""
        if not progress.targets:
            assigned = [TopicPartition(self._topic, p) for p in sorted(await self._partitions())]
            consumer.assign(assigned)
            progress.done = dict(await consumer.beginning_offsets(assigned))
            progress.beginnings = dict(progress.done)
            progress.targets = dict(await consumer.end_offsets(assigned))
        assigned = sorted(progress.targets)
        consumer.assign(assigned)
        starts = await consumer.beginning_offsets(assigned)
        for tp in assigned:  # retention may have deleted what an earlier attempt had not read
            progress.done[tp] = max(progress.done[tp], starts[tp])
            consumer.seek(tp, progress.done[tp])
        return assigned

    async def _read_archive(self, consumer: Consumer, progress: _Progress) -> None:
        """Check every message from where ``progress`` stands (the earliest offsets, at
        first) up to the end offsets seen when the sweep started. A batch's results (the
        summary, the sample drawn, the positions) are kept only once its verdicts were
        delivered and it was counted: an attempt that fails leaves them as they were."""
        assigned = await self._resume(consumer, progress)
        sample = progress.sample
        # an attempt's own drawing: keys of a batch that failed must not linger in its filter
        drawing = None if sample is None else Drawing(progress.now, sample.seed, sample.capacity)
        fetcher = Fetcher(consumer, self._metrics, self._pipeline().prefetch)
        targets = progress.targets
        work = sum(targets[tp] - progress.beginnings[tp] for tp in assigned) or 1
        remaining = {tp for tp in assigned if progress.done[tp] < targets[tp]}
        while remaining:
            batches = await fetcher.getmany(*remaining, timeout_ms=500, max_records=2000)
            done = dict(progress.done)
            for tp, skipped_to in fetcher.skipped_to.items():
                done[tp] = max(done[tp], skipped_to)  # an unreadable batch is behind us
            batch = ArchiveBatch(
                self._pipeline().sweep_step(drawing),
                SweepBatch({} if sample is None else sample.thresholds()),
            )
            for tp, records in batches.items():
                reached = await batch.check(records, targets[tp], self._publisher)
                done[tp] = max(done[tp], reached)
            for tp in remaining:
                # the position, not the last record: the last offsets may hold no record (a
                # transaction marker), and a sweep waiting for one would never complete
                done[tp] = max(done[tp], await consumer.position(tp))
            await self._publisher.delivered(batch.sent)
            self._metrics.record(batch.outcomes)
            progress.summary.merge(batch.sweep.summary)
            progress.done = done
            if sample is not None:
                sample.add(batch.sweep.counts, batch.sweep.candidates)
            remaining = {tp for tp in remaining if done[tp] < targets[tp]}
            moved = sum(done[tp] - progress.beginnings[tp] for tp in assigned)
            self._metrics.state.sweep_progress = min(1.0, moved / work)


@dataclass
class ArchiveBatch:
    """One fetch of a sweep of the answer topic, checked and not yet delivered: its outcomes,
    the failing verdicts sent, and its part of the summary and of the judge's sample. Both
    sweeps (each instance's, the group's) keep it only once ``sent`` is delivered."""

    step: SweepStep
    sweep: SweepBatch
    outcomes: list[Outcome] = field(default_factory=list)
    sent: list[Awaitable[Any]] = field(default_factory=list)

    async def check(self, records: list[Any], target: int, publisher: Publisher) -> int:
        """Check one partition's ``records`` below ``target``, in sweep mode: send their
        failing verdicts (invalid inputs were dead-lettered when first consumed), draw from
        them; the offset after the last one checked (0 if none was)."""
        reached = 0
        last_yield = time.monotonic()
        for record in records:
            if record.offset >= target:
                break
            origin = Origin(record.topic, record.partition, record.offset)
            where = f"{record.topic}/{record.partition}@{record.offset}"
            outcome = self.step.record(
                self.sweep, record.value, origin, where, key=record.key, partition=record.partition
            )
            self.outcomes.append(outcome)
            for verdict in outcome.publish:
                self.sent.append(await publisher.verdict(verdict, outcome.origin, Mode.SWEEP))
            reached = record.offset + 1
            if time.monotonic() - last_yield > YIELD_SECONDS:
                await asyncio.sleep(0)  # inline checks and heartbeats go on
                last_yield = time.monotonic()
        return reached


@dataclass
class _Progress:
    """One sweep's state across its attempts: what it set out to read (``targets``, from
    ``beginnings``), how far its delivered batches got (``done``), and what they came to."""

    judging: SampleJudging | None
    summary: SweepSummary = field(default_factory=SweepSummary)
    sample: StratifiedSample[PackedCandidate] | None = None
    beginnings: dict[TopicPartition, int] = field(default_factory=dict)
    targets: dict[TopicPartition, int] = field(default_factory=dict)
    done: dict[TopicPartition, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))  # the sample's age bands

    def __post_init__(self) -> None:
        if self.judging is not None:
            self.sample = StratifiedSample(self.judging.size, self.judging.seed)


async def judge_sweep_sample(
    judging: SampleJudging,
    sample: StratifiedSample[PackedCandidate],
    *,
    store: ChunkStore,
    metrics: ExporterMetrics,
    publisher: Publisher,
    topic: str,
) -> EntailmentSummary:
    """Judge a sweep's sample; count the judgements (mode sweep) and publish the not_entailed
    ones, as the judge behind the response does; log what it came to."""
    judged, entailment = await judging.judge(sample, store)
    metrics.judged(
        Mode.SWEEP, [item.judgement for item in judged], [item.called for item in judged]
    )
    sent: list[Awaitable[Any]] = []
    for item in judged:
        if item.judgement.result is not EntailmentResult.NOT_ENTAILED:
            continue
        candidate = item.candidate
        origin = Origin(topic, candidate.partition or 0, candidate.line)
        sent.append(
            await publisher.entailment(
                candidate.verdict, item.judgement, item.action, origin, Mode.SWEEP
            )
        )
    # behind the sweep, as behind the response: a result not delivered is logged (a
    # failure here must not start the sweep again, counting it twice)
    delivered = await asyncio.gather(*sent, return_exceptions=True)
    failed = [error for error in delivered if isinstance(error, BaseException)]
    if failed:
        log.warning(
            "%d of %d not_entailed results of the sweep could not be published: %s",
            len(failed),
            len(sent),
            failed[0],
        )
    log.info(
        "sweep judged %d of %d judgeable citations (%s): %d not entailed, %d unknown, "
        "%d errors, %d skipped; %d model calls, $%.4f",
        sum(entailment.sampled.values()),
        entailment.judgeable,
        entailment.judge,
        *(entailment.result_count(result) for result in _REPORTED),
        entailment.calls,
        entailment.cost_usd,
    )
    return entailment
