"""Checks as plug-ins: a check defined only here goes through every consumer of results.

Two checks are defined in this module and nowhere else: a per-citation one (a quote too short
to tell its place apart) and a per-answer one (an answer that cites a single document). They
register through :mod:`exporter.checks.plugins` alone, and their results appear in the verdicts
published and written, in the metrics and in the sweep's summary, with no other file changed.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.checks.engine import Policy
from exporter.checks.plugins import AnswerContext, Count, MetricSpec, ResultSummary, Unusable
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status, Verdict
from exporter.file_sweep import run_sweep
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.report import summary_json, summary_text
from exporter.outputs.verdicts import verdict_json, verdict_key
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.gate import Gate
from exporter.pipeline.outcome import Mode, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.records.schema import Chunk, Citation
from exporter.sources.jsonl import JsonLines

TEXT = "Refunds take 5 days. See the policy. Shipping is free."
SHORT_QUOTE = 16  # characters: a quote shorter than this may sit in many places


@dataclass(slots=True)
class ShortQuote:
    """A citation whose quote is too short to relocate with confidence."""

    citation_id: str | None
    chars: int

    @property
    def check(self) -> str:
        return "short_quote"

    @property
    def unusable(self) -> Unusable | None:
        return None

    def record(self) -> dict[str, Any]:
        return {"check": "short_quote", "citation_id": self.citation_id, "chars": self.chars}

    def key(self) -> bytes:
        return (self.citation_id or "").encode()

    def published(self, *, everything: bool, sweep: bool) -> bool:
        return True  # inline and in a sweep: a finding of the archive, not of the moment

    def counts(self) -> Iterable[Count]:
        return [("citation_short_quotes", ("short",), 1)]

    def new_summary(self) -> ShortQuoteSummary:
        return ShortQuoteSummary()


@dataclass
class ShortQuoteSummary:
    found: int = 0
    invalid: int = 0
    lengths: list[int] = field(default_factory=list)

    def add(self, result: ShortQuote) -> None:
        self.found += 1
        self.lengths.append(result.chars)

    def merge(self, other: ShortQuoteSummary) -> None:
        self.found += other.found
        self.invalid += other.invalid
        self.lengths += other.lengths

    def lines(self) -> list[str]:
        return ["", f"  short quotes: {self.found:,}"] if self.found else []

    def as_json(self) -> dict[str, Any]:
        return {"found": self.found, "shortest": min(self.lengths, default=None)}

    def invalid_phrase(self) -> str | None:
        return f"short quotes not judged: {self.invalid}" if self.invalid else None


@dataclass(frozen=True)
class ShortQuoteCheck:
    name: str = "short_quote"
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            "citation_short_quotes",
            "Citations whose quote is too short to relocate.",
            ("kind",),
            (("short",),),
        ),
    )

    def check(self, citation: Citation, verdict: Verdict, store: ChunkStore) -> ShortQuote | None:
        chars = len(citation.quote)
        return ShortQuote(citation.citation_id, chars) if chars < SHORT_QUOTE else None

    def summary(self) -> ResultSummary:
        return ShortQuoteSummary()


@dataclass(slots=True)
class OneDocument:
    answer_id: str | None
    topic: str | None
    documents: int

    @property
    def check(self) -> str:
        return "one_document"

    @property
    def unusable(self) -> Unusable | None:
        return None

    def record(self) -> dict[str, Any]:
        return {"check": "one_document", "answer_id": self.answer_id, "topic": self.topic}

    def key(self) -> bytes:
        return (self.answer_id or "").encode()

    def published(self, *, everything: bool, sweep: bool) -> bool:
        return not sweep and self.documents == 1

    def counts(self) -> Iterable[Count]:
        return [("citation_single_source_answers", (self.topic,), 1)] if self.documents == 1 else []

    def new_summary(self) -> OneDocumentSummary:
        return OneDocumentSummary()


@dataclass
class OneDocumentSummary:
    answers: int = 0
    invalid: int = 0

    def add(self, result: OneDocument) -> None:
        self.answers += result.documents == 1

    def merge(self, other: OneDocumentSummary) -> None:
        self.answers += other.answers
        self.invalid += other.invalid

    def lines(self) -> list[str]:
        return [f"  answers citing one document: {self.answers:,}"]

    def as_json(self) -> dict[str, Any]:
        return {"answers": self.answers}

    def invalid_phrase(self) -> str | None:
        return f"answers not judged for sources: {self.invalid}" if self.invalid else None


@dataclass(frozen=True)
class OneDocumentCheck:
    name: str = "one_document"
    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            "citation_single_source_answers",
            "Answers all of whose citations name one document, by topic.",
            ("topic",),
            topic=True,
        ),
    )
    broken: bool = False  # raise, as a plug-in with a bug would

    def check(self, answer: AnswerContext) -> OneDocument | None:
        if self.broken:
            raise ZeroDivisionError("the plug-in's own bug")
        documents = len({verdict.doc_id for verdict in answer.verdicts})
        return OneDocument(answer.answer_id, answer.topic, documents)

    def summary(self) -> ResultSummary:
        return OneDocumentSummary()


def _store() -> ChunkStore:
    store = ChunkStore()
    store.apply(Chunk("d", "v1", "d#0", TEXT, 0, 0))
    return store


def _answer(answer_id: str, quotes: list[str]) -> bytes:
    citations = []
    for number, quote in enumerate(quotes):
        start = TEXT.index(quote)
        citations.append(
            {
                "citation_id": f"{answer_id}-{number}",
                "doc_id": "d",
                "doc_version": "v1",
                "chunk_id": "d#0",
                "chunk_span": [start, start + len(quote)],
                "quote": quote,
            }
        )
    event = {"answer_id": answer_id, "topic": "billing", "citations": citations}
    return orjson.dumps(event)


POLICY = Policy(answer_plugins=(OneDocumentCheck(),), citation_plugins=(ShortQuoteCheck(),))


def _inline(policy: Policy, value: bytes, offset: int = 0) -> Outcome:
    return Pipeline(_store(), policy).answer(LocalRecord("answers", 0, offset, None, value))


def test_a_check_defined_here_is_in_the_verdicts_published() -> None:
    outcome = _inline(POLICY, _answer("a1", ["See the policy.", "Refunds take 5 days."]))
    assert [v.status for v in outcome.verdicts] == [Status.OK, Status.OK]
    assert [result.check for result in outcome.results] == ["short_quote", "one_document"]
    published = [verdict_json(item, topic="answers") for item in outcome.publish]
    records = [orjson.loads(line) for line in published]
    # the short quote is published although its citation is ok; the answer citing one document
    # is too; each record names its check, the provenance added beside it
    assert records == [
        {"check": "short_quote", "citation_id": "a1-0", "chars": 15, "topic": "answers"},
        # a provenance key the record holds itself is written as source_<key>
        {"check": "one_document", "answer_id": "a1", "topic": "billing", "source_topic": "answers"},
    ]
    assert [verdict_key(item) for item in outcome.publish] == [b"a1-0", b"a1"]


def test_a_sweep_publishes_by_the_results_own_rule() -> None:
    pipeline = Pipeline(_store(), POLICY)
    value = _answer("a1", ["See the policy."])
    outcome = pipeline.answer(LocalRecord("answers", 0, 0, None, value), Mode.SWEEP)
    # the short quote publishes in a sweep too; the one-document finding only inline
    assert [result.check for result in outcome.publish] == ["short_quote"]  # type: ignore[union-attr]


def test_a_check_defined_here_counts_into_its_own_metrics() -> None:
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "test", checks=POLICY.checks)
    before = generate_latest(registry).decode()
    # declared and started at 0 from the first scrape, as the built-in series are
    assert 'citation_short_quotes_total{kind="short",mode="inline"} 0.0' in before
    assert 'citation_short_quotes_total{kind="short",mode="sweep"} 0.0' in before
    metrics.record(
        [
            _inline(POLICY, _answer("a1", ["See the policy.", "Refunds take 5 days."])),
            _inline(POLICY, _answer("a2", ["See the policy."]), offset=1),
        ]
    )
    after = generate_latest(registry).decode()
    assert 'citation_short_quotes_total{kind="short",mode="inline"} 2.0' in after
    # its topic label bounded as the built-in topic labels are
    assert 'citation_single_source_answers_total{mode="inline",topic="billing"} 2.0' in after
    # coverage's counters are still there, beside the plug-ins'
    assert "citation_answers_checked_total" in after


def test_a_check_defined_here_is_in_the_summary_and_the_written_verdicts(tmp_path: Any) -> None:
    lines = [_answer("a1", ["See the policy.", "Shipping is free."]), _answer("a2", [TEXT[:20]])]
    path = tmp_path / "citations.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = io.BytesIO()
    summary = SweepSummary()
    summary.store_loaded(1, 1)
    run_sweep(_store(), JsonLines(str(path)), POLICY, summary, out=out, jobs=2)
    written = [orjson.loads(line) for line in out.getvalue().splitlines()]
    checks = [record.get("check") for record in written]
    # line 1: two verdicts, one short quote, its answer; line 2: one verdict, its answer
    assert checks == [None, None, "short_quote", "one_document", None, "one_document"]
    assert written[2]["line"] == 1 and written[5]["line"] == 2
    text = summary_text(summary, Gate())
    assert "  short quotes: 1" in text
    assert "  answers citing one document: 2" in text
    data = summary_json(summary, Gate())
    assert data["short_quote"] == {"found": 1, "shortest": 15}
    assert data["one_document"] == {"answers": 2}
    # coverage's place in the JSON is where it was: before the entailment
    keys = list(data)
    assert keys.index("coverage") < keys.index("short_quote") < keys.index("entailment")


def test_a_check_that_raises_is_reported_for_its_message_and_keeps_the_rest() -> None:
    policy = Policy(
        answer_plugins=(OneDocumentCheck(broken=True),), citation_plugins=(ShortQuoteCheck(),)
    )
    outcome = _inline(policy, _answer("a1", ["See the policy."]))
    # the citation's verdict and the other check's result are kept
    assert [v.status for v in outcome.verdicts] == [Status.OK]
    assert [result.check for result in outcome.results] == ["short_quote", "one_document"]
    letter = outcome.dead_letter
    assert letter is not None and letter.reason == "check_failed"
    assert letter.exception == "ZeroDivisionError"
    assert letter.error.startswith("one_document: the one_document check failed: ZeroDivision")
    # a dead-lettered result is never published, and is counted as invalid in the summary
    assert [item.check for item in outcome.publish] == ["short_quote"]  # type: ignore[union-attr]
    summary = SweepSummary()
    summary.add_outcome(outcome, "line 1")
    assert summary.results["one_document"].invalid == 1
    assert "answers not judged for sources: 1" in summary_text(summary, None)
    assert any(error.startswith("line 1 one_document: ") for error in summary.errors)


def test_coverage_off_leaves_the_plug_ins_on() -> None:
    policy = Policy(coverage=False, answer_plugins=(OneDocumentCheck(),))
    value = orjson.loads(_answer("a1", ["See the policy."]))
    value["sentences"] = ["Refunds take 5 days.", "The sky is green."]
    outcome = _inline(policy, orjson.dumps(value))
    assert [result.check for result in outcome.results] == ["one_document"]
    with_coverage = _inline(Policy(answer_plugins=(OneDocumentCheck(),)), orjson.dumps(value))
    assert [result.check for result in with_coverage.results] == ["coverage", "one_document"]


@pytest.mark.parametrize("count", [("citation_undeclared", (), 1)])
def test_a_count_into_an_undeclared_metric_is_dropped_not_fatal(
    count: Count, caplog: pytest.LogCaptureFixture
) -> None:
    @dataclass
    class Stray(OneDocument):
        def counts(self) -> Iterable[Count]:
            return [count]

    outcome = _inline(POLICY, _answer("a1", ["See the policy."]))
    outcome.results.append(Stray("a1", None, 1))
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "test", checks=POLICY.checks)
    metrics.record([outcome, outcome])
    assert "citation_undeclared" not in generate_latest(registry).decode()
    assert [r.message for r in caplog.records].count(
        "a check counted into 'citation_undeclared', which no check declared: not counted"
    ) == 1
