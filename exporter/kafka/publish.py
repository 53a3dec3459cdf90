"""Verdicts and dead letters onto their topics; delivery is awaited before offsets commit.

A dead letter must never be the thing that stalls the exporter: its value is the offending
message, which may be as large as the broker allows on the source topic but not on the
dead-letter topic. Values above :data:`MAX_DEAD_LETTER_VALUE` are cut to their head (header
``value_truncated`` gives the original size; the whole message stays on its source topic at the
offset the headers name), and a dead letter the broker still refuses as too large is sent again
with only the first kilobyte.

Each dead letter also carries Kafka Connect's error headers (``__connect.errors.*``, as written
by Connect's DeadLetterQueueReporter), so tools made for Connect's dead-letter queues read ours.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable
from typing import Any

from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

from exporter.checks.plugins import CheckResult
from exporter.checks.verdict import Verdict
from exporter.entailment.results import EntailmentAction, Judgement
from exporter.errors import InvalidJson, RecordError
from exporter.kafka.protocols import Producer
from exporter.outputs.verdicts import entailment_json, verdict_json, verdict_key
from exporter.pipeline.outcome import DeadLetter, Origin, Outcome
from exporter.records import decode

__all__ = ["MAX_DEAD_LETTER_VALUE", "Publisher"]

log = logging.getLogger(__name__)

# Well under the broker's default message.max.bytes (1 MB), headers included.
MAX_DEAD_LETTER_VALUE = 512 * 1024
_LAST_RESORT_VALUE = 1024
# Keys are identifiers; a longer one is cut (it is still in the source message).
_MAX_KEY = 4096
# Citation indexes listed in a header (all of them are counted in invalid_citations).
_MAX_INDEXES_LISTED = 100
_TOO_LARGE = (MessageSizeTooLargeError, RecordTooLargeError)
_MAX_ERROR = 1024

# Kafka Connect's Stage of each reason: a record that never became a valid input failed where a
# Connect sink's value converter would have (decoding, the record contract, the size limits);
# a check that raised failed in the task's own work, as SinkTask.put would.
CONNECT_STAGES = {
    "invalid_json": "VALUE_CONVERTER",
    "invalid_record": "VALUE_CONVERTER",
    "oversized": "VALUE_CONVERTER",
    "empty": "VALUE_CONVERTER",
    "check_failed": "TASK_PUT",
}
# Where Connect names the converter or task class, the module that judged the record.
_CONNECT_EXECUTING = {"VALUE_CONVERTER": decode.__name__, "TASK_PUT": "exporter.pipeline"}


def _qualified(error: type[Exception]) -> str:
    return f"{error.__module__}.{error.__qualname__}"


def _connect_headers(letter: DeadLetter, connector: str, task: str) -> list[tuple[str, bytes]]:
    """Kafka Connect's names and formats (DeadLetterQueueReporter.populateContextHeaders), with
    the exception class of a check that raised, or the decoder's InvalidJson or RecordError."""
    stage = CONNECT_STAGES.get(letter.reason, "TASK_PUT")
    if stage == "TASK_PUT":
        exception = letter.exception or "Exception"
    else:
        exception = _qualified(InvalidJson if letter.reason == "invalid_json" else RecordError)
    prefix = "__connect.errors."
    return [
        (prefix + "topic", letter.origin.topic.encode()),
        (prefix + "partition", str(letter.origin.partition).encode()),
        (prefix + "offset", str(letter.origin.offset).encode()),
        (prefix + "connector.name", connector.encode()),
        (prefix + "task.id", task.encode()),
        (prefix + "stage", stage.encode()),
        (prefix + "class.name", _CONNECT_EXECUTING[stage].encode()),
        # a class name is a plug-in's to choose: bounded as the message is
        (prefix + "exception.class.name", exception.encode()[:_MAX_ERROR]),
        (prefix + "exception.message", letter.error.encode()[:_MAX_ERROR]),
    ]


def _headers(letter: DeadLetter, connector: str, task: str) -> list[tuple[str, bytes]]:
    headers = [
        ("source_topic", letter.origin.topic.encode()),
        ("source_partition", str(letter.origin.partition).encode()),
        ("source_offset", str(letter.origin.offset).encode()),
        ("reason", letter.reason.encode()),
        ("error", letter.error.encode()[:_MAX_ERROR]),
    ]
    if letter.invalid_sentences:
        headers.append(("invalid_sentences", b"1"))
    if letter.citations:
        headers.append(("invalid_citations", str(len(letter.citations)).encode()))
        indexes = letter.indexes[:_MAX_INDEXES_LISTED]
        if indexes:
            headers.append(("citation_indexes", ",".join(map(str, indexes)).encode()))
    return headers + _connect_headers(letter, connector, task)


def _where(origin: Origin, mode: str) -> dict[str, Any]:
    """The provenance a published verdict carries: its mode and the message it came from."""
    return {
        "mode": mode,
        "topic": origin.topic,
        "partition": origin.partition,
        "offset": origin.offset,
    }


class Publisher:
    """Sends outputs; ``await delivered(sent)`` raises if any of them failed."""

    def __init__(
        self,
        producer: Producer,
        verdicts_topic: str,
        dlq_topic: str,
        *,
        connector: str = "citation-exporter",
    ) -> None:
        self._producer = producer
        self._verdicts_topic = verdicts_topic
        self._dlq_topic = dlq_topic
        # Connect's connector and task: the exporter's client id and the host (a pod's name),
        # which tells the instances of one consumer group apart
        self._connector = connector
        self._task = socket.gethostname()

    async def verdict(
        self, verdict: Verdict | CheckResult, origin: Origin, mode: str
    ) -> asyncio.Future[Any]:
        """Send one verdict, keyed by its citation (a check's result: as it says)."""
        return await self._send(verdict_json(verdict, **_where(origin, mode)), verdict_key(verdict))

    async def entailment(
        self,
        verdict: Verdict,
        judgement: Judgement,
        action: EntailmentAction,
        origin: Origin,
        mode: str,
    ) -> asyncio.Future[Any]:
        """Send a judged citation (``"check": "entailment"``), keyed by its citation."""
        value = entailment_json(verdict, judgement, action, **_where(origin, mode))
        return await self._send(value, verdict_key(verdict))

    async def _send(self, value: bytes, key: bytes) -> asyncio.Future[Any]:
        sent: asyncio.Future[Any] = await self._producer.send(self._verdicts_topic, value, key=key)
        return sent

    async def dead_letter(self, letter: DeadLetter) -> Awaitable[Any]:
        headers = _headers(letter, self._connector, self._task)
        value = letter.value
        original = letter.truncated_from
        if value is not None and len(value) > MAX_DEAD_LETTER_VALUE:
            original = original or len(value)
            value = value[:MAX_DEAD_LETTER_VALUE]
        if original is not None:
            headers.append(("value_truncated", str(original).encode()))
        key = letter.key[:_MAX_KEY] if letter.key is not None else None
        sent = await self._producer.send(self._dlq_topic, value, key=key, headers=headers)
        return asyncio.ensure_future(self._confirmed(sent, letter, headers))

    async def _confirmed(
        self, sent: asyncio.Future[Any], letter: DeadLetter, headers: list[tuple[str, bytes]]
    ) -> Any:
        """Await the broker; a value it refuses as too large goes again, cut to its head."""
        try:
            return await sent
        except _TOO_LARGE as exc:
            log.warning(
                "dead letter of %s/%d@%d refused as too large (%s); sending its first %d bytes",
                letter.origin.topic,
                letter.origin.partition,
                letter.origin.offset,
                exc,
                _LAST_RESORT_VALUE,
            )
            value = (letter.value or b"")[:_LAST_RESORT_VALUE]
            if not any(name == "value_truncated" for name, _ in headers):
                original = letter.truncated_from or len(letter.value or b"")
                headers = [*headers, ("value_truncated", str(original).encode())]
            key = (letter.key or b"")[:_LAST_RESORT_VALUE]
            again = await self._producer.send(self._dlq_topic, value, key=key, headers=headers)
            return await again

    async def outcome(self, outcome: Outcome) -> list[Awaitable[Any]]:
        """Send the verdicts an outcome publishes and its dead letter; their deliveries."""
        sent: list[Awaitable[Any]] = [
            await self.verdict(verdict, outcome.origin, outcome.mode) for verdict in outcome.publish
        ]
        if outcome.dead_letter is not None:
            sent.append(await self.dead_letter(outcome.dead_letter))
        return sent

    @staticmethod
    async def delivered(sent: list[Awaitable[Any]]) -> None:
        if sent:
            await asyncio.gather(*sent)
