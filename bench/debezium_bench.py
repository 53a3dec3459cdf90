"""Benchmark: how soon a change in Postgres reaches the exporter's checks through Debezium.

Prints figures; asserts nothing.

    python bench/debezium_bench.py [--changes 50]

Starts PostgreSQL (scripts/postgres-local), a broker (scripts/kafka-local, or the one named by
$CITATION_KAFKA_BOOTSTRAP), Debezium's connector in Kafka Connect (scripts/debezium-local,
configured as docs/postgres.md says) and ``citation-exporter run`` on the connector's topic.
Then, one at a time, it updates a chunk's text in Postgres and measures the time from the
commit to (1) the exporter having applied the change (its ``citation_exporter_events_total``
of the chunk topic counts it; scraped every 10 ms) and (2) the verdict of an answer produced
right after the commit showing the change (its citation ``drift_repaired`` at the new shift):
change to verdict. Median, 90th percentile and maximum of each.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("PG_STATE", "/tmp/citation-drift-exporter-postgres-bench")
os.environ.setdefault("PG_PORT", "15460")

from kafka_support import (  # noqa: E402
    ExporterProcess,
    Topics,
    consume,
    create_topics,
    free_port,
    kafka_broker,
    produce,
    total,
)
from postgres_support import fresh_database, postgres_server  # noqa: E402
from test_debezium import DEBEZIUM_LOCAL, _connector_properties  # noqa: E402

TEXT = "Refunds are issued within 30 days of purchase."


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"median {statistics.median(ordered) * 1000:6.0f} ms, p90 {p90 * 1000:6.0f} ms, "
        f"max {ordered[-1] * 1000:6.0f} ms"
    )


def _verdict_shift(bootstrap: str, topic: str, answer_id: str, seconds: float) -> int | None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def wait() -> int | None:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=50)).values():
                    for record in batch:
                        verdict = orjson.loads(record.value)
                        if verdict.get("answer_id") == answer_id:
                            repair = verdict.get("repair") or {}
                            return int(repair.get("shift") or 0)
            return None
        finally:
            await consumer.stop()

    return asyncio.run(wait())


def _answer(number: int) -> tuple[bytes, bytes]:
    citation = {
        "citation_id": f"c{number}", "doc_id": "r", "doc_version": "v1", "chunk_id": "r#0",
        "chunk_span": [0, len(TEXT)], "quote": TEXT,
    }  # fmt: skip
    answer_id = f"a{number}"
    return answer_id.encode(), orjson.dumps({"answer_id": answer_id, "citations": [citation]})


def _one_change(
    bootstrap: str, uri: str, exporter: ExporterProcess, topics: Topics, number: int
) -> tuple[float, float]:
    """Seconds from one update's commit to its being applied, and to a verdict showing it."""
    changes = topics.chunks
    seen = total(exporter.scrape(), "citation_exporter_events_total", topic=changes)
    prefix = "#" * (number % 7 + 1) + " "
    with psycopg.connect(uri, autocommit=True) as connection:
        committed = time.perf_counter()
        connection.execute("UPDATE chunks SET text = %s WHERE chunk_id = 'r#0'", (prefix + TEXT,))
    while total(exporter.scrape(), "citation_exporter_events_total", topic=changes) <= seen:
        if time.perf_counter() - committed > 30:
            raise SystemExit("a change did not arrive in 30 s")
        time.sleep(0.01)
    applied = time.perf_counter() - committed
    produce(bootstrap, topics.answers, [_answer(number)])
    shift = _verdict_shift(bootstrap, topics.verdicts, f"a{number}", 30.0)
    if shift != len(prefix):
        raise SystemExit(f"verdict a{number}: shift {shift}, expected {len(prefix)}")
    return applied, time.perf_counter() - committed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=50)
    args = parser.parse_args()
    with (
        kafka_broker() as bootstrap,
        postgres_server() as server,
        fresh_database(server) as uri,
        tempfile.TemporaryDirectory() as folder,
    ):
        with psycopg.connect(uri) as connection:
            connection.execute(
                "CREATE TABLE chunks (chunk_id text PRIMARY KEY, doc_id text, doc_version text, "
                "text text, doc_offset integer, chunker text)"
            )
            connection.execute("INSERT INTO chunks VALUES ('r#0', 'r', 'v1', %s, 0, 's')", (TEXT,))
        tag = uuid.uuid4().hex[:10]
        env = {**os.environ, "DEBEZIUM_STATE": f"{folder}/debezium", "KAFKA_BOOTSTRAP": bootstrap,
               "CONNECT_PORT": str(free_port())}  # fmt: skip
        properties = _connector_properties(Path(folder) / "connector.properties", uri, tag)
        subprocess.run([str(DEBEZIUM_LOCAL), "start", str(properties)], env=env, check=True)
        changes = f"cdc{tag}.public.chunks"
        exporter = None
        try:
            consume(bootstrap, changes, 1, 60.0)
            topics = dataclasses.replace(create_topics(bootstrap), chunks=changes)
            exporter = ExporterProcess(bootstrap, topics, Path(folder) / "exporter.log",
                                       publish_all_verdicts="true")  # fmt: skip
            exporter.wait_ready()
            applied_after: list[float] = []
            verdict_after: list[float] = []
            for number in range(1, args.changes + 1):
                applied, verdict = _one_change(bootstrap, uri, exporter, topics, number)
                applied_after.append(applied)
                verdict_after.append(verdict)
            print(f"{args.changes} updates in Postgres, one at a time:")
            print(f"  commit -> applied by the exporter: {_percentiles(applied_after)}")
            print(f"  commit -> verdict showing it:      {_percentiles(verdict_after)}")
        finally:
            if exporter is not None:
                exporter.stop()
            subprocess.run([str(DEBEZIUM_LOCAL), "stop"], env=env, check=False)
            with psycopg.connect(uri, autocommit=True) as connection:
                connection.execute("SELECT pg_drop_replication_slot(%s)", (f"slot_{tag}",))


if __name__ == "__main__":
    main()
