"""Coverage: claims no citation backs, judged per answer, and the malformed inputs around it.

The classifier here is a stand-in whose answers the tests choose (a sentence starting ``F:`` is
framing), so these tests pin the coverage logic, not the built-in classifier's judgement
(tests/test_claims.py measures that).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from exporter.checks.claims import HybridClassifier, SentenceKind
from exporter.checks.coverage import (
    CoverageAction,
    CoverageStatus,
    CoverageVerdict,
    check_coverage,
)
from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status
from exporter.cli import main
from exporter.file_sweep import load_store, run_sweep
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.report import summary_json, summary_text
from exporter.outputs.verdicts import verdict_json, verdict_key
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.gate import Gate
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import Mode, Origin, Outcome
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import decode_chunk
from exporter.records.limits import MAX_ID_CHARS, MAX_SENTENCES_PER_ANSWER, Limits
from exporter.settings import SettingsError, load_settings
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from exporter.sources.jsonl import JsonLines

TEXT = "Refunds are issued within 30 days. Annual plans renew automatically."


class PrefixClassifier:
    """Framing when the sentence starts with ``F:``; a claim otherwise."""

    def classify(self, sentence: str) -> SentenceKind:
        return SentenceKind.FRAMING if sentence.startswith("F:") else SentenceKind.CLAIM


class BrokenClassifier:
    def classify(self, sentence: str) -> SentenceKind:
        raise RuntimeError("model server gone")


POLICY = Policy(classifier=PrefixClassifier())


def _store() -> ChunkStore:
    store = ChunkStore()
    store.apply(
        decode_chunk({"doc_id": "d1", "doc_version": "v1", "chunk_id": "d1#0", "text": TEXT})
    )
    return store


def _citation(number: int, sentence_index: object = None, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "citation_id": f"c{number}",
        "doc_id": "d1",
        "doc_version": "v1",
        "chunk_id": "d1#0",
        "chunk_span": [0, 33],
        "quote": "Refunds are issued within 30 days",
    }
    if sentence_index is not None:
        record["sentence_index"] = sentence_index
    return record | changes


def _answer(sentences: object, *citations: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "answer_id": "a1",
        "topic": "billing",
        "sentences": sentences,
        "citations": list(citations),
    } | extra


SENTENCES = [
    "F: Thanks for asking!",
    "Refunds are issued within 30 days.",
    "Annual plans renew automatically.",
    "Seats can be added at any time.",
    "F: Anything else?",
]


def _check(value: object, policy: Policy = POLICY, mode: Mode = Mode.INLINE) -> Outcome:
    data = value if isinstance(value, bytes) else orjson.dumps(value)
    return check_message(
        data, b"k", Origin("rag.answers", 0, 7), store=_store(), policy=policy, mode=mode
    )


def test_claims_without_a_citation_are_uncited() -> None:
    """Four claims, two cited: the hole every per-citation check walks past."""
    outcome = _check(_answer(SENTENCES, _citation(1, 1), _citation(2, 2)))
    assert [c.verdict.status for c in outcome.checked] == [Status.OK, Status.OK]
    coverage = outcome.coverage
    assert coverage is not None
    assert coverage.status is CoverageStatus.UNCITED_CLAIMS
    assert coverage.action is CoverageAction.MARK_UNCITED
    assert (coverage.claims, coverage.framing, coverage.uncited) == ([1, 2, 3], [0, 4], [3])
    assert coverage.answer_id == "a1" and coverage.topic == "billing"
    assert outcome.dead_letter is None


def test_every_claim_cited_is_covered() -> None:
    outcome = _check(_answer(SENTENCES[:3], _citation(1, 1), _citation(2, 2), _citation(3, 2)))
    assert outcome.coverage is not None
    assert outcome.coverage.status is CoverageStatus.COVERED
    assert outcome.coverage.action is CoverageAction.KEEP
    assert outcome.coverage.uncited == []


def test_claims_of_an_answer_whose_citations_were_all_unreadable_are_unjudged() -> None:
    """Reproduces issue 22: such an answer reported "uncited ratio 100%". Its claims may well be
    cited by the citations that could not be read: they are unjudged, counted apart."""
    unreadable = [_citation(1, 1, chunk_span="broken"), _citation(2, 2, quote=7)]
    outcome = _check(_answer(SENTENCES, *unreadable))
    assert [c.verdict.status for c in outcome.checked] == [Status.INVALID, Status.INVALID]
    coverage = outcome.coverage
    assert coverage is not None
    assert coverage.status is CoverageStatus.UNJUDGED
    assert coverage.action is CoverageAction.FIX_RECORD
    assert (coverage.uncited, coverage.unjudged) == ([], [1, 2, 3])
    summary = SweepSummary()
    summary.add_outcome(outcome, "answers.jsonl:1")
    assert summary.coverage.uncited == 0 and summary.coverage.unjudged == 3
    assert summary.coverage.uncited_ratio == 0.0
    report = summary.coverage.as_json()
    assert report["unjudged"] == 3 and report["answers_with_unreadable_citations"] == 1
    text = "\n".join(summary.coverage.lines())
    assert "not judged" in text and "3 claims in 1 answer whose citations could not be read" in text


def test_one_unreadable_citation_leaves_the_claims_it_may_have_cited_unjudged() -> None:
    outcome = _check(_answer(SENTENCES, _citation(1, 1), _citation(2, 2, quote=7)))
    coverage = outcome.coverage
    assert coverage is not None and coverage.status is CoverageStatus.UNJUDGED
    assert (coverage.claims, coverage.uncited, coverage.unjudged) == ([1, 2, 3], [], [2, 3])


def test_sentences_named_by_refused_citations_are_unjudged_and_the_rest_judged() -> None:
    """An event that names the sentences cited by citations refused when it was captured
    (``refused_citation_sentences``): those claims are neither covered nor uncited; the others
    are judged as ever; one a written citation names too is covered."""
    coverage = _check(_answer(SENTENCES, _citation(1, 1), refused_citation_sentences=[2])).coverage
    assert coverage is not None and coverage.status is CoverageStatus.UNCITED_CLAIMS
    assert (coverage.claims, coverage.uncited, coverage.unjudged) == ([1, 2, 3], [3], [2])
    both = _answer(SENTENCES, _citation(1, 1), refused_citation_sentences=[2, 3])
    coverage = _check(both).coverage
    assert coverage is not None and coverage.status is CoverageStatus.UNJUDGED
    assert (coverage.uncited, coverage.unjudged) == ([], [2, 3])
    # framing named by a refused citation is a claim by the answer's own account
    coverage = _check(_answer(SENTENCES, refused_citation_sentences=[0])).coverage
    assert coverage is not None and 0 in coverage.claims and 0 in coverage.unjudged
    also_written = _answer(SENTENCES, _citation(1, 1), refused_citation_sentences=[1])
    coverage = _check(also_written).coverage
    assert coverage is not None and (coverage.uncited, coverage.unjudged) == ([2, 3], [])
    for none in ({}, {"refused_citation_sentences": []}, {"refused_citation_sentences": None}):
        coverage = _check(_answer(SENTENCES, _citation(1, 1), **none)).coverage
        assert coverage is not None and coverage.uncited == [2, 3] and coverage.unjudged == []


def test_a_refused_citation_is_a_citation_where_a_sentence_sits() -> None:
    """The hybrid reads a signature-like line as framing only where it closes the answer, with
    no cited sentence after it: a citation refused at capture is one, as a written one is."""
    sentences = [
        "Refunds are issued within 30 days.",
        "Regards, Deepa | InfoSec Helpdesk",
        "Annual plans renew automatically.",
    ]
    written = check_coverage("a", None, sentences, {0, 2}, HybridClassifier())
    refused = check_coverage("a", None, sentences, {0}, HybridClassifier(), refused={2})
    assert written.uncited == refused.uncited == [1]
    assert refused.unjudged == [2]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("2", "got str"),
        (2, "got int"),
        ([5], "holds 5"),
        ([-1], "holds -1"),
        ([True], "holds True"),
        ([1.0], "holds 1.0"),
        (["1"], "holds '1'"),
        ([None], "holds null"),
        ([0, 1, 2, 3, 4, 0], "got 6 items"),
    ],
)
def test_refused_citation_sentences_that_name_no_sentence_make_the_coverage_invalid(
    value: object, shown: str
) -> None:
    """Named in one line; the citations are checked all the same."""
    outcome = _check(_answer(SENTENCES, _citation(1, 1), refused_citation_sentences=value))
    assert [c.verdict.status for c in outcome.checked] == [Status.OK]
    coverage = outcome.coverage
    assert coverage is not None and coverage.status is CoverageStatus.INVALID
    assert coverage.error is not None and "'refused_citation_sentences'" in coverage.error
    assert shown in coverage.error


_JSON = st.recursive(
    # integers orjson can write, as any message the exporter reads holds
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=7) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(_JSON | st.lists(st.none() | st.integers(-2, 6), max_size=6))
def test_any_refused_citation_sentences_is_read_or_named_never_raised(value: object) -> None:
    sentences = len(SENTENCES)
    outcome = _check(_answer(SENTENCES, _citation(1, 1), refused_citation_sentences=value))
    coverage = outcome.coverage
    assert coverage is not None
    readable = value is None or (
        type(value) is list
        and len(value) <= sentences
        and all(type(i) is int and 0 <= i < sentences for i in value)
    )
    if not readable:
        assert coverage.status is CoverageStatus.INVALID
        assert coverage.error is not None and "'refused_citation_sentences'" in coverage.error
        return
    named = set(value or ())
    assert set(coverage.unjudged) == named - {1}  # sentence 1 has a written citation
    assert not set(coverage.uncited) & named


def test_unjudged_claims_are_not_claims_of_the_coverage_ratio_metric() -> None:
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "t", topics=SourceLabels())
    metrics.record([_check(_answer(SENTENCES, _citation(1, 1), _citation(2, 2, quote=7)))])
    sample = registry.get_sample_value
    assert sample("citation_answer_sentences_total", {"mode": "inline", "kind": "claim"}) == 1
    assert (
        sample("citation_answer_sentences_total", {"mode": "inline", "kind": "unjudged_claim"}) == 2
    )


def test_a_citation_that_drifted_still_covers_its_sentence() -> None:
    """Coverage asks whether a claim was cited; whether the citation still holds is the
    span checks' question, answered in its own verdict."""
    drifted = _citation(1, 0, chunk_span=[35, 68])
    outcome = _check(_answer(["Refunds are issued within 30 days."], drifted))
    assert outcome.checked[0].verdict.status is not Status.OK
    assert outcome.coverage is not None and outcome.coverage.uncited == []


def test_no_sentences_no_coverage_verdict() -> None:
    assert _check(_answer(None, _citation(1, 0))).coverage is None
    assert (
        _check({k: v for k, v in _answer([], _citation(1)).items() if k != "sentences"}).coverage
        is None
    )


def test_an_answer_of_framing_only_or_no_sentences_is_covered() -> None:
    for sentences in ([], ["F: Hello!", "F: Bye."]):
        coverage = _check(_answer(sentences)).coverage
        assert coverage is not None and coverage.status is CoverageStatus.COVERED


def test_a_lone_citation_record_may_name_its_sentence_but_gets_no_coverage() -> None:
    outcome = _check(_citation(1, 4, answer_id="a1"))
    assert outcome.checked[0].verdict.status is Status.OK
    assert outcome.coverage is None and outcome.dead_letter is None


@pytest.mark.parametrize(
    ("index", "error"),
    [
        (5, "'sentence_index' 5 is out of range: the answer has 5 sentences"),
        (-1, "'sentence_index' must be a non-negative integer, got -1"),
        ("2", "'sentence_index' must be a non-negative integer, got '2'"),
        (1.0, "'sentence_index' must be a non-negative integer, got 1.0"),
        (True, "'sentence_index' must be a non-negative integer, got True"),
    ],
)
def test_a_bad_sentence_index_makes_that_citation_invalid_and_only_it(
    index: object, error: str
) -> None:
    outcome = _check(_answer(SENTENCES, _citation(1, 1), _citation(2, index), _citation(3, 2)))
    statuses = [c.verdict.status for c in outcome.checked]
    assert statuses == [Status.OK, Status.INVALID, Status.OK]
    assert outcome.checked[1].verdict.error == error
    letter = outcome.dead_letter
    assert letter is not None and letter.indexes == [1] and error in letter.error
    # what an unreadable citation named is unknown: sentence 3, named by no readable one, is
    # neither uncited nor covered but unjudged (the record is to be fixed)
    coverage = outcome.coverage
    assert coverage is not None and (coverage.uncited, coverage.unjudged) == ([], [3])
    assert coverage.status is CoverageStatus.UNJUDGED


def test_an_out_of_range_index_of_a_single_sentence_answer_reads_well() -> None:
    outcome = _check(_answer(["Refunds are issued within 30 days."], _citation(1, 1)))
    assert outcome.checked[0].verdict.error == (
        "'sentence_index' 1 is out of range: the answer has 1 sentence"
    )


@pytest.mark.parametrize(
    ("sentences", "error"),
    [
        ("Refunds are issued.", "'sentences' must be a list of strings, got str"),
        ({"0": "x"}, "'sentences' must be a list of strings, got dict"),
        (["ok", 3], "'sentences' must be a list of strings, but item #1 is int"),
        (["ok", None], "'sentences' must be a list of strings, but item #1 is null"),
        ([["nested"]], "'sentences' must be a list of strings, but item #0 is list"),
    ],
)
def test_unusable_sentences_make_the_coverage_invalid_and_the_citations_are_still_checked(
    sentences: object, error: str
) -> None:
    outcome = _check(_answer(sentences, _citation(1, 0), _citation(2, 0)))
    assert [c.verdict.status for c in outcome.checked] == [Status.OK, Status.OK]
    coverage = outcome.coverage
    assert coverage is not None
    assert coverage.status is CoverageStatus.INVALID
    assert coverage.action is CoverageAction.FIX_RECORD
    assert coverage.error == error and coverage.reason == "invalid_record"
    letter = outcome.dead_letter
    assert letter is not None and letter.invalid_sentences and letter.citations == ()
    assert letter.reason == "invalid_record"
    assert letter.error == f"coverage: {error}"
    assert list(letter.invalid_citations()) == []  # it stands for no citation


def test_too_many_sentences_is_an_oversized_coverage_not_a_lost_answer() -> None:
    policy = Policy(classifier=PrefixClassifier(), limits=Limits(max_sentences_per_answer=3))
    outcome = _check(_answer(SENTENCES, _citation(1, 1)), policy)
    assert outcome.checked[0].verdict.status is Status.OK
    assert outcome.coverage is not None
    assert outcome.coverage.status is CoverageStatus.INVALID
    assert outcome.coverage.reason == "oversized"
    assert outcome.coverage.error == (
        "the answer has 5 sentences, more than max_sentences_per_answer=3"
    )
    assert outcome.dead_letter is not None and outcome.dead_letter.reason == "oversized"


def test_an_answer_with_a_broken_header_gets_an_invalid_coverage_verdict() -> None:
    outcome = _check({"sentences": ["x"], "citations": [_citation(1, 0)]})
    assert outcome.checked[0].verdict.status is Status.INVALID
    assert outcome.coverage is not None
    assert outcome.coverage.status is CoverageStatus.INVALID
    assert outcome.coverage.error == "answer event: missing required field 'answer_id'"


def test_both_invalid_citations_and_invalid_sentences_share_one_dead_letter() -> None:
    outcome = _check(_answer("nope", _citation(1, 0, quote=""), _citation(2, 0)))
    letter = outcome.dead_letter
    assert letter is not None and letter.invalid_sentences and letter.indexes == [0]
    assert letter.error.startswith("coverage: 'sentences' must be a list of strings, got str; ")
    assert "#0: 'quote' must be a non-empty string" in letter.error


def test_a_classifier_that_raises_fails_that_answers_coverage_only() -> None:
    policy = Policy(classifier=BrokenClassifier())
    outcome = _check(_answer(SENTENCES, _citation(1, 1)), policy)
    assert outcome.checked[0].verdict.status is Status.OK
    assert outcome.coverage is not None
    assert outcome.coverage.status is CoverageStatus.INVALID
    assert outcome.coverage.reason == "check_failed"
    assert outcome.coverage.error == "classifying failed: RuntimeError: 'model server gone'"


def test_anything_but_a_clear_framing_from_a_classifier_is_a_claim() -> None:
    class Unsure:
        def classify(self, sentence: str) -> Any:
            return {"framing?": "maybe"}

    outcome = _check(_answer(["Hello."]), Policy(classifier=Unsure()))
    assert outcome.coverage is not None and outcome.coverage.claims == [0]


class ExitingClassifier:
    def classify(self, sentence: str) -> SentenceKind:
        raise SystemExit(0)


def test_a_classifier_that_exits_fails_that_answers_coverage_only() -> None:
    """A plug-in's SystemExit used to escape the checks: the consumer stopped, and a sweep
    exited 0, passing its gate with no summary."""
    outcome = _check(_answer(SENTENCES, _citation(1, 1)), Policy(classifier=ExitingClassifier()))
    assert outcome.checked[0].verdict.status is Status.OK
    assert outcome.coverage is not None
    assert outcome.coverage.status is CoverageStatus.INVALID
    assert outcome.coverage.reason == "check_failed"
    assert outcome.coverage.error == "classifying failed: SystemExit: '0'"


def test_a_sweep_in_workers_survives_a_classifier_that_exits(tmp_path: Path) -> None:
    store = _store()
    citations = _write(
        tmp_path / "answers.jsonl",
        [_answer(SENTENCES, _citation(n, 1), answer_id=f"a{n}") for n in range(4)],
    )
    summary = SweepSummary()
    coverage = io.BytesIO()
    policy = Policy(classifier=ExitingClassifier())
    run_sweep(store, JsonLines(str(citations)), policy, summary, coverage_out=coverage, jobs=2)
    assert summary.statuses[Status.OK] == 4
    assert summary.coverage.invalid == 4
    assert [json.loads(line)["reason"] for line in coverage.getvalue().splitlines()] == [
        "check_failed"
    ] * 4


def test_only_a_clear_framing_is_framing_not_whatever_says_it_equals_framing() -> None:
    class Agreeable:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    class Liar:
        def classify(self, sentence: str) -> Any:
            return Agreeable()

    class Plain:
        def classify(self, sentence: str) -> Any:
            return "framing" if sentence.startswith("F:") else "claim"

    outcome = _check(_answer(["F: Hello.", "Refunds."]), Policy(classifier=Liar()))
    assert outcome.coverage is not None and outcome.coverage.claims == [0, 1]
    outcome = _check(_answer(["F: Hello.", "Refunds."]), Policy(classifier=Plain()))
    assert outcome.coverage is not None
    assert (outcome.coverage.framing, outcome.coverage.claims) == ([0], [1])


def test_no_coverage_verdict_can_outgrow_a_kafka_message() -> None:
    """The worst answer the limits allow: every sentence a one-letter uncited claim, so the
    verdict lists each index twice, with the longest ids and topic, as published. It must fit
    the producer's max_request_size (1 MiB at least): one that did not was refused by the
    producer, the whole poll was rewound and the same answer checked again, forever."""
    assert Limits().max_sentences_per_answer <= MAX_SENTENCES_PER_ANSWER
    with pytest.raises(ValueError, match="max_sentences_per_answer"):
        Limits(max_sentences_per_answer=MAX_SENTENCES_PER_ANSWER + 1)
    limits = Limits(max_sentences_per_answer=MAX_SENTENCES_PER_ANSWER)
    answer = _answer(
        ["a"] * MAX_SENTENCES_PER_ANSWER,
        answer_id="\x01" * MAX_ID_CHARS,  # each escaped as six bytes in JSON
        topic="\x02" * MAX_ID_CHARS,
    )
    outcome = _check(answer, Policy(classifier=PrefixClassifier(), limits=limits))
    assert outcome.coverage is not None
    assert len(outcome.coverage.uncited) == MAX_SENTENCES_PER_ANSWER
    line = verdict_json(
        outcome.coverage, mode="inline", topic="t" * 249, partition=2**31 - 1, offset=2**63 - 1
    )
    assert len(line) + len(verdict_key(outcome.coverage)) < 1_048_576 // 4


@pytest.mark.parametrize("spec", ["sys:exit", "no.such.module:Thing"])
def test_the_service_refuses_a_classifier_that_exits_or_cannot_load(
    monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    """The service's settings load the classifier at start-up: a SystemExit there used to end
    the process with the plug-in's status instead of naming the setting."""
    monkeypatch.setenv("CITATION_EXPORTER_COVERAGE_CLASSIFIER", spec)
    with pytest.raises(SettingsError, match="coverage_classifier"):
        load_settings()


def test_the_sentence_limit_is_bounded_in_settings_and_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_MAX_SENTENCES_PER_ANSWER", "20000")
    with pytest.raises(SettingsError, match="max_sentences_per_answer"):
        load_settings()
    chunks = _write(tmp_path / "chunks.jsonl", [])
    citations = _write(tmp_path / "answers.jsonl", [_answer(SENTENCES)])
    files = ["--chunks", str(chunks), "--citations", str(citations), "--allow-empty"]
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", *files, "--max-sentences-per-answer", "20000"])
    assert "--max-sentences-per-answer must be at most 10,000" in capsys.readouterr().err
    out = tmp_path / "coverage.jsonl"
    code = main(["sweep", *files, "--max-sentences-per-answer", "2", "--coverage-out", str(out)])
    assert code == 0
    assert json.loads(out.read_text())["reason"] == "oversized"


class _Agreeable:
    """Says it equals anything, framing included."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


class _Unruly:
    """A plugged-in classifier whose every answer is drawn: a kind, garbage, or an exception."""

    def __init__(self, answers: list[Any]) -> None:
        self._answers = answers
        self.calls = 0

    def classify(self, sentence: str) -> Any:
        answer = self._answers[self.calls % len(self._answers)]
        self.calls += 1
        if isinstance(answer, BaseException):
            raise answer
        return answer


_UNRULY_ANSWERS = st.one_of(
    st.sampled_from(
        [SentenceKind.CLAIM, SentenceKind.FRAMING, "framing", "claim", None, b"framing"]
    ),
    st.integers(),
    st.text(max_size=8),
    st.builds(_Agreeable),
    st.sampled_from(
        [RuntimeError("boom"), SystemExit(3), RecursionError(), ValueError("x" * 5000)]
    ),
)


@given(
    answers=st.lists(_UNRULY_ANSWERS, min_size=1, max_size=6),
    sentences=st.lists(st.text(max_size=20), max_size=8),
    cited=st.sets(st.integers(0, 7), max_size=8),
)
def test_whatever_a_plugged_classifier_does_each_answer_gets_one_bounded_verdict(
    answers: list[Any], sentences: list[str], cited: set[int]
) -> None:
    citations = [_citation(n, n) for n in sorted(cited) if n < len(sentences)]
    unruly = _Unruly(answers)
    outcome = _check(_answer(sentences, *citations), Policy(classifier=unruly))
    assert [c.verdict.status for c in outcome.checked] == [Status.OK] * len(citations)
    coverage = outcome.coverage
    assert coverage is not None
    if coverage.status is CoverageStatus.INVALID:
        assert coverage.reason == "check_failed" and coverage.error is not None
        assert len(coverage.error) <= 480 and "\n" not in coverage.error
        assert outcome.dead_letter is not None and outcome.dead_letter.invalid_sentences
        return
    assert sorted(coverage.claims + coverage.framing) == list(range(len(sentences)))
    asked = [i for i in range(len(sentences)) if i not in cited]  # cited ones are claims
    assert unruly.calls == len(asked)
    for call, index in enumerate(asked):  # framing only when the classifier clearly said so
        said = answers[call % len(answers)]
        clearly_framing = type(said) in (str, SentenceKind) and said == "framing"
        assert (index in coverage.framing) == clearly_framing
    assert coverage.uncited == [i for i in coverage.claims if i not in cited]
    assert outcome.dead_letter is None


def _pipeline(publish_all: bool = False) -> Pipeline:
    return Pipeline(_store(), POLICY, publish_all=publish_all)


def _record(value: dict[str, Any], offset: int = 0) -> LocalRecord:
    return LocalRecord("rag.answers", 0, offset, b"k", orjson.dumps(value))


def test_only_uncited_claims_are_published_unless_all_verdicts_are() -> None:
    uncited = _answer(SENTENCES, _citation(1, 1))
    covered = _answer(SENTENCES[:2], _citation(1, 1))
    invalid = _answer(7, _citation(1, 1))
    quiet = _pipeline()
    assert [type(v) for v in quiet.answer(_record(uncited)).publish] == [CoverageVerdict]
    assert quiet.answer(_record(covered)).publish == []
    assert quiet.answer(_record(invalid)).publish == []  # dead-lettered instead
    loud = _pipeline(publish_all=True)
    published = loud.answer(_record(covered)).publish
    assert [type(v).__name__ for v in published] == ["Verdict", "CoverageVerdict"]
    assert loud.answer(_record(invalid)).publish[-1:] != [CoverageVerdict]
    # a sweep publishes failures only, even with publish_all_verdicts, and no coverage verdict:
    # coverage does not depend on the store, and was published when the answer was first read
    assert loud.answer(_record(covered), Mode.SWEEP).publish == []
    assert quiet.answer(_record(uncited), Mode.SWEEP).publish == []


def test_the_coverage_verdict_on_the_wire() -> None:
    outcome = _check(_answer(SENTENCES, _citation(1, 1), _citation(2, 2)))
    assert outcome.coverage is not None
    line = verdict_json(outcome.coverage, mode="inline", topic="rag.answers", offset=7)
    assert line.endswith(b"\n")
    kafka = json.loads(line)
    assert kafka["topic"] == "billing"  # the answer's topic; the Kafka one is its provenance
    assert (kafka["source_topic"], kafka["offset"], kafka["mode"]) == ("rag.answers", 7, "inline")
    record = json.loads(verdict_json(outcome.coverage, line=3))
    assert record == {
        "check": "coverage",
        "answer_id": "a1",
        "status": "uncited_claims",
        "action": "mark_uncited",
        "claims": [1, 2, 3],
        "framing": [0, 4],
        "uncited": [3],
        "unjudged": [],
        "topic": "billing",
        "line": 3,
    }
    assert verdict_key(outcome.coverage) == b"a1"
    invalid = _check(_answer(7)).coverage
    assert invalid is not None
    record = json.loads(verdict_json(invalid))
    assert record["status"] == "invalid" and record["action"] == "fix_record"
    assert record["reason"] == "invalid_record"
    assert record["error"] == "'sentences' must be a list of strings, got int"


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, (name, labels)
    return value


def test_metrics_count_answers_sentences_and_uncited_claims_by_bounded_topic() -> None:
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "t", topics=SourceLabels(limit=1))
    pipeline = _pipeline()
    outcomes = [
        pipeline.answer(_record(_answer(SENTENCES, _citation(1, 1)), 0)),  # 3 uncited
        pipeline.answer(_record(_answer(SENTENCES[:2], _citation(1, 1)), 1)),  # covered
        pipeline.answer(_record(_answer(SENTENCES[1:3], topic="legal"), 2)),  # 2 uncited
        pipeline.answer(_record(_answer("bad", _citation(1, 1)), 3)),  # invalid
        pipeline.answer(_record(_citation(9, 0, answer_id="a9"), 4)),  # no coverage
        pipeline.answer(_record(_answer(SENTENCES[1:2], topic="hr"), 5), Mode.SWEEP),  # 1 uncited
    ]
    metrics.record(outcomes)
    assert _sample(registry, "citation_answers_checked_total", mode="inline") == 3
    assert _sample(registry, "citation_answers_checked_total", mode="sweep") == 1
    sentences = "citation_answer_sentences_total"
    assert _sample(registry, sentences, mode="inline", kind="claim") == 3 + 1 + 2
    assert _sample(registry, sentences, mode="inline", kind="framing") == 2 + 1
    assert _sample(registry, sentences, mode="sweep", kind="claim") == 1
    uncited = "citation_uncited_claims_total"
    assert _sample(registry, uncited, mode="inline", topic="billing") == 2
    assert _sample(registry, uncited, mode="inline", topic="other") == 2  # past max_topics=1
    assert _sample(registry, uncited, mode="sweep", topic="other") == 1
    assert _sample(registry, uncited, mode="sweep", topic="billing") == 0  # born at 0
    invalid = "citation_exporter_invalid_events_total"
    assert _sample(registry, invalid, topic="rag.answers", reason="invalid_record") == 1


def test_the_summary_adds_up_coverage_and_keeps_the_error() -> None:
    summary = SweepSummary()
    for value in (
        _answer(SENTENCES, _citation(1, 1)),
        _answer(SENTENCES[:2], _citation(1, 1), topic="legal"),
        _answer(["Seats are unlimited."], topic="legal"),
        _answer([3], _citation(1, 0)),
    ):
        summary.add_outcome(_check(value, mode=Mode.SWEEP), "answers.jsonl:1")
    report = summary_json(summary, Gate())["coverage"]
    assert report == {
        "answers": 3,
        "claims": 3 + 1 + 1,
        "framing": 2 + 1,
        "uncited": 2 + 0 + 1,
        "uncited_ratio": 3 / 5,
        "invalid": 1,
        "answers_with_uncited_claims": 2,
        "unjudged": 0,
        "answers_with_unreadable_citations": 0,
        "uncited_by_topic": [
            {"topic": "billing", "uncited": 2},
            {"topic": "legal", "uncited": 1},
        ],
    }
    assert summary.errors == [
        "answers.jsonl:1 sentences: 'sentences' must be a list of strings, but item #0 is int"
    ]
    text = summary_text(summary, Gate())
    assert "coverage: 3 answers judged; 5 claims, 3 framing" in text
    assert "uncited ratio      60.00%   3 claims without a citation, in 2 answers" in text
    assert "uncited by topic: billing 2, legal 1" in text


def test_a_summary_keeps_a_bounded_number_of_topics() -> None:
    summary = SweepSummary()
    for number in range(80):
        summary.add_outcome(_check(_answer(["A claim."], topic=f"t{number}")), "f:1")
    topics = summary.coverage.uncited_topics
    assert len(topics) == 51 and topics["other"] == 30
    assert sum(topics.values()) == 80


def test_the_text_summary_shows_hostile_topics_on_one_short_line() -> None:
    """A topic is the producer's free text: it used to reach the terminal raw, newlines,
    carriage returns and escape sequences included, and up to 1,024 characters of it."""
    summary = SweepSummary()
    hostile = ["a\nFAKE LINE", "\x1b[2J\x1b[31mred\r", "x" * 1024, "\u202eevil", "ok"]
    for number, topic in enumerate(hostile):
        value = _answer(["An uncited claim."], topic=topic)
        summary.add_outcome(_check(value), f"answers.jsonl:{number}")
    rendered = "\n".join(summary.coverage.lines())
    topics_line = next(line for line in rendered.splitlines() if "uncited by topic" in line)
    assert "FAKE LINE" in topics_line and "red" in topics_line and "ok 1" in topics_line
    assert all(c.isprintable() for c in topics_line)
    assert len(topics_line) < 5 * 80
    # the JSON keeps the topics as they are (orjson escapes what it must)
    assert {row["topic"] for row in summary.coverage.as_json()["uncited_by_topic"]} == set(hostile)


def _write(path: Path, records: list[Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_the_sweep_writes_one_coverage_verdict_per_answer_with_sentences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = _write(
        tmp_path / "chunks.jsonl",
        [{"doc_id": "d1", "doc_version": "v1", "chunk_id": "d1#0", "text": TEXT}],
    )
    citations = _write(
        tmp_path / "answers.jsonl",
        [
            _answer(["Refunds are issued within 30 days.", "Plans renew."], _citation(1, 0)),
            _citation(2, 0, answer_id="a2"),  # a lone citation: no coverage verdict
            _answer(["Refunds are issued within 30 days."], _citation(3, 0), answer_id="a3"),
            _answer({"not": "a list"}, _citation(4, 0), answer_id="a4"),
            {"answer_id": "a5", "citations": [_citation(5, 0)]},  # no sentences
        ],
    )
    out = tmp_path / "coverage.jsonl"
    code = main(
        [
            "sweep",
            "--chunks",
            str(chunks),
            "--citations",
            str(citations),
            "--coverage-out",
            str(out),
            "--format",
            "json",
            "--jobs",
            "1",
        ]
    )
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(v["answer_id"], v["status"], v["uncited"], v["line"]) for v in lines] == [
        ("a1", "uncited_claims", [1], 1),
        ("a3", "covered", [], 3),
        ("a4", "invalid", [], 4),
    ]
    summary = json.loads(capsys.readouterr().out)
    assert summary["statuses"]["ok"] == 5  # every citation checked, a4's too
    assert summary["coverage"] | {"uncited_by_topic": None} == {
        "answers": 2,
        "claims": 3,
        "framing": 0,
        "uncited": 1,
        "uncited_ratio": 1 / 3,
        "invalid": 1,
        "answers_with_uncited_claims": 1,
        "unjudged": 0,
        "answers_with_unreadable_citations": 0,
        "uncited_by_topic": None,
    }


def test_the_sweep_refuses_a_classifier_it_cannot_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--coverage-classifier", "no.such.module:Thing"])
    error = capsys.readouterr().err
    assert "--coverage-classifier" in error and "no.such.module" in error


@pytest.mark.parametrize("spec", ["sys:exit", "builtins:quit"])
def test_the_sweep_refuses_a_classifier_that_exits_instead_of_exiting_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    """A plug-in's SystemExit used to end the sweep with status 0 (the gate passed) and no
    summary, having checked nothing."""
    chunks = _write(tmp_path / "chunks.jsonl", [])
    citations = _write(tmp_path / "answers.jsonl", [_answer(["A claim."])])
    with pytest.raises(SystemExit) as exited:
        main(["sweep", "--chunks", str(chunks), "--citations", str(citations),
              "--coverage-classifier", spec])  # fmt: skip
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "--coverage-classifier" in error and "SystemExit" in error


def test_the_sweep_refuses_two_outputs_on_standard_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--out", "-", "--coverage-out", "-"])
    assert "only one of --out and --coverage-out" in capsys.readouterr().err


def test_the_sweep_refuses_a_coverage_output_that_is_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = _write(tmp_path / "chunks.jsonl", [])
    citations = _write(tmp_path / "answers.jsonl", [])
    with pytest.raises(SystemExit, match="2"):
        main(
            [
                "sweep",
                "--chunks",
                str(chunks),
                "--citations",
                str(citations),
                "--coverage-out",
                str(citations),
            ]
        )
    assert "--coverage-out" in capsys.readouterr().err


def test_a_simulated_archive_gets_exactly_the_coverage_its_generator_wrote(
    tmp_path: Path,
) -> None:
    """Through the sweep with the built-in classifier: every answer event's claims, framing
    and uncited claims as the scenario's ground truth has them."""
    scenario = build_scenario(ScenarioConfig(seed=3, answers=800, uncited_share=0.3))
    paths = write_scenario(scenario, tmp_path)
    out = tmp_path / "coverage.jsonl"
    summary = SweepSummary()
    store = load_store(JsonLines(str(paths["chunks"])), summary)
    with out.open("wb") as stream:
        run_sweep(
            store,
            JsonLines(str(paths["citations"])),
            Policy(),
            summary,
            coverage_out=stream,
            jobs=2,
        )
    got = [json.loads(line) for line in out.read_text().splitlines()]
    expected = [json.loads(line) for line in paths["expected_coverage"].read_text().splitlines()]
    fields = ("answer_id", "topic", "claims", "framing", "uncited")
    assert [{k: v[k] for k in fields} for v in got] == expected
    assert sum(1 for e in expected if e["uncited"]) > 150
    assert {v["status"] for v in got} == {"covered", "uncited_claims"}
    assert summary.coverage.uncited == sum(len(e["uncited"]) for e in expected)


def test_a_cited_sentence_is_a_claim_by_the_answers_own_account() -> None:
    """The classifier is asked only about sentences no citation names: those are where an
    uncited claim can be, and in a typical answer they are the few."""
    asked: list[str] = []

    class Recording(PrefixClassifier):
        def classify(self, sentence: str) -> SentenceKind:
            asked.append(sentence)
            return super().classify(sentence)

    outcome = _check(
        _answer(SENTENCES, _citation(1, 0), _citation(2, 1)), Policy(classifier=Recording())
    )
    coverage = outcome.coverage
    assert coverage is not None
    assert asked == SENTENCES[2:]
    assert (coverage.claims, coverage.framing, coverage.uncited) == ([0, 1, 2, 3], [4], [2, 3])


def test_coverage_can_be_switched_off_and_then_sentences_are_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = Policy(classifier=PrefixClassifier(), coverage=False)
    outcome = _check(_answer(["one claim", 42], _citation(1, 0)), off)
    assert outcome.coverage is None and outcome.dead_letter is None
    assert main(["sweep", "--example", "--no-coverage", "--format", "json", "--jobs", "1"]) == 1
    assert json.loads(capsys.readouterr().out)["coverage"] is None  # not judged, not zero
    assert main(["sweep", "--example", "--no-coverage", "--jobs", "1"]) == 1
    assert "coverage: not judged (switched off)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--no-coverage", "--coverage-out", str(tmp_path / "c")])
    assert "--coverage-out needs coverage" in capsys.readouterr().err


def test_an_index_beyond_a_list_of_non_strings_is_out_of_range_too() -> None:
    """The list's items fail the coverage; an index past its end fails its own citation."""
    outcome = _check(_answer([1, 2], _citation(1, 1), _citation(2, 2)))
    assert [c.verdict.status for c in outcome.checked] == [Status.OK, Status.INVALID]
    assert outcome.checked[1].verdict.error == (
        "'sentence_index' 2 is out of range: the answer has 2 sentences"
    )
    assert outcome.coverage is not None and outcome.coverage.status is CoverageStatus.INVALID


def test_an_answer_event_without_its_citations_key_is_named_as_such() -> None:
    """Sentences and no 'citations': not a citation missing its span, but an answer event that
    lost its list (an answer that cites nothing sends [] and is judged)."""
    outcome = _check({"answer_id": "a1", "sentences": ["Seats are unlimited."]})
    assert [c.verdict.status for c in outcome.checked] == [Status.INVALID]
    assert outcome.checked[0].verdict.error == (
        "an answer event needs 'citations': a list, [] when the answer cites nothing"
    )
    assert outcome.checked[0].verdict.answer_id == "a1"
    cites_nothing = _check(
        {"answer_id": "a1", "sentences": ["Seats are unlimited."], "citations": []}
    )
    assert cites_nothing.coverage is not None and cites_nothing.coverage.uncited == [0]


@pytest.mark.parametrize("full", ["--out", "--coverage-out"])
def test_an_output_that_cannot_be_written_is_named_by_its_option(
    full: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/full refuses every write: the error names the option that pointed there."""
    other = "--coverage-out" if full == "--out" else "--out"
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--jobs", "1", full, "/dev/full", other, str(tmp_path / "o")])
    error = capsys.readouterr().err
    assert f"{full} /dev/full: cannot write" in error


@pytest.mark.parametrize("unjudged", ['"3"', "{}", "7", "null"])
def test_a_coverage_record_with_an_unjudged_that_is_no_list_is_named_not_counted(
    unjudged: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The field added for issue 22, wrong-typed in a verdict file given to ``report``."""
    record = (
        '{"check": "coverage", "answer_id": "a1", "status": "unjudged", "claims": [1], '
        f'"framing": [], "uncited": [], "unjudged": {unjudged}}}\n'
    )
    good = json.dumps(
        {"citation_id": "c1", "answer_id": "a1", "doc_id": "d1", "status": "ok", "action": "keep"}
    )
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text(record + good + "\n")
    assert main(["report", str(verdicts), "--out", str(tmp_path / "r.html")]) == 0
    said = capsys.readouterr().err
    assert "1 lines not verdicts" in said
