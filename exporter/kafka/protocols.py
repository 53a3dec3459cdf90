"""The shape of what the exporter calls on aiokafka's consumer and producer.

The loops are written against these protocols, not against aiokafka's classes, so that the
in-memory broker in ``tests/fake_kafka.py`` can stand in for a real one: rewinds after a failed
delivery, commits on a revoke, a sweep's end offsets and readiness get fast unit tests, and the
real-broker tests stay the outer ring. aiokafka's ``AIOKafkaConsumer`` and ``AIOKafkaProducer``
satisfy them as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from aiokafka import ConsumerRebalanceListener, TopicPartition

from exporter.pipeline.core import Record

__all__ = ["Consumer", "Producer", "Record"]


class Consumer(Protocol):
    """An ``AIOKafkaConsumer``: assignment, fetching, positions and commits."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def subscribe(
        self, topics: Sequence[str], *, listener: ConsumerRebalanceListener | None = None
    ) -> None: ...
    def assign(self, partitions: Collection[TopicPartition]) -> None: ...
    def assignment(self) -> set[TopicPartition]: ...
    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]: ...
    async def position(self, partition: TopicPartition) -> int: ...
    def seek(self, partition: TopicPartition, offset: int) -> None: ...
    async def seek_to_beginning(self, *partitions: TopicPartition) -> bool: ...
    async def beginning_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]: ...
    async def end_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]: ...
    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None: ...
    def highwater(self, partition: TopicPartition) -> int | None: ...


class Producer(Protocol):
    """An ``AIOKafkaProducer``: sends return a future that resolves once the broker has it."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[Any]: ...
    async def partitions_for(self, topic: str) -> set[int]: ...
