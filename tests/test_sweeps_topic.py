"""The sweeps topic: created when missing (one partition, compacted), refused when it would lose
or reorder the group's sweeps; against a fake admin client (the real broker creates it in the
group-sweep tests)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.admin import NewTopic

from exporter.errors import RestartRequired
from exporter.kafka import sweeps_topic
from exporter.kafka.sweeps_topic import ensure_sweeps_topic
from exporter.settings import Settings

TOPIC = "exporters.sweeps"


@dataclass
class FakeAdmin:
    """A cluster of ``brokers`` brokers with ``topics`` (name: (partitions, cleanup policy))."""

    brokers: int = 3
    topics: dict[str, tuple[int, str]] = field(default_factory=dict)
    create_error: tuple[int, str | None] = (0, None)
    configs_fail: bool = False
    visible_after: int = 0  # describe_topics calls before a created topic shows
    created: list[NewTopic] = field(default_factory=list)

    async def list_topics(self) -> list[str]:
        return list(self.topics)

    async def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"node_id": i} for i in range(self.brokers)]}

    async def describe_topics(self, topics: list[str] | None = None) -> list[Any]:
        if self.visible_after > 0:
            self.visible_after -= 1
            return [{"topic": name, "error_code": 3, "partitions": []} for name in topics or []]
        return [
            {"topic": name, "error_code": 0, "partitions": [{}] * self.topics[name][0]}
            if name in self.topics
            else {"topic": name, "error_code": 3, "partitions": []}
            for name in topics or []
        ]

    async def create_topics(
        self, new_topics: list[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> Any:
        self.created.extend(new_topics)
        code, message = self.create_error
        if code in (0, 36):  # created here, or by another instance just before
            for new in new_topics:
                policy = new.topic_configs.get("cleanup.policy", "delete")
                self.topics[new.name] = (new.num_partitions, policy)
        return SimpleNamespace(topic_errors=[(new.name, code, message) for new in new_topics])

    async def describe_configs(
        self, config_resources: list[Any], include_synonyms: bool = False
    ) -> list[Any]:
        if self.configs_fail:
            from aiokafka.errors import TopicAuthorizationFailedError

            raise TopicAuthorizationFailedError()
        resources = []
        for resource in config_resources:
            _partitions, policy = self.topics[resource.name]
            entry = ("cleanup.policy", policy, False, 5, False, [])
            resources.append((0, None, 2, resource.name, [entry]))
        return [SimpleNamespace(resources=resources)]


def ensure(admin: FakeAdmin, replicas: int | None = None) -> None:
    asyncio.run(ensure_sweeps_topic(admin, TOPIC, replicas))


@pytest.mark.parametrize(("brokers", "replicas"), [(1, 1), (2, 2), (5, 3)])
def test_a_missing_topic_is_created_compacted_with_one_partition(
    brokers: int, replicas: int
) -> None:
    admin = FakeAdmin(brokers=brokers)
    ensure(admin)
    (created,) = admin.created
    assert (created.name, created.num_partitions, created.replication_factor) == (
        TOPIC,
        1,
        replicas,
    )
    assert created.topic_configs == {"cleanup.policy": "compact"}


def test_the_replication_factor_set_is_the_one_used() -> None:
    admin = FakeAdmin(brokers=5)
    ensure(admin, replicas=5)
    assert admin.created[0].replication_factor == 5


def test_a_topic_that_exists_is_not_created_again() -> None:
    admin = FakeAdmin(topics={TOPIC: (1, "compact")})
    ensure(admin)
    assert admin.created == []


def test_another_instance_creating_it_first_is_no_error() -> None:
    ensure(FakeAdmin(create_error=(36, "Topic 'exporters.sweeps' already exists.")))


def test_no_right_to_create_says_how_to_create_it_or_turn_sharing_off() -> None:
    admin = FakeAdmin(create_error=(29, None))
    with pytest.raises(RestartRequired) as raised:
        ensure(admin)
    message = str(raised.value)
    assert TOPIC in message
    assert "TopicAuthorizationFailedError" in message
    assert "--partitions 1 --config cleanup.policy=compact" in message
    assert "share_sweeps=false" in message


def test_another_creation_error_is_named() -> None:
    admin = FakeAdmin(brokers=1, create_error=(38, "Replication factor: 3 larger than brokers"))
    with pytest.raises(RestartRequired, match="could not be created: Replication factor"):
        ensure(admin, replicas=3)


def test_a_topic_of_several_partitions_is_refused() -> None:
    admin = FakeAdmin(topics={TOPIC: (3, "compact")})
    with pytest.raises(RestartRequired, match="has 3 partitions and needs exactly 1"):
        ensure(admin)


@pytest.mark.parametrize("policy", ["delete", ""])
def test_a_topic_without_compaction_is_refused(policy: str) -> None:
    admin = FakeAdmin(topics={TOPIC: (1, policy)})
    with pytest.raises(RestartRequired, match="needs compact") as raised:
        ensure(admin)
    assert "--add-config cleanup.policy=compact" in str(raised.value)


def test_compaction_with_deletion_is_taken() -> None:
    ensure(FakeAdmin(topics={TOPIC: (1, "compact,delete")}))


def test_a_policy_that_cannot_be_read_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    admin = FakeAdmin(topics={TOPIC: (1, "delete")}, configs_fail=True)
    with caplog.at_level(logging.WARNING):
        ensure(admin)
    assert "could not read the cleanup policy" in caplog.text


def test_a_created_topic_is_waited_for_until_the_metadata_shows_it() -> None:
    admin = FakeAdmin(visible_after=2)
    ensure(admin)
    assert admin.visible_after == 0


def test_a_created_topic_that_never_shows_is_a_bounded_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweeps_topic, "_APPEARS_WITHIN_SECONDS", 0.6)
    admin = FakeAdmin(visible_after=10**6)
    with pytest.raises(RestartRequired, match="not in the metadata after"):
        ensure(admin)


def test_the_group_shares_sweeps_by_default_through_a_topic_named_after_it() -> None:
    assert Settings(group_id="rag-exporters").shared_sweeps_topic == "rag-exporters.sweeps"
    assert Settings(sweeps_topic="ours.sweeps").shared_sweeps_topic == "ours.sweeps"
    assert Settings(sweeps_topic=" ").shared_sweeps_topic == "citation-drift-exporter.sweeps"
    assert Settings(share_sweeps=False).shared_sweeps_topic is None


def test_a_group_id_that_makes_no_topic_name_asks_for_a_sweeps_topic() -> None:
    with pytest.raises(ValueError, match=r"from group_id 'team/rag'.*set sweeps_topic"):
        Settings(group_id="team/rag")
    assert Settings(group_id="team/rag", sweeps_topic="team-rag.sweeps").shared_sweeps_topic
    assert Settings(group_id="team/rag", share_sweeps=False).shared_sweeps_topic is None


def test_a_sweeps_topic_that_is_no_topic_name_is_refused() -> None:
    with pytest.raises(ValueError, match="from sweeps_topic"):
        Settings(sweeps_topic="a" * 250)
