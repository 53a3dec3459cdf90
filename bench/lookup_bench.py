"""Benchmark: inline checks against a mirror of the store and in lookup mode, same traffic.

Prints figures; asserts nothing.

    python bench/lookup_bench.py [--answers 20000] [--documents 40000] [--rate 500]

One simulated store (a day without a re-index: few citations failing) is written to LangChain
PGVector's tables in Postgres and to a compacted chunk topic; the same answer messages go to a
fresh answer topic for each mode. Each mode runs ``citation-exporter run`` as a process of its
own, twice:

- **throughput**: the whole backlog of answers, from ready (the mirror loaded from the chunk
  topic; the database answering) to the last citation checked: messages and citations a
  second, and the process's peak RSS (VmHWM) and RSS at the end;
- **latency**: answers produced at ``--rate`` messages a second for ``--seconds``, every
  verdict published (``publish_all_verdicts``): the time from an answer's record timestamp to
  its verdicts' (both stamped by their producers on this host), p50 and p99 over every
  citation.

Uses the broker named by $CITATION_KAFKA_BOOTSTRAP (or starts scripts/kafka-local) and the
server named by $CITATION_POSTGRES_URI (or starts scripts/postgres-local in a directory of its
own: PG_STATE, PG_PORT).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import psycopg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("PG_STATE", "/tmp/citation-drift-exporter-postgres-bench")
os.environ.setdefault("PG_PORT", "15460")

from kafka_support import (  # noqa: E402
    ExporterProcess,
    Topics,
    answer_messages,
    chunk_messages,
    create_topics,
    kafka_broker,
    produce,
    total,
)
from postgres_support import (  # noqa: E402
    LANGCHAIN_DDL,
    chunk_records,
    fresh_database,
    postgres_server,
)

# a day without a re-index (as bench/stream_bench.py --steady)
STEADY = (
    "--resize-share=0.005",
    "--retypeset-share=0.01",
    "--refresh-share=0.01",
    "--silent-edit-share=0.005",
    "--delete-share=0.002",
)


def _fill(uri: str, rows: list[dict[str, Any]]) -> None:
    """LangChain's tables holding ``rows`` (COPY: a million rows in seconds)."""
    with psycopg.connect(uri) as connection:
        connection.execute(LANGCHAIN_DDL)
        collection = uuid.uuid4()
        connection.execute(
            "INSERT INTO langchain_pg_collection (uuid, name) VALUES (%s, 'langchain')",
            (collection,),
        )
        statement = (
            "COPY langchain_pg_embedding (id, collection_id, document, cmetadata) FROM STDIN"
        )
        with connection.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                metadata = {"source": row["doc_id"], "doc_version": row["doc_version"]}
                if row.get("doc_offset") is not None:
                    metadata["start_index"] = row["doc_offset"]
                copy.write_row((row["chunk_id"], collection, row["text"], json.dumps(metadata)))
    with psycopg.connect(uri, autocommit=True) as connection:
        # what autovacuum does after a bulk load: GIN's pending list merged into the index
        # (until then every probe reads the whole list) and the planner's statistics
        connection.execute("VACUUM ANALYZE langchain_pg_embedding")


def _peak_rss(pid: int) -> tuple[int, int]:
    """(VmHWM, VmRSS) of a running process, in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            values[name] = int(rest.split()[0]) * 1024
    return values["VmHWM"], values["VmRSS"]


def _until(exporter: ExporterProcess, at_least: float, seconds: float = 900) -> float:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if total(exporter.scrape(), "citation_checks_total", mode="inline") >= at_least:
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"citation_checks_total did not reach {at_least} in {seconds:.0f} s")


def _mode_settings(mode: str, database: str, cache_bytes: int) -> dict[str, str]:
    if mode == "mirror":
        return {}
    return {
        "chunk_lookup": database,
        "chunks_layout": "langchain",
        "chunk_lookup_cache_bytes": str(cache_bytes),
    }


def _throughput(
    bootstrap: str,
    *,
    settings: dict[str, str],
    chunks: list[tuple[bytes | None, bytes | None]],
    answers: list[tuple[bytes | None, bytes | None]],
    citations: int,
    log: Path,
) -> dict[str, float]:
    topics = create_topics(bootstrap, answer_partitions=4)
    produce(bootstrap, topics.chunks, chunks)
    produce(bootstrap, topics.answers, answers)
    exporter = ExporterProcess(bootstrap, topics, log, coverage="false", **settings)
    try:
        exporter.wait_ready(300)
        ready = time.monotonic()
        done = _until(exporter, citations)
        peak, now = _peak_rss(exporter.process.pid)
        samples = exporter.scrape()
    finally:
        exporter.stop()
    seconds = done - ready
    return {
        "seconds": seconds,
        "messages_per_second": len(answers) / seconds,
        "citations_per_second": citations / seconds,
        "peak_rss": peak,
        "rss": now,
        "lookups": total(samples, "citation_lookups_total"),
    }


async def _paced(
    bootstrap: str, topics: Topics, answers: list[bytes], rate: float, seconds: float
) -> tuple[dict[str, int], int]:
    """Produce ``answers`` at ``rate`` a second for ``seconds``, then read every verdict: the
    produce timestamp of each citation, and how many verdicts were expected."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1)
    await producer.start()
    sent_at: dict[str, int] = {}
    try:
        count = min(len(answers), int(rate * seconds))
        started = time.monotonic()
        pending = []
        for number, value in enumerate(answers[:count]):
            due = started + number / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            stamp = int(time.time() * 1000)
            pending.append(await producer.send(topics.answers, value, timestamp_ms=stamp))
            for citation in orjson.loads(value).get("citations", []):
                sent_at[citation["citation_id"]] = stamp
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent_at, len(sent_at)


async def _verdict_times(
    bootstrap: str, topic: str, wanted: set[str], seconds: float
) -> dict[str, int]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    seen: dict[str, int] = {}
    try:
        deadline = time.monotonic() + seconds
        while not wanted <= seen.keys() and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    value = orjson.loads(record.value)
                    if "citation_id" in value:
                        seen.setdefault(value["citation_id"], record.timestamp)
    finally:
        await consumer.stop()
    return seen


def _latency(
    bootstrap: str,
    *,
    settings: dict[str, str],
    chunks: list[tuple[bytes | None, bytes | None]],
    answers: list[bytes],
    rate: float,
    seconds: float,
    log: Path,
) -> dict[str, float]:
    topics = create_topics(bootstrap, answer_partitions=4)
    produce(bootstrap, topics.chunks, chunks)
    exporter = ExporterProcess(
        bootstrap, topics, log, coverage="false", publish_all_verdicts="true", **settings
    )
    try:
        exporter.wait_ready(300)
        sent_at, expected = asyncio.run(_paced(bootstrap, topics, answers, rate, seconds))
        verdict_at = asyncio.run(_verdict_times(bootstrap, topics.verdicts, set(sent_at), 120))
    finally:
        exporter.stop()
    latencies = sorted(verdict_at[cid] - sent_at[cid] for cid in sent_at if cid in verdict_at)
    if not latencies:
        raise SystemExit("no verdict arrived")

    def quantile(q: float) -> float:
        return float(latencies[min(len(latencies) - 1, int(q * len(latencies)))])

    return {
        "citations": len(latencies),
        "missing": expected - len(latencies),
        "p50_ms": quantile(0.5),
        "p99_ms": quantile(0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20000)
    parser.add_argument("--documents", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--rate", type=float, default=500.0, help="messages a second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--cache-bytes", type=int, default=64 * 1024 * 1024, help="lookup mode's cache bound"
    )
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as workdir,
        kafka_broker() as bootstrap,
        postgres_server() as server,
        fresh_database(server) as database,
    ):
        scenario = Path(workdir) / "scenario"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter.cli",
                "simulate",
                "--out",
                str(scenario),
                "--answers",
                str(args.answers),
                "--documents",
                str(args.documents),
                "--seed",
                str(args.seed),
                *STEADY,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        rows = chunk_records(scenario / "chunks.jsonl")
        _fill(database, rows)
        chunks = chunk_messages(scenario / "chunks.jsonl")
        answers = answer_messages(scenario / "citations.jsonl")
        values = [value for _, value in answers if value is not None]
        citations = sum(len(orjson.loads(value).get("citations", [])) for value in values)
        text_bytes = sum(len(row["text"].encode()) for row in rows)
        print(
            f"{len(rows):,} chunks of {args.documents:,} documents ({text_bytes / 2**20:,.0f} MiB "
            f"of text) in LangChain's tables and on a chunk topic; {len(answers):,} answers, "
            f"{citations:,} citations; {os.cpu_count()} CPUs"
        )
        results: dict[str, dict[str, float]] = {}
        for mode in ("mirror", "lookup"):
            settings = _mode_settings(mode, database, args.cache_bytes)
            log = Path(workdir) / f"{mode}.log"
            results[mode] = _throughput(
                bootstrap,
                settings=settings,
                chunks=chunks,
                answers=answers,
                citations=citations,
                log=log,
            )
            paced = _latency(
                bootstrap,
                settings=settings,
                chunks=chunks,
                answers=values,
                rate=args.rate,
                seconds=args.seconds,
                log=log,
            )
            results[mode] |= {f"paced_{key}": value for key, value in paced.items()}
        for mode, result in results.items():
            print(
                f"{mode:>6}: backlog {result['messages_per_second']:,.0f} messages/s "
                f"({result['citations_per_second']:,.0f} citations/s, {result['seconds']:.1f} s); "
                f"peak RSS {result['peak_rss'] / 2**20:,.0f} MiB, at the end "
                f"{result['rss'] / 2**20:,.0f} MiB; at {args.rate:,.0f} messages/s: verdict "
                f"p50 {result['paced_p50_ms']:,.0f} ms, p99 {result['paced_p99_ms']:,.0f} ms "
                f"({result['paced_citations']:,.0f} citations, {result['paced_missing']:,.0f} "
                f"without a verdict)"
                + (f"; {result['lookups']:,.0f} lookups" if mode == "lookup" else "")
            )
        mirror, lookup = results["mirror"], results["lookup"]
        speed = lookup["messages_per_second"] / mirror["messages_per_second"]
        print(
            f"lookup / mirror: throughput {speed:.2f}x, "
            f"peak RSS {lookup['peak_rss'] / mirror['peak_rss']:.2f}x, "
            f"p50 {lookup['paced_p50_ms'] / max(1.0, mirror['paced_p50_ms']):.2f}x, "
            f"p99 {lookup['paced_p99_ms'] / max(1.0, mirror['paced_p99_ms']):.2f}x "
            f"(cache bound {args.cache_bytes / 2**20:,.0f} MiB)"
        )


if __name__ == "__main__":
    main()
