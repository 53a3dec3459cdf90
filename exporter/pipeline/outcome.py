"""What handling one message came to: the one type every path returns and every output reads.

The Kafka loops, sweeps over the answer topic, ``run --source`` replays, the demo and the
offline file sweep all turn a message into an :class:`Outcome`; the metrics record outcomes
(a batch at a time), the publisher sends their verdicts and dead letter, and the sweep summary
adds them up. Every citation a message held is in ``checked``, valid or not, in input order, so
every path accounts for every citation the same way.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from exporter.checks.coverage import CoverageVerdict
from exporter.checks.evidence import Evidence
from exporter.checks.plugins import CheckResult
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.records.limits import failure
from exporter.records.schema import InvalidCitation

__all__ = [
    "CheckedCitation",
    "DeadLetter",
    "JudgeInput",
    "Mode",
    "Origin",
    "Outcome",
    "evidence_crc",
]


class Mode(StrEnum):
    """Why a message is being checked: as it arrives, or again in a sweep of the archive."""

    INLINE = "inline"
    SWEEP = "sweep"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message came from, for dead letters and verdict provenance."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input that could not be used (whole, or some of its citations).

    ``reason`` is a bounded label value; ``citations`` are the invalid citations of a message
    whose other citations were checked (empty when the message as a whole was unusable);
    ``invalid_sentences`` says a per-answer check could not judge the answer (its sentences
    could not be used, or the check raised); ``truncated_from`` is the original size of a value
    cut to its head.
    """

    origin: Origin
    value: bytes | None
    key: bytes | None
    reason: str
    error: str
    citations: tuple[InvalidCitation, ...] = field(default=())
    invalid_sentences: bool = False
    truncated_from: int | None = None  # the size of ``value`` before it was cut to its head
    # with check_failed: the class of the first exception a check raised, carried as a type's
    # name from where it was caught (never parsed back out of ``error``)
    exception: str | None = None

    @property
    def indexes(self) -> list[int]:
        """Positions of the invalid citations within their answer."""
        return [item.index for item in self.citations if item.index is not None]

    @classmethod
    def raised(
        cls, origin: Origin, value: bytes | None, key: bytes | None, exc: BaseException
    ) -> DeadLetter:
        """The dead letter of an input whose handling raised (a bug, reported rather than
        fatal): reason ``check_failed``, the error naming the exception, its class kept."""
        error = failure("handling", exc)
        return cls(origin, value, key, "check_failed", error, exception=type(exc).__name__)

    def invalid_citations(self) -> Iterator[InvalidCitation]:
        """One item per citation this letter stands for (one for a whole unusable message)."""
        if self.citations:
            yield from self.citations
        elif not self.invalid_sentences:  # an unjudged answer stands for no citation
            yield InvalidCitation(self.error, reason=self.reason)


@dataclass(slots=True)
class JudgeInput:
    """What the entailment judge needs of a checked citation: its claim, and where its evidence
    is now (the live span, or the repaired one after a repair), with what the sample's strata
    are drawn from. Read-only by convention: one is made per judgeable citation of a judging
    sweep, and a frozen one costs twice as much."""

    claim: str
    chunk_id: str
    start: int
    end: int
    emitted_at: str | None
    topic: str | None
    quote_chars: int
    evidence_crc: int  # of the text at the span when checked (see evidence_crc)

    def evidence(self, store: ChunkStore) -> str | None:
        """The text at the span, read from ``store``: None when the chunk is gone since the
        check, or holds other text there now. A sweep judges its sample after reading the whole
        archive, while the service's store follows the chunk topic: a chunk re-indexed under
        the same id meanwhile is not the evidence the citation was checked against."""
        chunk = store.chunk(self.chunk_id)
        if chunk is None:
            return None
        text = chunk.text[self.start : self.end]
        return text if evidence_crc(text) == self.evidence_crc else None


def evidence_crc(text: str) -> int:
    """A checksum of a citation's evidence (the same in every process, unlike ``hash``)."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class CheckedCitation:
    """One citation's verdict, where it sat in its answer, and what checking it cost.

    ``index`` is the position within an answer event (None for a lone citation); ``seconds``
    is the inline check time (0 for a citation that could not be decoded). Read-only by
    convention, not frozen: one is made per citation, and a frozen one costs twice as much.
    """

    verdict: Verdict
    index: int | None = None
    seconds: float = 0.0
    judge_input: JudgeInput | None = None  # only when the policy asks (a judging sweep)
    evidence: Evidence | None = None  # only when the policy asks, and only for drift


@dataclass(slots=True)
class Outcome:
    """One message, handled: its citations' verdicts, the results of the plug-in checks, its
    dead letter, what to publish.

    A chunk or control message has no citations; ``results`` are what the policy's plug-in
    checks said (see :mod:`exporter.checks.plugins`: coverage's verdict of an answer event
    that carried ``sentences`` among them), per citation in input order, then per answer;
    ``dead_letter`` is at most one per message, listing every invalid citation it held and
    every result that could not be judged; ``publish`` is what to send to the verdict topic
    (failing verdicts, or all inline ones with ``publish_all_verdicts``, and the results whose
    own rule says so).
    """

    origin: Origin
    mode: Mode = Mode.INLINE
    checked: list[CheckedCitation] = field(default_factory=list)
    dead_letter: DeadLetter | None = None
    publish: list[Verdict | CheckResult] = field(default_factory=list)
    results: list[CheckResult] = field(default_factory=list)

    @property
    def coverage(self) -> CoverageVerdict | None:
        """The coverage verdict among the results, for what shows coverage alone (the demo)."""
        for result in self.results:
            if type(result) is CoverageVerdict:
                return result
        return None

    @property
    def verdicts(self) -> list[Verdict]:
        """The verdicts of the citations that could be checked (not the invalid ones)."""
        return [c.verdict for c in self.checked if c.verdict.status is not Status.INVALID]
