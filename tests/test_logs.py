"""The log stays readable while the broker is away."""

from __future__ import annotations

import logging

from freezegun import freeze_time

from exporter.service.logs import RepeatFilter


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", logging.ERROR, __file__, 1, message, None, None)


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
