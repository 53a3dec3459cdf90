"""Offsets in the unit a producer counts in, turned into code points (Python ``str`` indices).

Records count in code points. JavaScript producers count UTF-16 code units and Gemini's
grounding segments UTF-8 bytes; outside the Basic Multilingual Plane (an emoji, a CJK extension
character) and, for bytes, outside ASCII, the same character sits at another number. An offset
that falls inside a character (between the two halves of a surrogate pair, inside a UTF-8
sequence) or past the text is refused, never rounded: it says the producer counted something
other than the text it was given.
"""

from __future__ import annotations

from typing import Literal

from exporter.capture.reasons import RefusedError

__all__ = ["UNITS", "OffsetError", "Unit", "check_unit", "to_code_points"]

Unit = Literal["code_point", "utf16", "utf8"]
#: The units :func:`to_code_points` reads.
UNITS: tuple[Unit, ...] = ("code_point", "utf16", "utf8")

_MAX_OFFSET = 2**53
_CODECS = {"utf16": ("utf-16-le", 2), "utf8": ("utf-8", 1)}


class OffsetError(RefusedError):
    """An offset that names no place between two characters of the text."""


def check_unit(unit: object) -> None:
    """A unit the caller named that is none of :data:`UNITS`: its mistake, raised at once."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")


def to_code_points(text: str, offset: int, unit: Unit) -> int:
    """``offset``, counted in ``unit`` from the start of ``text``, as a code point index.

    Raises :class:`OffsetError` (``offset_past_text``, ``offset_splits_character``) when the
    offset is negative, past the end of the text or inside a character.
    """
    if type(offset) is not int or offset < 0:
        raise OffsetError("offset_past_text", "the offset is not a non-negative integer")
    if offset > _MAX_OFFSET:  # never formatted: an integer of thousands of digits cannot be
        raise OffsetError("offset_past_text", "the offset is above 2^53")
    if unit == "code_point" or text.isascii():
        if offset > len(text):
            raise OffsetError(
                "offset_past_text", f"offset {offset} is past the text's {len(text)} characters"
            )
        return offset
    if unit not in _CODECS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    codec, width = _CODECS[unit]
    # surrogatepass: a lone surrogate in the text is one unit of either encoding (three bytes)
    encoded = text.encode(codec, "surrogatepass")
    if offset * width > len(encoded):
        raise OffsetError(
            "offset_past_text",
            f"offset {offset} is past the text's {len(encoded) // width} {unit} units",
        )
    try:
        # strict: a prefix cut between the halves of a pair, or inside a UTF-8 sequence, fails
        return len(encoded[: offset * width].decode(codec))
    except UnicodeDecodeError:
        return _walk(text, offset, unit)


def _walk(text: str, offset: int, unit: Unit) -> int:
    """The slow way, for a text that holds a lone surrogate (strict decoding refuses it)."""
    units = 0
    for index, character in enumerate(text):
        if units == offset:
            return index
        point = ord(character)
        if unit == "utf16":
            units += 2 if point > 0xFFFF else 1
        else:
            units += 1 if point < 0x80 else 2 if point < 0x800 else 3 if point < 0x10000 else 4
        if units > offset:
            raise OffsetError(
                "offset_splits_character", f"{unit} offset {offset} falls inside a character"
            )
    return len(text)
