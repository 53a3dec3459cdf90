"""Find where a stored quote lives now in its live document, or say why it cannot be said.

Outcomes besides success, never a guess: the quote is in several places that its stored
context and position hint cannot tell apart (``ambiguous``), it now runs across two chunks
(``straddles_chunks``), nothing is close enough (``quote_not_found``), the quote is too long to be
searched for approximately and is not there verbatim (``quote_too_long``), or the search ran out
of its CPU budget before it could be sure (``relocation_budget_exceeded``). A citation repaired to
the wrong occurrence is worse than one left unrepaired.

Between several places, evidence decides in this order (``Relocation.how``): the only place good
enough (``unique``), then the stored prefix and suffix (``context``), then the citation's
position in the document at answer time (``position_hint``, see :func:`_held_hint`).

Search order, cheapest first, all on the document folded once (:class:`DocumentView`):

1. every occurrence of the quote, raw (``exact``) or folded (``normalised``); an exact copy gets
   no shortcut past the context check when there are several;
2. only when there is none and the quote is long enough, approximate search (``fuzzy``). A
   candidate must score at least the threshold and state the same numbers and negations as the
   quote (a near-copy that says 60 days is not the quote that said 30); a true match differs from
   the quote by at most ``d = (1 - t/100) * 2 * len`` insertions/deletions (threshold ``t``), so
   cutting the quote into ``d + 1`` pieces guarantees one piece occurs verbatim (pigeonhole).
   The occurrences of the pieces are the only windows aligned in full: the work is bounded and
   no true match is lost, unlike a sliding window of fixed length.

Work is bounded whatever the input: quotes longer than ``max_fuzzy_chars`` are never aligned
approximately (alignment grows with the square of the length), stored context is compared over
at most :data:`CONTEXT_CHARS` characters, windows that cannot reach the threshold are dropped by
a cheap upper bound before they are aligned, and a :class:`Budget` of CPU time is checked
between every costly step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.distance import Indel, LCSseq

from exporter.checks.compare import FoldedQuote, facts
from exporter.checks.normalize import fold
from exporter.checks.store import DocumentView, Placement

__all__ = [
    "AMBIGUOUS",
    "BUDGET_EXCEEDED",
    "BY_CONTEXT",
    "BY_POSITION_HINT",
    "FOUND",
    "NOT_FOUND",
    "STRADDLES",
    "TOO_LONG",
    "UNIQUE",
    "UNREPAIRED_OUTCOMES",
    "Budget",
    "Place",
    "PositionHint",
    "Relocation",
    "relocate",
]

FOUND = "found"
AMBIGUOUS = "ambiguous"
STRADDLES = "straddles_chunks"
NOT_FOUND = "quote_not_found"
TOO_LONG = "quote_too_long"
BUDGET_EXCEEDED = "relocation_budget_exceeded"
# Every way relocation can fail (the reasons of unrepaired drift).
UNREPAIRED_OUTCOMES = (AMBIGUOUS, STRADDLES, NOT_FOUND, TOO_LONG, BUDGET_EXCEEDED)

# Folded quotes shorter than this are only relocated exactly: short strings match by accident.
MIN_FUZZY_LENGTH = 24
# Shortest verbatim piece searched for in fuzzy mode.
MIN_ANCHOR_LENGTH = 8
# Bounds on the work per citation. A search that meets more candidates than these does not
# examine them all, so it never claims a unique place: the quote is ambiguous there.
MAX_OCCURRENCES = 256
MAX_ANCHOR_HITS = 64
MAX_WINDOWS = 24
# A fuzzy place must beat the runner-up by this many points, or context must separate them.
FUZZY_MARGIN = 2.0
# Context (prefix/suffix) decides between places only when it is this good and this clear.
CONTEXT_FLOOR = 80.0
CONTEXT_MARGIN = 15.0
# Stored context is compared over at most this many characters next to the quote: twice the 32
# that Hypothesis stores in a W3C TextQuoteSelector. Longer context is cut, not only for speed
# (aligning a megabyte of it would take minutes): the text nearest the quote tells copies apart,
# and the further a window reaches, the more every copy's surroundings look alike.
CONTEXT_CHARS = 64
# How the one place was told apart from the others (Relocation.how, a repair's "how").
UNIQUE = "unique"
BY_CONTEXT = "context"
BY_POSITION_HINT = "position_hint"


class Budget:
    """CPU time one relocation may spend.

    Thread CPU time, not wall time: a busy neighbour process or a slow scrape does not eat into
    it, so a citation is cut short only by its own cost. The clock starts at the first
    :meth:`check`, not at construction: reading a thread's CPU time is a system call (ten
    times the cost of the wall clock here), and most relocations end before they look at their
    budget at all. Later checks read the wall clock first: a thread spends no more CPU time
    than the time that passed, so while less than the budget has passed, it is not spent.
    """

    __slots__ = ("_cpu_deadline", "_seconds", "_wall_deadline")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._cpu_deadline: float | None = None
        self._wall_deadline = 0.0

    def check(self) -> None:
        """Raise :class:`OutOfBudgetError` once the budget is spent."""
        if self._cpu_deadline is None:
            self._cpu_deadline = time.thread_time() + self._seconds
            self._wall_deadline = time.perf_counter() + self._seconds
        elif time.perf_counter() > self._wall_deadline and time.thread_time() > self._cpu_deadline:
            raise OutOfBudgetError


class OutOfBudgetError(Exception):
    """The relocation's budget is spent; it cannot say where the quote is."""


_UNLIMITED = 3600.0
# Alignment candidates between two looks at the budget.
_CHECK_EVERY = 16


@dataclass(frozen=True, slots=True)
class Place:
    """A candidate location: raw document span, folded span, similarity 0-100, method."""

    start: int
    end: int
    folded_start: int
    folded_end: int
    similarity: float
    method: str


@dataclass(frozen=True, slots=True)
class PositionHint:
    """Where the quote was in its whole document at answer time (``doc_span``), and that
    document's fingerprint (``doc_sha256``): together, what :func:`_held_hint` trusts."""

    start: int
    end: int
    doc_sha256: str


@dataclass(frozen=True, slots=True)
class Relocation:
    """The relocator's answer; ``placement`` is the chunk holding the place when found, ``how``
    what singled the place out (``unique``, ``context`` or ``position_hint``)."""

    outcome: str
    place: Place | None = None
    placement: Placement | None = None
    how: str | None = None


class TooManyPlacesError(Exception):
    """The search met more candidates than it examines: it cannot say the place is unique."""


def _occurrences(
    haystack: str, needle: str, limit: int = MAX_OCCURRENCES, budget: Budget | None = None
) -> list[int]:
    """Every start of ``needle``; raises TooManyPlacesError past ``limit`` of them."""
    found: list[int] = []
    at = haystack.find(needle)
    while at != -1:
        if len(found) == limit:
            raise TooManyPlacesError
        found.append(at)
        if budget is not None:
            budget.check()  # a long needle in a repetitive text: each find is a long scan
        at = haystack.find(needle, at + 1)
    return found


def _verbatim_places(quote: FoldedQuote, view: DocumentView, budget: Budget) -> list[Place]:
    folded = view.folded
    exact = set(_occurrences(view.text, quote.raw, budget=budget))
    places = []
    seen = set()
    length = len(quote.text)
    for at in _occurrences(folded.text, quote.text, budget=budget):
        start, end = folded.to_raw(at, at + length)
        if (start, end) in seen:
            continue
        seen.add((start, end))
        budget.check()  # each place is folded again: a long quote in a repetitive text
        # the raw quote itself there folds to the quote: only another text is folded again
        verbatim = start in exact and end - start == len(quote.raw)
        if not verbatim and fold(view.text[start:end]).strip() != quote.text:
            # the occurrence ends or starts inside one folded character, which maps back whole:
            # "Stage I" inside "Stage \u2161" (folded "Stage II") is another statement
            continue
        method = "exact" if verbatim else "normalised"
        places.append(Place(start, end, at, at + length, 100.0, method))
    return places


def _align(
    quote: str, text: str, window: tuple[int, int], slack: int, budget: Budget
) -> tuple[int, int]:
    """Best-matching span of ``text[lo:hi]`` for ``quote``: LCS alignment, then each end tuned."""
    lo, hi = window
    equal = [op for op in Indel.opcodes(quote, text[lo:hi]) if op.tag == "equal"]
    if not equal:
        return lo, lo
    start, end = lo + equal[0].dest_start, lo + equal[-1].dest_end
    # a score below the best so far is never needed: the cutoff lets rapidfuzz give up early
    best = fuzz.ratio(quote, text[start:end])
    ends = range(max(start + 1, end - slack), min(len(text), end + slack) + 1)
    for n, candidate in enumerate(ends):
        if n % _CHECK_EVERY == 0:
            budget.check()
        score = fuzz.ratio(quote, text[start:candidate], score_cutoff=best)
        if score > best:
            best, end = score, candidate
    starts = range(max(0, start - slack), min(end - 1, start + slack) + 1)
    for n, candidate in enumerate(starts):
        if n % _CHECK_EVERY == 0:
            budget.check()
        score = fuzz.ratio(quote, text[candidate:end], score_cutoff=best)
        if score > best:
            best, start = score, candidate
    while start < end and text[start] == " ":
        start += 1
    while end > start and text[end - 1] == " ":
        end -= 1
    return start, end


def _lcs_needed(length: int, score: float) -> int:
    """Fewest characters in common with a quote of ``length`` for a ratio of ``score``.

    The ratio of the quote and a span with ``c`` characters in common is at most
    ``200c / (length + c)`` (the span being as short as it can be), so any window in which the
    quote shares fewer characters cannot hold a span that scores ``score``.
    """
    return max(0, int(score * length / (200.0 - score)))


def _fuzzy_places(
    quote: FoldedQuote, view: DocumentView, threshold: float, budget: Budget
) -> list[Place]:
    """Places scoring within FUZZY_MARGIN of the threshold (rivals count, not only winners)."""
    folded = view.folded
    text, q = folded.text, quote.text
    length = len(q)
    slack = int((100.0 - threshold) / 100.0 * 2 * length)
    pieces = slack + 1
    if length // pieces < MIN_ANCHOR_LENGTH:
        pieces = max(1, length // MIN_ANCHOR_LENGTH)
    piece_length = length // pieces

    estimated_starts: list[int] = []
    for k in range(pieces):
        budget.check()
        offset = k * piece_length
        anchor = q[offset : offset + piece_length]
        estimated_starts.extend(at - offset for at in _occurrences(text, anchor, MAX_ANCHOR_HITS))
    if not estimated_starts:
        return []

    estimated_starts.sort()
    # one true match puts its anchors' estimated starts within `slack` of its start, so a
    # cluster never grows wider than 2 * slack + 1: chained hits make several windows, not one
    # window of the whole document
    clusters: list[list[int]] = [[estimated_starts[0]]]
    for start in estimated_starts[1:]:
        cluster = clusters[-1]
        if start - cluster[-1] <= slack + 1 and start - cluster[0] <= 2 * slack + 1:
            cluster.append(start)
        else:
            clusters.append([start])
    clusters.sort(key=len, reverse=True)

    if len(clusters) > MAX_WINDOWS and len(clusters[MAX_WINDOWS]) > 1:
        raise TooManyPlacesError  # more well-supported windows than are aligned
    scored: list[Place] = []
    needed = _lcs_needed(length, threshold - FUZZY_MARGIN)
    for cluster in clusters[:MAX_WINDOWS]:
        budget.check()
        lo = max(0, cluster[0] - slack)
        hi = min(len(text), cluster[-1] + length + slack)
        if LCSseq.similarity(q, text[lo:hi], score_cutoff=needed) < needed:
            continue  # no span of this window can come close enough: do not align it
        start, end = _align(q, text, (lo, hi), slack, budget)
        if end <= start:
            continue
        score = float(fuzz.ratio(q, text[start:end]))
        # a changed number or negation is another statement, however similar: not a candidate
        if score >= threshold - FUZZY_MARGIN and facts(text[start:end]) == quote.facts:
            raw_start, raw_end = folded.to_raw(start, end)
            scored.append(Place(raw_start, raw_end, start, end, score, "fuzzy"))

    scored.sort(key=lambda p: p.similarity, reverse=True)
    places: list[Place] = []
    for place in scored:
        if all(place.end <= kept.start or place.start >= kept.end for kept in places):
            places.append(place)
    return places


def _context_score(view: DocumentView, place: Place, prefix: str, suffix: str) -> float:
    """How well the text around ``place`` agrees with the stored prefix and suffix (0-100)."""
    text = view.folded.text
    scores = []
    if prefix:
        before = text[max(0, place.folded_start - len(prefix) - 1) : place.folded_start].rstrip()
        scores.append(fuzz.ratio(prefix, before[-len(prefix) :]))
    if suffix:
        after = text[place.folded_end : place.folded_end + len(suffix) + 1].lstrip()
        scores.append(fuzz.ratio(suffix, after[: len(suffix)]))
    return sum(scores) / len(scores)


def _held_hint(contenders: list[Place], view: DocumentView, hint: PositionHint) -> Place | None:
    """The contender the position hint singles out: the one that *holds* it, or None.

    A hint holds where the document has the fingerprint it had at answer time and the quote byte
    for byte, starting and ending exactly at the hinted offsets. No rule on positions alone is
    safe, with a margin or without:

    - a chunk-size change leaves the document as it was, so the quote is exactly at its hint,
      however close its copies (in Debian's man pages, a third of the repeated sentences have a
      copy within 256 characters: any margin wide enough to matter refuses them);
    - a re-extraction moves text by an amount that accumulates along the document: the same
      man pages rendered at 65, 100 and 120 columns instead of 80 moved text by 4% of its
      position at the median, up to 31% (thousands of characters). Nearness means nothing
      there, and not even exactness: of the 23 repeated sentences whose hinted offsets still
      held the quote byte for byte, 6 held a *neighbouring copy* moved there by the re-wrap
      (short sentences closing consecutive option paragraphs).

    What separates the two is the document, not the position: a chunk-size change keeps its
    text, a re-extraction that moves text changes it. Not always its length: an extractor that
    reads two columns in the other order keeps that, and the hinted offsets then hold the other
    column's copy. So the hint is trusted only when the document assembled from the live
    chunks' offsets has the fingerprint ``doc_sha256`` (exporter.records.fingerprint: whitespace
    kinds aside, the same characters at the same offsets).
    """
    if view.fingerprint != hint.doc_sha256:
        return None
    for place in contenders:
        if place.start == hint.start and place.end == hint.end and place.method == "exact":
            return place  # places are distinct spans: at most one holds the hint
    return None


def _choose(
    places: list[Place],
    view: DocumentView,
    prefix: str | None,
    suffix: str | None,
    threshold: float,
    *,
    hint: PositionHint | None,
) -> tuple[Place, str] | None:
    """The one place the evidence supports and how it was told apart, or None when it does
    not single one out."""
    best = max(places, key=lambda p: p.similarity)
    if best.similarity < threshold:
        return None
    margin = FUZZY_MARGIN if best.method == "fuzzy" else 0.0
    contenders = [p for p in places if p.similarity >= best.similarity - margin]
    if len(contenders) == 1:
        return best, UNIQUE
    # the context nearest the quote decides; a megabyte of stored prefix must not cost seconds
    folded_prefix = fold(prefix[-2 * CONTEXT_CHARS :]).strip()[-CONTEXT_CHARS:] if prefix else ""
    folded_suffix = fold(suffix[: 2 * CONTEXT_CHARS]).strip()[:CONTEXT_CHARS] if suffix else ""
    hinted = _held_hint(contenders, view, hint) if hint is not None else None
    if not (folded_prefix or folded_suffix):
        return None if hinted is None else (hinted, BY_POSITION_HINT)
    scores = [(_context_score(view, p, folded_prefix, folded_suffix), p) for p in contenders]
    ranked = sorted(scores, key=lambda scored: scored[0], reverse=True)
    (top_score, top), (second_score, _) = ranked[0], ranked[1]
    if top_score >= CONTEXT_FLOOR and top_score - second_score >= CONTEXT_MARGIN:
        return top, BY_CONTEXT
    # the hint never overrides a context that fits another place better
    if hinted is not None and next(s for s, p in scores if p is hinted) >= top_score:
        return hinted, BY_POSITION_HINT
    return None


def relocate(
    quote: FoldedQuote,
    view: DocumentView,
    *,
    threshold: float,
    prefix: str | None = None,
    suffix: str | None = None,
    cited_chunk_id: str | None = None,
    hint: PositionHint | None = None,
    max_fuzzy_chars: int | None = None,
    budget: Budget | None = None,
) -> Relocation:
    """Find ``quote`` in ``view``; prefer the cited chunk when several chunks hold the place.

    ``hint`` is where the quote was in the whole document at answer time (the citation's
    ``doc_span`` and ``doc_sha256``); it is used only when the view places its chunks at their
    document offsets, so that its offsets are the document's. ``max_fuzzy_chars`` bounds the
    quotes searched for approximately; ``budget`` bounds the CPU time of the whole search (none:
    unlimited, for tests and tools).
    """
    if not quote.text:
        return Relocation(NOT_FOUND)
    budget = budget or Budget(_UNLIMITED)
    try:
        places = _verbatim_places(quote, view, budget)
        if not places and len(quote.text) >= MIN_FUZZY_LENGTH:
            if max_fuzzy_chars is not None and len(quote.text) > max_fuzzy_chars:
                return Relocation(TOO_LONG)
            places = _fuzzy_places(quote, view, threshold, budget)
    except OutOfBudgetError:
        return Relocation(BUDGET_EXCEEDED)
    except TooManyPlacesError:
        return Relocation(AMBIGUOUS)  # some candidates were not examined: no claim of one
    if not places:
        return Relocation(NOT_FOUND)
    chosen = _choose(
        places, view, prefix, suffix, threshold, hint=hint if view.has_doc_offsets else None
    )
    if chosen is None:
        best = max(place.similarity for place in places)
        outcome = AMBIGUOUS if best >= threshold else NOT_FOUND
        return Relocation(outcome)
    winner, how = chosen
    holders = view.chunks_holding(winner.start, winner.end)
    if not holders:
        return Relocation(STRADDLES, winner, how=how)
    holder = next((h for h in holders if h.chunk.chunk_id == cited_chunk_id), holders[0])
    return Relocation(FOUND, winner, holder, how)
