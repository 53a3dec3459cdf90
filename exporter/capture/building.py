"""The framework-neutral half of capture: cited places in chunks -> one answer event.

Each framework adapter (``anthropic``, ...) reads its own objects and hands this module what
they say: the answer's text, and for each citation the chunk it names, a span in code points
of that chunk's text, and the text the framework says it cited. Nothing here trusts the span:
the quote written is always the chunk's own text at the span written, so a captured citation
never fails its first check by construction. When the framework's text and the chunk disagree,
the project's relocator looks for the framework's text in the chunk; found in one place, that
place is recorded, else the citation is refused with its reason, counted, and the rest of the
answer is kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from exporter.capture.sentences import sentence_spans
from exporter.checks.compare import FoldedQuote
from exporter.checks.relocate import FOUND, Budget, relocate
from exporter.checks.store import DocumentView, Placement
from exporter.defaults import DEFAULT_THRESHOLD
from exporter.records.limits import DEFAULT_LIMITS, MAX_ID_CHARS
from exporter.records.schema import Chunk

__all__ = ["CONTEXT_CHARS", "AnswerBuilder", "Captured", "Refusal"]

#: Characters of prefix and suffix recorded beside a quote: what Hypothesis stores in a W3C
#: TextQuoteSelector, and half of what the relocator compares.
CONTEXT_CHARS = 32
# A quote of the framework that differs from the chunk is looked for with the check's own
# threshold: what the check will later accept as the same text.
_THRESHOLD = DEFAULT_THRESHOLD
# CPU time one relocation of a framework's quote may take (the checks' own default).
_BUDGET_SECONDS = DEFAULT_LIMITS.relocation_budget_ms / 1000


@dataclass(frozen=True, slots=True)
class Refusal:
    """A citation of the framework's answer that was not written, and why.

    ``reason`` is one word of a closed set (the docs' table lists them); ``detail`` one short
    line; ``index`` the citation's position in the framework's own output, when it has one.
    """

    reason: str
    detail: str
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Captured:
    """What one capture made: the answer event (``None`` when there was no answer to read) and
    every citation refused on the way."""

    event: dict[str, Any] | None
    refusals: tuple[Refusal, ...] = ()

    @property
    def refused(self) -> Counter[str]:
        """Refusals by reason."""
        return Counter(refusal.reason for refusal in self.refusals)


@dataclass(slots=True)
class AnswerBuilder:
    """Collects one answer's sentences and citations; :meth:`build` returns the event."""

    answer_id: str
    text: str
    topic: str | None = None
    emitted_at: str | None = None
    fingerprints: dict[str, str] = field(default_factory=dict)
    _spans: list[tuple[int, int]] = field(default_factory=list, init=False)
    _citations: list[dict[str, Any]] = field(default_factory=list, init=False)
    _refusals: list[Refusal] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._spans = sentence_spans(self.text)

    @property
    def sentences(self) -> list[str]:
        return [self.text[start:end] for start, end in self._spans]

    def sentence_at(self, start: int, end: int) -> int | None:
        """The sentence that holds most of the answer text ``[start, end)`` (the first of
        equals), or the one the position falls in for an empty range."""
        best, most = None, 0
        for index, (first, last) in enumerate(self._spans):
            overlap = min(end, last) - max(start, first)
            if overlap > most or (start == end and first <= start < last):
                best, most = index, max(overlap, 1)
        return best

    def refuse(self, reason: str, detail: str, index: int | None = None) -> None:
        self._refusals.append(Refusal(reason, _short(detail), index))

    def cite(
        self,
        chunk: Chunk,
        start: int,
        end: int,
        *,
        said: str | None,
        sentence_index: int | None,
        index: int | None,
        search: bool = False,
    ) -> None:
        """Adds a citation of ``chunk.text[start:end]`` (code points), checked against ``said``
        (the text the framework says it cited; ``None``: nothing to check against).

        ``search``: the span is only a guess (a framework that gives none), so ``said`` is
        looked for anywhere in the chunk."""
        problem = _bad_chunk(chunk)
        if problem is not None:
            self.refuse("bad_chunk", problem, index)
            return
        if len(self._citations) >= DEFAULT_LIMITS.max_citations_per_answer:
            self.refuse(
                "too_many_citations",
                f"the answer already has {DEFAULT_LIMITS.max_citations_per_answer} citations",
                index,
            )
            return
        text = chunk.text
        if not 0 <= start <= end <= len(text):
            self.refuse(
                "offset_past_text",
                f"span [{start}, {end}] is outside the chunk's {len(text)} characters",
                index,
            )
            return
        placed = _placed(text, start, end, said, search)
        if isinstance(placed, Refusal):
            self.refuse(placed.reason, placed.detail, index)
            return
        start, end = placed
        citation: dict[str, Any] = {
            "citation_id": f"{self.answer_id}#{len(self._citations)}",
            "doc_id": chunk.doc_id,
            "doc_version": chunk.doc_version,
            "chunk_id": chunk.chunk_id,
            "chunk_span": [start, end],
            "quote": text[start:end],
            "prefix": text[max(0, start - CONTEXT_CHARS) : start],
            "suffix": text[end : end + CONTEXT_CHARS],
        }
        if chunk.doc_offset is not None:
            citation["doc_span"] = [chunk.doc_offset + start, chunk.doc_offset + end]
            fingerprint = self.fingerprints.get(chunk.doc_id)
            if fingerprint is not None:
                citation["doc_sha256"] = fingerprint
        if chunk.source is not None:
            citation["source"] = chunk.source
        if sentence_index is not None:
            citation["sentence_index"] = sentence_index
            citation["claim"] = self.sentences[sentence_index]
        self._citations.append(citation)

    def build(self) -> Captured:
        event: dict[str, Any] = {"answer_id": self.answer_id}
        if self.topic is not None:
            event["topic"] = self.topic
        if self.emitted_at is not None:
            event["emitted_at"] = self.emitted_at
        event["sentences"] = self.sentences
        event["citations"] = self._citations
        return Captured(event, tuple(self._refusals))


def _placed(
    text: str, start: int, end: int, said: str | None, search: bool
) -> tuple[int, int] | Refusal:
    """The span to record: ``[start, end)`` trimmed of surrounding whitespace when it holds
    ``said`` (or ``said`` is unknown), else the one place of the chunk that holds ``said``."""
    held = text[start:end]
    if said is None or held == said or held.strip() == said.strip():
        if not held.strip():
            return Refusal("empty_quote", f"span [{start}, {end}] holds only whitespace")
        return _trimmed(text, start, end)
    if not said.strip():
        return Refusal("empty_quote", "the cited text is only whitespace")
    alone = Chunk(doc_id="capture", doc_version="capture", chunk_id="capture", text=text)
    view = DocumentView("capture", "capture", text, (Placement(alone, 0),), has_doc_offsets=False)
    found = relocate(
        FoldedQuote(said),
        view,
        threshold=_THRESHOLD,
        max_fuzzy_chars=DEFAULT_LIMITS.max_quote_chars,
        budget=Budget(_BUDGET_SECONDS),
    )
    if found.outcome != FOUND or found.place is None:
        where = "in the chunk" if search else f"at [{start}, {end}] or elsewhere in the chunk"
        return Refusal(
            "quote_not_in_source",
            f"the cited text {_preview(said)} is not {where} ({found.outcome})",
        )
    return _trimmed(text, found.place.start, found.place.end)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _bad_chunk(chunk: object) -> str | None:
    if not isinstance(chunk, Chunk):
        return f"a source must be an exporter.capture.Chunk, not {type(chunk).__name__}"
    for name in ("doc_id", "doc_version", "chunk_id"):
        value = getattr(chunk, name)
        if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS or "\0" in value:
            return f"the chunk's {name} must be a non-empty string of at most {MAX_ID_CHARS}"
    if not isinstance(chunk.text, str):
        return f"the chunk's text must be a string, not {type(chunk.text).__name__}"
    if len(chunk.text) > DEFAULT_LIMITS.max_chunk_chars:
        return f"the chunk's text is above {DEFAULT_LIMITS.max_chunk_chars:,} characters"
    if chunk.doc_offset is not None and (
        type(chunk.doc_offset) is not int
        or not 0 <= chunk.doc_offset <= DEFAULT_LIMITS.max_doc_offset
    ):
        return "the chunk's doc_offset must be a non-negative integer"
    return None


def _preview(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _short(detail: str, limit: int = 200) -> str:
    return detail if len(detail) <= limit else detail[: limit - 3] + "..."
