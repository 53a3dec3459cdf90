"""Shared helpers: small stores and citations built from plain values."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from exporter.checks.store import ChunkStore
from exporter.records.decode import decode_chunk
from exporter.records.schema import Citation

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
