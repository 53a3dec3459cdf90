"""Is the quote a few characters away from its span? Small systematic shifts, told from typography.

The similarity line of the quote check (98 by default) exists for typography, which moves
nothing: a curly quote for a straight one, a hyphen for U+2010, a no-break space for a space. It
also accepts a span that moved by a few characters, since a span k characters early still holds
all but k characters of its quote: a re-extraction that puts a byte-order mark, a page marker or
a heading sigil before every chunk's text, or writes line breaks as CR LF, left most citations
``ok`` while every one of their spans pointed at other text (the bounds-check trap, inside the
quote check).

So before the similarity is asked, the folded quote is looked for near the span, in the cited
chunk. Found exactly at the span, nothing moved. Found elsewhere within the window, the span has
moved (or its end was cut: a line break inside the quote became two characters) and the citation
is drift, to be relocated like any other. Not found, the text itself changed, and the similarity
decides as before.

The window reaches as far as a shift the similarity line could still accept, and a little
further: beyond ``(1 - threshold/100) * 2 * len(quote)`` characters the span and the quote share
too little to score the threshold, and the quote check fails without help. It is measured on the
longer of the raw quote and the raw span, so whitespace that folding collapses (tabs expanded
into spaces, justified text) widens it as it widens the shift. The work is one fold of a window
about the quote's length, paid only by spans that do not hold their quote verbatim; a copy found
in it maps back to the chunk through the document's fold when the engine has one built (a span
of the live version of a document an earlier relocation folded), not through an offset map
built for the window.

:func:`span_check` is that whole check, the one the engine runs and the scenario generator's
ground truth applies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from exporter.checks.compare import FoldedQuote, span_too_long, text_matches
from exporter.checks.normalize import FoldedText, can_cut, fold, fold_with_map, folded_part

__all__ = [
    "NEAR_SLACK",
    "FoldedHost",
    "Nearby",
    "near_window",
    "quote_nearby",
    "span_check",
    "trimmed",
]

# Characters of the window beyond the widest shift the similarity line accepts: a shift by a few
# characters of a short quote scores far below the line, but is still a shift.
NEAR_SLACK = 32
# Occurrences of the quote examined in one window (each is folded again): a window holding more
# is a quote so short or a text so repetitive that nearness says nothing, and the similarity
# decides, as without the search.
_MAX_NEAR_OCCURRENCES = 16
# What may stand beside a quote inside a span that still holds it: spaces, and punctuation that
# closes (after the quote) or opens (before it) a sentence or a bracket. Not "%", "-", "<" or a
# degree sign: "10" with "%" beside it is another number.
_OPENING = frozenset("([{\"'\u2018\u201c\u00ab")
_CLOSING = frozenset(".,;:!?)]}\"'\u2019\u201d\u00bb")


def near_window(
    start: int, end: int, quote_chars: int, text_chars: int, threshold: float
) -> tuple[int, int]:
    """The raw window of a chunk of ``text_chars`` characters searched around ``[start, end)``.

    Its reach is measured on the longer of the raw quote and the raw span: a chunk whose
    whitespace is wider than the quote's (columns of a PDF, justified text) widens the span and
    any shift alike."""
    longer = max(quote_chars, end - start)
    reach = math.ceil((100.0 - threshold) / 100.0 * 2 * longer) + NEAR_SLACK
    return max(0, start - reach), min(text_chars, end + reach)


class FoldedHost(NamedTuple):
    """The cited chunk's document, folded once for all its citations (a document view's): a
    copy found near a span maps back to the chunk through this fold, instead of through an
    offset map built for the window (the costliest step of a search that finds one)."""

    text: str  # the document's text
    folded: FoldedText  # its fold
    offset: int  # where the chunk's text starts in ``text``


# Makes the cited chunk's FoldedHost when the search needs one (None: fold the window itself).
HostFactory = Callable[[], FoldedHost | None]


class Nearby:
    """What the window around a span holds of its quote."""

    __slots__ = ("held", "places")

    def __init__(self, held: bool, places: tuple[tuple[int, int], ...]) -> None:
        self.held = held  # the folded quote starts and ends exactly at the span
        self.places = places  # raw chunk spans of the other copies in the window

    @property
    def moved(self) -> bool:
        """The quote is near, but not at the span: the span moved, or its end was cut."""
        return not self.held and bool(self.places)


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _inside_with_punctuation(text: str, place: tuple[int, int], span: tuple[int, int]) -> bool:
    """The span holds the whole quote and, beside it, only spaces and sentence punctuation.

    No shift makes that: a span moved by k characters loses k characters of its quote. It is a
    span recorded a little wider than its quote at answer time (the sentence's full stop, a
    closing bracket), and a reader sees the quote: nothing moved.
    """
    if not (span[0] <= place[0] and place[1] <= span[1]):
        return False
    before, after = text[span[0] : place[0]], text[place[1] : span[1]]
    return all(c.isspace() or c in _OPENING for c in before) and all(
        c.isspace() or c in _CLOSING for c in after
    )


def quote_nearby(  # noqa: PLR0917 - a quote, where it was, and how far to look
    quote: FoldedQuote,
    text: str,
    start: int,
    end: int,
    threshold: float,
    host: HostFactory | None = None,
) -> Nearby:
    """Where the folded ``quote`` occurs in ``text`` (a chunk) near ``[start, end)``; ``host``
    gives the chunk's folded document when there is one to read (the same answer, sooner).

    Bounded by the quote: a span too long to hold it is not searched around (it would make the
    window a whole chunk), and an occurrence counts only where the raw text it maps back to
    folds to the quote itself (a quote "Stage I" is no occurrence in "Stage \u2161", which folds
    to "Stage II" and maps back whole).
    """
    if not quote.text or span_too_long(quote, text[start:end]):
        return Nearby(False, ())
    lo, hi = near_window(start, end, len(quote.raw), len(text), threshold)
    window = _Window(text, lo, hi, host)
    needle = quote.text
    at = window.folded.find(needle)
    if at == -1:
        return Nearby(False, ())  # the usual answer, without building the offset map
    span = trimmed(text, start, end)
    places: list[tuple[int, int]] = []
    for _ in range(_MAX_NEAR_OCCURRENCES):
        if at == -1:
            return Nearby(False, tuple(places))
        place = trimmed(text, *window.to_raw(at, at + len(needle)))
        found = text[place[0] : place[1]]
        # the raw quote itself folds to the quote: only another text there is folded again
        if found == quote.raw or fold(found).strip() == quote.text:
            if place == span or _inside_with_punctuation(text, place, span):
                return Nearby(True, ())
            places.append(place)
        at = window.folded.find(needle, at + 1)
    return Nearby(False, ())  # too many copies: nearness says nothing


# How far inside a window its ends may move to a boundary that folds apart from its
# neighbours (a run of spaces or a hyphenated line break is rarely longer).
_EDGE_CHARS = 16


def _first_cut(text: str, offsets: range) -> int | None:
    """The first of ``offsets`` where ``text`` folds apart (see :func:`can_cut`)."""
    return next((at for at in offsets if can_cut(text, at)), None)


class _Window:
    """The window ``text[lo:hi]`` of a chunk, folded, and the way back from its folded offsets
    to the chunk's.

    ASCII folds only shorten (a join removed, a run of spaces or dashes made one) or swap one
    character for one: an ASCII window that kept its length folded offset for offset, and needs
    no map. Any other window maps back through the chunk's folded document when there is one
    (``host``): between the first and the last boundary inside the window that fold apart from
    their neighbours, the window's fold is a slice of the document's, with the same map back.
    Only an occurrence outside those (in the few characters at either end) builds the window's
    own map.
    """

    __slots__ = (
        "_factory",
        "_hi",
        "_host",
        "_identity",
        "_lo",
        "_map",
        "_middle",
        "_text",
        "folded",
    )

    def __init__(self, text: str, lo: int, hi: int, host: HostFactory | None) -> None:
        self._text, self._lo, self._hi = text, lo, hi
        raw = text[lo:hi]
        self.folded = fold(raw)
        self._identity = raw.isascii() and len(self.folded) == len(raw)
        self._factory = host  # asked for the host on the first map back, if one is needed
        self._host: FoldedHost | None = None
        self._map: FoldedText | None = None  # the window's own map, built only if needed
        # (folded start, folded end) of the part mapped through the host, and the host's
        # folded offset of its start
        self._middle: tuple[int, int, int] | None = None

    def to_raw(self, start: int, end: int) -> tuple[int, int]:
        """The chunk's span of the window's folded ``[start, end)``."""
        if self._identity:
            return self._lo + start, self._lo + end
        if self._factory is not None:
            self._middle = self._through_host(self._factory())
            self._factory = None
        middle, host = self._middle, self._host
        if middle is not None and host is not None and middle[0] <= start and end <= middle[1]:
            shift = middle[2] - middle[0]
            raw_start, raw_end = host.folded.to_raw(start + shift, end + shift)
            return raw_start - host.offset, raw_end - host.offset
        if self._map is None:  # no host, or an occurrence at the window's edge
            self._map = fold_with_map(self._text[self._lo : self._hi])
        raw_start, raw_end = self._map.to_raw(start, end)
        return self._lo + raw_start, self._lo + raw_end

    def _through_host(self, host: FoldedHost | None) -> tuple[int, int, int] | None:
        if host is None:
            return None
        text, lo, hi, document = self._text, self._lo, self._hi, host.text
        first, last = host.offset + lo, host.offset + hi
        if document[first:last] != text[lo:hi]:
            return None  # not this chunk's text
        inner_lo = _first_cut(document, range(first, min(last, first + _EDGE_CHARS) + 1))
        inner_hi = _first_cut(document, range(last, max(first, last - _EDGE_CHARS) - 1, -1))
        if inner_lo is None or inner_hi is None or inner_lo >= inner_hi:
            return None
        part = folded_part(host.folded, document, inner_lo, inner_hi)
        if part is None:
            return None
        self._host = host
        # the window folds as its three parts folded apart: the cuts fold apart in it too
        before = len(fold(document[first:inner_lo])) if inner_lo > first else 0
        after = len(fold(document[inner_hi:last])) if inner_hi < last else 0
        return before, len(self.folded) - after, part[0]


def span_check(
    quote: FoldedQuote,
    chunk_text: str,
    span: tuple[int, int],
    *,
    threshold: float,
    max_quote_chars: int,
    host: HostFactory | None = None,
) -> tuple[bool, float | None, bool]:
    """(matches, similarity, moved) of a span that does not hold its quote verbatim.

    Folded equality at the span is typography, which moves nothing. Else a copy of the folded
    quote near the span means the span moved; only when there is none does the similarity line
    decide, for a text that itself changed a little. A quote longer than ``max_quote_chars``
    (folded) is compared by folded equality only, with no similarity. ``host``: see
    :func:`quote_nearby`.
    """
    start, end = span
    text = chunk_text[start:end]
    folded = None if span_too_long(quote, text) else fold(text).strip()
    if folded == quote.text:
        return True, 100.0, False
    nearby = quote_nearby(quote, chunk_text, start, end, threshold, host)
    if nearby.held:
        return True, 100.0, False
    if len(quote.text) > max_quote_chars:
        return False, None, nearby.moved
    matches, similarity = text_matches(quote, text, threshold, folded=folded)
    # moved, the similarity at the span is still reported: how far off a reader would be
    return matches and not nearby.moved, similarity, nearby.moved
