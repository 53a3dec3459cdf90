"""The topic through which the group shares its sweeps: created when missing, checked when found.

Like Kafka Connect with its internal topics (configs, offsets, status), the exporter creates the
compacted topic it keeps its shared state in, so that sharing sweeps asks nothing of the
operator on a cluster that lets it create topics; and, like Connect, it refuses a topic that
would lose or reorder that state: more than one partition (instances would read the records of
a sweep in different orders) or a cleanup policy without compaction (retention would delete a
finished sweep's records, and its request would run again).

Whether the topic exists is asked with a metadata request for every topic, which never creates
one: a request naming it would, on a broker with ``auto.create.topics.enable``, create it with
the broker's defaults (one that deletes, not compacts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, for_code

from exporter.config.kafka import KafkaConnection
from exporter.errors import RestartRequired
from exporter.kafka.clients import client_options

__all__ = ["TopicAdmin", "ensure_sweeps_topic", "make_admin", "prepare_sweeps_topic"]

log = logging.getLogger(__name__)

# the replicas of a created topic when the settings name none: Kafka Connect's default for its
# internal topics, or every broker of a smaller cluster (a one-broker development cluster)
DEFAULT_REPLICAS = 3
# how long a topic just created may take to appear in the metadata, asked every half second
_APPEARS_WITHIN_SECONDS = 15.0
_NO_ERROR, _ALREADY_EXISTS = 0, 36
_AUTHORIZATION_FAILED = (29, 31)  # topic, cluster


class TopicAdmin(Protocol):
    """What is asked of aiokafka's admin client here (a fake one in unit tests)."""

    async def list_topics(self) -> list[str]: ...

    async def describe_cluster(self) -> dict[str, Any]: ...

    async def describe_topics(self, topics: list[str] | None = None) -> list[Any]: ...

    async def create_topics(
        self, new_topics: list[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> Any: ...

    async def describe_configs(
        self, config_resources: list[ConfigResource], include_synonyms: bool = False
    ) -> list[Any]: ...


def make_admin(connection: KafkaConnection) -> AIOKafkaAdminClient:
    """An admin client with the service's connection, named ``<client_id>-admin``."""
    return AIOKafkaAdminClient(**client_options(AIOKafkaAdminClient, connection, "admin"))


async def prepare_sweeps_topic(
    connection: KafkaConnection, topic: str, replicas: int | None = None
) -> None:
    """:func:`ensure_sweeps_topic` with an admin client of its own, closed after."""
    admin = make_admin(connection)
    try:
        await admin.start()
        await ensure_sweeps_topic(admin, topic, replicas)
    finally:
        await admin.close()


async def ensure_sweeps_topic(admin: TopicAdmin, topic: str, replicas: int | None) -> None:
    """Make sure ``topic`` exists with one partition and compaction, creating it if missing;
    RestartRequired says what is wrong with it and what to do."""
    if topic not in await admin.list_topics():
        await _create(admin, topic, replicas)
        await _appears(admin, topic)
    await _check(admin, topic)


async def _create(admin: TopicAdmin, topic: str, replicas: int | None) -> None:
    if replicas is None:
        brokers = len((await admin.describe_cluster()).get("brokers") or ())
        replicas = max(1, min(DEFAULT_REPLICAS, brokers))
    new = NewTopic(topic, 1, replicas, topic_configs={"cleanup.policy": "compact"})
    response = await admin.create_topics([new])
    for entry in response.topic_errors:
        code = entry[1]
        if code in (_NO_ERROR, _ALREADY_EXISTS):  # another instance may have been first
            continue
        message = entry[2] if len(entry) > 2 and entry[2] else for_code(code).__name__
        if code in _AUTHORIZATION_FAILED:
            raise RestartRequired(
                f"sweeps topic {topic!r} is missing and may not be created here ({message}): "
                f"create it (kafka-topics.sh --create --topic {topic} --partitions 1 "
                "--config cleanup.policy=compact), or set share_sweeps=false"
            )
        raise RestartRequired(f"sweeps topic {topic!r} could not be created: {message}")
    log.info("created the sweeps topic %r (1 partition, %d replicas, compacted)", topic, replicas)


async def _appears(admin: TopicAdmin, topic: str) -> None:
    """Wait, bounded, until the metadata shows the topic just created (or found created)."""
    deadline = time.monotonic() + _APPEARS_WITHIN_SECONDS
    while True:
        if _partitions(await admin.describe_topics([topic]), topic) is not None:
            return
        if time.monotonic() >= deadline:
            raise RestartRequired(
                f"sweeps topic {topic!r} was created but is not in the metadata after "
                f"{_APPEARS_WITHIN_SECONDS:.0f} s"
            )
        await asyncio.sleep(0.5)


async def _check(admin: TopicAdmin, topic: str) -> None:
    partitions = _partitions(await admin.describe_topics([topic]), topic)
    if partitions is not None and partitions != 1:
        raise RestartRequired(
            f"sweeps topic {topic!r} has {partitions} partitions and needs exactly 1 (every "
            "instance must read its records in one order): recreate it with one, or name "
            "another in sweeps_topic"
        )
    policy = await _cleanup_policy(admin, topic)
    if policy is None:
        log.warning("could not read the cleanup policy of the sweeps topic %r (ACLs?)", topic)
    elif "compact" not in policy:
        raise RestartRequired(
            f"sweeps topic {topic!r} has cleanup.policy={','.join(sorted(policy))} and needs "
            "compact (retention would delete finished sweeps, and their requests run again): "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
            "--add-config cleanup.policy=compact"
        )


def _partitions(described: list[Any], topic: str) -> int | None:
    """The topic's partition count in a metadata answer; None while it is unknown there."""
    for entry in described:
        if entry.get("topic") == topic and entry.get("error_code") == _NO_ERROR:
            return len(entry.get("partitions") or ()) or None
    return None


async def _cleanup_policy(admin: TopicAdmin, topic: str) -> frozenset[str] | None:
    """The topic's cleanup policies; None when the broker does not say (no DescribeConfigs)."""
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": None})
    try:
        responses = await admin.describe_configs([resource])
    except (KafkaError, OSError) as exc:  # only a warning: the topic may still be right
        log.debug("describe_configs of %r failed: %r", topic, exc)
        return None
    for response in responses:
        for error_code, _message, _type, name, entries in response.resources:
            if name != topic or error_code != _NO_ERROR:
                continue
            for entry in entries:
                if entry[0] == "cleanup.policy":
                    return frozenset(part.strip() for part in (entry[1] or "").split(","))
    return None
