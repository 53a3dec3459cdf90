"""The log stays readable while the broker is away."""

from __future__ import annotations

import logging

from freezegun import freeze_time

from exporter.kafka.logs import KafkaNoise, RepeatFilter


def _record(message: str, name: str = "aiokafka") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, None)


def test_repeated_messages_pass_once_per_interval_and_are_counted() -> None:
    with freeze_time("2026-11-30 12:00:00") as clock:
        repeat = RepeatFilter(interval=30.0)
        assert repeat.filter(_record("Unable connect to node %s"))
        assert not any(repeat.filter(_record("Unable connect to node %s")) for _ in range(50))
        assert repeat.filter(_record("another message"))
        clock.tick(31)
        later = _record("Unable connect to node %s")
        assert repeat.filter(later)
        assert "and 50 more like it" in str(later.msg)


def test_every_aiokafka_logger_is_quietened_and_ours_are_not() -> None:
    with freeze_time("2026-11-30 12:00:00"):
        noise = KafkaNoise(interval=30.0)
        fetcher = "aiokafka.consumer.fetcher"
        assert noise.filter(_record("Failed fetch messages from %s: %s", fetcher))
        assert not noise.filter(_record("Failed fetch messages from %s: %s", fetcher))
        ours = "exporter.kafka.runtime"
        assert all(noise.filter(_record("%s; retrying", ours)) for _ in range(5))


def test_the_bootstrap_failure_is_left_to_the_exporter_s_own_diagnosis() -> None:
    assert not KafkaNoise().filter(_record('Unable connect to "%s:%s": %s'))
    assert KafkaNoise().filter(_record("Unable connect to node with id %s: %s"))
