"""What the Kafka settings must hold, checked when the settings are read.

A Kafka setting that cannot work should stop start-up with its name, not surface later as a
broker that cannot be reached, a fetch that fails or a login that hangs: the TLS files and the
OAUTHBEARER token file are read here, and the further client options of ``kafka_options`` are
checked against what aiokafka's clients take. Nothing here connects to Kafka, and aiokafka is
imported only when ``kafka_options`` has something to check.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from exporter.config.tls import MAX_TLS_FILE_BYTES, EncryptedKey, refuse_passphrase
from exporter.records.limits import DEFAULT_LIMITS
from exporter.small_files import (
    UnusableFile,
    described,
    read_small_file,
    shown,
    small_file_problem,
)

__all__ = [
    "MAX_TOKEN_BYTES",
    "OWN_KAFKA_OPTIONS",
    "KafkaConnection",
    "KafkaOptionValue",
    "KafkaTopics",
    "aiokafka_options",
    "json_object",
    "kafka_option_problem",
    "read_token",
    "tls_context",
]

# Client options the exporter sets itself, refused in kafka_options, with what to use instead:
# a second value for one of these would either clash with ours or quietly break a guarantee
# (offsets committed after delivery, the store read from the start, acks=all).
OWN_KAFKA_OPTIONS: dict[str, str] = {
    "bootstrap_servers": "use the bootstrap_servers setting",
    "client_id": "use the client_id setting",
    "group_id": "use the group_id setting",
    "security_protocol": "use the security_protocol setting",
    "ssl_context": "use ssl_cafile, ssl_certfile and ssl_keyfile",
    "sasl_mechanism": "use the sasl_mechanism setting",
    "sasl_plain_username": "use the sasl_username setting",
    "sasl_plain_password": "use the sasl_password setting",
    "sasl_kerberos_service_name": "use the sasl_kerberos_service_name setting",
    "sasl_kerberos_domain_name": "use the sasl_kerberos_domain_name setting",
    "sasl_oauth_token_provider": "use the sasl_oauth_token_file setting",
    "max_partition_fetch_bytes": "derived from the max_message_bytes setting",
    "max_request_size": "derived from the max_message_bytes setting",
    "enable_auto_commit": "offsets are committed only once a batch's outputs are delivered",
    "auto_offset_reset": "the chunk store and sweeps read from the earliest offset",
    "acks": "verdicts and dead letters are sent with acks=all",
    "linger_ms": "set by the exporter",
    "max_batch_size": "set by the exporter",
    "request_timeout_ms": "set by the exporter",
    # objects and callables no setting can express, and transactions the exporter does not use
    "topics": "set by the exporter",
    "loop": "set by the exporter",
    "key_deserializer": "the exporter reads bytes",
    "value_deserializer": "the exporter reads bytes",
    "key_serializer": "the exporter writes bytes",
    "value_serializer": "the exporter writes bytes",
    "partitioner": "not expressible as a setting",
    "partition_assignment_strategy": "not expressible as a setting",
    "transactional_id": "the exporter does not use transactions",
}
KafkaOptionValue = bool | int | float | str
# What a kafka_options value may be beyond its type: aiokafka takes a wrong type or a 10**30 in
# its constructor and fails later, inside a fetch or a heartbeat, far from the setting.
_KAFKA_INT_MAX = 2**31 - 1  # the protocol's int32: every *_ms, *_bytes and count option
_KAFKA_STRING_CHARS = 1024
# options whose default (None) does not tell their type
_KAFKA_OPTION_TYPES: dict[str, type] = {
    "group_instance_id": str,
    "rebalance_timeout_ms": int,
    "max_poll_records": int,
    "api_version": str,
    "compression_type": str,
    "client_rack": str,
}
_KAFKA_OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "compression_type": ("gzip", "snappy", "lz4", "zstd"),
    "isolation_level": ("read_uncommitted", "read_committed"),
}
_KAFKA_OPTION_MINIMUM: dict[str, int] = {"max_poll_records": 1}
# An OAUTHBEARER token: a JWT of a few kilobytes.
MAX_TOKEN_BYTES = 64 * 1024
# RFC 6750's b64token; a token with a control character (\x01 separates OAUTHBEARER's SASL
# fields) would rewrite the login message
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def read_token(path: Path) -> str:
    """The OAUTHBEARER token in ``path``, or a ValueError naming the file.

    Read without blocking (a FIFO is refused, not waited on: the token provider runs on the
    event loop) and at most MAX_TOKEN_BYTES of it.
    """
    where = f"sasl_oauth_token_file {shown(path)}"
    try:
        data = read_small_file(path, MAX_TOKEN_BYTES)
    except UnusableFile as exc:
        raise ValueError(f"{where} {exc}") from None
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{where} holds bytes a bearer token cannot have") from None
    if not token:
        raise ValueError(f"{where} is empty")
    if not _BEARER_TOKEN.fullmatch(token):
        raise ValueError(f"{where} holds characters a bearer token cannot have")
    return token


def json_object(text: str) -> dict[str, Any]:
    """The JSON object of an environment variable; ValueError saying what it is instead."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not a JSON object: {shown(exc, 200)}") from None
    except RecursionError:
        raise ValueError("is not a JSON object: nested too deeply") from None
    except ValueError as exc:  # an integer of 5,000 digits
        raise ValueError(f"is not a JSON object: {shown(exc, 200)}") from None
    if not isinstance(value, dict):
        raise ValueError(f"is not a JSON object but {type(value).__name__}")
    return value


def kafka_option_problem(key: str, value: KafkaOptionValue, default: object) -> str | None:
    """What is wrong with ``value`` for aiokafka's option ``key`` (default ``default``)."""
    expected = _KAFKA_OPTION_TYPES.get(key) or (
        type(default) if isinstance(default, bool | int | str) else None
    )
    if expected is bool and not isinstance(value, bool):
        return f"must be true or false, not {described(value)}"
    if expected is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, not {described(value)}"
        minimum = _KAFKA_OPTION_MINIMUM.get(key, 0)
        if not minimum <= value <= _KAFKA_INT_MAX:
            return f"must be from {minimum} to {_KAFKA_INT_MAX}, not {described(value)}"
    if expected is str and not isinstance(value, str):
        return f"must be a string, not {described(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {described(value)}"
    if isinstance(value, str):
        if len(value) > _KAFKA_STRING_CHARS:
            return f"is longer than {_KAFKA_STRING_CHARS} characters"
        choices = _KAFKA_OPTION_CHOICES.get(key)
        if choices is not None and value not in choices:
            return f"must be one of {', '.join(choices)}, not {described(value)}"
    return None


def aiokafka_options() -> dict[str, object]:
    """Keyword arguments of aiokafka's consumer and producer, with their defaults (imported
    only when needed: the sweep never imports aiokafka)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    return {
        name: parameter.default
        for client in (AIOKafkaConsumer, AIOKafkaProducer)
        for name, parameter in inspect.signature(client).parameters.items()
    }


def tls_context(cafile: Path | None, certfile: Path | None, keyfile: Path | None) -> ssl.SSLContext:
    """The TLS context of every Kafka client (from the ssl_* settings); a file that cannot be
    used is named by its setting."""
    for name, path in (
        ("ssl_cafile", cafile),
        ("ssl_certfile", certfile),
        ("ssl_keyfile", keyfile),
    ):
        if path is None:
            continue
        problem = small_file_problem(path, MAX_TLS_FILE_BYTES)
        if problem is not None:
            raise ValueError(f"{name} {shown(path)} {problem}")
    try:
        context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"ssl_cafile {shown(cafile or '')} holds no usable CA certificate: {shown(exc, 200)}"
        ) from None
    if certfile:
        try:
            context.load_cert_chain(
                str(certfile),
                str(keyfile) if keyfile else None,
                password=refuse_passphrase,
            )
        except EncryptedKey:
            raise ValueError(
                f"ssl_keyfile {shown(keyfile or certfile)} is "
                "encrypted: the exporter needs a key without a passphrase"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"ssl_certfile {shown(certfile)} / ssl_keyfile "
                f"{shown(keyfile or '')}: not a usable client certificate and "
                f"key: {shown(exc, 200)}"
            ) from None
    return context


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    """How the Kafka clients reach and log in to the brokers, and the largest message they
    move. Built by the settings (which check every value); the Kafka adapter's clients, its
    diagnosis and its admin take this, never the settings."""

    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "citation-exporter"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = field(default=None, repr=False)
    sasl_oauth_token_file: Path | None = None
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    # further aiokafka client options, checked by the settings (kafka_option_problem)
    kafka_options: Mapping[str, KafkaOptionValue] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_LIMITS.max_message_bytes


@dataclass(frozen=True, slots=True)
class KafkaTopics:
    """The topics the exporter reads and writes (the produce command sends to them)."""

    chunks: str = "rag.chunks"
    answers: str = "rag.answers"
    verdicts: str = "rag.citation-verdicts"
    dlq: str = "rag.citation-events.dlq"
    control: str = "rag.control"
