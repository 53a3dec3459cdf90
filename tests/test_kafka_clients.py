"""The Kafka client layer without a broker: what every client is built with (its name, its
security, the operator's extra options), the OAUTHBEARER token file, what a rejected token is
called, and the Kafka Connect headers of a dead letter."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import sys
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnknownTopicOrPartitionError,
)
from kafka_support import unsecured_jwt
from pydantic import SecretStr

from exporter.checks import engine
from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.config.kafka import OWN_KAFKA_OPTIONS
from exporter.kafka import clients
from exporter.kafka.clients import (
    TokenFile,
    client_options,
    connection_options,
    make_consumer,
    make_producer,
    topic_partitions,
)
from exporter.kafka.diagnose import TokenRejectedError, explain
from exporter.kafka.publish import CONNECT_STAGES, Publisher
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import DeadLetter, Origin
from exporter.settings import Settings


def _jwt(expires: float) -> str:
    return unsecured_jwt("exporter", expires)


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


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(_jwt(time.time() + 3600) + "\n")
    return path


# ------------------------------------------------------------------------------- client ids


def test_every_client_is_named_by_the_client_id_and_its_role(built: list[Any]) -> None:
    settings = Settings(client_id="rag-prod")
    make_consumer(settings.kafka, "answers", group_id="g")
    make_consumer(settings.kafka, "chunks")
    make_consumer(settings.kafka)
    make_producer(settings.kafka)
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
    consumer = make_consumer(settings.kafka, "answers", group_id="g")
    producer = make_producer(settings.kafka)
    admin = client_options(AIOKafkaAdminClient, settings, "admin")
    assert (consumer["session_timeout_ms"], consumer["metadata_max_age_ms"]) == (45_000, 60_000)
    assert "compression_type" not in consumer
    assert (producer["compression_type"], producer["metadata_max_age_ms"]) == ("zstd", 60_000)
    assert "session_timeout_ms" not in producer
    assert admin["metadata_max_age_ms"] == 60_000
    assert not {"session_timeout_ms", "compression_type"} & set(admin)
    # what the exporter sets itself is untouched
    assert consumer["enable_auto_commit"] is False and producer["acks"] == "all"


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER", "GSSAPI", None])
def test_every_option_the_exporter_sets_is_refused_in_kafka_options(
    built: list[Any], monkeypatch: pytest.MonkeyPatch, token_file: Path, mechanism: str | None
) -> None:
    """Else an operator's value would clash with ours (a TypeError at start) or override it."""
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))
    if mechanism is None:
        settings = Settings(security_protocol="SSL")
    else:
        settings = Settings(
            security_protocol="SASL_SSL",
            sasl_mechanism=mechanism,
            sasl_username="u",
            sasl_password=SecretStr("p"),
            sasl_oauth_token_file=token_file,
        )
    make_consumer(settings.kafka, "answers", group_id="g")
    make_producer(settings.kafka)
    set_by_us = {key for call in built for key in call}
    assert set_by_us <= set(OWN_KAFKA_OPTIONS)


def test_aiokafka_builds_its_clients_with_the_merged_options() -> None:
    settings = Settings(kafka_options={"session_timeout_ms": 45_000, "compression_type": "gzip"})

    async def build() -> None:
        consumer = make_consumer(settings.kafka, "answers", group_id="g")
        producer = make_producer(settings.kafka)
        await clients.close(consumer)
        await clients.close(producer)

    asyncio.run(build())


# ------------------------------------------------------------------------------ SASL options


def test_oauthbearer_logs_in_with_the_token_file(token_file: Path) -> None:
    settings = Settings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_file=token_file,
    )
    options = connection_options(settings.kafka)
    provider = options["sasl_oauth_token_provider"]
    assert isinstance(provider, TokenFile) and provider.path == token_file
    assert asyncio.run(provider.token()) == token_file.read_text().strip()
    assert "sasl_plain_username" not in options and "sasl_plain_password" not in options


def test_gssapi_passes_the_kerberos_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))
    settings = Settings(
        security_protocol="SASL_SSL",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_service_name="kafka-prod",
        sasl_kerberos_domain_name="kafka.example.com",
    )
    options = connection_options(settings.kafka)
    assert options["sasl_mechanism"] == "GSSAPI"
    assert options["sasl_kerberos_service_name"] == "kafka-prod"
    assert options["sasl_kerberos_domain_name"] == "kafka.example.com"
    assert "sasl_plain_password" not in options


def _rewrite(path: Path, text: str) -> None:
    """Write ``text``, with a modification time the token file surely sees as new."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_the_token_file_is_read_again_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    provider = TokenFile(path)

    async def tokens() -> list[str]:
        seen = [await provider.token(), await provider.token()]
        _rewrite(path, "second")  # rotated by a sidecar
        seen.append(await provider.token())
        _rewrite(path, "")  # caught mid-rotation
        seen.append(await provider.token())
        path.unlink()
        seen.append(await provider.token())
        _rewrite(path, "third\n")
        seen.append(await provider.token())
        return seen

    with caplog.at_level(logging.WARNING, "exporter.kafka.clients"):
        assert asyncio.run(tokens()) == ["first", "first", "second", "second", "second", "third"]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        f"sasl_oauth_token_file {path} is empty; logging in with the token read before",
        f"sasl_oauth_token_file {path} does not exist; logging in with the token read before",
    ]


def test_a_token_file_never_read_is_a_connection_error(tmp_path: Path) -> None:
    """A KafkaError: the service retries it and diagnoses it, as it does an outage."""
    with pytest.raises(KafkaConnectionError, match="does not exist"):
        asyncio.run(TokenFile(tmp_path / "gone").token())


# --------------------------------------------------------------------- a token the broker refuses


def _oauth_settings(token: Path) -> Settings:
    return Settings(
        bootstrap_servers="127.0.0.1:19096",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_file=token,
    )


def test_an_expired_token_is_named_with_its_expiry(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(_jwt(1_700_000_000))
    sentence = explain(TokenRejectedError(), "127.0.0.1", 19096, _oauth_settings(token).kafka)
    assert sentence == (
        f"Kafka at 127.0.0.1:19096 rejected the OAUTHBEARER token in sasl_oauth_token_file "
        f"{token}: it expired at 2023-11-14 22:13:20 UTC"
    )


@pytest.mark.parametrize("error", [TokenRejectedError(), SaslAuthenticationFailed("invalid_token")])
def test_a_rejected_opaque_token_is_named(tmp_path: Path, error: Exception) -> None:
    token = tmp_path / "token"
    secret = f"opaque-{uuid.uuid4().hex}"
    token.write_text(secret)
    sentence = explain(error, "127.0.0.1", 19096, _oauth_settings(token).kafka)
    assert sentence == (
        f"Kafka at 127.0.0.1:19096 rejected the OAUTHBEARER token in sasl_oauth_token_file "
        f"{token} (invalid, expired, or issued for another broker)"
    )
    assert secret not in sentence, "the token itself is a secret"


class _NoBroker:
    """A producer whose metadata names no broker, as after a rejected OAUTHBEARER token."""

    client = types.SimpleNamespace(cluster=types.SimpleNamespace(brokers=set))

    async def partitions_for(self, topic: str) -> set[int]:
        raise UnknownTopicOrPartitionError()


def test_no_broker_in_the_metadata_is_a_connection_problem_not_a_missing_topic() -> None:
    settings = Settings(bootstrap_servers="k1:9092")
    with pytest.raises(KafkaConnectionError, match="no broker metadata from k1:9092"):
        asyncio.run(topic_partitions(_NoBroker(), "rag.chunks", "chunks_topic", settings.kafka))  # type: ignore[arg-type]


# ---------------------------------------------------------------- dead letters, Connect-style


class _Producer:
    """Sends succeed; what was sent is kept."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []

    async def send(
        self, topic: str, value: bytes | None, key: bytes | None = None, headers: Any = None
    ) -> asyncio.Future[Any]:
        self.sent.append((topic, value, key, list(headers or [])))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _published(letter: DeadLetter, connector: str | None = "rag-prod") -> list[tuple[str, bytes]]:
    producer = _Producer()

    async def run() -> None:
        named = {} if connector is None else {"connector": connector}
        publisher = Publisher(producer, "verdicts", "dlq", **named)  # type: ignore[arg-type]
        await publisher.delivered([await publisher.dead_letter(letter)])

    asyncio.run(run())
    [(topic, _, _, headers)] = producer.sent
    assert topic == "dlq"
    return headers


def test_a_dead_letter_carries_kafka_connects_error_headers() -> None:
    letter = DeadLetter(Origin("rag.answers", 3, 1207), b"{oops", b"k", "invalid_json", "bad")
    headers = _published(letter)
    ours = [name for name, _ in headers if not name.startswith("__connect.")]
    assert ours == ["source_topic", "source_partition", "source_offset", "reason", "error"]
    connect = {name: value for name, value in headers if name.startswith("__connect.")}
    assert connect == {
        "__connect.errors.topic": b"rag.answers",
        "__connect.errors.partition": b"3",
        "__connect.errors.offset": b"1207",
        "__connect.errors.connector.name": b"rag-prod",
        "__connect.errors.task.id": socket.gethostname().encode(),
        "__connect.errors.stage": b"VALUE_CONVERTER",
        "__connect.errors.class.name": b"exporter.records.decode",
        "__connect.errors.exception.class.name": b"exporter.errors.InvalidJson",
        "__connect.errors.exception.message": b"bad",
    }


def test_a_check_that_raised_is_a_task_put_failure_naming_the_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exception's class travels as a type from where it was caught to the header."""

    def divide(*_: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(engine, "check_citation", divide)
    citation = {
        "citation_id": "c",
        "doc_id": "d",
        "doc_version": "v1",
        "chunk_id": "d#0",
        "chunk_span": [0, 1],
        "quote": "x",
    }
    value = orjson.dumps({"answer_id": "a", "citations": [citation, {"citation_id": 7}]})
    outcome = check_message(
        value, None, Origin("rag.answers", 0, 5), store=ChunkStore(), policy=Policy()
    )
    letter = outcome.dead_letter
    assert letter is not None and letter.exception == "ZeroDivisionError"
    connect = dict(_published(letter))
    assert connect["__connect.errors.stage"] == b"TASK_PUT"
    assert connect["__connect.errors.class.name"] == b"exporter.pipeline"
    assert connect["__connect.errors.exception.class.name"] == b"ZeroDivisionError"
    assert connect["invalid_citations"] == b"2" and connect["citation_indexes"] == b"0,1"


def test_a_huge_exception_class_name_is_cut_in_its_header() -> None:
    """What raised may be a plug-in's class, named as it likes."""
    huge = type("E" * 100_000, (Exception,), {})
    letter = DeadLetter.raised(Origin("rag.answers", 0, 5), b"{}", None, huge("boom"))
    header = dict(_published(letter))["__connect.errors.exception.class.name"]
    assert header == b"E" * 1024


def test_an_error_text_that_looks_like_a_raised_exception_names_none() -> None:
    """What a record's own text says is never read back as an exception's class."""
    letter = DeadLetter(
        Origin("rag.answers", 0, 5),
        b"{}",
        None,
        "check_failed",
        "#0: checking failed: Injected: text from the record",
    )
    assert dict(_published(letter))["__connect.errors.exception.class.name"] == b"Exception"


@pytest.mark.parametrize("reason", sorted(CONNECT_STAGES))
def test_every_reason_has_a_connect_stage(reason: str) -> None:
    letter = DeadLetter(Origin("t", 0, 0), b"v", None, reason, "e" * 5000)
    connect = dict(_published(letter))
    assert connect["__connect.errors.stage"] == CONNECT_STAGES[reason].encode()
    assert len(connect["__connect.errors.exception.message"]) == 1024, "bounded like error"


def test_without_a_client_id_the_connector_is_the_default_one() -> None:
    letter = DeadLetter(Origin("t", 0, 0), b"v", None, "empty", "no value")
    connect = dict(_published(letter, connector=None))
    assert connect["__connect.errors.connector.name"] == b"citation-exporter"
