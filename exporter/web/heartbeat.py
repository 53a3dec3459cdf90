"""A heartbeat of the asyncio event loop, read by the HTTP thread for ``/healthz``.

The HTTP server runs in its own thread, so it keeps answering while the event loop is stuck (a
blocking call, a runaway check): without a heartbeat ``/healthz`` would say "ok" for a process
that checks nothing any more. A restart is the only cure for a stuck loop, so liveness fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

__all__ = ["BEAT_SECONDS", "STALE_AFTER_SECONDS", "Heartbeat"]

# How often the event loop beats.
BEAT_SECONDS = 1.0
# How long without a beat means stuck. The loop yields every 50 ms while checking
# (YIELD_SECONDS in exporter.kafka.answers), so a healthy loop never comes close; 30 s leaves room
# for a full garbage collection of a large chunk store on a throttled CPU; the shipped liveness
# probe (every 20 s, 3 failures) then restarts a stuck process within about a minute and a half.
STALE_AFTER_SECONDS = 30.0


class Heartbeat:
    """When the event loop last ran; it is checked only once it has beaten once.

    A process whose loop never beats (a replay, the demo) is not judged by it.
    """

    def __init__(
        self,
        stale_after: float = STALE_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stale_after = stale_after
        self._clock = clock
        self._last: float | None = None

    def beat(self) -> None:
        self._last = self._clock()  # one assignment: safe to read from another thread

    def age(self) -> float | None:
        """Seconds since the last beat; None before the first."""
        last = self._last
        return None if last is None else self._clock() - last

    def stuck_for(self) -> float | None:
        """Seconds since the last beat when that is longer than ``stale_after``, else None."""
        age = self.age()
        return age if age is not None and age > self.stale_after else None

    async def keep_beating(self, stop: asyncio.Event, every: float = BEAT_SECONDS) -> None:
        """Beat now and every ``every`` seconds until ``stop`` is set."""
        while not stop.is_set():
            self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
