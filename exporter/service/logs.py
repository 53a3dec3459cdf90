"""Logging set-up: one readable line per event, and no flood while the broker is away.

During an outage aiokafka logs every failed connection attempt, tens of lines a second; the
same lines once per interval say as much. The filter passes the first record of each message
template per interval and counts the rest into the next one it passes.
"""

from __future__ import annotations

import logging
import time

__all__ = ["RepeatFilter", "configure_logging"]


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


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kafka = logging.getLogger("aiokafka")
    kafka.setLevel(max(logging.WARNING, logging.getLevelNamesMapping()[level]))
    kafka.addFilter(RepeatFilter())
