"""One citation and the live store in, one verdict out: the checks and the failure policy.

The order of the checks is the contract:

1. the document must be live, else ``document_missing``;
2. the cited chunk must exist and hold the span, else ``chunk_missing`` / ``out_of_bounds``;
3. the text at the span must hold the quote: folded equality (typography moves nothing), else,
   when the folded quote sits a few characters away in the chunk, ``span_shifted`` (the span
   moved, or its end was cut: see exporter.checks.nearby), else the folded similarity at least
   the threshold with the same numbers and negations (a text that changed a little), else
   ``quote_mismatch``;
4. a failure on an older recorded version is ``superseded`` and is never relocated (moving an old
   answer onto a reissued document would cite sentences it never saw); on the live version it is
   drift, and the quote is relocated across the whole document.

The work is bounded by :class:`~exporter.records.limits.Limits`: a quote longer than
``max_quote_chars`` (folded) is compared and searched for verbatim only, and relocation stops at
``relocation_budget_ms`` of CPU time.

Nothing here does I/O or touches metrics, so the sweep, the streaming service and the tests all
share exactly this code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from exporter.checks.claims import HybridClassifier, SentenceClassifier
from exporter.checks.compare import FoldedQuote
from exporter.checks.coverage import CoverageCheck
from exporter.checks.nearby import FoldedHost, span_check
from exporter.checks.plugins import AnswerCheck, CitationCheck
from exporter.checks.relocate import FOUND, UNIQUE, Budget, Place, PositionHint, relocate
from exporter.checks.store import ChunkStore, DocumentView
from exporter.checks.verdict import Action, CitedAs, FailedCheck, Repair, Status, Verdict
from exporter.defaults import DEFAULT_HIGH_SEVERITY_TOPICS, DEFAULT_THRESHOLD, in_similarity_range
from exporter.records.limits import DEFAULT_LIMITS, Limits, failure
from exporter.records.schema import Chunk, Citation, InvalidCitation

__all__ = [
    "Policy",
    "check_citation",
    "check_or_report",
    "invalid_verdict",
]


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of the checks. ``threshold`` is a similarity on the 0-100 scale."""

    threshold: float = DEFAULT_THRESHOLD
    high_severity_topics: frozenset[str] = field(default=DEFAULT_HIGH_SEVERITY_TOPICS)
    limits: Limits = DEFAULT_LIMITS
    # tells claim-bearing sentences from framing, for coverage (see exporter.checks.claims)
    classifier: SentenceClassifier = field(default_factory=HybridClassifier)
    # judge coverage where answers carry their sentences (off: their sentences are ignored)
    coverage: bool = True
    # share of judgeable citations whose claim and evidence are kept for the entailment
    # judge: judge_sample_rate behind the response, 1.0 in a sweep drawing its sample
    judge_rate: float = 0.0
    # keep, for a drifted citation, its quote, what its span holds now and where the quote was
    # found (bounded): what a sweep's report shows as examples, written into its verdicts
    keep_evidence: bool = False
    # further checks, run after the built-in ones on every message (see exporter.checks.plugins)
    answer_plugins: tuple[AnswerCheck, ...] = ()
    citation_plugins: tuple[CitationCheck, ...] = ()
    # every per-answer check to run, in order (coverage first, when on): derived, not set
    answer_checks: tuple[AnswerCheck, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            in_similarity_range(self.threshold)
        except ValueError as exc:
            raise ValueError(f"threshold {exc}") from None
        builtin: tuple[AnswerCheck, ...] = (
            (CoverageCheck(self.classifier),) if self.coverage else ()
        )
        object.__setattr__(self, "answer_checks", builtin + tuple(self.answer_plugins))

    @property
    def checks(self) -> tuple[AnswerCheck | CitationCheck, ...]:
        """Every plug-in check this policy runs (coverage included, when on)."""
        return (*self.answer_checks, *self.citation_plugins)

    def unrepaired_action(self, topic: str | None) -> Action:
        """A claim on a high-severity topic is suppressed rather than left vaguely sourced."""
        if topic is not None and topic in self.high_severity_topics:
            return Action.SUPPRESS_CLAIM
        return Action.DEGRADE_TO_DOCUMENT


def invalid_verdict(item: InvalidCitation) -> Verdict:
    """The verdict of a citation that could not be decoded."""
    return Verdict(
        citation_id=item.citation_id,
        answer_id=item.answer_id,
        doc_id=item.doc_id,
        status=Status.INVALID,
        action=Action.FIX_RECORD,
        reason=item.reason,
        error=item.error,
    )


def check_or_report(
    citation: Citation, store: ChunkStore, policy: Policy, index: int | None = None
) -> Verdict | InvalidCitation:
    """:func:`check_citation`, with a check that raises (a bug) reported like a bad record
    (reason ``check_failed``, ``index`` its place in its answer), never fatal."""
    try:
        return check_citation(citation, store, policy)
    except Exception as exc:  # one citation never stops the sweep or the service
        return InvalidCitation(
            failure("checking", exc),
            citation.citation_id,
            citation.answer_id,
            citation.doc_id,
            index,
            reason="check_failed",
            exception=type(exc).__name__,
        )


def _position_hint(citation: Citation) -> PositionHint | None:
    """The citation's ``doc_span`` with its ``doc_sha256``: a hint needs both (see relocate)."""
    start, end, fingerprint = citation.doc_start, citation.doc_end, citation.doc_sha256
    if start is None or end is None or fingerprint is None:
        return None
    return PositionHint(start, end, fingerprint)


def _shift(
    citation: Citation,
    cited: Chunk | None,
    view: DocumentView,
    place: Place,
    repair: tuple[str, int],
) -> int | None:
    """Where the quote is now minus where the recorded span points now (see :class:`Repair`)."""
    if view.has_doc_offsets and cited is not None and cited.doc_offset is not None:
        return place.start - (cited.doc_offset + citation.start)
    repair_chunk_id, repair_start = repair
    if repair_chunk_id == citation.chunk_id:
        return repair_start - citation.start
    return None


def _verdict(
    citation: Citation,
    status: Status,
    action: Action,
    live_version: str | None,
    source: str | None,
    **details: Any,
) -> Verdict:
    """A verdict carrying what every verdict of this citation carries, plus ``details``; a
    failing one (every verdict made here) says what the citation held, for ``apply``."""
    return Verdict(
        citation.citation_id,
        citation.answer_id,
        citation.doc_id,
        status,
        action,
        recorded_version=citation.doc_version,
        live_version=live_version,
        topic=citation.topic,
        source=source,
        cited=cited_as(citation),
        **details,
    )


def cited_as(citation: Citation) -> CitedAs:
    """What ``citation`` holds, as a verdict records it (the quote by its SHA-256)."""
    digest = hashlib.sha256(citation.quote.encode("utf-8", "surrogatepass")).hexdigest()
    return CitedAs(citation.chunk_id, citation.start, citation.end, digest)


class _HostOf:
    """The cited chunk's folded document, looked up only if the search near its span asks, and
    only if its view is built already: the search may find the quote held at the span, and a
    citation that passes must not fold its whole document (a megabyte: half a second)."""

    __slots__ = ("chunk", "doc_id", "store")

    def __init__(self, store: ChunkStore, doc_id: str, chunk: Chunk) -> None:
        self.store, self.doc_id, self.chunk = store, doc_id, chunk

    def __call__(self) -> FoldedHost | None:
        view = self.store.viewed(self.doc_id)
        placement = None if view is None else view.placement(self.chunk.chunk_id)
        if view is None or placement is None or placement.chunk is not self.chunk:
            return None
        return FoldedHost(view.text, view.folded, placement.start)


def check_citation(citation: Citation, store: ChunkStore, policy: Policy) -> Verdict:
    """Check one citation against the live store and decide what should happen to it."""
    live_version = store.live_version(citation.doc_id)
    if live_version is None:
        return _verdict(
            citation,
            Status.DOCUMENT_MISSING,
            Action.DROP_CITATION,
            None,
            citation.source,
            reason="document_missing",
        )

    cited = store.chunk(citation.chunk_id)
    if cited is not None and cited.doc_id != citation.doc_id:
        cited = None
    source = citation.source
    if source is None and cited is not None:
        source = cited.source
    similarity: float | None = None
    quote: FoldedQuote | None = None
    if cited is None:
        failed = FailedCheck.CHUNK_MISSING
    elif citation.end > len(cited.text):
        failed = FailedCheck.OUT_OF_BOUNDS
    else:
        text = cited.text[citation.start : citation.end]
        if text == citation.quote:
            matches, similarity, moved = True, 100.0, False
        else:
            quote = FoldedQuote(citation.quote)
            matches, similarity, moved = span_check(
                quote,
                cited.text,
                (citation.start, citation.end),
                threshold=policy.threshold,
                max_quote_chars=policy.limits.max_quote_chars,
                # a span of the live version that has moved is relocated in its folded
                # document next: the search near the span maps back through its fold when one
                # is built (a span found held has no relocation to pay for it)
                host=(
                    _HostOf(store, citation.doc_id, cited)
                    if citation.doc_version == live_version
                    else None
                ),
            )
        if matches:  # the common case, built without _verdict's keyword arguments
            return Verdict(
                citation.citation_id,
                citation.answer_id,
                citation.doc_id,
                Status.OK,
                Action.KEEP,
                None,
                None,
                similarity,
                citation.doc_version,
                live_version,
                None,
                citation.topic,
                source,
            )
        failed = FailedCheck.SPAN_SHIFTED if moved else FailedCheck.QUOTE_MISMATCH

    if citation.doc_version != live_version:
        return _verdict(
            citation,
            Status.SUPERSEDED,
            Action.PIN_ARCHIVED_VERSION,
            live_version,
            source,
            reason=failed.value,
            failed_check=failed,
            similarity=similarity,
        )

    view = store.document(citation.doc_id)
    assert view is not None  # the document has a live version, so it has live chunks
    if source is None:
        source = view.placements[0].chunk.source if view.placements else None
    relocation = relocate(
        quote or FoldedQuote(citation.quote),
        view,
        threshold=policy.threshold,
        prefix=citation.prefix,
        suffix=citation.suffix,
        cited_chunk_id=citation.chunk_id,
        hint=_position_hint(citation),
        max_fuzzy_chars=policy.limits.max_quote_chars,
        budget=Budget(policy.limits.relocation_budget_ms / 1000.0),
    )
    if relocation.outcome != FOUND:
        return _verdict(
            citation,
            Status.DRIFT_UNREPAIRED,
            policy.unrepaired_action(citation.topic),
            live_version,
            source,
            reason=relocation.outcome,
            failed_check=failed,
            similarity=similarity,
        )

    place, placement = relocation.place, relocation.placement
    assert place is not None and placement is not None
    new_start = place.start - placement.start
    new_chunk_id = placement.chunk.chunk_id
    repair = Repair(
        chunk_id=new_chunk_id,
        start=new_start,
        end=place.end - placement.start,
        similarity=place.similarity,
        method=place.method,
        shift=_shift(citation, cited, view, place, (new_chunk_id, new_start)),
        how=relocation.how or UNIQUE,
    )
    return _verdict(
        citation,
        Status.DRIFT_REPAIRED,
        Action.REWRITE_OFFSETS,
        live_version,
        source,
        reason=failed.value,
        failed_check=failed,
        similarity=similarity,
        repair=repair,
    )
