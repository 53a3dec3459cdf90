"""Shared helpers: small stores and citations built from plain values."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from exporter.checks.store import ChunkStore
from exporter.records.decode import decode_chunk
from exporter.records.schema import Citation

# With pytest-xdist (scripts/test runs two workers), each worker starts a broker and a
# PostgreSQL of its own, on ports and in directories of its own: one worker stopping its
# server must never take the other's away. Worker gwN adds 10 * N to the ports (the defaults or
# those set: KAFKA_PORT, PG_PORT) and "-gwN" to the directories. Set before any test module
# reads them.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
if _WORKER != "gw0" and _WORKER[2:].isdigit():
    _number = int(_WORKER[2:])
    for _port, _state, _default_port, _default_state in (
        ("KAFKA_PORT", "KAFKA_STATE", 19092, "/tmp/citation-drift-exporter-kafka"),
        ("PG_PORT", "PG_STATE", 15432, "/tmp/citation-drift-exporter-postgres"),
    ):
        os.environ[_port] = str(int(os.environ.get(_port, _default_port)) + 10 * _number)
        os.environ[_state] = f"{os.environ.get(_state, _default_state)}-{_WORKER}"

settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def chunk_record(doc_id: str, ordinal: int, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "doc_version": extra.pop("doc_version", "v1"),
        "chunk_id": extra.pop("chunk_id", f"{doc_id}#{ordinal}"),
        "text": text,
        "ordinal": ordinal,
        **extra,
    }


# The text of the one chunk of :func:`claims_archive`.
REFUND_TEXT = "Refunds are issued within 30 days of purchase. Annual plans renew automatically."


def claims_archive(directory: Path, claims: list[str]) -> tuple[Path, Path]:
    """A chunk file of one chunk (REFUND_TEXT) and a citation file with one citation of it
    per claim, each holding its quote, topics alternating billing and pricing (a
    high-severity topic)."""
    chunks = directory / "chunks.jsonl"
    chunk = {"doc_id": "d1", "doc_version": "v1", "chunk_id": "d1#0", "text": REFUND_TEXT}
    chunks.write_text(json.dumps(chunk) + "\n")
    citations = directory / "citations.jsonl"
    records = [
        {
            "citation_id": f"c{number}",
            "answer_id": f"a{number}",
            "doc_id": "d1",
            "doc_version": "v1",
            "chunk_id": "d1#0",
            "chunk_span": [0, 46],
            "quote": "Refunds are issued within 30 days of purchase",
            "claim": claim,
            "topic": "pricing" if number % 2 else "billing",
        }
        for number, claim in enumerate(claims)
    ]
    citations.write_text("".join(json.dumps(record) + "\n" for record in records))
    return chunks, citations


async def until(condition: Callable[[], bool], steps: int = 3_000) -> bool:
    """Let the other tasks run until ``condition`` holds (at most ``steps`` times, about a
    millisecond each); whether it does. A wait in steps, never a timed assertion."""
    for _ in range(steps):
        if condition():
            return True
        await asyncio.sleep(0.001)
    return condition()


def store_of(*records: dict[str, Any]) -> ChunkStore:
    store = ChunkStore()
    for record in records:
        store.apply(decode_chunk(record))
    return store


def citation(
    quote: str, chunk_id: str, start: int, end: int | None = None, **extra: Any
) -> Citation:
    doc_id = extra.pop("doc_id", chunk_id.split("#", maxsplit=1)[0])
    return Citation(
        citation_id=extra.pop("citation_id", "cit-1"),
        answer_id=extra.pop("answer_id", "ans-1"),
        doc_id=doc_id,
        doc_version=extra.pop("doc_version", "v1"),
        chunk_id=chunk_id,
        start=start,
        end=start + len(quote) if end is None else end,
        quote=quote,
        **extra,
    )


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    """A real Kafka broker for the integration tests (see tests/kafka_support.py)."""
    from kafka_support import kafka_broker

    with kafka_broker() as address:
        yield address


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A real PostgreSQL server for the integration tests (see tests/postgres_support.py): the
    URI of a role that may create databases."""
    from postgres_support import postgres_server

    with postgres_server() as uri:
        yield uri


@pytest.fixture
def database(postgres: str) -> Iterator[str]:
    """A database of its own on the real server, dropped after the test."""
    from postgres_support import fresh_database

    with fresh_database(postgres) as uri:
        yield uri


def sweep_json(
    scenario: dict[str, Path], capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any]]:
    """``citation-exporter sweep`` of a written scenario: its exit status and JSON summary."""
    from exporter.cli import main

    inputs = ["--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    code = main(["sweep", *inputs, "--no-progress", "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def cpu_seconds(work: Callable[[], object]) -> float:
    """This thread's CPU seconds for ``work``, the garbage collector held off: a bound on what
    hostile input costs measures the code, not a loaded machine (wall time), another thread of
    the worker (the process's CPU time) or a full collection of what earlier tests left."""
    gc.collect()
    gc.disable()
    try:
        started = time.thread_time()
        work()
        return time.thread_time() - started
    finally:
        gc.enable()
