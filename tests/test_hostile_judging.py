"""Hostile inputs to the entailment judging of sweeps: the judge's settings, its outputs, a
model endpoint that fails, and the service's sweeps whose judging fails.

Every loop is bounded in count; the only network target is 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REFUND_TEXT, chunk_record, claims_archive, store_of

from exporter.checks.engine import Policy
from exporter.checks.verdict import Action, Status, Verdict
from exporter.cli import main
from exporter.entailment.drawing import Candidate
from exporter.entailment.judging import judge_sample_async
from exporter.entailment.lexical import LexicalJudge
from exporter.entailment.results import CLAIM_CHARS_KEPT, EntailmentResult, Judgement
from exporter.entailment.sampling import STRATA
from exporter.entailment.summary import EntailmentSummary
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import JudgeInput, Mode, Origin, evidence_crc

TEXT = REFUND_TEXT


def _files(tmp_path: Path, claims: int = 3) -> list[str]:
    paraphrases = [f"Money comes back within a month, case {i}." for i in range(claims)]
    chunks, citations = claims_archive(tmp_path, paraphrases)
    return ["--chunks", str(chunks), "--citations", str(citations), "--jobs", "1"]


# -- claims --------------------------------------------------------------------------------------


def _judge_inputs(sentence: str, citations: int) -> list[JudgeInput | None]:
    """The judge inputs of an answer whose citations all support its one ``sentence``."""
    cited = {"doc_id": "d1", "doc_version": "v1", "chunk_id": "d1#0", "chunk_span": [0, 46]}
    quote = "Refunds are issued within 30 days of purchase"
    answer = {
        "answer_id": "a",
        "sentences": [sentence],
        "citations": [
            {"citation_id": f"c{i}", "quote": quote, "sentence_index": 0, **cited}
            for i in range(citations)
        ],
    }
    outcome = check_message(
        json.dumps(answer).encode(),
        None,
        Origin("answers.jsonl", 0, 1),
        store=store_of(chunk_record("d1", 0, TEXT)),
        policy=Policy(judge_rate=1.0),
        mode=Mode.SWEEP,
    )
    return [item.judge_input for item in outcome.checked]


def test_a_claim_is_read_no_further_than_what_a_judge_is_given() -> None:
    """Whether a claim is blank was read over its whole length, once per citation: 500
    citations of a sentence of 900,000 spaces around one letter read 450 million characters,
    a megabyte line taking 30 times its checks. A judge is given the first CLAIM_CHARS_KEPT
    characters: blank there, the claim names nothing to judge."""
    padding = " " * CLAIM_CHARS_KEPT
    assert _judge_inputs(padding + "Refunds take 60 days.", 3) == [None] * 3
    kept = _judge_inputs(padding[1:] + "Refunds take 60 days.", 3)
    assert all(item is not None and item.claim.endswith(" [truncated]") for item in kept)


# -- the judge's settings -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["sk-clé", "sk-1\nX-Injected: 1"])
def test_an_api_key_no_header_can_carry_is_a_usage_error_before_the_sweep(
    key: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key that is not printable ASCII cannot be an Authorization header: httpx raised
    UnicodeEncodeError once the whole sweep was done (an internal error), or h11 refused it
    with the key quoted in every judged citation's reason."""
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_API_KEY", key)
    judge = ["--judge", "openai", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"]
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", *_files(tmp_path), *judge, "--judge-out", str(tmp_path / "judged.jsonl")])
    error = capsys.readouterr().err
    assert "API key must be printable ASCII" in error and error.count("\n") == 1
    assert key not in error and "sk-1" not in error
    assert not (tmp_path / "judged.jsonl").exists()


# -- --judge-out ----------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_judged_citations_that_cannot_be_written_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk (or a closed pipe) while writing the judged citations raised OSError past
    the handler: an internal error, exit 3."""
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", *_files(tmp_path, claims=100), "--judge-out", "/dev/full"])
    error = capsys.readouterr().err
    assert "--judge-out /dev/full: cannot write" in error and error.count("\n") == 1


def test_a_judge_out_that_cannot_be_created_is_named_before_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--judge-out was opened only once the sweep and the judging (the model's spending
    included) were done: a directory's name there lost all of it."""

    def no_sweep(*_: object, **__: object) -> None:
        raise AssertionError("the sweep ran before --judge-out was opened")

    monkeypatch.setattr("exporter.cli.sweep.run_sweep", no_sweep)
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", *_files(tmp_path), "--judge-out", str(tmp_path)])
    error = capsys.readouterr().err
    assert f"--judge-out {tmp_path}: " in error and error.count("\n") == 1


# -- a model judge that fails ---------------------------------------------------------------------


class ScriptedModel:
    """A model judge whose n-th answer (from 0) is ``result(n)``; it counts its calls."""

    name = "openai"

    def __init__(self, result: Callable[[int], EntailmentResult]) -> None:
        self.result = result
        self.calls = 0

    async def __aenter__(self) -> ScriptedModel:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def judge(self, claim: str, evidence: str) -> Judgement:
        called = self.calls
        self.calls += 1
        await asyncio.sleep(0)  # as a call would: the other workers go on meanwhile
        return Judgement(self.result(called), self.name, "timeout", 30.0)


def _judge_paraphrases(model: ScriptedModel, count: int, concurrency: int) -> EntailmentSummary:
    """Judge ``count`` paraphrases the lexical judge cannot settle: all go to ``model``."""
    store = store_of(chunk_record("d1", 0, TEXT))
    verdict = Verdict("c", "a", "d1", Status.OK, Action.KEEP)
    crc = evidence_crc(TEXT[0:46])
    chosen = [
        (
            STRATA["unknown", "exact"],
            Candidate(
                line,
                verdict,
                JudgeInput(f"Money back, case {line}.", "d1#0", 0, 46, None, None, 46, crc),
            ),
        )
        for line in range(count)
    ]
    summary = EntailmentSummary()
    asyncio.run(
        judge_sample_async(
            chosen,
            store,
            LexicalJudge(),
            lambda: model,
            summary,
            high_severity_topics=frozenset(),
            concurrency=concurrency,
        )
    )
    return summary


def test_a_model_judge_that_only_fails_is_not_asked_about_the_whole_sample() -> None:
    """An endpoint that accepts connections and never answers cost each citation its whole
    timeout: 2,000 citations at 30 s and concurrency 4 kept a deploy gate waiting four hours
    for nothing but errors."""
    model = ScriptedModel(lambda _: EntailmentResult.ERROR)
    summary = _judge_paraphrases(model, 500, concurrency=4)
    assert 20 <= model.calls <= 20 + 4, "given up after 20 errors in a row (and those in flight)"
    assert summary.calls == model.calls
    assert summary.result_count(EntailmentResult.ERROR) == model.calls
    assert summary.result_count(EntailmentResult.SKIPPED) == 500 - model.calls


def test_a_model_judge_that_fails_now_and_then_is_asked_about_every_citation() -> None:
    model = ScriptedModel(
        lambda n: EntailmentResult.ENTAILED if n % 19 == 18 else EntailmentResult.ERROR
    )
    summary = _judge_paraphrases(model, 200, concurrency=1)
    assert model.calls == 200 and summary.result_count(EntailmentResult.SKIPPED) == 0
