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
about the quote's length, paid only by spans that do not hold their quote verbatim.

:func:`span_check` is that whole check, the one the engine runs and the scenario generator's
ground truth applies.
"""

from __future__ import annotations

import math

from exporter.checks.compare import FoldedQuote, span_too_long, text_matches
from exporter.checks.normalize import fold, fold_with_map

__all__ = ["NEAR_SLACK", "Nearby", "near_window", "quote_nearby", "span_check", "trimmed"]

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


def quote_nearby(quote: FoldedQuote, text: str, start: int, end: int, threshold: float) -> Nearby:
    """Where the folded ``quote`` occurs in ``text`` (a chunk) near ``[start, end)``.

    Bounded by the quote: a span too long to hold it is not searched around (it would make the
    window a whole chunk), and an occurrence counts only where the raw text it maps back to
    folds to the quote itself (a quote "Stage I" is no occurrence in "Stage \u2161", which folds
    to "Stage II" and maps back whole).
    """
    if not quote.text or span_too_long(quote, text[start:end]):
        return Nearby(False, ())
    lo, hi = near_window(start, end, len(quote.raw), len(text), threshold)
    window = text[lo:hi]
    folded_window = fold(window)
    if quote.text not in folded_window:
        return Nearby(False, ())  # the usual answer, without building the offset map
    # ASCII folds only shorten (a join removed, a run of spaces or dashes made one) or swap one
    # character for one: an ASCII window that kept its length folded offset for offset, and
    # needs no map
    mapped = (
        None if window.isascii() and len(folded_window) == len(window) else fold_with_map(window)
    )
    span = trimmed(text, start, end)
    places: list[tuple[int, int]] = []
    at = folded_window.find(quote.text)
    for _ in range(_MAX_NEAR_OCCURRENCES):
        if at == -1:
            return Nearby(False, tuple(places))
        if mapped is None:
            raw_start, raw_end = at, at + len(quote.text)
        else:
            raw_start, raw_end = mapped.to_raw(at, at + len(quote.text))
        place = trimmed(text, lo + raw_start, lo + raw_end)
        if fold(text[place[0] : place[1]]).strip() == quote.text:
            if place == span or _inside_with_punctuation(text, place, span):
                return Nearby(True, ())
            places.append(place)
        at = folded_window.find(quote.text, at + 1)
    return Nearby(False, ())  # too many copies: nearness says nothing


def span_check(
    quote: FoldedQuote,
    chunk_text: str,
    span: tuple[int, int],
    *,
    threshold: float,
    max_quote_chars: int,
) -> tuple[bool, float | None, bool]:
    """(matches, similarity, moved) of a span that does not hold its quote verbatim.

    Folded equality at the span is typography, which moves nothing. Else a copy of the folded
    quote near the span means the span moved; only when there is none does the similarity line
    decide, for a text that itself changed a little. A quote longer than ``max_quote_chars``
    (folded) is compared by folded equality only, with no similarity.
    """
    start, end = span
    text = chunk_text[start:end]
    folded = None if span_too_long(quote, text) else fold(text).strip()
    if folded == quote.text:
        return True, 100.0, False
    nearby = quote_nearby(quote, chunk_text, start, end, threshold)
    if nearby.held:
        return True, 100.0, False
    if len(quote.text) > max_quote_chars:
        return False, None, nearby.moved
    matches, similarity = text_matches(quote, text, threshold, folded=folded)
    # moved, the similarity at the span is still reported: how far off a reader would be
    return matches and not nearby.moved, similarity, nearby.moved
