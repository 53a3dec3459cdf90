"""Entailment behind the response: a sample of live citations, judged by background workers.

A model judge takes about 120 ms a citation, a thousand times a span check, so the inline path
never waits for it: after a batch is checked and delivered, its sampled citations (the
pipeline keeps the claim and evidence of ``judge_sample_rate`` of them) are offered to a
bounded queue without blocking, and workers judge them, the lexical judge first and the model
judge for what it cannot settle. A full queue, or an hourly budget already spent, drops the
sample (counted by reason): a judge that falls behind or costs too much loses samples, never
time on the inline path. A ``not_entailed`` result is published to the verdicts topic
(``"check": "entailment"``, keyed by ``citation_id``); it is a prompt to look, not a verdict.

Samples are best effort: the queue is memory, so a stop or a crash loses what waits in it (the
citations themselves were checked and committed; only their judging is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Verdict
from exporter.entailment.results import (
    AsyncJudge,
    EntailmentAction,
    EntailmentResult,
    Judgement,
    SyncJudge,
    entailment_action,
    settled,
)
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.outcome import JudgeInput, Mode, Origin, Outcome

__all__ = ["BackgroundJudge", "EntailmentPublisher", "HourlyBudget"]

log = logging.getLogger(__name__)


class EntailmentPublisher(Protocol):
    """Where a not-entailed result goes (the Kafka publisher's shape)."""

    async def entailment(
        self,
        verdict: Verdict,
        judgement: Judgement,
        action: EntailmentAction,
        origin: Origin,
        mode: str,
    ) -> asyncio.Future[Any]: ...


@dataclass(frozen=True, slots=True)
class _Sample:
    verdict: Verdict
    judge_input: JudgeInput
    evidence: str
    origin: Origin


class HourlyBudget:
    """Dollars spent in the current clock hour, against a limit (None: no limit)."""

    def __init__(self, limit: float | None, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._hour = -1
        self._spent = 0.0

    def _roll(self) -> None:
        hour = int(self._clock() // 3600)
        if hour != self._hour:
            self._hour, self._spent = hour, 0.0

    @property
    def exhausted(self) -> bool:
        if self.limit is None:
            return False
        self._roll()
        return self._spent >= self.limit

    def spend(self, dollars: float) -> None:
        self._roll()
        self._spent += dollars


class BackgroundJudge:
    """A bounded queue of sampled citations and the workers that judge them."""

    def __init__(
        self,
        *,
        store: ChunkStore,
        lexical: SyncJudge,
        model: Callable[[], AbstractAsyncContextManager[AsyncJudge]] | None,
        metrics: ExporterMetrics,
        publisher: EntailmentPublisher | None,
        high_severity_topics: frozenset[str],
        queue_size: int = 1_000,
        concurrency: int = 1,
        budget: HourlyBudget | None = None,
    ) -> None:
        self._store = store
        self._lexical = lexical
        self._model = model
        self._metrics = metrics
        self._publisher = publisher
        self._high = high_severity_topics
        self._queue: asyncio.Queue[_Sample] = asyncio.Queue(queue_size)
        self._concurrency = max(1, concurrency) if model is not None else 1
        self._budget = budget or HourlyBudget(None)
        self._pending: set[asyncio.Future[Any]] = set()

    def offer(self, outcomes: Sequence[Outcome]) -> None:
        """Queue the sampled citations of a checked batch; never waits (drops instead)."""
        for outcome in outcomes:
            for checked in outcome.checked:
                judge_input = checked.judge_input
                if judge_input is None:
                    continue
                if self._model is not None and self._budget.exhausted:
                    self._metrics.dropped("budget")
                    continue
                evidence = judge_input.evidence(self._store)
                if evidence is None:
                    continue  # gone since the check: nothing to read
                try:
                    self._queue.put_nowait(
                        _Sample(checked.verdict, judge_input, evidence, outcome.origin)
                    )
                except asyncio.QueueFull:
                    self._metrics.dropped("queue_full")
        self._metrics.state.entailment_queue_depth = self._queue.qsize()

    async def run(self, stop: asyncio.Event) -> None:
        """Judge queued samples until ``stop``; what still waits then is dropped."""
        if self._model is None:
            await self._work(None, stop)
            return
        async with self._model() as model:
            await asyncio.gather(*(self._work(model, stop) for _ in range(self._concurrency)))

    async def _work(self, model: AsyncJudge | None, stop: asyncio.Event) -> None:
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                taking = asyncio.ensure_future(self._queue.get())
                done, _ = await asyncio.wait(
                    {taking, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                if taking not in done:
                    taking.cancel()
                    return
                sample = taking.result()
                self._metrics.state.entailment_queue_depth = self._queue.qsize()
                try:
                    await self._judge(model, sample)
                except Exception:  # one sample never stops the judging
                    log.exception("judging a sampled citation failed")
        finally:
            stopping.cancel()

    async def _judge(self, model: AsyncJudge | None, sample: _Sample) -> None:
        claim = sample.judge_input.claim
        judgement = self._lexical.judge(claim, sample.evidence)
        called = False
        if not settled(judgement) and model is not None:
            if self._budget.exhausted:
                self._metrics.dropped("budget")
                return
            judgement = await model.judge(claim, sample.evidence)
            self._budget.spend(judgement.cost_usd)
            called = True
        self._metrics.judged(Mode.INLINE, [judgement], [called])
        if judgement.result is EntailmentResult.NOT_ENTAILED and self._publisher is not None:
            await self._publish(sample, judgement)

    async def _publish(self, sample: _Sample, judgement: Judgement) -> None:
        assert self._publisher is not None
        action = entailment_action(judgement.result, sample.judge_input.topic, self._high)
        sent = await self._publisher.entailment(
            sample.verdict, judgement, action, sample.origin, Mode.INLINE
        )
        # behind the response, so not part of a batch's commit: a failed send is logged
        self._pending.add(sent)
        sent.add_done_callback(self._sent)

    def _sent(self, sent: asyncio.Future[Any]) -> None:
        self._pending.discard(sent)
        with contextlib.suppress(asyncio.CancelledError):
            error = sent.exception()
            if error is not None:
                log.warning("an entailment verdict could not be published: %s", error)
