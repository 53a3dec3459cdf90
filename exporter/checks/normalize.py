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
    # a hyphen (or soft hyphen, or invisible run) between letters, maybe with a line break
    rf"(?P<join>(?<={_LETTER})[{_DASHES}{_INVISIBLE}]+(?:[^\S\n]*\n\s*)?(?={_LETTER}))"
    # whitespace and invisible runs, except a lone plain space
    rf"|(?P<space>(?! (?![\s{_INVISIBLE}]))[\s{_INVISIBLE}]+)"
    # dash runs, and any single non-ASCII dash
    rf"|(?P<dash>[{_DASHES}]{{2,}}|[{_UNICODE_DASHES}])"
    # a character followed by combining marks, or any other non-ASCII character
    rf"|(?P<char>.[{_COMBINING}]+|[^\x00-\x7f])",
    re.DOTALL,
)

_TYPOGRAPHY = str.maketrans(
    {
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
    """Fold one non-ASCII character (with its combining marks)."""
    return unicodedata.normalize("NFKC", raw).translate(_TYPOGRAPHY)


def _fold_unit(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "join":
        return ""
    if kind == "space":
        return " " if any(c.isspace() for c in match.group()) else ""
    if kind == "dash":
        return "-"
    return _fold_char(match.group())


def fold(text: str) -> str:
    """Return the folded form of ``text`` (no offset map; the hot path)."""
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


def fold_with_map(text: str) -> FoldedText:
    """Fold ``text`` and keep, for every folded character, where it came from."""
    parts: list[str] = []
    folded_starts: list[int] = []
    raw_starts: list[int] = []
    raw_ends: list[int] = []
    linear: list[bool] = []
    folded_at = 0
    raw_at = 0

    def add(piece: str, raw_start: int, raw_end: int, is_linear: bool) -> None:
        nonlocal folded_at
        if not piece:
            return
        parts.append(piece)
        folded_starts.append(folded_at)
        raw_starts.append(raw_start)
        raw_ends.append(raw_end)
        linear.append(is_linear)
        folded_at += len(piece)

    for match in _IRREGULAR.finditer(text):
        start, end = match.span()
        if start > raw_at:
            add(text[raw_at:start], raw_at, start, True)
        folded = _fold_unit(match)
        add(folded, start, end, folded == match.group())
        raw_at = end
    if raw_at < len(text):
        add(text[raw_at:], raw_at, len(text), True)
    return FoldedText(
        "".join(parts),
        len(text),
        tuple(folded_starts),
        tuple(raw_starts),
        tuple(raw_ends),
        tuple(linear),
    )
