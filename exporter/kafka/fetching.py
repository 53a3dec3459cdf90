"""Fetching that never stalls on a message no retry can read.

aiokafka decodes a fetched record batch while ``getmany()`` hands it out, so a batch it cannot
decode (a codec it lacks, a checksum that fails) raises from ``getmany()``, the position stays
where it was, and the next call fetches the very same batch: one bad batch stops the consumer
for good, and the records fetched with it before the bad one are never handed out either.

:class:`Fetcher` turns that into accounting. On such an error it first moves every partition
back to where it was before the call (aiokafka may already have handed out, and so lost, another
partition's records in it), then reads the partitions one record at a time, which hands out
every readable record up to the bad batch and pins the failure on one partition and offset; it
logs one line naming them and why, counts the batch's records in
``citation_exporter_unreadable_messages_total``, seeks past it and tells the caller in
:attr:`Fetcher.skipped_to`, so that a consumer commits past a bad batch even when nothing
follows it. Errors that a retry can fix (the broker is away) are raised as before, for the
caller's backoff.
"""

from __future__ import annotations

import logging
import types
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import (
    CorruptRecordException,
    IllegalStateError,
    KafkaError,
    UnsupportedCodecError,
)

from exporter.kafka.protocols import Consumer
from exporter.outputs.metrics import ExporterMetrics
from exporter.records.limits import bounded

__all__ = ["Fetcher", "assign_from_start", "unreadable_reason"]

log = logging.getLogger(__name__)

# Records read one at a time per partition while isolating a bad batch (per call; the next
# call goes on where this one stopped).
_ISOLATION_STEPS = 500
_ISOLATION_TIMEOUT_MS = 200
# Attempts at one offset before it is given up as unreadable: a checksum can fail in transit.
_ATTEMPTS = 2


def unreadable_reason(exc: BaseException) -> str | None:
    """The counter's ``reason`` when ``exc`` means a message cannot be read, else None."""
    if isinstance(exc, UnsupportedCodecError):
        return "unsupported_codec"
    if isinstance(exc, CorruptRecordException):
        return "corrupt_record"
    if isinstance(exc, KafkaError):
        return None  # the broker, the network, the group: a retry can fix these
    if isinstance(exc, Exception):
        return "undecodable"  # the client's decoder failed on what the broker sent
    return None


def _batch_end(exc: BaseException) -> int | None:
    """The offset after the record batch that failed to decode, when the traceback shows it.

    aiokafka's record iterator holds the batch it was decoding in a local named ``next_batch``,
    whose header (read before decompression) gives the offset after its last record. Without
    it the failure is stepped past one offset at a time, which gets there too, more slowly.
    """
    trace: types.TracebackType | None = exc.__traceback__
    while trace is not None:
        batch = trace.tb_frame.f_locals.get("next_batch")
        end = getattr(batch, "next_offset", None)
        if isinstance(end, int):
            return end
        trace = trace.tb_next
    return None


class Fetcher:
    """``getmany()`` of one consumer, with unreadable batches isolated and stepped past.

    ``prepare`` (lookup mode: fetch what the records cite) runs on every batch before it is
    handed out; when it fails, every partition is moved back to the batch's first record and
    the error raised, so the batch is fetched again and nothing of it is lost or committed.
    What it fetched is kept until the next ``getmany()`` (the batch is checked by then: every
    loop checks what it fetched before it fetches again) or until the fetcher is gone.
    """

    def __init__(
        self,
        consumer: Any,
        metrics: ExporterMetrics,
        prepare: Callable[[list[Any]], Awaitable[Callable[[], None]]] | None = None,
    ) -> None:
        self._consumer = consumer
        self._metrics = metrics
        self._prepare = prepare
        self._release: weakref.finalize[Any, Fetcher] | None = None
        self._failures: dict[tuple[TopicPartition, int], int] = {}
        # the offset after each batch skipped by the last getmany(), by partition
        self.skipped_to: dict[TopicPartition, int] = {}

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[Any]]:
        if self._release is not None:
            self._release()  # the last batch is checked
            self._release = None
        fetched = await self._getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        if self._prepare is not None and fetched:
            try:
                release = await self._prepare(
                    [record for records in fetched.values() for record in records]
                )
                self._release = weakref.finalize(self, release)
            except BaseException:
                assigned = self._consumer.assignment()
                for tp, records in fetched.items():
                    if tp in assigned:
                        self._consumer.seek(tp, records[0].offset)
                raise
        return fetched

    async def _getmany(
        self, *partitions: TopicPartition, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[Any]]:
        self.skipped_to = {}
        wanted = partitions or tuple(self._consumer.assignment())
        before = await self._positions(wanted)
        try:
            fetched: dict[TopicPartition, list[Any]] = await self._consumer.getmany(
                *partitions, timeout_ms=timeout_ms, max_records=max_records
            )
        except Exception as exc:
            if unreadable_reason(exc) is None:
                raise
            assigned = self._consumer.assignment()
            for tp, position in before.items():
                if tp in assigned:
                    self._consumer.seek(tp, position)  # what the failed call handed out, again
            return await self._isolate(tuple(before))
        return fetched

    async def _positions(self, partitions: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        positions = {}
        for tp in partitions:
            try:
                positions[tp] = await self._consumer.position(tp)
            except IllegalStateError:  # revoked meanwhile: its new owner reads it
                continue
        return positions

    async def _isolate(self, partitions: tuple[TopicPartition, ...]) -> dict[TopicPartition, Any]:
        """Read each partition a record at a time: the readable records, the bad batch skipped."""
        fetched: dict[TopicPartition, list[Any]] = {}
        for tp in sorted(partitions):
            records: list[Any] = []
            for _ in range(_ISOLATION_STEPS):
                try:
                    got = await self._consumer.getmany(
                        tp, timeout_ms=_ISOLATION_TIMEOUT_MS, max_records=1
                    )
                except Exception as exc:
                    reason = unreadable_reason(exc)
                    if reason is None:
                        raise
                    await self._give_up_or_retry(tp, exc, reason)
                    continue
                if not got:
                    break
                if len(self._failures) > _ATTEMPTS * 64:
                    self._failures.clear()  # old single failures that were read on retry
                records.extend(got[tp])
            if records:
                fetched[tp] = records
        return fetched

    async def _give_up_or_retry(self, tp: TopicPartition, exc: BaseException, reason: str) -> None:
        offset = await self._consumer.position(tp)
        key = (tp, offset)
        self._failures[key] = self._failures.get(key, 0) + 1
        if self._failures[key] < _ATTEMPTS:
            return  # the position did not move: the next fetch tries this offset again
        del self._failures[key]
        end = _batch_end(exc)
        skip_to = end if end is not None and end > offset else offset + 1
        log.error(
            "cannot read %s partition %d offsets %d to %d (%s: %s); skipped them, counted in "
            "citation_exporter_unreadable_messages_total",
            tp.topic,
            tp.partition,
            offset,
            skip_to - 1,
            type(exc).__name__,
            bounded(str(exc), 300),
        )
        self._metrics.unreadable(tp.topic, reason, skip_to - offset)
        self._consumer.seek(tp, skip_to)
        self.skipped_to[tp] = skip_to


async def assign_from_start(
    consumer: Consumer, topic: str, partitions: set[int]
) -> list[TopicPartition]:
    """Assign ``partitions`` of ``topic`` (no consumer group) and read them from their first
    offset: how every instance reads a topic it must see whole. Returns them, in order."""
    assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    await consumer.seek_to_beginning(*assigned)
    return assigned
