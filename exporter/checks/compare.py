"""Does the text at a span still say what the stored quote says?

A similarity ratio alone is not enough: "refunds within 30 days of purchase, except ..." and
"refunds within 60 days of purchase, except ..." differ by one character and score above 98 in a
long quote. So a match also needs the same numbers and the same negations after folding, each in
the same order: as collections, a span shifted by one token in "1 ... 0 ... 1" holds the same
numbers as its quote at 99.4 similarity while it marks other characters.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from exporter.checks.normalize import fold

__all__ = ["Facts", "FoldedQuote", "facts", "similarity", "span_too_long", "text_matches"]

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Negations in the languages the corpora prove (English, German, Japanese). Japanese has no
# spaces to bound words, so its markers are matched as they stand: verb endings (ない, なかっ,
# なく, ません, ず, ぬ) and the negating prefixes (不, 無, 非, 未). A few words merely contain
# one (少ない "few", まず "first"); both sides of a comparison hold them alike, so they only
# make a span cut mid-sentence less likely to pass.
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|nowhere|neither|nor|cannot|without)\b|n't\b"
    r"|\b(?:nicht|nichts|nie|niemals|niemand(?:e[mn])?|nirgends|nirgendwo|weder|ohne"
    r"|kein(?:e[mnrs]?)?|keineswegs)\b"
    r"|ない|なかっ|なく|ません|ず(?!つ)|ぬ|[不無非未]",
    re.IGNORECASE,
)


# Lengths may differ this much (plus twice the shorter) before a comparison is skipped as hopeless.
_LENGTH_SLACK = 64
# A raw span longer than this many times its raw quote is not even folded (folding collapses runs
# of whitespace and invisible characters, so a span may fold to far less than its raw length).
_SPAN_FOLD_FACTOR = 8


Facts = tuple[tuple[str, ...], tuple[str, ...]]


def facts(folded: str) -> Facts:
    """The numbers and the negations of a folded text, each in order: what must not change."""
    numbers = tuple(_NUMBER.findall(folded))
    return numbers, tuple(m.lower() for m in _NEGATION.findall(folded))


def similarity(a: str, b: str) -> float:
    """Similarity of two folded texts on the 0-100 scale (normalised Indel, like fuzz.ratio)."""
    return float(fuzz.ratio(a, b))


class FoldedQuote:
    """A stored quote folded once, reused by the check and the relocator.

    Its facts are extracted only when asked for: they matter only for texts that are already
    similar enough, which most failing spans are not.
    """

    __slots__ = ("_facts", "raw", "text")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.text = fold(raw).strip()
        self._facts: Facts | None = None

    @property
    def facts(self) -> Facts:
        if self._facts is None:
            self._facts = facts(self.text)
        return self._facts


def span_too_long(quote: FoldedQuote, raw_text: str) -> bool:
    """Whether a span is so much longer than its quote that it cannot hold it, whatever folding
    would make of it: then it is not folded at all (it may be a whole chunk crafted to fold
    slowly)."""
    return len(raw_text) > _SPAN_FOLD_FACTOR * len(quote.raw) + _LENGTH_SLACK


def text_matches(
    quote: FoldedQuote, raw_text: str, threshold: float, *, folded: str | None = None
) -> tuple[bool, float]:
    """Compare the raw text now at a span with the quote: (matches, similarity 0-100).

    ``folded``: the span already folded and stripped, by a caller that needed it first."""
    if raw_text == quote.raw:
        return True, 100.0
    if span_too_long(quote, raw_text):
        # a span this much longer than its quote cannot hold it, whatever folding would make of
        # it: say so without folding up to a whole chunk of text crafted to fold slowly
        shorter = len(quote.text)
        return False, 200.0 * shorter / (shorter + len(raw_text))
    if folded is None:
        folded = fold(raw_text).strip()
    shorter, longer = sorted((len(quote.text), len(folded)))
    if longer > 2 * shorter + _LENGTH_SLACK:
        # the ratio is at most this bound, far below any threshold: say so without aligning
        # texts of very different lengths (a broken span over a whole chunk, say)
        return False, 200.0 * shorter / (shorter + longer)
    score = similarity(quote.text, folded)
    if score < threshold:
        return False, score
    return facts(folded) == quote.facts, score
