"""Fold away what a re-extraction legitimately changes, with a map back to raw offsets.

Two documents produced by two extractors from the same source differ in ways that do not change
what a sentence says: compatibility forms (ligatures, full-width letters), dash and quote
variants, non-breaking and zero-width spaces, soft hyphens, runs of whitespace and words
hyphenated across a line break. Folding both sides makes those differences vanish while keeping
everything else, digits and negations included, intact.

The text is scanned once with a single regular expression that finds only the *irregular*
places; plain text between them is copied verbatim. That keeps folding at C speed for the usual
mostly-ASCII text, and lets :func:`fold` (text only, the hot path) and :func:`fold_with_map`
(text plus offset map, for relocation) share one definition, so they can never disagree.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["FoldedText", "fold", "fold_with_map"]

# Characters that are deleted outright (they carry no text).
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
# Hyphen and dash variants; all fold to "-", and between two letters they fold away entirely
# (a hyphenated line break or a compound written with or without its hyphen reads the same).
_UNICODE_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
_DASHES = "\\-" + _UNICODE_DASHES
_LETTER = r"[^\W\d_]"
_COMBINING = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"

_IRREGULAR = re.compile(
    # a hyphen (or soft hyphen, or invisible run) between letters (a letter may carry combining
    # marks), maybe with a line break
    rf"(?P<join>(?<={_LETTER}|[{_COMBINING}])[{_DASHES}{_INVISIBLE}]+(?:[^\S\n]*\n\s*)?(?={_LETTER}))"
    # whitespace and invisible runs, except a lone plain space
    rf"|(?P<space>(?! (?![\s{_INVISIBLE}]))[\s{_INVISIBLE}]+)"
    # dash runs (invisible characters inside them included), and any single non-ASCII dash
    rf"|(?P<dash>[{_DASHES}](?:[{_INVISIBLE}]*[{_DASHES}])+|[{_UNICODE_DASHES}])"
    # a character followed by combining marks, or any other non-ASCII character
    rf"|(?P<char>.[{_INVISIBLE}]*[{_COMBINING}]+|[^\x00-\x7f])",
    re.DOTALL,
)

_TYPOGRAPHY = str.maketrans(
    {
        **dict.fromkeys(_INVISIBLE),
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
    }
)


def _fold_char(raw: str) -> str:
    """Fold one character with its combining marks (invisible characters among them dropped)."""
    return unicodedata.normalize("NFKC", raw.translate(_TYPOGRAPHY)).translate(_TYPOGRAPHY)


def _fold_unit(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "join":
        return ""
    if kind == "space":
        return " " if any(c.isspace() for c in match.group()) else ""
    if kind == "dash":
        return "-"
    return _fold_char(match.group())


# For pure-ASCII text the alternatives of _IRREGULAR cannot overlap (no combining marks, no
# invisible characters, and joins, spaces and dashes use disjoint characters), so three passes
# with constant replacements give the same result without a Python call per irregular place.
# The property tests hold fold() to fold_with_map().text on arbitrary text.
_ASCII_JOIN = re.compile(r"(?<=[A-Za-z])-+(?:[^\S\n]*\n\s*)?(?=[A-Za-z])")
_ASCII_SPACE = re.compile(r"\s\s+|[^\S ]")
_ASCII_DASHES = re.compile(r"--+")


def fold(text: str) -> str:
    """Return the folded form of ``text`` (no offset map; the hot path)."""
    if text.isascii():
        if "-" not in text:
            return _ASCII_SPACE.sub(" ", text)
        return _ASCII_DASHES.sub("-", _ASCII_SPACE.sub(" ", _ASCII_JOIN.sub("", text)))
    return _IRREGULAR.sub(_fold_unit, text)


@dataclass(frozen=True, slots=True)
class FoldedText:
    """Folded text plus a piecewise map from folded offsets back to raw offsets.

    The folded text is cut into pieces; a *linear* piece was copied verbatim (offsets move
    together), any other piece came from one irregular raw run as a whole, so any part of it maps
    to the whole run.
    """

    text: str
    raw_length: int
    _folded_starts: tuple[int, ...]
    _raw_starts: tuple[int, ...]
    _raw_ends: tuple[int, ...]
    _linear: tuple[bool, ...]

    def to_raw(self, start: int, end: int) -> tuple[int, int]:
        """Map the folded span ``[start, end)`` to the raw span that produced it."""
        if not 0 <= start < end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) is not inside the folded text")
        i = bisect_right(self._folded_starts, start) - 1
        raw_start = self._raw_starts[i]
        if self._linear[i]:
            raw_start += start - self._folded_starts[i]
        j = bisect_right(self._folded_starts, end - 1) - 1
        if self._linear[j]:
            raw_end = self._raw_starts[j] + end - self._folded_starts[j]
        else:
            raw_end = self._raw_ends[j]
        return raw_start, raw_end


# The ASCII units whose folded form is shorter than the raw text: only these break the offset map
# (a lone newline or tab becomes one space, which keeps every offset where it was).
_ASCII_RESIZING = re.compile(rf"(?P<join>{_ASCII_JOIN.pattern})|\s\s+|--+")


def _resizing_units(text: str) -> tuple[str, list[tuple[int, int, int]]]:
    """Folded text and the (raw start, raw end, folded length) of every length-changing unit."""
    if text.isascii():
        units = [
            (m.start(), m.end(), 0 if m.lastgroup == "join" else 1)
            for m in _ASCII_RESIZING.finditer(text)
        ]
        return fold(text), units
    parts: list[str] = []
    units = []
    raw_at = 0
    for match in _IRREGULAR.finditer(text):
        start, end = match.span()
        folded = _fold_unit(match)
        parts.append(text[raw_at:start])
        parts.append(folded)
        if len(folded) != end - start:
            units.append((start, end, len(folded)))
        raw_at = end
    parts.append(text[raw_at:])
    return "".join(parts), units


def fold_with_map(text: str) -> FoldedText:
    """Fold ``text`` and keep, for every folded character, where it came from.

    Only units that change length start a new piece of the map; a character folded into one
    other character (a newline into a space, a curly quote into a straight one) stays linear.
    """
    folded, units = _resizing_units(text)
    folded_starts: list[int] = []
    raw_starts: list[int] = []
    raw_ends: list[int] = []
    linear: list[bool] = []
    folded_at = raw_at = 0
    for start, end, length in units:
        if start > raw_at:
            folded_starts.append(folded_at)
            raw_starts.append(raw_at)
            raw_ends.append(start)
            linear.append(True)
            folded_at += start - raw_at
        if length:
            folded_starts.append(folded_at)
            raw_starts.append(start)
            raw_ends.append(end)
            linear.append(False)
            folded_at += length
        raw_at = end
    if raw_at < len(text):
        folded_starts.append(folded_at)
        raw_starts.append(raw_at)
        raw_ends.append(len(text))
        linear.append(True)
        folded_at += len(text) - raw_at
    assert folded_at == len(folded), "the offset map must cover the folded text exactly"
    return FoldedText(
        folded,
        len(text),
        tuple(folded_starts),
        tuple(raw_starts),
        tuple(raw_ends),
        tuple(linear),
    )
