"""The Kafka client layer without a broker: what every client is built with (its name, its
security, the operator's extra options)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from pydantic import SecretStr

from exporter.kafka import clients
from exporter.kafka.clients import (
    client_options,
    make_consumer,
    make_producer,
)
from exporter.settings import OWN_KAFKA_OPTIONS, Settings


def _recording(real: type, calls: list[dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A stand-in for an aiokafka client class that keeps the keyword arguments it is built with
    (and, like the class, refuses one it does not take)."""
    signature = inspect.signature(real)

    def build(**kwargs: Any) -> dict[str, Any]:
        signature.bind(**kwargs)
        calls.append(kwargs)
        return kwargs

    build.__signature__ = signature  # type: ignore[attr-defined]
    return build


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(clients, "AIOKafkaConsumer", _recording(AIOKafkaConsumer, calls))
    monkeypatch.setattr(clients, "AIOKafkaProducer", _recording(AIOKafkaProducer, calls))
    return calls


# ------------------------------------------------------------------------------- client ids


def test_every_client_is_named_by_the_client_id_and_its_role(built: list[Any]) -> None:
    settings = Settings(client_id="rag-prod")
    make_consumer(settings, "answers", group_id="g")
    make_consumer(settings, "chunks")
    make_consumer(settings)
    make_producer(settings)
    assert [call["client_id"] for call in built] == [
        "rag-prod-answers",
        "rag-prod-chunks",
        "rag-prod-consumer",
        "rag-prod-producer",
    ]
    admin = client_options(AIOKafkaAdminClient, settings, "admin")
    assert admin["client_id"] == "rag-prod-admin"


def test_the_default_client_id() -> None:
    options = client_options(AIOKafkaProducer, Settings(), "producer")
    assert options["client_id"] == "citation-exporter-producer"


# ---------------------------------------------------------------------------- kafka_options


def test_kafka_options_reach_every_client_that_takes_them(built: list[Any]) -> None:
    settings = Settings(
        kafka_options={
            "session_timeout_ms": 45_000,  # consumers only
            "compression_type": "zstd",  # the producer only
            "metadata_max_age_ms": 60_000,  # every client
        }
    )
    consumer = make_consumer(settings, "answers", group_id="g")
    producer = make_producer(settings)
    admin = client_options(AIOKafkaAdminClient, settings, "admin")
    assert (consumer["session_timeout_ms"], consumer["metadata_max_age_ms"]) == (45_000, 60_000)
    assert "compression_type" not in consumer
    assert (producer["compression_type"], producer["metadata_max_age_ms"]) == ("zstd", 60_000)
    assert "session_timeout_ms" not in producer
    assert admin["metadata_max_age_ms"] == 60_000
    assert not {"session_timeout_ms", "compression_type"} & set(admin)
    # what the exporter sets itself is untouched
    assert consumer["enable_auto_commit"] is False and producer["acks"] == "all"


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL", "PLAINTEXT"])
def test_every_option_the_exporter_sets_is_refused_in_kafka_options(
    built: list[Any], protocol: str
) -> None:
    """Else an operator's value would clash with ours (a TypeError at start) or override it."""
    settings = Settings(security_protocol=protocol, sasl_username="u", sasl_password=SecretStr("p"))
    make_consumer(settings, "answers", group_id="g")
    make_producer(settings)
    set_by_us = {key for call in built for key in call}
    assert set_by_us <= set(OWN_KAFKA_OPTIONS)


def test_aiokafka_builds_its_clients_with_the_merged_options() -> None:
    settings = Settings(kafka_options={"session_timeout_ms": 45_000, "compression_type": "gzip"})

    async def build() -> None:
        consumer = make_consumer(settings, "answers", group_id="g")
        producer = make_producer(settings)
        await clients.close(consumer)
        await clients.close(producer)

    asyncio.run(build())
