"""Notices a re-index: chunks cut by a chunker fingerprint not seen before, then quiet."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["ReindexWatch"]

log = logging.getLogger(__name__)


class ReindexWatch:
    """Notices a new chunker fingerprint and says when the chunk stream has gone quiet."""

    def __init__(
        self,
        quiet_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        on_new_chunker: Callable[[str], None] | None = None,
    ) -> None:
        self._quiet = quiet_seconds
        self._clock = clock
        self._on_new_chunker = on_new_chunker
        self._known: set[str] = set()
        self._armed = False
        self._pending: str | None = None
        self._last_chunk = 0.0

    def arm(self) -> None:
        """From now on a fingerprint not seen before means a re-index (not the initial load)."""
        self._armed = True

    def saw(self, chunker: str) -> None:
        self._last_chunk = self._clock()
        if chunker not in self._known:
            self._known.add(chunker)
            if self._armed:
                self._pending = chunker
                log.info("chunks cut by a new chunker %r are arriving", chunker)
                if self._on_new_chunker is not None:
                    self._on_new_chunker(chunker)

    def touched(self) -> None:
        """Any chunk record arrived (quiet time restarts)."""
        self._last_chunk = self._clock()

    def due(self) -> str | None:
        """The new fingerprint once the stream has been quiet long enough, once."""
        if self._pending is None or self._clock() - self._last_chunk < self._quiet:
            return None
        chunker, self._pending = self._pending, None
        return chunker
