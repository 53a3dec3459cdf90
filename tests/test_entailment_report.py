"""The judged sample's summary: per-stratum counts, cost, and the whole archive's projection."""

from __future__ import annotations

import pytest

from exporter.entailment.report import entailment_json, entailment_lines
from exporter.entailment.results import EntailmentResult, Judgement
from exporter.entailment.sampling import Stratum
from exporter.entailment.summary import EntailmentSummary

EXACT, CONDITIONAL = Stratum("under_7d", "exact"), Stratum("under_7d", "conditional")


def _summary(concurrency: int, asked_share: float) -> EntailmentSummary:
    """A sample of 2,000 of 180,000 judgeable citations, ``asked_share`` of which went to a
    model answering in 120 ms for $0.0004 a call."""
    summary = EntailmentSummary("lexical+openai", 2_000, concurrency)
    summary.totals = {EXACT: 120_000, CONDITIONAL: 60_000}
    asked = round(2_000 * asked_share)
    for number in range(2_000):
        stratum = EXACT if number % 3 else CONDITIONAL
        if number < asked:
            judgement = Judgement(EntailmentResult.ENTAILED, "openai", "", 0.12, 0.0004, 180, 2)
        else:
            judgement = Judgement(EntailmentResult.UNKNOWN, "lexical", "")
        summary.add(stratum, judgement, number < asked)
    return summary


def test_the_whole_archive_judged_by_the_model_is_the_issue_s_six_hours_and_72_dollars() -> None:
    summary = _summary(concurrency=1, asked_share=1.0)
    assert summary.projection() == {
        "calls": 180_000,
        "hours": pytest.approx(6.0),
        "usd": pytest.approx(72.0),
    }
    assert "180,000 calls, 6.0 hours at concurrency 1, $72.00" in "\n".join(
        entailment_lines(summary)
    )


def test_the_projection_asks_the_model_the_share_the_sample_did_and_concurrency_divides_time() -> (
    None
):
    summary = _summary(concurrency=4, asked_share=0.25)
    assert summary.projection() == {
        "calls": 45_000,
        "hours": pytest.approx(45_000 * 0.12 / 4 / 3600),
        "usd": pytest.approx(18.0),
    }
    assert "45,000 calls, 22 min at concurrency 4, $18.00" in "\n".join(entailment_lines(summary))
    document = entailment_json(summary)
    assert document["whole_archive"] == {"calls": 45_000, "hours": 0.375, "usd": 18.0}
    assert document["calls"] == 500 and document["cost_usd"] == pytest.approx(0.2)
    assert document["tokens"] == {"prompt": 90_000, "completion": 1_000}


def test_no_call_no_projection() -> None:
    summary = _summary(concurrency=4, asked_share=0.0)
    assert summary.projection() == {"calls": 0, "hours": 0.0, "usd": 0.0}
    assert not any("whole archive" in line for line in entailment_lines(summary))


def test_skipped_citations_say_why() -> None:
    summary = _summary(concurrency=4, asked_share=0.0)
    for number in range(7):
        reason = "budget" if number < 5 else "evidence gone"
        summary.add(EXACT, Judgement(EntailmentResult.SKIPPED, "openai", reason), False)
    assert entailment_json(summary)["skipped_because"] == {"budget": 5, "evidence gone": 2}
    assert "    skipped: budget 5, evidence gone 2" in entailment_lines(summary)
