"""Logging set-up: one readable line per event, and no flood while the broker is away.

During an outage aiokafka logs every failed connection attempt, tens of lines a second; the
same lines once per interval say as much. The filter passes the first record of each message
template per interval and counts the rest into the next one it passes. aiokafka's line for a
failed bootstrap is dropped altogether: the exporter follows every such failure with its own
line naming the cause (see ``kafka/diagnose.py``), and aiokafka's, for a TLS alert, says only
"connection closed".
"""

from __future__ import annotations

import logging
import time

__all__ = ["KafkaNoise", "RepeatFilter", "configure_logging"]


class RepeatFilter(logging.Filter):
    """Lets each message template through at most once per ``interval`` seconds."""

    def __init__(self, interval: float = 30.0) -> None:
        super().__init__()
        self._interval = interval
        self._last: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last[key] = now
        repeated = self._suppressed.pop(key, 0)
        if repeated:
            record.msg = f"{record.msg} (and {repeated} more like it in the last interval)"
        return True


# aiokafka's client.py, when a bootstrap server cannot be used
_BOOTSTRAP_FAILED = 'Unable connect to "%s:%s": %s'


class KafkaNoise(logging.Filter):
    """For aiokafka's records (of every one of its loggers): no bootstrap failures, and each
    message template at most once per interval (see :class:`RepeatFilter`). Installed on the
    handler, because a filter on the ``aiokafka`` logger does not see its children's records
    (``aiokafka.consumer.fetcher`` logs most of an outage)."""

    def __init__(self, interval: float = 30.0) -> None:
        super().__init__()
        self._repeat = RepeatFilter(interval)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "aiokafka" and not record.name.startswith("aiokafka."):
            return True
        if record.msg == _BOOTSTRAP_FAILED:
            return False
        return self._repeat.filter(record)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(
        max(logging.WARNING, logging.getLevelNamesMapping()[level])
    )
    noise = KafkaNoise()
    for handler in logging.getLogger().handlers:
        handler.addFilter(noise)
