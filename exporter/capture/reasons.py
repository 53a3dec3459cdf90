"""Why a citation was refused: one word of a closed set, each a row of the docs' table.

A closed set, so a team can count refusals by reason in its own metrics and alert on a new
one, and the docs test can hold the table to it.
"""

from __future__ import annotations

from typing import Literal, get_args

from exporter.capture.reading import UnreadableError

__all__ = ["REASONS", "Reason", "RefusedError", "reason_of"]

Reason = Literal[
    "no_such_document",
    "unmapped_document",
    "no_such_source",
    "chunk_not_given",
    "not_plain_text",
    "not_content_blocks",
    "no_such_block",
    "offset_past_text",
    "offset_splits_character",
    "quote_not_in_source",
    "empty_quote",
    "page_location",
    "web_search_result",
    "unknown_location",
    "bad_chunk",
    "too_many_citations",
    "answer_too_large",
    "unreadable_citation",
    "unreadable_response",
]
#: Every reason a refusal can give.
REASONS: tuple[Reason, ...] = get_args(Reason)


class RefusedError(UnreadableError):
    """A citation that cannot be written, and why: raised inside an adapter, caught by it and
    made a refusal, never raised into the caller's code."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason: Reason = reason


def reason_of(error: Exception) -> Reason:
    """The reason an exception met while reading a citation gives: its own, or unreadable."""
    return error.reason if isinstance(error, RefusedError) else "unreadable_citation"
