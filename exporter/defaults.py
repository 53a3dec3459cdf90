"""One home for the defaults and value rules that several parts of the exporter share.

The checks, the settings of the service, the command line and the scenario generator each
need the same threshold, port and list syntax; they read them here, so a change is made once.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_HIGH_SEVERITY_TOPICS",
    "DEFAULT_METRICS_PORT",
    "DEFAULT_THRESHOLD",
    "comma_separated",
    "in_similarity_range",
    "similarity_threshold",
]

# Folded similarity (0-100) at which the text at a span still holds the quote: high enough that
# "within 60 days" and "within 90 days" differ, low enough for typography-only changes.
DEFAULT_THRESHOLD = 98.0
# The exporter's port in Prometheus' default port allocations wiki (unclaimed range).
DEFAULT_METRICS_PORT = 9877
# Topics whose unrepairable citations suppress the claim rather than degrade to the document.
DEFAULT_HIGH_SEVERITY_TOPICS = frozenset({"pricing", "security", "legal"})


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
