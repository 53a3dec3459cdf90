"""Where a sentence sits in its answer: the rules that read it, and coverage telling them.

A restatement of the user's situation opens an answer and reads as a claim alone ("So your
export keeps stopping at exactly 2,000 rows."); a signature closes one ("Regards, Deepa |
InfoSec Helpdesk"). Each is framing only at its edge of the answer; anywhere else the sentence
is judged alone, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.checks.claims import (
    HybridClassifier,
    Place,
    RuleClassifier,
    SentenceKind,
    place,
)
from exporter.checks.coverage import check_coverage

CLAIM, FRAMING = SentenceKind.CLAIM, SentenceKind.FRAMING
rules = RuleClassifier()
hybrid = HybridClassifier()
FILLER = "Exports stop at 2,000 rows on the Free plan."


@pytest.mark.parametrize(
    ("count", "index", "cited", "where"),
    [
        (6, 0, {2}, Place.OPENING),
        (6, 1, {2}, Place.OPENING),
        (6, 1, {0}, Place.MIDDLE),  # a cited sentence before it: the answer has begun
        (6, 2, set(), Place.MIDDLE),
        (6, 5, {2}, Place.CLOSING),
        (6, 4, {2}, Place.CLOSING),
        (6, 4, {5}, Place.MIDDLE),  # a cited sentence after it
        (2, 0, set(), Place.OPENING | Place.CLOSING),
        (1, 0, set(), Place.OPENING | Place.CLOSING),
    ],
)
def test_place(count: int, index: int, cited: set[int], where: Place) -> None:
    assert place(count, index, cited) == where


RESTATEMENTS = [
    "So your export keeps stopping at exactly 2,000 rows.",
    "So your invoice shows $60.27 where you were expecting $49.",
    "So, if I follow you, you signed up on 10 May and changed your mind on 29 May.",
    "It sounds like your SAML setup works for existing users but not for new ones.",
    "Hi! Looks like you're getting a `401` on every call.",
    "Just to confirm I've got it right: you think the 3.2.1 tarball differs from the one "
    "on the download page.",
    "I understand that your renewal quote rose from $4,200 to $4,900.",
    "So the hail hit on Saturday and the garage roof is leaking now; let me explain why.",
]


@pytest.mark.parametrize("sentence", RESTATEMENTS)
@pytest.mark.parametrize("judge", [rules, hybrid], ids=["rules", "hybrid"])
def test_a_restatement_opening_an_answer_is_framing(
    judge: RuleClassifier | HybridClassifier, sentence: str
) -> None:
    answer = ["Hi Dana,", sentence, FILLER, "Hope that helps!"]
    assert judge.classify_in_answer(answer, 1, {2}) is FRAMING


@pytest.mark.parametrize("sentence", RESTATEMENTS)
def test_the_same_sentence_after_a_citation_is_judged_alone(sentence: str) -> None:
    answer = [FILLER, "A second cited claim.", "More.", sentence, "Even more.", "Bye!"]
    assert rules.classify_in_answer(answer, 3, {0, 1}) is rules.classify(sentence)
    assert rules.classify(sentence) is CLAIM


@pytest.mark.parametrize(
    "sentence",
    [
        "So yes, your refund went through on 3 May.",
        "So no, the Free plan has no SSO.",
        "So, unfortunately, exports over 2,000 rows need the Pro plan.",
        # a restatement and then a claim of its own, in one sentence
        "So your export stops at 2,000 rows; the Free plan caps every export there.",
    ],
)
def test_an_answer_that_opens_with_so_and_an_answer_stays_a_claim(sentence: str) -> None:
    assert rules.classify_in_answer([sentence, FILLER], 0, {1}) is CLAIM


SIGNATURES = [
    "Regards, Deepa | InfoSec Helpdesk",
    "Cheers, Leah @ Coastline Mobile",
    "Un saludo, Diego \u2013 Benefits Team",
    "Dhanyavaad, e-Seva Support Desk",
    "— Acme IT Service Desk, Tier 1",
    "Katrin Möller, HR Business Partner, People & Culture EMEA",
    "Élodie Marchand, Solano Lyon Est",
]


@pytest.mark.parametrize("sentence", SIGNATURES)
def test_a_signature_line_closing_an_answer_is_framing(sentence: str) -> None:
    answer = ["Hi Sam,", FILLER, "Thanks for asking.", sentence]
    assert rules.classify_in_answer(answer, 3, {1}) is FRAMING
    # in the middle of an answer it is judged alone: a claim, the unsure rule
    middle = [FILLER, "Hi.", sentence, "More.", "Even more.", "Bye!"]
    assert rules.classify_in_answer(middle, 2, {0, 5}) is CLAIM


@pytest.mark.parametrize(
    "sentence", ["- Implants", "- Priority email support", "Yes", "Unlimited", "- Pro Plan"]
)
def test_a_list_item_or_a_bare_answer_closing_an_answer_stays_a_claim(sentence: str) -> None:
    answer = ["The plan covers:", "- Crowns", sentence]
    assert rules.classify_in_answer(answer, 2, {1}) is CLAIM


@pytest.mark.parametrize(
    "sentence", ["📦 ShipBot", ":computer: ITBot", "🏢 OfficeBot", "— LoomBot 🤖"]
)
def test_a_bot_name_behind_an_emoji_is_framing_anywhere(sentence: str) -> None:
    assert rules.classify(sentence) is FRAMING


@pytest.mark.parametrize(
    "sentence",
    [
        "Your case reference is HB-20443.",
        "Your reference for today's chat is SL-88120.",
        "We've logged it as PRV-20817 and will be in touch by email.",
        "We've logged your report as SEC-4418.",
        "Your request has been logged as DSR-2025-0419.",
        "Closing INC-81107.",
        "Re: Claim reference CLM-2024-88314",
        "Quick update on your ticket INC-58821: an engineer has picked it up.",
        "See also: [Pagination](https://docs.parcelpoint.example/pagination).",
        "Here's the link to the guidelines: [Brand usage](https://brindle.example/brand)",
        "Details in the cookie policy.",
        "Upgrade notes are in the migration guide.",
        "The migration guide goes through the breaking changes in detail.",
        "G'day Steve!",
        "Wishing her a comfortable journey.",
        "You've asked whether you still have time to bring a claim.",
    ],
)
def test_conversation_references_and_pointers_are_framing(sentence: str) -> None:
    assert rules.classify(sentence) is FRAMING


@pytest.mark.parametrize(
    "sentence",
    [
        "Your order #48213 shipped on 3 March.",
        "Your reference number is valid for 30 days.",
        "The case number is required on the claim form.",
        "Ticket INC-81107 was closed because the fix shipped in 4.2.",
        "Details of the Pro plan: 25 seats at $9 each.",
        "Sample invoices are deleted after 30 days.",
    ],
)
def test_account_facts_near_those_words_stay_claims(sentence: str) -> None:
    assert rules.classify(sentence) is CLAIM


class SpyClassifier:
    """Records what coverage tells it; framing for everything but the last sentence."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, frozenset[int]]] = []

    def classify(self, sentence: str) -> SentenceKind:
        raise AssertionError("coverage should ask classify_in_answer")

    def classify_in_answer(
        self, sentences: Sequence[str], index: int, cited: Collection[int]
    ) -> SentenceKind:
        self.asked.append((index, frozenset(cited)))
        return CLAIM if index == len(sentences) - 1 else FRAMING


def test_coverage_tells_a_classifier_where_each_uncited_sentence_sits() -> None:
    spy = SpyClassifier()
    verdict = check_coverage("a1", None, ["Hi!", FILLER, "Hm.", "Last."], {1}, spy)
    assert spy.asked == [(0, frozenset({1})), (2, frozenset({1})), (3, frozenset({1}))]
    assert verdict.uncited == [3]


def test_coverage_reads_a_restatement_opening_an_answer_as_framing() -> None:
    sentences = [
        "Hi Sam!",
        "So your export keeps stopping at exactly 2,000 rows.",
        FILLER,
        "Upgrading lifts the cap the same day.",
    ]
    verdict = check_coverage("a1", None, sentences, {2}, hybrid)
    assert verdict.framing == [0, 1]
    assert verdict.uncited == [3]


hostile = st.text(max_size=120) | st.sampled_from(RESTATEMENTS + SIGNATURES)


@given(
    st.lists(hostile, min_size=1, max_size=8),
    st.data(),
)
def test_any_answer_gets_a_kind_and_the_model_only_adds_framing(
    sentences: list[str], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(sentences) - 1))
    cited = data.draw(st.sets(st.integers(0, len(sentences) - 1)))
    said = rules.classify_in_answer(sentences, index, cited)
    assert said in (CLAIM, FRAMING)
    if said is FRAMING:
        assert hybrid.classify_in_answer(sentences, index, cited) is FRAMING


def test_a_long_sentence_is_a_claim_wherever_it_sits() -> None:
    long = "So " + "your export keeps stopping " * 40
    assert rules.classify_in_answer([long, FILLER], 0, {1}) is CLAIM
    assert hybrid.classify_in_answer([long, FILLER], 0, {1}) is CLAIM
