"""What the check of one citation concluded, and what the serving side should do about it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Action", "CitedAs", "FailedCheck", "Repair", "Status", "Verdict"]


class Status(StrEnum):
    OK = "ok"
    DRIFT_REPAIRED = "drift_repaired"
    DRIFT_UNREPAIRED = "drift_unrepaired"
    SUPERSEDED = "superseded"
    DOCUMENT_MISSING = "document_missing"
    INVALID = "invalid"


class FailedCheck(StrEnum):
    """Why the recorded span no longer holds the quote."""

    CHUNK_MISSING = "chunk_missing"
    OUT_OF_BOUNDS = "out_of_bounds"
    QUOTE_MISMATCH = "quote_mismatch"
    # the quote sits a few characters from the span (a systematic shift, or an end cut short)
    SPAN_SHIFTED = "span_shifted"


class Action(StrEnum):
    KEEP = "keep"
    REWRITE_OFFSETS = "rewrite_offsets"
    DEGRADE_TO_DOCUMENT = "degrade_to_document"
    SUPPRESS_CLAIM = "suppress_claim"
    PIN_ARCHIVED_VERSION = "pin_archived_version"
    DROP_CITATION = "drop_citation"
    FIX_RECORD = "fix_record"


@dataclass(frozen=True, slots=True)
class Repair:
    """Where the quote is now: new chunk and raw span covering exactly the quote.

    ``shift`` is signed: where the quote is now minus where the recorded span points now, in
    document characters when chunk offsets are known, else within the chunk when the chunk is
    the same, else None. ``method`` says how the text matched (``exact``, ``normalised``,
    ``fuzzy``), ``how`` what told the place apart from other copies (``unique``, ``context``,
    ``position_hint``).
    """

    chunk_id: str
    start: int
    end: int
    similarity: float
    method: str
    shift: int | None
    how: str = "unique"


@dataclass(frozen=True, slots=True)
class CitedAs:
    """What a failing citation held when it was checked: what applying its action expects its
    stored row to hold still (a row changed since is a conflict, left alone)."""

    chunk_id: str
    start: int
    end: int
    quote_sha256: str


@dataclass(slots=True)
class Verdict:
    """One verdict per input citation (read-only by convention; not frozen, for speed).

    ``reason`` is the most specific cause:

    - drift_repaired / superseded: the failed check (chunk_missing, out_of_bounds,
      quote_mismatch, span_shifted);
    - drift_unrepaired: why relocation failed (ambiguous, straddles_chunks, quote_not_found),
      the failed check being kept in ``failed_check``;
    - document_missing: "document_missing"; invalid: what was wrong, in ``error``.
    """

    citation_id: str | None
    answer_id: str | None
    doc_id: str | None
    status: Status
    action: Action
    reason: str | None = None
    failed_check: FailedCheck | None = None
    similarity: float | None = None
    recorded_version: str | None = None
    live_version: str | None = None
    repair: Repair | None = None
    topic: str | None = None
    source: str | None = None
    error: str | None = None
    cited: CitedAs | None = None  # failing verdicts: what the citation held when checked

    @property
    def is_drift(self) -> bool:
        return self.status in (Status.DRIFT_REPAIRED, Status.DRIFT_UNREPAIRED)
