"""Coverage: does every claim an answer makes carry a citation?

Every other check walks the citations an answer emitted; a claim asserted with no citation emits
none and walks past them all. Coverage starts from the answer's sentences instead: a classifier
(see :mod:`exporter.checks.claims`) tells claim-bearing sentences from framing, and a claim that
no citation names by its ``sentence_index`` is *uncited*. The action is ``mark_uncited``: the
serving side renders those sentences visibly as uncited; it never drops them and never rewrites
the answer. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from exporter.checks.claims import SentenceClassifier, SentenceKind
from exporter.checks.plugins import AnswerContext, Count, MetricSpec, Unusable
from exporter.checks.wording import counted, shown_topic
from exporter.records.decode import decode_sentences
from exporter.records.limits import bounded, failure

__all__ = [
    "COVERAGE",
    "COVERAGE_METRICS",
    "CoverageAction",
    "CoverageCheck",
    "CoverageStatus",
    "CoverageSummary",
    "CoverageVerdict",
    "check_coverage",
    "invalid_coverage",
]

COVERAGE = "coverage"  # the check's name: its records' "check", its part of a summary
_ANSWER_SENTENCES = "citation_answer_sentences"
_UNCITED_CLAIMS = "citation_uncited_claims"
_ANSWERS_CHECKED = "citation_answers_checked"
# the metrics coverage counts into (names are a public contract: rules and boards read them);
# unjudged_claim: a claim of an answer some of whose citations could not be read, or one a
# citation refused at capture named (neither cited nor uncited, so not a claim of the ratio)
COVERAGE_METRICS = (
    MetricSpec(
        _ANSWER_SENTENCES,
        "Sentences of answers whose coverage was judged, by kind: claim (asserts something "
        "checkable), framing, or unjudged_claim (a claim of an answer some of whose "
        "citations could not be read, or one a citation refused at capture named).",
        ("kind",),
        (("claim",), ("framing",), ("unjudged_claim",)),
    ),
    MetricSpec(
        _UNCITED_CLAIMS,
        "Claim-bearing sentences that no citation supports, by the answer's topic.",
        ("topic",),
        topic=True,
    ),
    MetricSpec(
        _ANSWERS_CHECKED,
        "Answers whose coverage was judged (answer events that carried their sentences).",
    ),
)
# Topics counted one by one in a summary; an archive's further topics are counted as "other"
# (a topic is the producer's free text: an archive may hold any number of them).
_MAX_TOPICS_KEPT = 50
_OTHER_TOPIC = "other"

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
    be read (they may be cited by those), and those named by citations refused at capture:
    neither covered nor uncited.
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

    # --- the result of a check (see exporter.checks.plugins.CheckResult) -------------------

    @property
    def check(self) -> str:
        return COVERAGE

    @property
    def unusable(self) -> Unusable | None:
        """Why the sentences could not be judged, for an ``invalid`` verdict."""
        if self.status is not CoverageStatus.INVALID:
            return None
        error = self.error or "the sentences could not be used"
        return Unusable("sentences", self.reason or "invalid_record", error, self.exception)

    def record(self) -> dict[str, Any]:
        """What the serving side reads: ``topic`` is the answer's topic here (a provenance
        ``topic`` added to it is written as ``source_topic``)."""
        record: dict[str, Any] = {
            "check": COVERAGE,
            "answer_id": self.answer_id,
            "status": self.status,
            "action": self.action,
            "claims": self.claims,
            "framing": self.framing,
            "uncited": self.uncited,
            "unjudged": self.unjudged,
            "topic": self.topic,
        }
        if self.error is not None:
            record["reason"] = self.reason
            record["error"] = self.error
        return record

    def key(self) -> bytes:
        return (self.answer_id or "").encode()

    def published(self, *, everything: bool, sweep: bool) -> bool:
        """Inline, what the serving side must act on (uncited and unjudged claims), and with
        ``everything`` the covered answers too; never in a sweep: coverage depends on the answer
        alone and was published when the answer was first checked."""
        if sweep:
            return False
        status = self.status
        return status in _ACTED_ON or (everything and status is CoverageStatus.COVERED)

    def counts(self) -> Iterable[Count]:
        if self.status is CoverageStatus.INVALID:
            return ()  # counted with its message's dead letter
        unjudged = len(self.unjudged)
        found: list[Count] = [
            (_ANSWERS_CHECKED, (), 1),
            (_ANSWER_SENTENCES, ("claim",), len(self.claims) - unjudged),
            (_ANSWER_SENTENCES, ("framing",), len(self.framing)),
            (_ANSWER_SENTENCES, ("unjudged_claim",), unjudged),
        ]
        if self.uncited:
            found.append((_UNCITED_CLAIMS, (self.topic,), len(self.uncited)))
        return found

    def new_summary(self) -> CoverageSummary:
        return CoverageSummary()


_ACTED_ON = frozenset((CoverageStatus.UNCITED_CLAIMS, CoverageStatus.UNJUDGED))


@dataclass
class CoverageSummary:
    """Coverage of the answers that carried sentences: claims, framing, uncited, per topic."""

    answers: int = 0
    claims: int = 0
    framing: int = 0
    uncited: int = 0
    invalid: int = 0
    answers_uncited: int = 0
    uncited_topics: Counter[str] = field(default_factory=Counter)
    # claims of answers some of whose citations could not be read: not known to be uncited
    unjudged: int = 0
    answers_unjudged: int = 0

    def add(self, verdict: CoverageVerdict) -> None:
        """Count a verdict that could be judged (the summary counts an invalid one itself)."""
        self.answers += 1
        self.claims += len(verdict.claims)
        self.framing += len(verdict.framing)
        if verdict.unjudged:
            self.unjudged += len(verdict.unjudged)
            self.answers_unjudged += 1
        if verdict.uncited:
            self.uncited += len(verdict.uncited)
            self.answers_uncited += 1
            self.count_topic(verdict.topic or "", len(verdict.uncited))

    def count_topic(self, topic: str, count: int) -> None:
        if topic not in self.uncited_topics and len(self.uncited_topics) >= _MAX_TOPICS_KEPT:
            topic = _OTHER_TOPIC
        self.uncited_topics[topic] += count

    def merge(self, other: CoverageSummary) -> None:
        self.answers += other.answers
        self.claims += other.claims
        self.framing += other.framing
        self.uncited += other.uncited
        self.invalid += other.invalid
        self.answers_uncited += other.answers_uncited
        self.unjudged += other.unjudged
        self.answers_unjudged += other.answers_unjudged
        for topic, count in other.uncited_topics.items():
            self.count_topic(topic, count)

    @property
    def judged(self) -> bool:
        return bool(self.answers or self.invalid)

    @property
    def judged_claims(self) -> int:
        """Claims whose citations could be read: the ones that are covered or uncited."""
        return self.claims - self.unjudged

    @property
    def uncited_ratio(self) -> float:
        """Uncited claims per judged claim: the share of what answers asserted that nothing
        backs (claims whose citations could not be read are neither)."""
        return self.uncited / self.judged_claims if self.judged_claims else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "claims": self.claims,
            "framing": self.framing,
            "uncited": self.uncited,
            "uncited_ratio": self.uncited_ratio,
            "invalid": self.invalid,
            "answers_with_uncited_claims": self.answers_uncited,
            "unjudged": self.unjudged,
            "answers_with_unreadable_citations": self.answers_unjudged,
            "uncited_by_topic": [
                {"topic": topic or None, "uncited": count}
                for topic, count in self.uncited_topics.most_common()
            ],
        }

    def lines(self) -> list[str]:
        if not self.judged:
            return []
        lines = [
            "",
            f"  coverage: {counted(self.answers, 'answer')} judged; "
            f"{counted(self.claims, 'claim')}, {self.framing:,} framing",
            f"  uncited ratio     {self.uncited_ratio:7.2%}   {counted(self.uncited, 'claim')} "
            f"without a citation, in {counted(self.answers_uncited, 'answer')} (mark_uncited)",
        ]
        if self.unjudged:
            lines.append(
                f"  not judged        {counted(self.unjudged, 'claim')} in "
                f"{counted(self.answers_unjudged, 'answer')} whose citations could not be read "
                "or were refused at capture: neither cited nor uncited, nor in the ratio "
                "(fix_record)"
            )
        if self.uncited_topics:
            top = ", ".join(
                f"{shown_topic(topic)} {count:,}"
                for topic, count in self.uncited_topics.most_common(5)
            )
            lines.append(f"  uncited by topic: {top}")
        if self.invalid:
            lines.append(f"  answers whose sentences could not be used: {self.invalid:,}")
        return lines

    def invalid_phrase(self) -> str | None:
        return f"invalid sentences: {self.invalid:,}" if self.invalid else None


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
    refused: Collection[int] = (),
) -> CoverageVerdict:
    """Sort the sentences into claims and framing; a claim whose index is not in ``cited`` is
    uncited, unless ``unreadable`` citations of the answer could not be read: then it is
    ``unjudged`` (an answer whose citations were all unreadable once reported every claim
    uncited, 100%, when none of them could be judged). A sentence in ``refused`` was named by a
    citation that capture refused to record: a claim by the answer's own account, and
    ``unjudged`` (cited, by something that cannot be checked), unless a written citation names
    it too; a classifier that reads where a sentence sits is told it is cited.

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
    unjudged: list[int] = []
    # what the answer cited, written or refused: where a sentence sits reads it so
    named = set(cited).union(refused) if refused else cited
    try:
        classify = classifier.classify
        # a classifier that reads where a sentence sits is told (claims.place)
        classify_in_answer = getattr(classifier, "classify_in_answer", None)
        for index, sentence in enumerate(sentences):
            if index in cited:
                claims.append(index)
                continue
            if index in refused:
                claims.append(index)
                unjudged.append(index)
                continue
            if classify_in_answer is not None:
                kind = classify_in_answer(sentences, index, named)
            else:
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
    if uncited and unreadable:  # what the unreadable citations named is unknown
        unjudged, uncited = sorted(unjudged + uncited), []
    if uncited:
        return CoverageVerdict(
            answer_id, _UNCITED, _MARK, claims, framing, uncited, topic, unjudged=unjudged
        )
    if unjudged:
        return CoverageVerdict(
            answer_id,
            CoverageStatus.UNJUDGED,
            CoverageAction.FIX_RECORD,
            claims,
            framing,
            [],
            topic,
            unjudged=unjudged,
        )
    return CoverageVerdict(answer_id, _COVERED, _KEEP, claims, framing, uncited, topic)


@dataclass(frozen=True, slots=True)
class CoverageCheck:
    """Coverage as a per-answer check: judged for every answer event that carried its
    ``sentences`` (others have nothing to judge), by ``classifier``."""

    classifier: SentenceClassifier

    @property
    def name(self) -> str:
        return COVERAGE

    @property
    def metrics(self) -> tuple[MetricSpec, ...]:
        return COVERAGE_METRICS

    def check(self, answer: AnswerContext) -> CoverageVerdict | None:
        decoded = decode_sentences(
            answer.parsed, answer.limits, header_checked=answer.header_checked
        )
        if decoded is None:
            return None
        if decoded.sentences is None:
            error = decoded.error or "the sentences could not be used"
            return invalid_coverage(decoded.answer_id, decoded.topic, error, decoded.reason)
        assert decoded.answer_id is not None
        return check_coverage(
            decoded.answer_id,
            decoded.topic,
            decoded.sentences,
            answer.cited,
            self.classifier,
            unreadable=answer.unreadable,
            refused=set(decoded.refused) if decoded.refused else (),
        )

    def summary(self) -> CoverageSummary:
        return CoverageSummary()
