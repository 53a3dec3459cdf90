"""Matching the text at a span with the stored quote."""

from __future__ import annotations

import pytest

from exporter.checks.compare import FoldedQuote, facts, text_matches

LONG = (
    "Customers on the Business plan can request refunds within 30 days of purchase, "
    "unless the contract says otherwise, and are not charged for the unused seats."
)


def test_identical_text_matches_at_100() -> None:
    assert text_matches(FoldedQuote(LONG), LONG, 98.0) == (True, 100.0)


def test_typography_and_wrapping_still_match() -> None:
    retyped = (
        LONG.replace("30 days", "30\u00a0days")
        .replace(" of ", "\nof ")
        .replace("refunds", "re-\nfunds")
    )
    matches, score = text_matches(FoldedQuote(LONG), retyped, 98.0)
    assert matches and score == 100.0


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(LONG.replace("30 days", "60 days"), id="a number"),
        pytest.param(LONG.replace("are not charged", "are now charged"), id="a negation"),
        pytest.param(LONG.replace("unless", "unless not"), id="an added negation"),
    ],
)
def test_a_changed_fact_fails_even_above_the_threshold(changed: str) -> None:
    matches, score = text_matches(FoldedQuote(LONG), changed, 98.0)
    assert score >= 98.0, "the point of this test is a change the ratio alone lets through"
    assert not matches


def test_shifted_span_fails_on_similarity() -> None:
    matches, score = text_matches(FoldedQuote(LONG), LONG[40:] + " Something else entirely.", 98)
    assert not matches and score < 98


def test_facts_are_order_free_numbers_and_negations() -> None:
    assert facts("no refund after 30 days or 1,000.5 units; it can't") == (
        "1,000.5",
        "30",
        "n't",
        "no",
    )
