"""A real Kafka broker and a real exporter process for the integration tests.

The broker is ``$CITATION_KAFKA_BOOTSTRAP`` when set, else one started by
``scripts/kafka-local`` (Apache Kafka's own jars from Maven Central). Each test uses topics of
its own, so tests never see each other's messages.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from prometheus_client.parser import text_string_to_metric_families

from exporter.records.chunk_messages import chunk_message

REPO = Path(__file__).resolve().parent.parent
KAFKA_LOCAL = REPO / "scripts" / "kafka-local"


@contextmanager
def kafka_broker() -> Iterator[str]:
    """Yield the bootstrap address of a running broker (started here if need be)."""
    given = os.environ.get("CITATION_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return
    status = subprocess.run([str(KAFKA_LOCAL), "status"], capture_output=True, check=False)
    started_here = status.returncode != 0
    if started_here:
        subprocess.run([str(KAFKA_LOCAL), "start"], check=True, stdout=subprocess.DEVNULL)
    try:
        yield "127.0.0.1:" + os.environ.get("KAFKA_PORT", "19092")
    finally:
        if started_here:
            subprocess.run([str(KAFKA_LOCAL), "stop"], check=False)


@dataclass(frozen=True)
class Topics:
    chunks: str
    answers: str
    verdicts: str
    dlq: str
    control: str
    sweeps: str  # progress of the sweeps the group shares (passed only where a test shares)

    @classmethod
    def fresh(cls) -> Topics:
        tag = uuid.uuid4().hex[:10]
        names = ("chunks", "answers", "verdicts", "dlq", "control", "sweeps")
        return cls(*(f"test-{tag}.{name}" for name in names))

    def env(self) -> dict[str, str]:
        return {
            "CITATION_EXPORTER_CHUNKS_TOPIC": self.chunks,
            "CITATION_EXPORTER_ANSWERS_TOPIC": self.answers,
            "CITATION_EXPORTER_VERDICTS_TOPIC": self.verdicts,
            "CITATION_EXPORTER_DLQ_TOPIC": self.dlq,
            "CITATION_EXPORTER_CONTROL_TOPIC": self.control,
        }


async def _create(bootstrap: str, topics: Topics, answer_partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(topics.chunks, 2, 1, topic_configs={"cleanup.policy": "compact"}),
                NewTopic(topics.answers, answer_partitions, 1),
                NewTopic(topics.verdicts, 2, 1),
                NewTopic(topics.dlq, 1, 1),
                NewTopic(topics.control, 1, 1),
                NewTopic(topics.sweeps, 1, 1, topic_configs={"cleanup.policy": "compact"}),
            ]
        )
    finally:
        await admin.close()


async def _topic_shape(bootstrap: str, topic: str) -> tuple[int, str | None]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": None})
        (response,) = await admin.describe_configs([resource])
        entries = response.resources[0][4]
        policy = next((entry[1] for entry in entries if entry[0] == "cleanup.policy"), None)
        return len(described["partitions"]), policy
    finally:
        await admin.close()


def topic_shape(bootstrap: str, topic: str) -> tuple[int, str | None]:
    """A topic's partition count and cleanup policy, as the broker has them."""
    return asyncio.run(_topic_shape(bootstrap, topic))


async def _create_topic(
    bootstrap: str, topic: str, partitions: int, configs: dict[str, str]
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    finally:
        await admin.close()


def create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    """One more topic (``cleanup_policy="compact"`` for ``cleanup.policy``)."""
    named = {key.replace("_", "."): value for key, value in configs.items()}
    asyncio.run(_create_topic(bootstrap, topic, partitions, named))


def create_topics(bootstrap: str, answer_partitions: int = 2) -> Topics:
    topics = Topics.fresh()
    asyncio.run(_create(bootstrap, topics, answer_partitions))
    return topics


async def _produce(
    bootstrap: str, topic: str, messages: Iterable[tuple[bytes | None, bytes | None]]
) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [await producer.send(topic, value, key=key) for key, value in messages]
        await asyncio.gather(*sent)
        return len(sent)
    finally:
        await producer.stop()


def produce(
    bootstrap: str, topic: str, messages: Iterable[tuple[bytes | None, bytes | None]]
) -> int:
    """Send (key, value) pairs; returns how many."""
    return asyncio.run(_produce(bootstrap, topic, messages))


async def _consume(
    bootstrap: str,
    topic: str,
    count: int,
    seconds: float,
    keep: Callable[[Any], bool] = lambda record: True,
) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + seconds
        while len(records) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for batch in batches.values():
                records.extend(filter(keep, batch))
        # a little longer, to catch more than expected
        for batch in (await consumer.getmany(timeout_ms=1000)).values():
            records.extend(filter(keep, batch))
    finally:
        await consumer.stop()
    return records


def consume(bootstrap: str, topic: str, count: int, seconds: float = 60.0) -> list[Any]:
    """Read a topic from the beginning until ``count`` records (or time) are seen."""
    return asyncio.run(_consume(bootstrap, topic, count, seconds))


def _is_citation_verdict(record: Any) -> bool:
    return "check" not in orjson.loads(record.value)


def consume_citation_verdicts(
    bootstrap: str, topic: str, count: int, seconds: float = 60.0
) -> list[Any]:
    """The citation verdicts of a verdicts topic (its coverage verdicts, keyed by answer, left
    out), read from the beginning until ``count`` (or time) are seen."""
    return asyncio.run(_consume(bootstrap, topic, count, seconds, _is_citation_verdict))


def consume_values(
    bootstrap: str, topic: str, count: int, keep: Callable[[dict[str, Any]], bool], seconds: float
) -> list[dict[str, Any]]:
    """The JSON values of a topic that ``keep`` accepts, read from the beginning until
    ``count`` (or time) are seen."""
    records = asyncio.run(
        _consume(bootstrap, topic, count, seconds, lambda record: keep(orjson.loads(record.value)))
    )
    return [orjson.loads(record.value) for record in records]


async def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in ends.items()}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The high water mark of each partition of ``topic``."""
    return asyncio.run(_end_offsets(bootstrap, topic, partitions))


async def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, by (topic, partition)."""
    return asyncio.run(_committed(bootstrap, group))


def chunk_messages(path: Path) -> list[tuple[bytes | None, bytes | None]]:
    """The live store as keyed messages: upserts, and tombstones for deletions."""
    messages: list[tuple[bytes | None, bytes | None]] = []
    for line in path.read_bytes().splitlines():
        message = chunk_message(line)
        assert message is not None, f"not a chunk record: {line[:80]!r}"
        messages.append(message)
    return messages


def answer_messages(path: Path) -> list[tuple[bytes | None, bytes | None]]:
    return [(None, line) for line in path.read_bytes().splitlines()]


def expected_verdicts(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def unsecured_jwt(subject: str, expires: float) -> str:
    """An unsigned JWT (``alg`` none), which Kafka's development OAUTHBEARER validator takes."""

    def part(claims: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'exp': int(expires)})}."


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, keyed by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    """Sum of a metric's samples whose labels include ``labels``."""
    return sum(
        value
        for (sample, sample_labels), value in samples.items()
        if sample == name and set(labels.items()) <= set(sample_labels)
    )


class ExporterProcess:
    """``citation-exporter run`` as a real process, with its own metrics port."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        log: Path,
        *,
        profile: Path | None = None,
        **settings: str,
    ) -> None:
        self.port = free_port()
        self.topics = topics
        env = {
            **os.environ,
            **topics.env(),
            "CITATION_EXPORTER_BOOTSTRAP_SERVERS": bootstrap,
            "CITATION_EXPORTER_METRICS_HOST": "127.0.0.1",
            "CITATION_EXPORTER_METRICS_PORT": str(self.port),
            "CITATION_EXPORTER_GROUP_ID": f"group-{topics.answers}",
            **{f"CITATION_EXPORTER_{k.upper()}": v for k, v in settings.items()},
        }
        self._log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                *(["-m", "cProfile", "-o", str(profile)] if profile is not None else []),
                "-m",
                "exporter.cli",
                "run",
                "--log-level",
                "INFO",
            ],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"exporter exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/readyz", timeout=2
                ) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise AssertionError("exporter not ready in time")

    def scrape(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return scrape(self.port)

    def readiness(self) -> tuple[int, str]:
        """What /readyz answers: its status and its sentence (0 and "" before it listens)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as ok:
                return ok.status, ok.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return 0, ""

    def wait_for(self, name: str, at_least: float, seconds: float = 60.0, **labels: str) -> float:
        """Poll /metrics until the metric's total reaches ``at_least``; return the total."""
        deadline = time.monotonic() + seconds
        value = 0.0
        while time.monotonic() < deadline:
            value = total(self.scrape(), name, **labels)
            if value >= at_least:
                return value
            time.sleep(0.25)
        raise AssertionError(
            f"{name}{labels} reached only {value}, wanted {at_least}\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        """The exporter's last log lines (from its last 64 KiB: the process writes the file
        itself), what a failed wait needs to be understood."""
        with self._log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 65_536))
            tail = log.read().decode(errors="replace").splitlines()[-lines:]
        return "exporter log, last lines:\n" + "\n".join(tail)

    def stop(self, sig: int = signal.SIGTERM, seconds: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(seconds)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self._log.close()
