"""The control topic: ``{"type": "sweep", "reason": "..."}`` starts a sweep.

Read in a consumer group of its own (``<group_id>.control``), so one instance of a deployment
acts on each request. Anything else is dead-lettered and counted as invalid. A request's offset
is committed only once a sweep that started after it has completed: a request that a crash, a
SIGTERM or a broker outage interrupted is read again and run again (at least once).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from exporter.kafka.fetching import Fetcher
from exporter.kafka.protocols import Consumer
from exporter.kafka.publish import Publisher
from exporter.kafka.sweep_progress import sweep_id
from exporter.kafka.topic_sweep import SweepRunner
from exporter.outputs.metrics import ExporterMetrics
from exporter.pipeline.outcome import DeadLetter, Origin, Outcome
from exporter.records.decode import RecordError, parse_json
from exporter.records.limits import MAX_ID_CHARS, preview

__all__ = ["ControlListener", "SweepRequest", "sweep_request"]

# A sweep request is a few dozen bytes; nothing larger is parsed.
_MAX_CONTROL_BYTES = 65536

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """A sweep asked for on the control topic, with the id that makes it one sweep however
    many instances read it (and however often it is sent)."""

    sweep_id: str
    reason: str


def sweep_request(value: bytes | None, origin: Origin) -> SweepRequest:
    """The sweep a control message asks for; raises RecordError for anything else.

    Its id is the message's ``id`` when it names one (the same request sent twice is one
    sweep), else ``control/<partition>/<offset>``: the same for every instance that reads it.
    """
    if value is None:
        raise RecordError("control message has no value")
    if len(value) > _MAX_CONTROL_BYTES:
        raise RecordError(f"control message of {len(value):,} bytes; requests are small")
    request: Any = parse_json(value)
    if type(request) is not dict or request.get("type") != "sweep":
        raise RecordError('a control message must be {"type": "sweep", "reason": "..."}')
    reason = request.get("reason", "requested")
    if type(reason) is not str:
        raise RecordError("'reason' must be a string")
    named = sweep_id(request.get("id", f"control/{origin.partition}/{origin.offset}"))
    return SweepRequest(named, reason[:MAX_ID_CHARS])


class ControlListener:
    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        sweeps: SweepRunner,
        metrics: ExporterMetrics,
        publisher: Publisher,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._sweeps = sweeps
        self._metrics = metrics
        self._publisher = publisher
        self._fetcher = Fetcher(consumer, metrics)
        # per partition, in order: (offset to commit after it, the sweep it waits for or None)
        self._outstanding: dict[TopicPartition, list[tuple[int, asyncio.Future[None] | None]]] = {}

    def subscribe(self) -> None:
        self._consumer.subscribe([self._topic])

    def _handle(self, record: Any) -> DeadLetter | asyncio.Future[None]:
        """Act on one control message: the sweep it asked for, or its dead letter."""
        origin = Origin(record.topic, record.partition, record.offset)
        try:
            reason = sweep_request(record.value, origin).reason
        except RecordError as exc:
            return DeadLetter(origin, record.value, record.key, "invalid_record", str(exc))
        except Exception as exc:  # nothing one message holds may stop the listener
            return DeadLetter.raised(origin, record.value, record.key, exc)
        log.info("sweep requested on %s: %s", self._topic, preview(reason))
        return self._sweeps.request(reason)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batches = await self._fetcher.getmany(timeout_ms=500, max_records=100)
            outcomes: list[Outcome] = []
            for tp, records in batches.items():
                for record in records:
                    handled = self._handle(record)
                    waits_for = None
                    if isinstance(handled, DeadLetter):
                        await self._publisher.delivered(
                            [await self._publisher.dead_letter(handled)]
                        )
                        outcomes.append(Outcome(handled.origin, dead_letter=handled))
                    else:
                        waits_for = handled
                        origin = Origin(record.topic, record.partition, record.offset)
                        outcomes.append(Outcome(origin))
                    self._outstanding.setdefault(tp, []).append((record.offset + 1, waits_for))
            self._metrics.record(outcomes)
            for tp, skipped_to in self._fetcher.skipped_to.items():
                queue = self._outstanding.setdefault(tp, [])
                if not queue or skipped_to > queue[-1][0]:  # a bad batch after the last request
                    queue.append((skipped_to, None))
            await self._commit_answered()

    async def _commit_answered(self) -> None:
        """Commit each partition up to its first request whose sweep has not completed."""
        offsets: dict[TopicPartition, int] = {}
        for tp, queue in self._outstanding.items():
            while queue and (queue[0][1] is None or queue[0][1].done()):
                offset, sweep = queue.pop(0)
                if sweep is not None and sweep.cancelled():
                    queue.clear()  # stopped before it completed: read it again next time
                    break
                offsets[tp] = offset
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("control offsets not committed (%s); a request may repeat", exc)
