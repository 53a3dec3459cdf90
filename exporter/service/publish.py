"""Verdicts and dead letters onto their topics; delivery is awaited before offsets commit."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer

from exporter.checks.verdict import Verdict
from exporter.outputs.verdicts import verdict_json
from exporter.service.messages import DeadLetter, Origin

__all__ = ["Publisher"]


class Publisher:
    """Sends outputs; ``await delivered(sent)`` raises if any of them failed."""

    def __init__(self, producer: AIOKafkaProducer, verdicts_topic: str, dlq_topic: str) -> None:
        self._producer = producer
        self._verdicts_topic = verdicts_topic
        self._dlq_topic = dlq_topic

    async def verdict(self, verdict: Verdict, origin: Origin, mode: str) -> asyncio.Future[Any]:
        value = verdict_json(
            verdict,
            mode=mode,
            topic=origin.topic,
            partition=origin.partition,
            offset=origin.offset,
        )
        key = (verdict.citation_id or "").encode()
        sent: asyncio.Future[Any] = await self._producer.send(self._verdicts_topic, value, key=key)
        return sent

    async def dead_letter(self, letter: DeadLetter) -> asyncio.Future[Any]:
        headers = [
            ("source_topic", letter.origin.topic.encode()),
            ("source_partition", str(letter.origin.partition).encode()),
            ("source_offset", str(letter.origin.offset).encode()),
            ("reason", letter.reason.encode()),
            ("error", letter.error.encode()[:4096]),
        ]
        if letter.index is not None:
            headers.append(("citation_index", str(letter.index).encode()))
        sent: asyncio.Future[Any] = await self._producer.send(
            self._dlq_topic, letter.value, key=letter.key, headers=headers
        )
        return sent

    @staticmethod
    async def delivered(sent: list[asyncio.Future[Any]]) -> None:
        if sent:
            await asyncio.gather(*sent)
