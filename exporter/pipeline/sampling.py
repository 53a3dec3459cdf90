"""The stratified sample of an archive that a sweep sends to the entailment judge.

A model judge costs about 120 ms and $0.0004 a citation: judging a 180,000-citation archive on
every re-index would take hours and dollars, so a sweep judges a sample (2,000 by default). A
uniform sample would spend it where citations are plentiful and healthy; strata make it look
where the judge matters: by the answer's **age** (from ``emitted_at``) and by **near-miss
family** (how close the citation came to failing the span checks, or how hard its claim is).
Every non-empty stratum gets at least one citation, the rest is proportional to the strata's
sizes, and within a stratum the sample is spread over documents round-robin, so one huge
document cannot take a stratum's whole share.

The archive is streamed: each stratum keeps a bounded reservoir (Algorithm R, seeded), so
memory is at most strata x sample size candidates whatever the archive holds, and the sample is
the same for the same input, seed and ``now``. Pure: no I/O; the clock is an argument.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, TypeVar

__all__ = [
    "AGE_BANDS",
    "FAMILIES",
    "StratifiedSample",
    "Stratum",
    "age_band",
    "allocate",
    "near_miss_family",
]

AGE_BANDS = ("under_7d", "7_30d", "30_180d", "over_180d", "unknown")
# One family per citation, in this order of precedence: the first that applies.
FAMILIES = ("repaired_drift", "conditional", "long_quote", "folded_below_100", "exact")
LONG_QUOTE_CHARS = 300
# Conditional language, where judges err most (about 6 times in 10).
_CONDITIONAL = re.compile(r"\b(?:if|unless|only|except|may|up to)\b", re.IGNORECASE)
# Only this much of a claim is searched for conditional language: bounded work per citation.
_CLAIM_CHARS_SEARCHED = 2_000

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class Stratum:
    age: str
    family: str


def age_band(emitted_at: str | None, now: datetime) -> str:
    """The age band of an answer emitted at ``emitted_at`` (RFC 3339), as seen at ``now``.

    A missing or unreadable timestamp is ``unknown``, and so is one in the future (a clock
    skewed by more than a minute says nothing about age).
    """
    if emitted_at is None:
        return "unknown"
    try:
        emitted = datetime.fromisoformat(emitted_at)
    except ValueError:
        return "unknown"
    if emitted.tzinfo is None:
        emitted = emitted.replace(tzinfo=UTC)
    days = (now - emitted).total_seconds() / 86_400
    if days < -1 / 1_440:
        return "unknown"
    if days < 7:
        return "under_7d"
    if days < 30:
        return "7_30d"
    if days < 180:
        return "30_180d"
    return "over_180d"


def near_miss_family(
    *, repaired: bool, claim: str, quote_chars: int, similarity: float | None
) -> str:
    """The near-miss family of a judgeable citation (see :data:`FAMILIES` for precedence).

    ``similarity`` is the folded similarity (0-100) at the span the quote now holds; below 100
    the span matched only after folding or approximately.
    """
    if repaired:
        return "repaired_drift"
    if _CONDITIONAL.search(claim, 0, _CLAIM_CHARS_SEARCHED) is not None:
        return "conditional"
    if quote_chars > LONG_QUOTE_CHARS:
        return "long_quote"
    if similarity is not None and similarity < 100.0:
        return "folded_below_100"
    return "exact"


def allocate(totals: dict[Stratum, int], size: int) -> dict[Stratum, int]:
    """How many of each stratum to sample: at least one of every non-empty stratum, the rest
    in proportion to their sizes (largest remainders first, ties in stratum order), never more
    than a stratum holds. With more non-empty strata than ``size``, each still gets one."""
    present = sorted(s for s, n in totals.items() if n > 0)
    whole = sum(totals[s] for s in present)
    if whole <= size:
        return {s: totals[s] for s in present}
    chosen = dict.fromkeys(present, 1)
    rest = size - len(present)
    if rest <= 0:
        return chosen
    shares = {s: rest * (totals[s] - 1) / (whole - len(present)) for s in present}
    for s in present:
        chosen[s] += int(shares[s])
    left = size - sum(chosen.values())
    by_remainder = sorted(present, key=lambda s: (-(shares[s] - int(shares[s])), s))
    for s in by_remainder:
        if left <= 0:
            break
        if chosen[s] < totals[s]:
            chosen[s] += 1
            left -= 1
    return chosen


@dataclass
class _Reservoir(Generic[T]):
    capacity: int
    seen: int = 0
    items: list[tuple[int, str, T]] = field(default_factory=list)  # (arrival, document, item)


class StratifiedSample(Generic[T]):
    """Offer every judgeable citation of an archive, in input order; :meth:`chosen` is the
    sample. Deterministic for the same offers and seed."""

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 0:
            raise ValueError(f"the sample size must not be negative, got {size}")
        self.size = size
        self._random = random.Random(seed)
        self._reservoirs: dict[Stratum, _Reservoir[T]] = {}

    def offer(self, stratum: Stratum, document: str, item: T) -> None:
        reservoir = self._reservoirs.get(stratum)
        if reservoir is None:
            reservoir = self._reservoirs[stratum] = _Reservoir(self.size)
        arrival = reservoir.seen
        reservoir.seen += 1
        if len(reservoir.items) < reservoir.capacity:
            reservoir.items.append((arrival, document, item))
            return
        slot = self._random.randrange(reservoir.seen)
        if slot < reservoir.capacity:
            reservoir.items[slot] = (arrival, document, item)

    @property
    def totals(self) -> dict[Stratum, int]:
        """Judgeable citations offered, per stratum."""
        return {stratum: r.seen for stratum, r in sorted(self._reservoirs.items())}

    def chosen(self) -> Iterator[tuple[Stratum, T]]:
        """The sample, stratum by stratum, each spread over its documents round-robin."""
        for stratum, count in allocate(self.totals, self.size).items():
            reservoir = self._reservoirs[stratum]
            for item in _round_robin(sorted(reservoir.items, key=lambda entry: entry[0]), count):
                yield stratum, item


def _round_robin(entries: list[tuple[int, str, T]], count: int) -> list[T]:
    """``count`` items taken one document at a time, documents in order of first arrival."""
    by_document: dict[str, list[T]] = {}
    for _, document, item in entries:
        by_document.setdefault(document, []).append(item)
    queues = [list(reversed(items)) for items in by_document.values()]
    taken: list[T] = []
    while queues and len(taken) < count:
        for queue in queues:
            if len(taken) >= count:
                break
            taken.append(queue.pop())
        queues = [queue for queue in queues if queue]
    return taken
