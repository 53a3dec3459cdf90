"""Messages written by Kafka's own console producer, with every codec, and a batch corrupted on
the broker's disk: the exporter reads every message a standard producer can write, and names,
counts and commits past a batch no retry can read.

The console producer runs from the broker's jars (``scripts/kafka-local fetch``); the corrupted
batch is edited in the broker's data directory, so that test needs the broker started here.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import CorruptRecordException
from kafka_support import (
    ExporterProcess,
    Topics,
    answer_messages,
    chunk_messages,
    committed,
    consume,
    consume_citation_verdicts,
    create_topics,
    end_offsets,
    expected_verdicts,
    produce,
    total,
)

from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.kafka

# where scripts/kafka-local keeps the jars and the broker's data (same defaults as the script)
KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "3.9.1")
KAFKA_LIB = (
    Path(
        os.environ.get("KAFKA_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "citation-drift-exporter"
        / f"kafka-{KAFKA_VERSION}"
    )
    / "lib"
)
KAFKA_DATA = Path(os.environ.get("KAFKA_STATE", "/tmp/citation-drift-exporter-kafka")) / "data"

NULL = "<null>"  # the console producer's null.marker: a null value (a tombstone) or no headers
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@dataclass(frozen=True)
class KafkaTools:
    """The broker's own command-line tools, run from its jars."""

    lib: Path
    log4j: Path

    def console_produce(
        self,
        bootstrap: str,
        topic: str,
        lines: Sequence[str],
        *,
        codec: str,
        keyed: bool = False,
        headers: bool = False,
        seconds: float = 60.0,
    ) -> None:
        """Send one message per line with ``kafka.tools.ConsoleProducer``.

        Lines are ``[headers\\t][key\\t]value`` as the flags say; ``NULL`` stands for a null
        value or for no headers. The producer lingers, so the lines go in a few large batches.
        """
        command = [
            "java",
            f"-Dlog4j.configuration=file:{self.log4j}",
            "-cp",
            f"{self.lib}/*",
            "kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--compression-codec",
            codec,
            "--property",
            f"null.marker={NULL}",
            "--property",
            f"parse.key={str(keyed).lower()}",
            "--property",
            f"parse.headers={str(headers).lower()}",
            "--producer-property",
            "linger.ms=1000",
            "--producer-property",
            "batch.size=524288",
            "--producer-property",
            "acks=all",
        ]
        done = subprocess.run(
            command,
            input="".join(line + "\n" for line in lines),
            capture_output=True,
            text=True,
            timeout=seconds,
            check=False,
        )
        # the console producer logs failed sends and still exits 0: callers count the records
        assert done.returncode == 0 and "ERROR" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def kafka_tools(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH to run Kafka's console producer")
    if not any(KAFKA_LIB.glob("kafka_2.13-*.jar")):
        where = os.environ.get("CITATION_KAFKA_BOOTSTRAP", "a broker started elsewhere")
        pytest.skip(
            f"Kafka's console producer runs from the broker's jars, not in {KAFKA_LIB} "
            f"(external broker: {where}); run scripts/kafka-local fetch"
        )
    log4j = tmp_path_factory.mktemp("kafka-tools") / "log4j.properties"
    log4j.write_text(LOG4J)
    return KafkaTools(KAFKA_LIB, log4j)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # a few hundred chunk records (deletions among them) and answer messages, every status
    config = ScenarioConfig(seed=29, answers=300, documents=50)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("producer-scenario"))


# ---------------------------------------------------------------------------------------------
# the broker's side: offsets, committed offsets, and record batches as they lie on its disk


async def _read_until_error(bootstrap: str, topic: str, seconds: float) -> tuple[int, Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    read = 0
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                batches = await consumer.getmany(timeout_ms=500)
            except Exception as exc:
                return read, exc
            read += sum(len(records) for records in batches.values())
        return read, None
    finally:
        await consumer.stop()


def read_until_error(bootstrap: str, topic: str, seconds: float = 10.0) -> tuple[int, Any]:
    """What a stock aiokafka consumer makes of a topic: records read, and the error it hit."""
    return asyncio.run(_read_until_error(bootstrap, topic, seconds))


@dataclass(frozen=True)
class DiskBatch:
    """The header of one v2 record batch in a segment file."""

    file: Path
    position: int  # of the batch in the file
    size: int  # bytes on disk, header included
    base_offset: int
    last_offset: int
    count: int
    codec: str

    @property
    def records_start(self) -> int:
        return self.position + 61  # after the fixed v2 batch header


def disk_batches(topic: str, partition: int) -> list[DiskBatch]:
    """Every record batch of a partition as the broker stored it (v2 headers, parsed here)."""
    batches: list[DiskBatch] = []
    for segment in sorted((KAFKA_DATA / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            magic = data[position + 16]
            assert magic == 2, f"{segment}: batch at {position} has magic {magic}"
            (attributes, last_delta) = struct.unpack_from(">hi", data, position + 21)
            (count,) = struct.unpack_from(">i", data, position + 57)
            size = 12 + length
            if position + size > len(data):
                break  # a batch still being written
            batches.append(
                DiskBatch(
                    segment,
                    position,
                    size,
                    base_offset,
                    base_offset + last_delta,
                    count,
                    CODECS[attributes & 0x07],
                )
            )
            position += size
    return batches


def corrupt(batch: DiskBatch) -> None:
    """Flip bytes inside a batch's records, in place: its CRC32C check fails, its framing holds."""
    middle = batch.records_start + (batch.size - 61) // 2
    with open(batch.file, "r+b") as segment:
        segment.seek(middle)
        original = segment.read(8)
        segment.seek(middle)
        segment.write(bytes(b ^ 0x5A for b in original))


# ---------------------------------------------------------------------------------------------
# the scenario as console-producer lines, and the counters its expected verdicts give


def chunk_lines(path: Path) -> list[str]:
    """``chunk_id\\tvalue`` per chunk record; a deletion as a tombstone (a null value)."""
    return [
        f"{key.decode()}\t{NULL if value is None else value.decode()}"
        for key, value in chunk_messages(path)
    ]


def answer_lines(path: Path) -> list[str]:
    """``headers\\tvalue`` per answer message (no key); every other one with headers."""
    return [
        (f"trace:{i:08x},producer:console" if i % 2 else NULL) + "\t" + value.decode()
        for i, (_, value) in enumerate(answer_messages(path))
        if value is not None
    ]


def citation_ids(value: bytes) -> list[str]:
    """The citation ids one answer message (an answer event or a citation record) carries."""
    message = orjson.loads(value)
    if "citations" in message:
        return [citation["citation_id"] for citation in message["citations"]]
    return [message["citation_id"]]


def assert_inline_counters(samples: dict[Any, float], statuses: Counter[str]) -> None:
    def inline(name: str, **labels: str) -> float:
        return total(samples, name, mode="inline", **labels)

    assert inline("citation_checks_total") == statuses.total()
    assert inline("citation_drift_failures_total", outcome="repaired") == statuses["drift_repaired"]
    assert (
        inline("citation_drift_failures_total", outcome="unrepaired")
        == statuses["drift_unrepaired"]
    )
    assert inline("citation_superseded_failures_total") == statuses["superseded"]
    assert inline("citation_document_missing_total") == statuses["document_missing"]
    assert total(samples, "citation_checks_total", mode="sweep") == 0


@pytest.fixture
def exporter_log(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "exporter.log"
    yield log
    if log.exists():  # shown by pytest when the test failed
        print(log.read_text(errors="replace")[-6000:])


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_console_producer_batches_of_every_codec_are_all_read_and_checked(
    bootstrap: str,
    kafka_tools: KafkaTools,
    scenario: dict[str, Path],
    exporter_log: Path,
    codec: str,
) -> None:
    topics: Topics = create_topics(bootstrap)
    chunks = chunk_lines(scenario["chunks"])
    answers = answer_lines(scenario["citations"])
    kafka_tools.console_produce(bootstrap, topics.chunks, chunks, codec=codec, keyed=True)
    kafka_tools.console_produce(bootstrap, topics.answers, answers, codec=codec, headers=True)
    assert sum(end_offsets(bootstrap, topics.chunks, 2).values()) == len(chunks)
    assert sum(end_offsets(bootstrap, topics.answers, 2).values()) == len(answers)

    # what was written: null keys, headers on every other answer, tombstones, large batches
    written = consume(bootstrap, topics.answers, len(answers), seconds=30)
    assert len(written) == len(answers)
    assert all(record.key is None for record in written)
    with_headers = [record for record in written if record.headers]
    assert len(with_headers) == len(answers) // 2
    assert all(dict(record.headers)["producer"] == b"console" for record in with_headers)
    stored = consume(bootstrap, topics.chunks, len(chunks), seconds=30)
    tombstones = sum(1 for line in chunks if line.endswith(f"\t{NULL}"))
    assert tombstones > 0 and sum(1 for record in stored if record.value is None) == tombstones
    if (KAFKA_DATA / f"{topics.answers}-0").is_dir():  # the broker's disk is here
        for topic in (topics.answers, topics.chunks):
            batches = [b for p in range(2) for b in disk_batches(topic, p)]
            assert {b.codec for b in batches} == {codec}, batches
            assert max(b.count for b in batches) >= 100, [b.count for b in batches]

    expected = expected_verdicts(scenario["expected"])
    statuses = Counter(e["status"] for e in expected)
    exporter = ExporterProcess(bootstrap, topics, exporter_log)
    try:
        exporter.wait_ready(seconds=30)
        exporter.wait_for(
            "citation_exporter_events_total", len(answers), seconds=30, topic=topics.answers
        )
        exporter.wait_for("citation_checks_total", len(expected), seconds=30, mode="inline")
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0

    assert total(samples, "citation_exporter_events_total", topic=topics.answers) == len(answers)
    assert total(samples, "citation_exporter_events_total", topic=topics.chunks) == len(chunks)
    assert_inline_counters(samples, statuses)
    assert total(samples, "citation_exporter_unreadable_messages_total") == 0
    assert total(samples, "citation_exporter_invalid_events_total") == 0
    assert total(samples, "citation_exporter_ready") == 1


def test_a_batch_corrupted_on_the_brokers_disk_is_named_counted_and_committed_past(
    bootstrap: str,
    kafka_tools: KafkaTools,
    scenario: dict[str, Path],
    exporter_log: Path,
) -> None:
    if os.environ.get("CITATION_KAFKA_BOOTSTRAP"):
        pytest.skip("an external broker: its data directory is not on this machine")
    topics = create_topics(bootstrap, answer_partitions=1)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    messages = [value for _, value in answer_messages(scenario["citations"]) if value]
    before, bad, after = messages[:120], messages[120:180], messages[180:]
    produce(bootstrap, topics.answers, [(None, value) for value in before])
    kafka_tools.console_produce(
        bootstrap,
        topics.answers,
        [f"{NULL}\t{value.decode()}" for value in bad],
        codec="gzip",
        headers=True,
    )
    produce(bootstrap, topics.answers, [(None, value) for value in after])
    assert end_offsets(bootstrap, topics.answers, 1) == {0: len(messages)}

    if not (KAFKA_DATA / f"{topics.answers}-0").is_dir():
        pytest.skip(f"the broker's data directory is not {KAFKA_DATA} (set KAFKA_STATE)")
    [target] = [b for b in disk_batches(topics.answers, 0) if b.base_offset == len(before)]
    assert (target.count, target.last_offset, target.codec) == (
        len(bad),
        len(before) + len(bad) - 1,
        "gzip",
    ), "the console producer was to write the middle messages as one batch"
    corrupt(target)
    # the broker serves the file as it is: a stock consumer reads up to the batch and stops there
    read, error = read_until_error(bootstrap, topics.answers)
    assert isinstance(error, CorruptRecordException), (read, error)
    assert read <= len(before)

    expected = {e["citation_id"]: e["status"] for e in expected_verdicts(scenario["expected"])}
    readable = [cid for value in before + after for cid in citation_ids(value)]
    statuses = Counter(expected[cid] for cid in readable)
    exporter = ExporterProcess(bootstrap, topics, exporter_log, publish_all_verdicts="true")
    try:
        exporter.wait_ready(seconds=30)
        exporter.wait_for(
            "citation_exporter_events_total",
            len(before) + len(after),
            seconds=30,
            topic=topics.answers,
        )
        exporter.wait_for("citation_checks_total", len(readable), seconds=30, mode="inline")
        exporter.wait_for(
            "citation_exporter_unreadable_messages_total", 1, seconds=30, topic=topics.answers
        )
        time.sleep(2)  # anything still to come: a second skip, a re-read, a crash
        assert exporter.process.poll() is None, "the exporter exited"
        exporter.wait_ready(seconds=5)
        samples = exporter.scrape()
    finally:
        assert exporter.stop() == 0

    answers_read = total(samples, "citation_exporter_events_total", topic=topics.answers)
    assert answers_read == len(before) + len(after)
    assert_inline_counters(samples, statuses)
    unreadable = {
        dict(labels)["reason"]: value
        for (name, labels), value in samples.items()
        if name == "citation_exporter_unreadable_messages_total"
        and dict(labels)["topic"] == topics.answers
        and value
    }
    assert unreadable == {"corrupt_record": len(bad)}
    assert total(samples, "citation_exporter_unreadable_messages_total", topic=topics.chunks) == 0

    named = [
        line
        for line in exporter_log.read_text().splitlines()
        if f"cannot read {topics.answers} partition 0" in line
    ]
    first, last = len(before), len(before) + len(bad) - 1
    assert len(named) == 1, [*named[:5], f"... {len(named)} lines"]
    assert f"offsets {first} to {last} (CorruptRecordException" in named[0], named[0]

    # every readable citation checked exactly once, none of the bad batch's
    verdicts = consume_citation_verdicts(bootstrap, topics.verdicts, len(readable), seconds=30)
    assert Counter(record.key.decode() for record in verdicts) == Counter(readable)
    assert all(not first <= orjson.loads(record.value)["offset"] <= last for record in verdicts)

    group = f"group-{topics.answers}"
    assert committed(bootstrap, group) == {(topics.answers, 0): len(messages)}


async def _produce_one_batch(
    bootstrap: str, topic: str, partition: int, messages: Sequence[tuple[bytes | None, bytes]]
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type="gzip",
        linger_ms=500,
        max_batch_size=4 * 1024 * 1024,
        max_request_size=8 * 1024 * 1024,
    )
    await producer.start()
    try:
        sent = [
            await producer.send(topic, value, key=key, partition=partition)
            for key, value in messages
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def produce_one_batch(
    bootstrap: str, topic: str, partition: int, messages: Sequence[tuple[bytes | None, bytes]]
) -> DiskBatch:
    """Send ``messages`` to one partition as a single gzip batch; returns that batch on disk."""
    asyncio.run(_produce_one_batch(bootstrap, topic, partition, messages))
    [batch] = [
        b for b in disk_batches(topic, partition) if b.count == len(messages) and b.codec == "gzip"
    ]
    return batch


def _needs_local_disk(topic: str) -> None:
    if os.environ.get("CITATION_KAFKA_BOOTSTRAP"):
        pytest.skip("an external broker: its data directory is not on this machine")
    if not (KAFKA_DATA / f"{topic}-0").is_dir():
        pytest.skip(f"the broker's data directory is not {KAFKA_DATA} (set KAFKA_STATE)")


def test_a_bad_batch_at_the_end_of_a_partition_is_committed_past(
    bootstrap: str, scenario: dict[str, Path], exporter_log: Path
) -> None:
    """Nothing after the bad batch to check: its offsets must still be committed, or every
    restart reads, logs and counts it again (and the group's lag never drains)."""
    topics = create_topics(bootstrap, answer_partitions=1)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    messages = [value for _, value in answer_messages(scenario["citations"]) if value]
    before, bad = messages[:100], messages[100:140]
    produce(bootstrap, topics.answers, [(None, value) for value in before])
    _needs_local_disk(topics.answers)
    corrupt(produce_one_batch(bootstrap, topics.answers, 0, [(None, v) for v in bad]))

    exporter = ExporterProcess(bootstrap, topics, exporter_log)
    try:
        exporter.wait_ready(seconds=30)
        exporter.wait_for("citation_exporter_unreadable_messages_total", len(bad), seconds=30)
        exporter.wait_for(
            "citation_exporter_events_total", len(before), seconds=30, topic=topics.answers
        )
    finally:
        assert exporter.stop() == 0
    group = f"group-{topics.answers}"
    assert committed(bootstrap, group) == {(topics.answers, 0): len(before) + len(bad)}

    successor = ExporterProcess(bootstrap, topics, exporter_log)
    try:
        successor.wait_ready(seconds=30)
        time.sleep(3)
        samples = successor.scrape()
    finally:
        assert successor.stop() == 0
    assert total(samples, "citation_exporter_unreadable_messages_total") == 0, "not read again"


def test_a_bad_chunk_batch_costs_its_own_records_only(bootstrap: str, exporter_log: Path) -> None:
    """With two chunk partitions, aiokafka hands out one partition's records and then raises on
    the other's bad batch in the same call: the records it handed out must not be lost."""
    topics = create_topics(bootstrap)

    def chunk(n: int) -> tuple[bytes, bytes]:
        record = {"doc_id": f"doc-{n}", "doc_version": "v1", "chunk_id": f"doc-{n}#0",
                  "text": f"Chunk number {n} of the store."}  # fmt: skip
        return record["chunk_id"].encode(), orjson.dumps(record)

    async def to_partition(partition: int, numbers: range) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for n in numbers:
                key, value = chunk(n)
                await producer.send_and_wait(topics.chunks, value, key=key, partition=partition)
        finally:
            await producer.stop()

    asyncio.run(to_partition(1, range(0, 150)))
    asyncio.run(to_partition(0, range(150, 200)))
    _needs_local_disk(topics.chunks)
    corrupt(produce_one_batch(bootstrap, topics.chunks, 0, [chunk(n) for n in range(200, 230)]))
    asyncio.run(to_partition(0, range(230, 260)))

    for _ in range(3):  # aiokafka's order of partitions in one fetch varies from run to run
        exporter = ExporterProcess(bootstrap, topics, exporter_log)
        try:
            exporter.wait_ready(seconds=30)
            samples = exporter.scrape()
        finally:
            assert exporter.stop() == 0
        assert total(samples, "citation_store_chunks") == 230
        unreadable = total(samples, "citation_exporter_unreadable_messages_total")
        assert unreadable == 30
