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


def test_facts_are_the_numbers_and_the_negations_each_in_order() -> None:
    assert facts("no refund after 30 days or 1,000.5 units; it can't") == (
        ("30", "1,000.5"),
        ("no", "n't"),
    )


@pytest.mark.parametrize("filler", ["plain words and more plain words " * 6, "文字" * 100])
def test_a_span_shifted_by_one_token_between_numbers_fails(filler: str) -> None:
    """Issue 14, seen on Japanese text: in "1 ... 0 ... 1", a span shifted by one token holds
    the same numbers as the quote, in another order, at 99.4 similarity: as collections they
    were equal, and the wrong characters were kept as a match."""
    document = f"1 {filler} 0 {filler} 1"
    quote, shifted = document[:-2], document[2:]
    matches, score = text_matches(FoldedQuote(quote), shifted, 98)
    assert score >= 98, "the similarity alone would take it"
    assert not matches


def test_full_width_digits_count_as_numbers() -> None:
    quote = FoldedQuote("料金は月額123円で、" + "契約は自動で更新されます。" * 12)
    assert text_matches(quote, quote.raw.replace("123", "\uff11\uff12\uff13"), 98)[0]
    matches, score = text_matches(quote, quote.raw.replace("123", "\uff11\uff12\uff14"), 98)
    assert score >= 98 and not matches


GERMAN = (
    "Kunden im Business-Tarif können innerhalb von 30 Tagen nach dem Kauf eine Erstattung "
    "verlangen, sofern der Vertrag nichts anderes bestimmt, und zahlen die ungenutzten Plätze "
    "nicht."
)
JAPANESE = (
    "ビジネスプランのお客様は、購入後30日以内であれば返金を請求できます。"
    "契約に別段の定めがある場合を除き、未使用の席の料金は請求されません。"
    "詳しい条件については契約書の該当する条項をご確認ください。"
)


@pytest.mark.parametrize(
    ("quote", "changed"),
    [
        pytest.param(GERMAN, GERMAN.replace("Plätze nicht.", "Plätze auch."), id="de nicht"),
        pytest.param(GERMAN, GERMAN.replace("nichts anderes", "etwas anderes"), id="de nichts"),
        pytest.param(GERMAN, GERMAN.replace("eine Erstattung", "keine Erstattung"), id="de kein"),
        pytest.param(JAPANESE, JAPANESE.replace("請求されません", "請求されます"), id="ja masen"),
        pytest.param(JAPANESE, JAPANESE.replace("未使用", "使用"), id="ja prefix"),
        pytest.param(JAPANESE, JAPANESE.replace("請求できます", "請求できない"), id="ja nai"),
    ],
)
def test_a_negation_changed_in_german_or_japanese_fails_above_the_threshold(
    quote: str, changed: str
) -> None:
    assert changed != quote
    matches, score = text_matches(FoldedQuote(quote), changed, 97.0)
    assert score >= 97.0, "the point of this test is a change the ratio alone lets through"
    assert not matches


def test_german_and_japanese_text_rewrapped_still_matches() -> None:
    for quote in (GERMAN, JAPANESE):
        rewrapped = quote.replace("、", "、\n").replace(" nach ", "\nnach ")
        assert text_matches(FoldedQuote(quote), rewrapped, 98.0) == (True, 100.0)
