"""Answer events to the answer topic, from the caller's response path, never holding it up.

An answer is served while its event is written; a broker that is slow or away must cost the
answer nothing. So :meth:`AnswerSender.submit` only encodes the event and puts it on a bounded
queue (thread-safe, from sync or async code): when the queue is full the event is *dropped and
counted*, never waited for. One thread of the sender's own runs an event loop and an aiokafka
producer built as the exporter builds its own (``acks=all``, its batching, its TLS and SASL),
keyed by ``answer_id``; a broker that cannot be reached is retried with backoff while the queue
holds what comes. :meth:`AnswerSender.close` sends what it can within its timeout and counts
the rest. The counts (sent, failed, dropped by reason, refusals by reason) are read by a
Prometheus collector at scrape time, as client_python's own collectors are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from exporter.capture.building import Captured
from exporter.config.kafka import KafkaConnection
from exporter.kafka.clients import make_producer

__all__ = ["DEFAULT_MAX_QUEUED", "AnswerSender", "DropReason", "SenderStats"]

log = logging.getLogger(__name__)

#: Events held while the broker is slow or away: about 10 MB at 1 KB an event.
DEFAULT_MAX_QUEUED = 10_000
DropReason = Literal["queue_full", "too_large", "unencodable", "closed", "unsent_at_close"]
# Backoff between attempts to reach the broker, in seconds: first and most.
_RETRY_FIRST, _RETRY_MOST = 0.5, 30.0
_CLOSE = object()


@dataclass(frozen=True, slots=True)
class SenderStats:
    """What the sender did: every event submitted is queued, sent, failed or dropped."""

    submitted: int
    queued: int
    in_flight: int
    sent: int
    failed: int
    dropped: Mapping[str, int]
    refused: Mapping[str, int]


@dataclass(slots=True)
class _Counts:
    lock: threading.Lock = field(default_factory=threading.Lock)
    submitted: int = 0
    queued: int = 0
    in_flight: int = 0
    sent: int = 0
    failed: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)


class AnswerSender:
    """Sends answer events to the answer topic on a thread of its own.

    ``with AnswerSender(KafkaConnection(bootstrap_servers=...), topic="rag.answers") as sender:
    sender.submit(captured)``; connected as the exporter connects with
    ``settings = exporter.settings.load_settings()`` and ``AnswerSender(settings.kafka,
    topic=settings.answers_topic)``. Pass ``registry`` to have its counts scraped.
    """

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        topic: str = "rag.answers",
        max_queued: int = DEFAULT_MAX_QUEUED,
        close_timeout: float = 10.0,
        registry: CollectorRegistry | None = None,
        producer: Callable[[KafkaConnection, str], AIOKafkaProducer] = make_producer,
    ) -> None:
        if not topic or type(topic) is not str:
            raise ValueError("topic must be a non-empty string")
        if type(max_queued) is not int or max_queued < 1:
            raise ValueError("max_queued must be a positive integer")
        self._connection = connection
        self._topic = topic
        self._max_queued = max_queued
        self._close_timeout = close_timeout
        self._max_bytes = connection.max_message_bytes
        self._producer_factory = producer
        self._counts = _Counts()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._closing = False
        self._deadline = float("inf")
        if registry is not None:
            registry.register(_SenderCollector(self))

    # --- the caller's side ----------------------------------------------------------------

    def start(self) -> AnswerSender:
        """Starts the sender's thread (at once: the broker is reached from there)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(
            target=self._run, name="citation-capture-sender", daemon=True
        )
        self._thread.start()
        self._ready.wait(5.0)
        return self

    def submit(self, answer: Captured | Mapping[str, Any] | None) -> bool:
        """Queues one answer event (a :class:`Captured`, whose refusals are counted, or the
        event itself); False when it was dropped, or there was no event. Never blocks, never
        raises."""
        counts = self._counts
        event: Any = answer
        if isinstance(answer, Captured):
            with counts.lock:
                counts.refused.update(refusal.reason for refusal in answer.refusals)
            event = answer.event
        if event is None:
            return False
        with counts.lock:
            counts.submitted += 1
        try:
            value = orjson.dumps(event)
            answer_id = event.get("answer_id") if isinstance(event, Mapping) else None
        except Exception:  # the caller's own object: counted, never raised into its path
            return self._drop("unencodable")
        if len(value) > self._max_bytes:
            return self._drop("too_large")
        key = answer_id.encode("utf-8", "replace") if isinstance(answer_id, str) else None
        with counts.lock:
            if self._closing or self._loop is None or self._queue is None:
                counts.dropped["closed"] += 1
                return False
            if counts.queued >= self._max_queued:
                counts.dropped["queue_full"] += 1
                return False
            counts.queued += 1
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (key, value))
        except RuntimeError:  # the loop is gone (closed meanwhile)
            with counts.lock:
                counts.queued -= 1
            return self._drop("closed")
        return True

    @property
    def stats(self) -> SenderStats:
        counts = self._counts
        with counts.lock:
            return SenderStats(
                submitted=counts.submitted,
                queued=counts.queued,
                in_flight=counts.in_flight,
                sent=counts.sent,
                failed=counts.failed,
                dropped=dict(counts.dropped),
                refused=dict(counts.refused),
            )

    def close(self, timeout: float | None = None) -> SenderStats:
        """Sends what is queued, for at most ``timeout`` seconds (default: ``close_timeout``);
        what is left is dropped and counted. Returns the final counts."""
        limit = self._close_timeout if timeout is None else timeout
        with self._counts.lock:
            if self._closing:
                return self.stats
            self._closing = True
            self._deadline = time.monotonic() + limit
        loop, queue, thread = self._loop, self._queue, self._thread
        if loop is not None and queue is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, _CLOSE)
        if thread is not None:
            thread.join(limit + 5.0)
        return self.stats

    def __enter__(self) -> AnswerSender:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def _drop(self, reason: DropReason) -> bool:
        with self._counts.lock:
            self._counts.dropped[reason] += 1
        return False

    # --- the sender's thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # a bug of ours: said, and the queue's events counted as dropped
            log.exception("the capture sender stopped")
        finally:
            with self._counts.lock:
                self._closing = True
                self._loop = None
                left = self._counts.queued
                self._counts.queued = 0
                if left:
                    self._counts.dropped["unsent_at_close"] += left

    async def _main(self) -> None:
        self._queue = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        producer: AIOKafkaProducer | None = None
        pending: set[asyncio.Future[Any]] = set()
        try:
            while True:
                item = await self._queue.get()
                if item is _CLOSE:
                    break
                producer = producer or await self._started()
                if producer is None:  # closed before the broker could be reached: the
                    break  # queued events are counted unsent as the thread ends
                await self._send(producer, item, pending)
        finally:
            if producer is not None:
                await self._stop(producer, pending)

    async def _started(self) -> AIOKafkaProducer | None:
        """A started producer, retried with backoff; None once closing passes its deadline."""
        wait = _RETRY_FIRST
        while True:
            producer = self._producer_factory(self._connection, "capture")
            try:
                await asyncio.wait_for(producer.start(), self._remaining(30.0))
                return producer
            except (KafkaError, OSError, TimeoutError) as error:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(producer.stop(), 5.0)
                if self._closing and self._remaining(1.0) <= 0.01:
                    return None
                log.warning(
                    "capture sender: no broker at %s yet (%s); retrying in %.1f s",
                    self._connection.bootstrap_servers,
                    type(error).__name__,
                    wait,
                )
                await asyncio.sleep(min(wait, self._remaining(wait)))
                wait = min(wait * 2, _RETRY_MOST)

    async def _send(
        self, producer: AIOKafkaProducer, item: tuple[bytes | None, bytes], pending: set[Any]
    ) -> None:
        key, value = item
        try:
            if self._closing and self._remaining(1.0) <= 0:
                self._dropped_queued(1)
                return
            future = await asyncio.wait_for(
                producer.send(self._topic, value, key=key), self._remaining(60.0)
            )
        except (KafkaError, TimeoutError):
            with self._counts.lock:
                self._counts.queued -= 1
                self._counts.failed += 1
            return
        with self._counts.lock:
            self._counts.queued -= 1
            self._counts.in_flight += 1
        pending.add(future)
        future.add_done_callback(lambda done: self._delivered(done, pending))

    def _delivered(self, future: asyncio.Future[Any], pending: set[Any]) -> None:
        if future not in pending:  # already counted unsent at close
            return
        pending.discard(future)
        failed = future.cancelled() or future.exception() is not None
        with self._counts.lock:
            self._counts.in_flight -= 1
            if failed:
                self._counts.failed += 1
            else:
                self._counts.sent += 1

    async def _stop(self, producer: AIOKafkaProducer, pending: set[Any]) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.flush(), max(self._remaining(0.0), 0.01))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.stop(), max(self._remaining(0.0), 1.0))
        with self._counts.lock:  # never acknowledged: not known to be sent
            self._counts.in_flight -= len(pending)
            self._counts.dropped["unsent_at_close"] += len(pending)
        pending.clear()

    def _dropped_queued(self, count: int) -> None:
        if count <= 0:
            return
        with self._counts.lock:
            taken = min(count, self._counts.queued)
            self._counts.queued -= taken
            self._counts.dropped["unsent_at_close"] += taken

    def _remaining(self, otherwise: float) -> float:
        """Seconds to the close deadline, or ``otherwise`` while not closing."""
        if not self._closing:
            return otherwise
        return max(0.0, min(otherwise, self._deadline - time.monotonic()))


class _SenderCollector(Collector):
    """The sender's counts, read at scrape time."""

    def __init__(self, sender: AnswerSender) -> None:
        self._sender = sender

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._sender.stats
        yield CounterMetricFamily(
            "citation_capture_events_sent",
            "Answer events the capture sender delivered to the answer topic.",
            value=stats.sent,
        )
        yield CounterMetricFamily(
            "citation_capture_events_failed",
            "Answer events the broker did not take (after the producer's retries).",
            value=stats.failed,
        )
        dropped = CounterMetricFamily(
            "citation_capture_events_dropped",
            "Answer events not sent, by reason: queue_full (the broker slow or away), "
            "too_large, unencodable, closed, unsent_at_close.",
            labels=["reason"],
        )
        for reason in ("queue_full", "too_large", "unencodable", "closed", "unsent_at_close"):
            dropped.add_metric([reason], stats.dropped.get(reason, 0))
        yield dropped
        refused = CounterMetricFamily(
            "citation_capture_refusals",
            "Citations capture refused, by reason (exporter.capture.REASONS).",
            labels=["reason"],
        )
        for reason, count in sorted(stats.refused.items()):
            refused.add_metric([reason], count)
        yield refused
        yield GaugeMetricFamily(
            "citation_capture_events_queued",
            "Answer events waiting in the capture sender's queue.",
            value=stats.queued,
        )
