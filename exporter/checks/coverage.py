"""Coverage: does every claim an answer makes carry a citation?

Every other check walks the citations an answer emitted; a claim asserted with no citation emits
none and walks past them all. Coverage starts from the answer's sentences instead: a classifier
(see :mod:`exporter.checks.claims`) tells claim-bearing sentences from framing, and a claim that
no citation names by its ``sentence_index`` is *uncited*. The action is ``mark_uncited``: the
serving side renders those sentences visibly as uncited; it never drops them and never rewrites
the answer. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from exporter.checks.claims import SentenceClassifier, SentenceKind
from exporter.records.limits import bounded, failure

__all__ = [
    "CoverageAction",
    "CoverageStatus",
    "CoverageVerdict",
    "check_coverage",
    "invalid_coverage",
]

# What a classifier's answer may be to count as framing: no subclass with its own __eq__.
_KINDS = (SentenceKind, str)


class CoverageStatus(StrEnum):
    COVERED = "covered"
    UNCITED_CLAIMS = "uncited_claims"
    # some citation of the answer could not be read: whether its claims are cited is unknown
    UNJUDGED = "unjudged"
    INVALID = "invalid"


class CoverageAction(StrEnum):
    KEEP = "keep"
    MARK_UNCITED = "mark_uncited"
    FIX_RECORD = "fix_record"


@dataclass(slots=True)
class CoverageVerdict:
    """One per answer event that carried ``sentences``: which are claims, which are uncited.

    The lists hold sentence indices (0-based, ascending). ``reason`` and ``error`` say why an
    ``invalid`` verdict could not be judged (``reason`` is a bounded label value, as for an
    invalid citation: ``invalid_record``, ``oversized`` or ``check_failed``). ``unjudged``
    holds the claims no readable citation names in an answer some of whose citations could not
    be read: they may be cited by those, so they are neither covered nor uncited.
    """

    answer_id: str | None
    status: CoverageStatus
    action: CoverageAction
    claims: list[int] = field(default_factory=list)
    framing: list[int] = field(default_factory=list)
    uncited: list[int] = field(default_factory=list)
    topic: str | None = None
    unjudged: list[int] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    # with check_failed: the class of what the classifier raised (for the DLQ's headers)
    exception: str | None = None


# bound once: an enum member looked up on its class costs more than the rest of the loop
_FRAMING = SentenceKind.FRAMING
_COVERED, _UNCITED = CoverageStatus.COVERED, CoverageStatus.UNCITED_CLAIMS
_KEEP, _MARK = CoverageAction.KEEP, CoverageAction.MARK_UNCITED


def invalid_coverage(
    answer_id: str | None,
    topic: str | None,
    error: str,
    reason: str = "invalid_record",
    exception: str | None = None,
) -> CoverageVerdict:
    """The verdict of an answer whose coverage cannot be judged: fix the record (``exception``:
    the class of what the classifier raised, when it raised)."""
    return CoverageVerdict(
        answer_id,
        CoverageStatus.INVALID,
        CoverageAction.FIX_RECORD,
        topic=topic,
        reason=reason,
        error=bounded(error),
        exception=exception,
    )


def check_coverage(
    answer_id: str,
    topic: str | None,
    sentences: Sequence[str],
    cited: Collection[int],
    classifier: SentenceClassifier,
    *,
    unreadable: int = 0,
) -> CoverageVerdict:
    """Sort the sentences into claims and framing; a claim whose index is not in ``cited`` is
    uncited, unless ``unreadable`` citations of the answer could not be read: then it is
    ``unjudged`` (an answer whose citations were all unreadable once reported every claim
    uncited, 100%, when none of them could be judged).

    A sentence a citation names is a claim by the answer's own account, and covered: the
    classifier is asked about the others only (in a typical answer most claims are cited, so
    this is most of the cost saved, and no uncited claim can hide behind it). Anything but a
    clear ``framing`` from the classifier (:attr:`SentenceKind.FRAMING` or the string
    ``"framing"``) counts as a claim (missing a claim is worse than flagging framing), even an
    object that says it equals everything. A classifier that raises or exits (a
    plugged-in one with a bug) makes this answer's coverage ``invalid`` with reason
    ``check_failed``; it never stops the checks (only ``KeyboardInterrupt`` goes through).
    """
    claims: list[int] = []
    framing: list[int] = []
    uncited: list[int] = []
    try:
        classify = classifier.classify
        for index, sentence in enumerate(sentences):
            if index in cited:
                claims.append(index)
                continue
            kind = classify(sentence)
            if type(kind) in _KINDS and kind == _FRAMING:
                framing.append(index)
            else:
                claims.append(index)
                uncited.append(index)
    except (Exception, SystemExit) as exc:  # one answer never stops the checks
        return invalid_coverage(
            answer_id, topic, failure("classifying", exc), "check_failed", type(exc).__name__
        )
    if uncited and unreadable:
        return CoverageVerdict(
            answer_id,
            CoverageStatus.UNJUDGED,
            CoverageAction.FIX_RECORD,
            claims,
            framing,
            [],
            topic,
            unjudged=uncited,
        )
    if uncited:
        return CoverageVerdict(answer_id, _UNCITED, _MARK, claims, framing, uncited, topic)
    return CoverageVerdict(answer_id, _COVERED, _KEEP, claims, framing, uncited, topic)
