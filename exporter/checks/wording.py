"""Words for a summary's lines, shared by the report and the checks' own summary parts. Pure."""

from __future__ import annotations

__all__ = ["counted", "shown_topic"]

# A topic in the text summary: at most this many characters (as long as a metric label's).
_TOPIC_SHOWN = 64


def counted(number: int, noun: str) -> str:
    """``number`` and ``noun``, plural unless one: "1 claim", "2,000 claims"."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def shown_topic(topic: str) -> str:
    """A topic for a terminal: cut short, and every character that is not printable (a newline,
    a carriage return, an escape sequence, a bidirectional override) shown escaped."""
    if not topic:
        return "(no topic)"
    cut = topic[:_TOPIC_SHOWN]
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
    return shown + ("..." if len(topic) > _TOPIC_SHOWN else "")
