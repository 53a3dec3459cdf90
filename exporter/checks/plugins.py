"""Checks as plug-ins: the one shape of every check beyond a citation's own span and quote.

A citation's own check (does its document resolve, is its span in bounds, does it still hold the
quote, is its version current) makes the :class:`~exporter.checks.verdict.Verdict` every path
is built around. Every further check is a plug-in of one of two shapes: a
:class:`CitationCheck` looks at one checked citation, an :class:`AnswerCheck` at one answer
event (coverage is one: :class:`exporter.checks.coverage.CoverageCheck`). Either returns a
:class:`CheckResult`, and the result type owns all that consumers do with it: its record (the
JSON written and published), its publish rule, what it adds to the metrics, and its part of a
sweep's summary (a :class:`ResultSummary`, with its own lines). The pipeline runs the checks a
:class:`~exporter.checks.engine.Policy` names; the outcome holds their results in order; the
metrics, the publisher, the file sweep and the summary iterate over them and know no check by
name. A check that raises is reported for its message (reason ``check_failed``), never fatal.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.records.limits import Limits, failure
from exporter.records.schema import Citation

__all__ = [
    "AnswerCheck",
    "AnswerContext",
    "CheckFailed",
    "CheckResult",
    "Checked",
    "CitationCheck",
    "Count",
    "MetricSpec",
    "ResultSummary",
    "Unusable",
    "run_guarded",
]

# One count a result adds to a metric: the metric's name, the values of its labels after
# ``mode`` (a topic label's value raw: the metrics bound it), and how much.
Count = tuple[str, tuple[str | None, ...], int]


class Unusable(NamedTuple):
    """Why a check could not judge what it was given: counted with its message's dead letter.

    ``what`` names the input in errors ("sentences"); ``reason`` is a bounded label value
    (``invalid_record``, ``oversized``, ``check_failed``); ``exception`` the class of what
    raised, when something did.
    """

    what: str
    reason: str
    error: str
    exception: str | None = None


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A counter a check's results count into: registered by the metrics once per name.

    ``labels`` follow ``mode``; ``initial`` are the label values started at 0 in every mode (so
    rates and ``absent()`` behave from the first scrape); with ``topic``, the last label is an
    answer's topic, bounded (and started at 0 for each topic) as the metrics bound topics.
    """

    name: str
    documentation: str
    labels: tuple[str, ...] = ()
    initial: tuple[tuple[str, ...], ...] = ((),)
    topic: bool = False


class ResultSummary(Protocol):
    """A check's part of a sweep's summary: constant memory, merged across batches (so it must
    pickle: a file sweep's workers send theirs back), rendered by its own lines."""

    invalid: int  # results that could not be judged (counted by the summary, never added)

    def add(self, result: Any) -> None:
        """Count one result that could be judged (``unusable`` None)."""

    def merge(self, other: Any) -> None:
        """Add a partial summary of the same check (one batch of a sweep)."""

    def lines(self) -> list[str]:
        """The summary's text lines for this check (none when it judged nothing)."""

    def as_json(self) -> dict[str, Any]:
        """The summary's JSON for this check, under the check's name."""

    def invalid_phrase(self) -> str | None:
        """How the summary's line of invalid inputs names these (None: none were invalid)."""


class CheckResult(Protocol):
    """What one check said about one citation or one answer."""

    @property
    def check(self) -> str:
        """The check's name: its records' ``check``, its key in the summary."""

    @property
    def unusable(self) -> Unusable | None:
        """Why the input could not be judged (then only the dead letter counts it)."""

    def record(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (provenance is added by whoever writes it)."""

    def key(self) -> bytes:
        """Its Kafka key on the verdict topic (a citation's id, an answer's)."""

    def published(self, *, everything: bool, sweep: bool) -> bool:
        """Whether it goes to the verdict topic: ``everything`` with ``publish_all_verdicts``;
        ``sweep`` when re-checked from the archive rather than as the answer arrived."""

    def counts(self) -> Iterable[Count]:
        """What it adds to the metrics (nothing when it is unusable)."""

    def new_summary(self) -> ResultSummary:
        """An empty summary part for results of its check."""


class Checked(Protocol):
    """A citation of the answer as checked (the pipeline's CheckedCitation has it)."""

    @property
    def verdict(self) -> Verdict: ...


@dataclass(frozen=True, slots=True)
class AnswerContext:
    """One answer event as a per-answer check sees it, decoded once for all of them.

    ``parsed`` is the event's JSON object; ``cited`` the sentence indices its readable
    citations name; ``unreadable`` how many of its citations could not be read;
    ``header_checked`` whether some citation could be decoded (its ``answer_id`` and
    ``topic`` are good); ``checked`` its citations as checked, in order (see ``verdicts``).
    """

    parsed: dict[str, Any]
    limits: Limits
    cited: Collection[int]
    unreadable: int
    header_checked: bool
    checked: Sequence[Checked]

    @property
    def verdicts(self) -> list[Verdict]:
        """The verdicts of the answer's readable citations, in order (made when asked for:
        coverage never asks, and it runs on every answer)."""
        return [c.verdict for c in self.checked if c.verdict.status is not Status.INVALID]

    @property
    def answer_id(self) -> str | None:
        value = self.parsed.get("answer_id")
        return value if type(value) is str else None

    @property
    def topic(self) -> str | None:
        value = self.parsed.get("topic")
        return value if type(value) is str else None


class AnswerCheck(Protocol):
    """A check of one answer event as a whole."""

    @property
    def name(self) -> str: ...
    @property
    def metrics(self) -> tuple[MetricSpec, ...]: ...

    def check(self, answer: AnswerContext) -> CheckResult | None:
        """Its result for this answer, or None when it has nothing to say (coverage, for an
        answer that carried no sentences)."""

    def summary(self) -> ResultSummary:
        """An empty summary part for its results."""


class CitationCheck(Protocol):
    """A check of one citation, after its own check made its verdict."""

    @property
    def name(self) -> str: ...
    @property
    def metrics(self) -> tuple[MetricSpec, ...]: ...

    def check(self, citation: Citation, verdict: Verdict, store: ChunkStore) -> CheckResult | None:
        """Its result for this citation, or None when it has nothing to say."""

    def summary(self) -> ResultSummary:
        """An empty summary part for its results."""


@dataclass(frozen=True, slots=True)
class CheckFailed:
    """The result of a check that raised (a bug in a plug-in): its message is dead-lettered
    with reason ``check_failed``; the check's other results, and the citations' verdicts, are
    kept."""

    check: str
    subject: str | None  # the answer or citation it was checking, for its record
    error: str
    exception: str
    summary_factory: Callable[[], ResultSummary]

    @property
    def unusable(self) -> Unusable:
        return Unusable(self.check, "check_failed", self.error, self.exception)

    def record(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "subject": self.subject,
            "status": "invalid",
            "action": "fix_record",
            "reason": "check_failed",
            "error": self.error,
        }

    def key(self) -> bytes:
        return (self.subject or "").encode()

    def published(self, *, everything: bool, sweep: bool) -> bool:
        return False  # dead-lettered, as every input that could not be judged

    def counts(self) -> Iterable[Count]:
        return ()

    def new_summary(self) -> ResultSummary:
        return self.summary_factory()


def run_guarded(
    check: AnswerCheck | CitationCheck, subject: str | None, *args: Any
) -> CheckResult | None:
    """``check.check(*args)`` (one check of one subject), a raise turned into a
    :class:`CheckFailed`: a plug-in's bug is reported for its message, never fatal."""
    try:
        return check.check(*args)
    except Exception as exc:  # one check of one message never stops the others
        error = failure(f"the {check.name} check", exc)
        return CheckFailed(check.name, subject, error, type(exc).__name__, check.summary)
