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

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from exporter.capture.reasons import Reason
from exporter.capture.sentences import sentence_spans
from exporter.checks.compare import FoldedQuote
from exporter.checks.nearby import trimmed
from exporter.checks.relocate import FOUND, Budget, relocate
from exporter.checks.store import DocumentView, Placement
from exporter.defaults import DEFAULT_THRESHOLD
from exporter.records.decode import is_sha256, is_timestamp
from exporter.records.limits import DEFAULT_LIMITS, MAX_ID_CHARS
from exporter.records.schema import Chunk

__all__ = ["CONTEXT_CHARS", "AnswerBuilder", "Captured", "Refusal", "check_event_fields"]

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

    reason: Reason
    detail: str
    index: int | None = None
    # the sentence of the answer the citation supported, when known (None: not known, or
    # none): the event names it, so coverage counts that claim unjudged rather than uncited
    sentence: int | None = None


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
    """Collects one answer's sentences and citations; :meth:`build` returns the event.

    Bounded whatever a framework hands it: at most ``max_citations_per_answer`` citations are
    *read* (written or refused; past that, one refusal says how many were left), each chunk is
    folded once for the whole answer, and the event is never above ``max_message_bytes``.
    """

    answer_id: str
    text: str
    topic: str | None = None
    emitted_at: str | None = None
    fingerprints: dict[str, str] = field(default_factory=dict)
    _spans: list[tuple[int, int]] = field(default_factory=list, init=False)
    _starts: list[int] = field(default_factory=list, init=False)
    _citations: list[dict[str, Any]] = field(default_factory=list, init=False)
    _refusals: list[Refusal] = field(default_factory=list, init=False)
    _read: int = field(default=0, init=False)
    _left_unread: int = field(default=0, init=False)
    _unread_sentences: set[int] = field(default_factory=set, init=False)
    _views: dict[int, tuple[Chunk, DocumentView]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        check_event_fields(self.answer_id, self.topic, self.emitted_at, self.fingerprints)
        self._spans = sentence_spans(self.text)
        self._starts = [start for start, _ in self._spans]

    @property
    def sentences(self) -> list[str]:
        return [self.text[start:end] for start, end in self._spans]

    def sentence_start(self, index: int) -> int:
        """Where the answer's sentence ``index`` starts in its text."""
        return self._starts[index]

    def sentence_at(self, start: int, end: int) -> int | None:
        """The sentence that holds most of the answer text ``[start, end)`` (the first of
        equals), or the one the position falls in for an empty range. Sentences are ordered
        and apart, so only those from the one holding ``start`` on are looked at."""
        best, most = None, 0
        first_index = max(0, bisect_right(self._starts, start) - 1)
        for index in range(first_index, len(self._spans)):
            first, last = self._spans[index]
            if first >= max(end, start + 1):
                break
            overlap = min(end, last) - max(start, first)
            if overlap > most or (start == end and first <= start < last):
                best, most = index, max(overlap, 1)
        return best

    def take(self, index: int | None, sentence: int | None = None) -> bool:
        """Whether one more citation may be read; past the bound, counted to be said once (and
        the ``sentence`` it supported kept, for the event to name)."""
        if self._read >= DEFAULT_LIMITS.max_citations_per_answer:
            self.left_unread(sentence)
            return False
        self._read += 1
        return True

    def left_unread(self, sentence: int | None) -> None:
        """One citation past the bound, not read: counted, and its sentence kept."""
        self._left_unread += 1
        if sentence is not None:
            self._unread_sentences.add(sentence)

    def refuse(
        self, reason: Reason, detail: str, index: int | None = None, sentence: int | None = None
    ) -> None:
        self._refusals.append(Refusal(reason, _short(detail), index, sentence))

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
        if not self.take(index, sentence_index):
            return
        problem = _bad_chunk(chunk)
        if problem is not None:
            self.refuse("bad_chunk", problem, index, sentence_index)
            return
        text = chunk.text
        if not 0 <= start <= end <= len(text):
            self.refuse(
                "offset_past_text",
                f"span [{start}, {end}] is outside the chunk's {len(text)} characters",
                index,
                sentence_index,
            )
            return
        placed = _placed(text, start, end, said, search, lambda: self._view(chunk))
        if isinstance(placed, Refusal):
            self.refuse(placed.reason, placed.detail, index, sentence_index)
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
            # the claim is the answer's sentences[sentence_index]: not copied into each citation
            citation["sentence_index"] = sentence_index
        self._citations.append(citation)

    def _view(self, chunk: Chunk) -> DocumentView:
        held = self._views.get(id(chunk))
        if held is None or held[0] is not chunk:
            alone = Chunk(doc_id="capture", doc_version="capture", chunk_id="c", text=chunk.text)
            view = DocumentView(
                "capture", "capture", chunk.text, (Placement(alone, 0),), has_doc_offsets=False
            )
            held = self._views[id(chunk)] = (chunk, view)
        return held[1]

    def build(self) -> Captured:
        if self._left_unread:
            self.refuse(
                "too_many_citations",
                f"{self._left_unread:,} citations past the first "
                f"{DEFAULT_LIMITS.max_citations_per_answer} were not read",
            )
        event: dict[str, Any] = {"answer_id": self.answer_id}
        if self.topic is not None:
            event["topic"] = self.topic
        if self.emitted_at is not None:
            event["emitted_at"] = self.emitted_at
        event["sentences"] = self.sentences
        event["citations"] = self._citations
        # the sentences refused citations named: coverage counts those claims unjudged, not
        # uncited. A refusal whose sentence is not known (or that named none) is not here: it
        # hides no claim, at worst one of its claims is flagged uncited
        named = self._unread_sentences.union(
            refusal.sentence for refusal in self._refusals if refusal.sentence is not None
        )
        if named:
            event["refused_citation_sentences"] = sorted(named)
        size = len(orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS))
        if size > DEFAULT_LIMITS.max_message_bytes:
            return Captured(
                None,
                (
                    *self._refusals,
                    Refusal(
                        "answer_too_large",
                        f"the event would be {size:,} bytes, above the exporter's "
                        f"max_message_bytes of {DEFAULT_LIMITS.max_message_bytes:,}",
                    ),
                ),
            )
        return Captured(event, tuple(self._refusals))


def check_event_fields(
    answer_id: object, topic: object, emitted_at: object, fingerprints: object
) -> None:
    """The caller's own arguments: a bad one is a mistake in code, raised at once (ValueError),
    never a record the exporter would refuse."""
    if not _is_identifier(answer_id, MAX_ID_CHARS - _ID_SUFFIX):
        raise ValueError(
            f"answer_id must be a non-empty string of at most {MAX_ID_CHARS - _ID_SUFFIX} "
            "characters, with no NUL or lone surrogate"
        )
    if topic is not None and not _is_identifier(topic, MAX_ID_CHARS):
        raise ValueError(f"topic must be a non-empty string of at most {MAX_ID_CHARS} characters")
    if emitted_at is not None and not (type(emitted_at) is str and is_timestamp(emitted_at)):
        raise ValueError("emitted_at must be an RFC 3339 timestamp")
    if not isinstance(fingerprints, dict) or any(
        not _is_identifier(key, MAX_ID_CHARS) or not is_sha256(value)
        for key, value in fingerprints.items()
    ):
        raise ValueError("fingerprints must map doc_ids to 64 hexadecimal digits")


# room in a citation id for the answer id's "#<n>"
_ID_SUFFIX = 8


def _is_identifier(value: object, limit: int) -> bool:
    return (
        type(value) is str and 0 < len(value) <= limit and "\0" not in value and _encodable(value)
    )


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no JSON reader gives it back
        return False
    return True


def _placed(  # noqa: PLR0917 - one private step of cite
    text: str,
    start: int,
    end: int,
    said: str | None,
    search: bool,
    view: Callable[[], DocumentView],
) -> tuple[int, int] | Refusal:
    """The span to record: ``[start, end)`` trimmed of surrounding whitespace when it holds
    ``said`` (or ``said`` is unknown), else the one place of the chunk that holds ``said``:
    verbatim, then in another case, then by the relocator. A place that cuts a word is no place
    of the quote ("10 days" inside "110 days", "refundable" inside "nonrefundable")."""
    held = text[start:end]
    if said is None or held == said or held.strip() == said.strip():
        if not held.strip():
            return Refusal("empty_quote", f"span [{start}, {end}] holds only whitespace")
        return trimmed(text, start, end)
    quote = said.strip()
    if not quote:
        return Refusal("empty_quote", "the cited text is only whitespace")
    where = "in the chunk" if search else f"at [{start}, {end}] or elsewhere in the chunk"
    place = _verbatim(text, quote)
    if place is None:
        found = relocate(
            FoldedQuote(said),
            view(),
            threshold=_THRESHOLD,
            max_fuzzy_chars=DEFAULT_LIMITS.max_quote_chars,
            budget=Budget(_BUDGET_SECONDS),
        )
        if found.outcome != FOUND or found.place is None:
            return Refusal(
                "quote_not_in_source",
                f"the cited text {_preview(said)} is not {where} ({found.outcome})",
            )
        place = trimmed(text, found.place.start, found.place.end)
    if _cuts_a_word(text, *place):
        return Refusal(
            "quote_not_in_source",
            f"the cited text {_preview(said)} is found {where} only inside a longer word",
        )
    return place


def _verbatim(text: str, quote: str) -> tuple[int, int] | None:
    """The one place of ``quote`` in ``text``, as is or in another case (where lower-casing
    keeps every length), or None (absent, or in several places)."""
    for haystack, needle in ((text, quote), (text.lower(), quote.lower())):
        if len(haystack) != len(text) or len(needle) != len(quote):
            continue
        at = haystack.find(needle)
        if at >= 0:
            if haystack.find(needle, at + 1) >= 0:
                return None
            return at, at + len(quote)
    return None


def _cuts_a_word(text: str, start: int, end: int) -> bool:
    if start >= end:
        return True
    before = start > 0 and text[start - 1].isalnum() and text[start].isalnum()
    after = end < len(text) and text[end].isalnum() and text[end - 1].isalnum()
    return before or after


def _bad_chunk(chunk: object) -> str | None:
    if not isinstance(chunk, Chunk):
        return f"a source must be an exporter.capture.Chunk, not {type(chunk).__name__}"
    for name in ("doc_id", "doc_version", "chunk_id"):
        if not _is_identifier(getattr(chunk, name), MAX_ID_CHARS):
            return (
                f"the chunk's {name} must be a non-empty string of at most {MAX_ID_CHARS}, "
                "with no NUL or lone surrogate"
            )
    if chunk.source is not None and not _is_identifier(chunk.source, MAX_ID_CHARS):
        return f"the chunk's source must be a non-empty string of at most {MAX_ID_CHARS}"
    if type(chunk.text) is not str:
        return f"the chunk's text must be a string, not {type(chunk.text).__name__}"
    if len(chunk.text) > DEFAULT_LIMITS.max_chunk_chars:
        return f"the chunk's text is above {DEFAULT_LIMITS.max_chunk_chars:,} characters"
    if not _encodable(chunk.text):
        return "the chunk's text holds a lone surrogate"
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
