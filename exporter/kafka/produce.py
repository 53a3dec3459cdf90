"""Send a simulated scenario to the topics, so anyone can watch the exporter react.

Three phases, in order: the store the answers were written against and the first half of the
answers (the baseline), then the re-index (re-chunked, re-extracted, refreshed and deleted
documents), then the second half of the answers, now checked against the changed store. Answers
are paced at ``rate`` citations per second (0: as fast as the broker takes them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from exporter.config.kafka import KafkaConnection, KafkaTopics
from exporter.kafka.clients import client_options, close
from exporter.records.chunk_messages import chunk_message

__all__ = ["ProducePlan", "create_topics", "produce_scenario"]

log = logging.getLogger(__name__)

Message = tuple[bytes | None, bytes | None]


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def _chunk_message(line: bytes) -> Message:
    """The keyed message of a chunk line (a line that is not one is sent as it is)."""
    return chunk_message(line) or (b"", line)


def _citations_in(line: bytes) -> int:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return 1
    if isinstance(value, dict) and isinstance(value.get("citations"), list):
        return len(value["citations"])
    return 1


@dataclass(frozen=True)
class ProducePlan:
    """What to send, from a directory written by ``citation-exporter simulate``."""

    baseline_chunks: list[Message]
    reindex_chunks: list[Message]
    answers: list[bytes]

    @classmethod
    def from_scenario(cls, directory: Path) -> ProducePlan:
        before = _lines(directory / "chunks.before.jsonl")
        live = _lines(directory / "chunks.jsonl")
        return cls(
            baseline_chunks=[_chunk_message(line) for line in before],
            reindex_chunks=[_chunk_message(line) for line in live[len(before) :]],
            answers=_lines(directory / "citations.jsonl"),
        )


async def create_topics(connection: KafkaConnection, names: KafkaTopics, partitions: int) -> None:
    """Create the exporter's topics (the chunk topic compacted); existing ones are kept."""
    admin = AIOKafkaAdminClient(**client_options(AIOKafkaAdminClient, connection, "admin"))
    try:
        await admin.start()
        topics = [
            NewTopic(names.chunks, partitions, 1, topic_configs={"cleanup.policy": "compact"}),
            NewTopic(names.answers, partitions, 1),
            NewTopic(names.verdicts, partitions, 1),
            NewTopic(names.dlq, 1, 1),
            NewTopic(names.control, 1, 1),
        ]
        for topic in topics:
            try:
                await admin.create_topics([topic])
            except TopicAlreadyExistsError:
                log.info("topic %s exists already", topic.name)
    finally:
        await admin.close()


async def _send(producer: AIOKafkaProducer, topic: str, messages: Iterable[Message]) -> int:
    sent = [await producer.send(topic, value, key=key) for key, value in messages]
    await asyncio.gather(*sent)
    return len(sent)


async def _send_answers(
    producer: AIOKafkaProducer, topic: str, lines: list[bytes], rate: float
) -> int:
    """Send answer lines at about ``rate`` citations per second; returns citations sent."""
    started = time.monotonic()
    citations = 0
    pending = []
    for line in lines:
        pending.append(await producer.send(topic, line))
        citations += _citations_in(line)
        if rate > 0:
            ahead = citations / rate - (time.monotonic() - started)
            if ahead > 0.05:
                await asyncio.sleep(ahead)
    await asyncio.gather(*pending)
    return citations


async def produce_scenario(
    connection: KafkaConnection,
    names: KafkaTopics,
    plan: ProducePlan,
    *,
    rate: float,
    sweep_after: bool,
) -> dict[str, int]:
    """Send the three phases; returns counts of what was sent."""
    producer = AIOKafkaProducer(
        **client_options(AIOKafkaProducer, connection, "produce"), acks="all", linger_ms=10
    )
    half = len(plan.answers) // 2
    try:
        await producer.start()
        counts = {"baseline_chunks": await _send(producer, names.chunks, plan.baseline_chunks)}
        log.info(
            "baseline: %d chunks sent; sending the first half of the answers",
            counts["baseline_chunks"],
        )
        counts["baseline_citations"] = await _send_answers(
            producer, names.answers, plan.answers[:half], rate
        )
        counts["reindex_chunks"] = await _send(producer, names.chunks, plan.reindex_chunks)
        log.info(
            "re-index: %d chunk records sent; sending the rest of the answers",
            counts["reindex_chunks"],
        )
        counts["after_citations"] = await _send_answers(
            producer, names.answers, plan.answers[half:], rate
        )
        if sweep_after:
            await _send(
                producer,
                names.control,
                [(None, b'{"type": "sweep", "reason": "citation-exporter produce"}')],
            )
        return counts
    finally:
        await close(producer)
