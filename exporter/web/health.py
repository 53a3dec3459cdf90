"""What ``/healthz`` and ``/readyz`` answer: a status code and one sentence.

``/healthz`` is liveness: 200 while the process works, also when Kafka is unusable (restarting
fixes neither a wrong password nor a broker outage, it only loses the chunk store), with the
problem, if any, in its body. It fails only when a restart is the cure: the event loop has
stopped beating. ``/readyz`` answers 503 with the same sentence until the chunk store has caught
up, and while the loop is stuck.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.web.heartbeat import Heartbeat

__all__ = ["Health"]


def _no_problem() -> str | None:
    return None


@dataclass(frozen=True)
class Health:
    """``is_ready`` and ``problem`` are read at request time, from the HTTP thread."""

    is_ready: Callable[[], bool]
    problem: Callable[[], str | None] = _no_problem
    heartbeat: Heartbeat | None = None  # None: the loop is not watched (a replay, the demo)

    def liveness(self) -> tuple[int, str]:
        stuck = self._stuck()
        if stuck is not None:
            return 503, f"not ok: {stuck}\n"
        trouble = self.problem()
        return 200, "ok\n" if trouble is None else f"ok, but {trouble}\n"

    def readiness(self) -> tuple[int, str]:
        stuck = self._stuck()
        if stuck is not None:
            return 503, f"not ready: {stuck}\n"
        if self.is_ready():
            return 200, "ready\n"
        return 503, f"not ready: {self.problem() or 'catching up with the chunk store'}\n"

    def _stuck(self) -> str | None:
        age = None if self.heartbeat is None else self.heartbeat.stuck_for()
        if age is None:
            return None
        return f"the event loop is stuck: no heartbeat for {age:.0f} s, nothing is checked"
