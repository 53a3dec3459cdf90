"""The stratified sample of an archive that a sweep sends to the entailment judge.

A model judge costs about 120 ms and $0.0004 a citation: judging a 180,000-citation archive on
every re-index would take hours and dollars, so a sweep judges a sample (2,000 by default). A
uniform sample would spend it where citations are plentiful and healthy; strata make it look
where the judge matters: by the answer's **age** (from ``emitted_at``) and by **near-miss
family** (how close the citation came to failing the span checks, or how hard its claim is).
Every non-empty stratum gets at least one citation, the rest is proportional to the strata's
sizes, and within a stratum the sample is spread over documents round-robin, so one huge
document cannot take a stratum's whole share.

The archive is streamed, in batches checked by several processes: every judgeable citation
gets a random key from the seed and its place in the input (:func:`sample_key`), and each
stratum keeps the ``2 x size`` smallest keys it has seen (bottom-k sampling: a uniform sample
that merges exactly however the input was split). Memory is at most strata x 2 x size candidates
whatever the archive holds, and the sample is the same for the same input, seed and ``now``,
whatever the number of worker processes. Pure: no I/O; the clock is an argument.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Generic, NamedTuple, TypeVar

from exporter.entailment.results import CLAIM_CHARS_KEPT

__all__ = [
    "AGE_BANDS",
    "FAMILIES",
    "KEY_SPACE",
    "STRATA",
    "KeyFilter",
    "StratifiedSample",
    "Stratum",
    "age_band",
    "allocate",
    "near_miss_family",
    "sample_key",
]

AGE_BANDS = ("under_7d", "7_30d", "30_180d", "over_180d", "unknown")
# One family per citation, in this order of precedence: the first that applies.
FAMILIES = ("repaired_drift", "conditional", "long_quote", "folded_below_100", "exact")
LONG_QUOTE_CHARS = 300
# Conditional language, where judges err most (about 6 times in 10).
_CONDITIONAL = re.compile(r"\b(?:if|unless|only|except|may|up to)\b")

T = TypeVar("T")


class Stratum(NamedTuple):
    """An answer's age band and a citation's near-miss family. A tuple, not a dataclass: a
    sweep looks up a stratum in a dict several times per judgeable citation, and a tuple
    hashes in C (a frozen dataclass calls its generated ``__hash__``); ordered alike."""

    age: str
    family: str


# Every stratum, made once: a sweep names one per judgeable citation.
STRATA = {(age, family): Stratum(age, family) for age in AGE_BANDS for family in FAMILIES}


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


def near_miss_family(repaired: bool, claim: str, quote_chars: int, similarity: float | None) -> str:
    """The near-miss family of a judgeable citation (see :data:`FAMILIES` for precedence).

    ``similarity`` is the folded similarity (0-100) at the span the quote now holds; below 100
    the span matched only after folding or approximately.
    """
    if repaired:
        return "repaired_drift"
    # a claim is kept to CLAIM_CHARS_KEPT characters: bounded work per citation
    if _CONDITIONAL.search(claim[:CLAIM_CHARS_KEPT].lower()) is not None:
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


# Keys are 64-bit: every key is below KEY_SPACE (a threshold of KEY_SPACE takes any key).
KEY_SPACE = 1 << 64
_MASK = KEY_SPACE - 1


def sample_key(seed: int, line: int, index: int) -> int:
    """The random key of the ``index``-th citation of input line ``line``, so the sample
    depends on the input and the seed only, not on how the work was split. Python's hash of a
    tuple of integers is the same in every process (unlike a string's) and well mixed; the
    multiplication spreads it over 64 bits. A quarter of the cost of a splitmix64 in Python,
    for a key computed for every judgeable citation."""
    return (hash((seed, line, index)) * 0x9E3779B97F4A7C15) & _MASK


class KeyFilter:
    """Per stratum, the ``capacity`` smallest keys seen so far: what one worker process of a
    sweep knows without asking. A key that is not among them cannot be among the smallest of
    the whole archive either, so a worker sends only the candidates this admits, and the
    bottom-k of what it sent is the bottom-k of what it saw."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._heaps: dict[Stratum, list[int]] = {}  # max-heaps, keys negated

    def admit(self, stratum: Stratum, key: int) -> bool:
        """Whether ``key`` is, so far, among the ``capacity`` smallest of ``stratum``."""
        heap = self._heaps.get(stratum)
        if heap is None:
            heap = self._heaps[stratum] = []
        if len(heap) < self.capacity:
            heapq.heappush(heap, -key)
            return True
        if key < -heap[0]:
            heapq.heapreplace(heap, -key)
            return True
        return False


class StratifiedSample(Generic[T]):
    """The sample of an archive: per stratum the ``size`` citations of smallest key (a uniform
    sample, mergeable however the archive was split), and how many each stratum held.

    Workers count every judgeable citation (:meth:`count`) but offer only those whose key is
    below their stratum's :meth:`thresholds` (a key above the current threshold can never be
    in the final sample: thresholds only fall), so memory and transfer stay at about strata x
    size candidates whatever the archive holds.
    """

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 0:
            raise ValueError(f"the sample size must not be negative, got {size}")
        self.size = size
        self.seed = seed
        # twice the sample per stratum: round-robin over documents needs some to choose from
        self.capacity = 2 * size
        self._seen: dict[Stratum, int] = {}
        # per stratum a max-heap (keys negated) of (-key, -arrival, document, item), at most
        # size long; the arrival number breaks ties between equal keys without comparing items
        self._heaps: dict[Stratum, list[tuple[int, int, str, T]]] = {}
        self._arrivals = 0

    def count(self, stratum: Stratum, citations: int = 1) -> None:
        """``citations`` more judgeable citations of ``stratum`` were seen."""
        self._seen[stratum] = self._seen.get(stratum, 0) + citations

    def offer(self, stratum: Stratum, key: int, document: str, item: T) -> None:
        """A candidate (counted apart, with :meth:`count`): kept while its key is among the
        ``2 x size`` smallest of its stratum."""
        if self.size == 0:
            return
        self._arrivals += 1
        entry = (-key, -self._arrivals, document, item)
        heap = self._heaps.setdefault(stratum, [])
        if len(heap) < self.capacity:
            heapq.heappush(heap, entry)
        elif entry[:2] > heap[0][:2]:  # a smaller key (or an equal one that came first)
            heapq.heapreplace(heap, entry)

    def add(
        self, counts: dict[Stratum, int], candidates: Iterable[tuple[Stratum, int, str, T]]
    ) -> None:
        """What part of an archive came to: its judgeable citations per stratum, and the
        candidates (stratum, key, document, item) it offers."""
        for stratum, seen in counts.items():
            self.count(stratum, seen)
        for stratum, key, document, item in candidates:
            self.offer(stratum, key, document, item)

    def thresholds(self) -> dict[Stratum, int]:
        """Per stratum, the key a candidate must be below to be worth offering (strata not
        listed take any key)."""
        return {s: -heap[0][0] + 1 for s, heap in self._heaps.items() if len(heap) >= self.capacity}

    @property
    def totals(self) -> dict[Stratum, int]:
        """Judgeable citations seen, per stratum."""
        return dict(sorted(self._seen.items()))

    def chosen(self) -> Iterator[tuple[Stratum, T]]:
        """The sample, stratum by stratum, each spread over its documents round-robin."""
        for stratum, count in allocate(self.totals, self.size).items():
            kept = sorted(self._heaps.get(stratum, []), key=lambda e: (-e[0], -e[1]))
            documents = [(document, item) for _, _, document, item in kept]
            for item in _round_robin(documents, count):
                yield stratum, item


def _round_robin(entries: list[tuple[str, T]], count: int) -> list[T]:
    """``count`` items taken one document at a time, documents in order of first appearance."""
    by_document: dict[str, list[T]] = {}
    for document, item in entries:
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
