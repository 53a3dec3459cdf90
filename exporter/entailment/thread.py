"""A model judge for a synchronous caller (the demo): an event loop in a thread of its own.

The demo paces its traffic with ``time.sleep`` and must never wait for a model that takes a
tenth of a second, or never answers. So the judge lives in a thread with its own event loop:
:meth:`JudgeThread.offer` hands it a claim and its evidence without blocking (or drops it,
counted, when ``queue_size`` already wait or the hourly budget is spent), ``concurrency``
workers ask the model, and the caller collects what was decided with :meth:`JudgeThread.take`.
:meth:`JudgeThread.finish` waits a bounded time for what is still waiting, then stops the
workers (cancelling calls in flight) and closes the judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from exporter.entailment.background import HourlyBudget
from exporter.entailment.results import AsyncJudge, EntailmentResult, Judgement

__all__ = ["JudgeThread", "Taken"]

log = logging.getLogger(__name__)

# How long the loop may take to start, and the thread to end once told to stop.
_START_SECONDS = 5.0
_STOP_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Taken:
    """What the model judge decided since the last take, and what it dropped, by reason."""

    judgements: list[Judgement] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


class JudgeThread:
    """A bounded queue of claims for a model judge that runs in a thread of its own.

    ``judge`` makes the judge (an async context manager, entered and closed in the thread).
    Thread-safe: :meth:`offer`, :meth:`take` and :meth:`waiting` may be called from any
    thread; :meth:`start` and :meth:`finish` from the one that owns it.
    """

    def __init__(
        self,
        judge: Callable[[], AbstractAsyncContextManager[AsyncJudge]],
        *,
        queue_size: int,
        concurrency: int,
        budget: HourlyBudget | None = None,
    ) -> None:
        self._make = judge
        self._capacity = max(1, queue_size) + max(1, concurrency)  # waiting and in flight
        self._concurrency = max(1, concurrency)
        self._budget = budget or HourlyBudget(None)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting = 0  # offered and not yet decided
        self._closed = False
        self._judgements: list[Judgement] = []
        self._dropped: Counter[str] = Counter()
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="model judge", daemon=True)

    def start(self) -> None:
        """Start the thread and wait (briefly) for its loop."""
        self._thread.start()
        if not self._ready.wait(_START_SECONDS):
            log.warning("the model judge's thread did not start in %.0f s", _START_SECONDS)

    @property
    def waiting(self) -> int:
        """Claims offered and not yet decided (queued or in flight)."""
        with self._lock:
            return self._waiting

    def offer(self, claim: str, evidence: str) -> bool:
        """Queue a claim for the model; never waits. False when it was not taken (dropped)."""
        with self._lock:
            if self._closed or self._loop is None:
                return False
            if self._budget.exhausted:
                self._dropped["budget"] += 1
                return False
            if self._waiting >= self._capacity:
                self._dropped["queue_full"] += 1
                return False
            self._waiting += 1
            loop = self._loop
        try:
            loop.call_soon_threadsafe(self._queue.put_nowait, (claim, evidence))
        except RuntimeError:  # the loop has just closed: the claim is not taken
            self._decided(None)
            return False
        return True

    def take(self) -> Taken:
        """The judgements made and the claims dropped since the last take."""
        with self._lock:
            taken = Taken(self._judgements, self._dropped)
            self._judgements, self._dropped = [], Counter()
        return taken

    def finish(self, seconds: float) -> int:
        """Wait up to ``seconds`` for the claims still waiting, then stop the workers and
        close the judge; the number left undecided (judgements made meanwhile are taken
        after this)."""
        with self._changed:
            self._changed.wait_for(lambda: self._waiting == 0 or self._closed, max(0.0, seconds))
            self._closed = True
            loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed already
                loop.call_soon_threadsafe(self._stop.set)
        if self._thread.is_alive():
            self._thread.join(_STOP_SECONDS)
            if self._thread.is_alive():
                log.warning("the model judge did not stop in %.0f s; left behind", _STOP_SECONDS)
        with self._lock:
            return self._waiting

    def _run(self) -> None:
        try:
            with asyncio.Runner() as runner:
                with self._lock:
                    self._loop = runner.get_loop()
                self._ready.set()
                runner.run(self._main())
        except Exception:
            log.exception("the model judge stopped")
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()
            self._ready.set()

    async def _main(self) -> None:
        async with self._make() as judge:
            workers = [asyncio.create_task(self._work(judge)) for _ in range(self._concurrency)]
            try:
                await self._stop.wait()
            finally:
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self, judge: AsyncJudge) -> None:
        while True:
            claim, evidence = await self._queue.get()
            with self._lock:
                over_budget = self._budget.exhausted
                if over_budget:
                    self._dropped["budget"] += 1
            if over_budget:
                self._decided(None)
                continue
            try:
                judgement = await judge.judge(claim, evidence)
            except Exception as exc:  # a judge never raises; if one does, it decided nothing
                log.warning("the model judge failed: %s", type(exc).__name__)
                judgement = Judgement(
                    EntailmentResult.ERROR, judge.name, reason=f"failed: {type(exc).__name__}"
                )
            self._decided(judgement)

    def _decided(self, judgement: Judgement | None) -> None:
        with self._changed:
            self._waiting -= 1
            if judgement is not None:
                self._judgements.append(judgement)
                self._budget.spend(judgement.cost_usd)
            if self._waiting == 0:
                self._changed.notify_all()
