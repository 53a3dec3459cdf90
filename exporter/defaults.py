"""One home for the defaults and value rules that several parts of the exporter share.

The checks, the settings of the service, the command line and the scenario generator each
need the same threshold, port and list syntax; they read them here, so a change is made once.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = [
    "DEFAULT_HIGH_SEVERITY_TOPICS",
    "DEFAULT_JUDGE_SWEEP_SAMPLE",
    "DEFAULT_METRICS_PORT",
    "DEFAULT_THRESHOLD",
    "ENV_PREFIX",
    "comma_separated",
    "in_similarity_range",
    "ratio_value",
    "similarity_threshold",
]

# Folded similarity (0-100) at which the text at a span still holds the quote: high enough that
# "within 60 days" and "within 90 days" differ, low enough for typography-only changes.
DEFAULT_THRESHOLD = 98.0
# The exporter's port in Prometheus' default port allocations wiki (unclaimed range).
DEFAULT_METRICS_PORT = 9877
# Topics whose unrepairable citations suppress the claim rather than degrade to the document.
DEFAULT_HIGH_SEVERITY_TOPICS = frozenset({"pricing", "security", "legal"})
# Citations a sweep's judge reads, drawn from the strata of its sample.
DEFAULT_JUDGE_SWEEP_SAMPLE = 2_000
# What every environment variable of the exporter's settings starts with.
ENV_PREFIX = "CITATION_EXPORTER_"


def comma_separated(text: str) -> frozenset[str]:
    """``a, b,,c`` -> {a, b, c}: the list syntax of environment variables and options."""
    return frozenset(item.strip() for item in text.split(",") if item.strip())


def in_similarity_range(value: float) -> float:
    """``value`` when it is a similarity on the 0-100 scale, (0, 100]; else ValueError."""
    if not 0.0 < value <= 100.0:
        raise ValueError(f"must be a similarity in (0, 100], got {value:g}")
    return value


def similarity_threshold(value: float) -> float:
    """``value`` when it is a similarity in (1, 100]; else ValueError naming the likely slip.

    Stricter than :func:`in_similarity_range` where a person types it (a setting, an option).
    """
    in_similarity_range(value)
    if value <= 1.0:  # 0.98 for 98: the similarity metric is a 0-1 ratio
        raise ValueError(
            f"is a similarity on the 0-100 scale; {value:g} looks like a ratio "
            f"(did you mean {value * 100:g}?)"
        )
    return value


# A ratio as people type it: a share of 0 to 1, or a percentage (at most this many characters
# are read: anything longer is no ratio, and is not echoed whole).
_RATIO_CHARS = 40
# A ratio as typed: a decimal number in ASCII digits, maybe with an exponent, maybe a percentage
# (spaces before the sign allowed: " 2 %"). Not "1_0", not other scripts' digits, not "nan".
_RATIO = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?) ?(?P<percent>%)?"
)
# Characters of a refused value an error message shows, escapes included.
_SHOWN_CHARS = 48


def _shown(text: str) -> str:
    """A typed value for a one-line error: control characters escaped, cut short."""
    escaped = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return escaped if len(escaped) <= _SHOWN_CHARS else escaped[:_SHOWN_CHARS] + "..."


def ratio_value(value: str | float) -> float:
    """A share in [0, 1] from ``0.01`` or ``1%``; ValueError naming both readings otherwise.

    A bare number of 1 or more is refused rather than read: ``--fail-above 1`` was meant as 1%
    far more often than as 100%, and a gate that reads it as 100% never fails. A person who
    means all of it writes ``100%``. Text is read as a decimal in ASCII digits (``0.7%`` is
    exactly 0.007, as ``0.007`` is: a line typed either way is the same line).
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a ratio such as 0.01 or 1%, got {value}")
    if not isinstance(value, str):  # a number from a TOML file: an int may have any size
        if value < 0 or not (isinstance(value, int) or math.isfinite(value)):
            shown = "a negative number" if value < 0 else f"{value}"
            raise ValueError(f"must be a ratio from 0 to 1 (or 0% to 100%), got {shown}")
        if value < 1:
            return value + 0.0
        if isinstance(value, int) and value > 100:
            raise ValueError("is a whole number far above 1: a ratio is 0 to 1, or 0% to 100%")
        return _refuse_bare(float(value), f"{value:g}")
    text = value.strip()
    written = _RATIO.fullmatch(text) if len(text) <= _RATIO_CHARS else None
    if written is None:
        raise ValueError(f"must be a ratio such as 0.01 or 1%, got '{_shown(text)}'")
    number = Decimal(written.group("number"))
    if number < 0:
        raise ValueError(f"must be a ratio from 0 to 1 (or 0% to 100%), got {_shown(text)}")
    if written.group("percent"):
        if number > 100:
            raise ValueError(f"must be a percentage from 0% to 100%, got {_shown(text)}")
        return float(number / 100) + 0.0
    if number >= 1:
        return _refuse_bare(float(number), _shown(text))
    return float(number) + 0.0  # -0 is 0 (shown as -0.00% otherwise)


def _refuse_bare(number: float, text: str) -> float:
    """The refusal of a bare number of 1 or more, with both readings spelled out."""
    if number > 100:
        raise ValueError(f"{text} would mean {number * 100:g}%: a ratio is 0 to 1, or 0% to 100%")
    raise ValueError(f"{text} would mean {number * 100:g}%: write {number:g}% or {number / 100:g}")
