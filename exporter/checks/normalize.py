"""Fold away what a re-extraction legitimately changes, with a map back to raw offsets.

Two documents produced by two extractors from the same source differ in ways that do not change
what a sentence says: compatibility forms (ligatures, full-width letters), dash and quote
variants, non-breaking and zero-width spaces, soft hyphens, runs of whitespace and words
hyphenated across a line break. Folding both sides makes those differences vanish while keeping
everything else, digits and negations included, intact.

Chinese and Japanese put no spaces between words, so whitespace between two of their characters
carries nothing: an extractor breaks their lines anywhere, with or without a space, and groff
renders each line break of a page's source as a space. Such whitespace folds away entirely (as
CSS Text removes a line break between two East Asian wide characters), and the same sentence
wrapped at another width folds to the same text.

The text is scanned once with a single regular expression that finds only the *irregular*
places; plain text between them is copied verbatim. That keeps folding at C speed for the usual
mostly-ASCII text, and lets :func:`fold` (text only, the hot path) and :func:`fold_with_map`
(text plus offset map, for relocation) share one definition, so they can never disagree.

Folding is local: no irregular place, and no look-around of the expression, reaches across a
boundary between two *plain* characters (neither whitespace, a dash, invisible nor a combining
mark). So :func:`refold` folds a changed document by folding only what changed, from the
nearest such boundary before the change to the nearest one after it, and reuses the rest of the
previous fold: a chunk update to a long document costs the chunk, not the document.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

__all__ = [
    "FoldedText",
    "can_cut",
    "fold",
    "fold_with_map",
    "folded_part",
    "refold",
]

# Characters that are deleted outright (they carry no text).
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
# Hyphen and dash variants; all fold to "-", and between two letters they fold away entirely
# (a hyphenated line break or a compound written with or without its hyphen reads the same).
_UNICODE_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
_DASHES = "\\-" + _UNICODE_DASHES
_LETTER = r"[^\W\d_]"
_COMBINING = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
# Characters of scripts written without spaces between words: CJK punctuation (not the
# ideographic space), hiragana, katakana, CJK ideographs (extensions beyond the BMP included),
# full-width punctuation (the commas and colons of Chinese text) and half-width katakana. Not the
# full-width letters and digits, which fold to ASCII and may sit in words spaced as Latin.
_CJK = (
    "\u3001-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff9f"
    "\U00020000-\U0003134f"
)

_IRREGULAR = re.compile(
    # a hyphen (or soft hyphen, or invisible run) between letters (a letter may carry combining
    # marks), maybe with a line break; not next to Chinese or Japanese, which never hyphenate
    # ("no-" ending a line before "を付ければ" is an option's name, not half a word)
    rf"(?P<join>(?<={_LETTER}|[{_COMBINING}])(?<![{_CJK}])[{_DASHES}{_INVISIBLE}]+"
    rf"(?:[^\S\n]*\n\s*)?(?=(?![{_CJK}]){_LETTER}))"
    # whitespace (and invisible) runs between two characters of a script without word spaces
    rf"|(?P<cjk>(?<=[{_CJK}])[\s{_INVISIBLE}]+(?=[{_CJK}]))"
    # whitespace and invisible runs, except a lone plain space
    rf"|(?P<space>(?! (?![\s{_INVISIBLE}]))[\s{_INVISIBLE}]+)"
    # dash runs (invisible characters inside them included), and any single non-ASCII dash
    rf"|(?P<dash>[{_DASHES}](?:[{_INVISIBLE}]*[{_DASHES}])+|[{_UNICODE_DASHES}])"
    # a character followed by combining marks (at most 30 of them per unit: Unicode's
    # canonical reordering is quadratic in a run's length, and no real text has runs longer
    # than its stream-safe limit of 30, UAX #15), or any other non-ASCII character
    rf"|(?P<char>.[{_INVISIBLE}]*[{_COMBINING}]{{1,30}}|[^\x00-\x7f])",
    re.DOTALL,
)

# Quotes, primes and accents folded to their ASCII forms (before NFKC, which would make an
# accent a space and a combining mark).
_QUOTE_FOLDS = {
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
_TYPOGRAPHY = str.maketrans({**dict.fromkeys(_INVISIBLE), **_QUOTE_FOLDS})


def _fold_char(raw: str) -> str:
    """Fold one character with its combining marks (invisible characters among them dropped)."""
    return unicodedata.normalize("NFKC", raw.translate(_TYPOGRAPHY)).translate(_TYPOGRAPHY)


def _fold_unit(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind in {"join", "cjk"}:
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
# A join starts at its first dash and looks behind it for the letter: a pattern that starts
# with a literal is searched for at C speed, one that starts with a look-behind is tried at
# every position (twelve times slower on prose).
_ASCII_JOIN = re.compile(r"-(?<=[A-Za-z]-)-*(?:[^\S\n]*\n\s*)?(?=[A-Za-z])")
_ASCII_DASHES = re.compile(r"--+")


# Whitespace runs are folded with str.split and join up to this many characters: 2.5 times
# faster than the expression, but a list of every word costs up to 22 bytes per character of
# text ("ab ab ab ..."), so a long text (a whole document) takes the expression, which costs
# its output only.
_SPLIT_MAX_CHARS = 4096
_ASCII_SPACE = re.compile(r"\s\s+|[^\S ]")


def _ascii_spaces(text: str) -> str:
    """Every run of whitespace as one space (both ways go by ``str.isspace``)."""
    if len(text) > _SPLIT_MAX_CHARS:
        return _ASCII_SPACE.sub(" ", text)
    words = text.split()
    if not words:
        return " " if text else ""
    joined = " ".join(words)
    if text[0].isspace():
        joined = " " + joined
    if text[-1].isspace():
        joined += " "
    return joined


# The typography re-extractions commonly add, each character folding to ASCII by itself,
# whatever stands beside it, so a text of ASCII and these folds as its ASCII translation does:
# no-break and thin spaces (whitespace, as a space is), curly quotes, dashes and the minus sign
# (as "-" in every rule), the "fi"-style ligatures (letters, as their letters are) and the
# ellipsis. Not the full-width hyphen, which sits among the Chinese and Japanese characters.
_TYPOGRAPHY_TO_ASCII = {
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    **_QUOTE_FOLDS,
    **dict.fromkeys(_UNICODE_DASHES.replace("\uff0d", ""), "-"),
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\u2026": "...",
}
# The invisible characters are deleted, as the rules delete them, but for one place: between a
# letter and a line break and a letter they join the two words, and the line break goes too
# ("exam\u00ad\nple" folds to "example"), which a text without a line break never has.
_INVISIBLE_TO_ASCII = dict.fromkeys(_INVISIBLE, "")
_TO_ASCII = {**_TYPOGRAPHY_TO_ASCII, **_INVISIBLE_TO_ASCII}
# the first character that is neither ASCII nor in the tables (a search stops there)
_NOT_TYPOGRAPHY = re.compile("[^\\x00-\\x7f" + "".join(_TYPOGRAPHY_TO_ASCII) + "]")
_NOT_TO_ASCII = re.compile("[^\\x00-\\x7f" + "".join(_TO_ASCII) + "]")


def _fold_ascii(text: str) -> str:
    if "-" not in text:
        return _ascii_spaces(text)
    return _ASCII_DASHES.sub("-", _ascii_spaces(_ASCII_JOIN.sub("", text)))


def fold(text: str) -> str:
    """Return the folded form of ``text`` (no offset map; the hot path)."""
    if text.isascii():
        return _fold_ascii(text)
    # ASCII but for common typography: its ASCII translation folds alike, at str speed (the
    # expression calls Python at each non-ASCII character, and its look-behinds slow the rest).
    # A property test holds this to the general expression.
    if (
        len(text) <= _SPLIT_MAX_CHARS
        and _NOT_TO_ASCII.search(text) is None
        and ("\n" not in text or _NOT_TYPOGRAPHY.search(text) is None)
    ):
        # a scan per table entry, at C speed: a list of the text's non-ASCII characters would
        # be a new object for each (345 KB for 4,096 dashes, 17 times slower)
        for char, ascii in _TO_ASCII.items():
            if char in text:
                text = text.replace(char, ascii)
        return _fold_ascii(text)
    return _IRREGULAR.sub(_fold_unit, text)


@dataclass(frozen=True, slots=True)
class FoldedText:
    """Folded text plus a piecewise map from folded offsets back to raw offsets.

    The folded text is cut into pieces; a *linear* piece was copied verbatim (offsets move
    together), any other piece came from one irregular raw run as a whole, so any part of it maps
    to the whole run. The map is held in machine arrays (8 bytes an offset, 1 a flag), not tuples
    of Python ints: text crafted to be irregular everywhere makes a piece of nearly every
    character, and boxed ints would cost over a hundred bytes each.
    """

    text: str
    raw_length: int
    _folded_starts: array[int]
    _raw_starts: array[int]
    _raw_ends: array[int]
    _linear: bytes

    @property
    def nbytes(self) -> int:
        """Memory held by the folded text and its map (for bounding caches of views)."""
        return sys.getsizeof(self.text) + sum(
            sys.getsizeof(part)
            for part in (self._folded_starts, self._raw_starts, self._raw_ends, self._linear)
        )

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
        array("q", folded_starts),
        array("q", raw_starts),
        array("q", raw_ends),
        bytes(linear),
    )


# Any of these makes a character part of an irregular place (or of its look-around).
_NOT_PLAIN = re.compile(rf"[\s{_DASHES}{_INVISIBLE}{_COMBINING}]")
# How far to look for a boundary between two plain characters before folding everything.
_MAX_BOUNDARY_SCAN = 4096
_COMPARE_BLOCK = 1 << 16


def can_cut(text: str, at: int) -> bool:
    """Whether folding ``text[:at]`` and ``text[at:]`` apart gives the fold of ``text``: true
    at either end and between two characters that no unit folds with a neighbour."""
    if at <= 0 or at >= len(text):
        return True
    before, after = text[at - 1], text[at]
    if before.isalnum() and after.isalnum():  # letters and digits are plain: no expression
        return True
    return _NOT_PLAIN.match(before) is None and _NOT_PLAIN.match(after) is None


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, compared a block at a time in C."""
    limit = min(len(a), len(b))
    at = 0
    while at < limit and a[at : at + _COMPARE_BLOCK] == b[at : at + _COMPARE_BLOCK]:
        at += _COMPARE_BLOCK
    at = min(at, limit)
    low, high = at, min(limit, at + _COMPARE_BLOCK)
    while low < high:  # the first difference lies in [low, high]
        middle = (low + high + 1) // 2
        if a[at:middle] == b[at:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix, at most ``limit``, compared a block at a time."""
    size_a, size_b = len(a), len(b)
    at = 0
    while at < limit:
        step = min(_COMPARE_BLOCK, limit - at)
        if a[size_a - at - step : size_a - at] != b[size_b - at - step : size_b - at]:
            break
        at += step
    else:
        return limit
    low, high = at, min(limit, at + _COMPARE_BLOCK)
    while low < high:  # the suffix length lies in [low, high]
        middle = (low + high + 1) // 2
        if a[size_a - middle : size_a - at] == b[size_b - middle : size_b - at]:
            low = middle
        else:
            high = middle - 1
    return low


def folded_part(folded: FoldedText, text: str, start: int, end: int) -> tuple[int, int] | None:
    """Where ``fold(text[start:end])`` sits in ``folded`` (the fold of ``text``), when both ends
    are boundaries that fold apart (:func:`can_cut`); None when either is not (a unit folded
    with its neighbours, such as a run of spaces or a hyphenated line break, may cross it).

    Lets a search near a span read the folded document it already has instead of folding a
    window of it again: between such boundaries the folded window is a slice of ``folded``, and
    its map back to ``text`` is ``folded``'s own."""
    if not (0 <= start <= end <= len(text)) or folded.raw_length != len(text):
        return None
    if not (can_cut(text, start) and can_cut(text, end)):
        return None
    return _raw_to_folded(folded, start), _raw_to_folded(folded, end)


def _raw_to_folded(folded: FoldedText, at: int) -> int:
    """The folded offset of raw offset ``at``, a boundary between two plain characters."""
    if at >= folded.raw_length:
        return len(folded.text)
    i = bisect_right(folded._raw_starts, at) - 1
    if i < 0:
        return 0
    if folded._linear[i]:
        return folded._folded_starts[i] + min(at, folded._raw_ends[i]) - folded._raw_starts[i]
    return folded._folded_starts[i] if at == folded._raw_starts[i] else _next_start(folded, i)


def _next_start(folded: FoldedText, i: int) -> int:
    starts = folded._folded_starts
    return starts[i + 1] if i + 1 < len(starts) else len(folded.text)


_Map = tuple["array[int]", "array[int]", "array[int]", bytearray]


def _cut(folded: FoldedText, raw_from: int, raw_to: int, folded_shift: int, raw_shift: int) -> _Map:
    """The map of ``folded`` for raw ``[raw_from, raw_to)`` (cut inside linear pieces at both
    ends), shifted; sliced in C, and shifted by one comprehension when it has to move."""
    raw_starts, raw_ends = folded._raw_starts, folded._raw_ends
    first = max(0, bisect_right(raw_starts, raw_from) - 1)
    if first < len(raw_ends) and raw_ends[first] <= raw_from:
        first += 1
    last = bisect_left(raw_starts, raw_to)
    starts = folded._folded_starts[first:last]
    begins, ends = raw_starts[first:last], raw_ends[first:last]
    linear = bytearray(folded._linear[first:last])
    if begins and linear[0] and begins[0] < raw_from:
        starts[0] += raw_from - begins[0]
        begins[0] = raw_from
    if ends and linear[-1] and ends[-1] > raw_to:
        ends[-1] = raw_to
    if folded_shift:
        starts = array("q", [value + folded_shift for value in starts])
    if raw_shift:
        begins = array("q", [value + raw_shift for value in begins])
        ends = array("q", [value + raw_shift for value in ends])
    return starts, begins, ends, linear


def _join(maps: list[_Map]) -> _Map:
    """Maps one after the other; a linear piece continuing the one before it is merged into it."""
    starts, begins, ends, linear = array("q"), array("q"), array("q"), bytearray()
    for more_starts, more_begins, more_ends, more_linear in maps:
        if not more_starts:
            continue
        skip = int(
            bool(linear)
            and bool(linear[-1])
            and bool(more_linear[0])
            and ends[-1] == more_begins[0]
            and starts[-1] + ends[-1] - begins[-1] == more_starts[0]
        )
        if skip:
            ends[-1] = more_ends[0]
        starts.extend(more_starts[skip:])
        begins.extend(more_begins[skip:])
        ends.extend(more_ends[skip:])
        linear.extend(more_linear[skip:])
    return starts, begins, ends, linear


def refold(previous: FoldedText, previous_text: str, text: str) -> FoldedText:
    """``fold_with_map(text)``, reusing the fold of ``previous_text`` for what did not change."""
    if text == previous_text:
        return previous
    prefix = _common_prefix(previous_text, text)
    suffix = _common_suffix(previous_text, text, min(len(text), len(previous_text)) - prefix)
    shift = len(text) - len(previous_text)
    # the changed part, widened to boundaries between plain characters, in both texts
    start = next(
        (
            at
            for at in range(prefix, max(-1, prefix - _MAX_BOUNDARY_SCAN), -1)
            if can_cut(text, at) and can_cut(previous_text, at)
        ),
        None,
    )
    changed_end = len(text) - suffix
    end = next(
        (
            at
            for at in range(changed_end, min(len(text), changed_end + _MAX_BOUNDARY_SCAN) + 1)
            if can_cut(text, at) and can_cut(previous_text, at - shift)
        ),
        None,
    )
    if start is None or end is None:
        return fold_with_map(text)  # no boundary near the change: fold the whole text
    middle = fold_with_map(text[start:end])
    folded_start = _raw_to_folded(previous, start)
    folded_end = _raw_to_folded(previous, end - shift)
    folded = previous.text[:folded_start] + middle.text + previous.text[folded_end:]
    starts, begins, ends, linear = _join(
        [
            _cut(previous, 0, start, 0, 0),
            _cut(middle, 0, middle.raw_length, folded_start, start),
            _cut(
                previous,
                end - shift,
                previous.raw_length,
                folded_start + len(middle.text) - folded_end,
                shift,
            ),
        ]
    )
    return FoldedText(folded, len(text), starts, begins, ends, bytes(linear))
