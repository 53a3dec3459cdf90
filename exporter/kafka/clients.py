"""aiokafka clients configured from the settings (addresses and security in one place).

Every client is named ``<client_id>-<role>`` (``citation-exporter-answers``, ``-producer``, ...),
so that broker logs, quotas and ACL audits tell one process's clients apart; the operator's
``kafka_options`` reach every client whose constructor takes them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider
from aiokafka.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from exporter.config.kafka import KafkaConnection, read_token, tls_context
from exporter.errors import RestartRequired
from exporter.kafka.protocols import Consumer

__all__ = [
    "TokenFile",
    "client_id",
    "client_options",
    "close",
    "connection_options",
    "lags",
    "make_consumer",
    "make_producer",
    "topic_partitions",
]


log = logging.getLogger(__name__)

# A client that cannot close in this long (its broker away) is left behind: the process ends.
_CLOSE_SECONDS = 5.0


async def close(client: Any) -> None:
    """Stop an aiokafka client, started or not, whatever state the broker is in.

    A consumer's ``stop()`` cancels its pending fetches and awaits them, so while the broker is
    away it raises their CancelledError into the caller: swallowed here unless the caller itself
    is being cancelled, so that SIGTERM during an outage still closes every client and exits 0.
    """
    try:
        await asyncio.wait_for(client.stop(), _CLOSE_SECONDS)
    except TimeoutError:
        log.warning(
            "%s did not close in %.0f s; left behind", type(client).__name__, _CLOSE_SECONDS
        )
    except (KafkaError, OSError) as exc:
        log.debug("closing %s: %s", type(client).__name__, exc)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


class TokenFile(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka is untyped
    """The OAUTHBEARER token in a file, read again whenever the file changes.

    A sidecar (or a projected Kubernetes token) rotates the file; each new connection then logs
    in with the current token, without a restart. A file caught empty or missing in the middle
    of a rotation keeps the token read before (start-up has already checked it was there).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._token: str | None = None

    async def token(self) -> str:
        seen = self._stamp()
        if seen is not None and seen == self._seen and self._token is not None:
            return self._token
        try:
            token = read_token(self.path)
        except ValueError as exc:
            if self._token is None:
                # a KafkaError, so the service retries and diagnoses it like an outage
                raise KafkaConnectionError(str(exc)) from None
            log.warning("%s; logging in with the token read before", exc)
            return self._token
        self._token, self._seen = token, seen
        return token

    def _stamp(self) -> tuple[int, int, int] | None:
        """What changes when the file is replaced or rewritten (None: it is not there)."""
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def client_id(connection: KafkaConnection, role: str) -> str:
    """The name a client gives the broker: the ``client_id`` setting and what the client does."""
    return f"{connection.client_id}-{role}"


def connection_options(connection: KafkaConnection) -> dict[str, Any]:
    """bootstrap servers, SSL and SASL options shared by every client."""
    options: dict[str, Any] = {
        "bootstrap_servers": connection.bootstrap_servers,
        "security_protocol": connection.security_protocol,
    }
    if connection.security_protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = tls_context(
            connection.ssl_cafile, connection.ssl_certfile, connection.ssl_keyfile
        )
    if connection.security_protocol.startswith("SASL"):
        mechanism = connection.sasl_mechanism or "PLAIN"
        options["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            if connection.sasl_oauth_token_file is None:  # the settings refuse this
                raise ValueError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file")
            options["sasl_oauth_token_provider"] = TokenFile(connection.sasl_oauth_token_file)
        elif mechanism == "GSSAPI":
            options["sasl_kerberos_service_name"] = connection.sasl_kerberos_service_name
            options["sasl_kerberos_domain_name"] = connection.sasl_kerberos_domain_name
        else:
            options["sasl_plain_username"] = connection.sasl_username
            options["sasl_plain_password"] = (
                connection.sasl_password.get_secret_value() if connection.sasl_password else None
            )
    return options


def client_options(client: type, connection: KafkaConnection, role: str) -> dict[str, Any]:
    """What every client of type ``client`` is built with: the connection, its name, and those
    of the operator's ``kafka_options`` its constructor takes (a consumer's fetch tuning does not
    reach the producer)."""
    accepted = inspect.signature(client).parameters
    user = {key: value for key, value in connection.kafka_options.items() if key in accepted}
    return {**connection_options(connection), "client_id": client_id(connection, role), **user}


async def topic_partitions(
    producer: AIOKafkaProducer, topic: str, setting: str, connection: KafkaConnection
) -> set[int]:
    """A topic's partitions, or RestartRequired naming the topic and its setting.

    The producer's metadata lookup is aiokafka's public way to list them; for a topic that does
    not exist it raises UnknownTopicOrPartitionError (or times out), which says neither which
    topic nor which setting. No partitions while no broker is known is a connection problem.
    """
    try:
        partitions: set[int] | None = await producer.partitions_for(topic)
    except TopicAuthorizationFailedError:
        raise RestartRequired(
            f"user {connection.sasl_username!r} may not read topic {topic!r} ({setting}, ACLs)"
        ) from None
    except (UnknownTopicOrPartitionError, KafkaTimeoutError):
        partitions = None
    if not partitions and not producer.client.cluster.brokers():
        # the metadata named no broker, so the connection, not the topic, is the problem (a
        # rejected OAUTHBEARER token looks like this): a KafkaError has the service diagnose it
        raise KafkaConnectionError(f"no broker metadata from {connection.bootstrap_servers}")
    if not partitions:
        raise RestartRequired(
            f"topic {topic!r} does not exist at {connection.bootstrap_servers} ({setting})"
        )
    return partitions


def make_consumer(
    connection: KafkaConnection, role: str = "consumer", **extra: Any
) -> AIOKafkaConsumer:
    """A consumer that commits only when told to and starts from the earliest offset; ``role``
    names it to the broker (chunks, answers, control, sweep)."""
    return AIOKafkaConsumer(
        **client_options(AIOKafkaConsumer, connection, role),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=max(1_048_576, connection.max_message_bytes * 2),
        **extra,
    )


def make_producer(connection: KafkaConnection, role: str = "producer") -> AIOKafkaProducer:
    """The producer of verdicts and dead letters: acks=all, since offsets are committed once
    they are delivered."""
    return AIOKafkaProducer(
        **client_options(AIOKafkaProducer, connection, role),
        acks="all",
        linger_ms=5,
        max_batch_size=262_144,
        max_request_size=max(1_048_576, connection.max_message_bytes * 2),
        request_timeout_ms=15_000,
    )


async def lags(consumer: Consumer) -> dict[tuple[str, int], int]:
    """Messages behind the high water mark, per assigned partition whose mark is known.

    A partition revoked while its position was being read is left out: its new owner reports
    it.
    """
    reported = {}
    for tp in list(consumer.assignment()):
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        try:
            position = await consumer.position(tp)
        except IllegalStateError:  # revoked meanwhile
            continue
        if tp in consumer.assignment():
            reported[(tp.topic, tp.partition)] = highwater - position
    return reported
