"""Where a sentence sits in its answer: the rules that read it, and coverage telling them.

A signature closes an answer and reads as a table row alone ("Regards, Deepa | InfoSec
Helpdesk" against "SSO | Enterprise Only"): it is framing only there, after everything the
answer cites; anywhere else a sentence is judged alone, as before.
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


# Found by a hostile review of an earlier rule that read a restatement of the user's situation
# into an answer's opening ("So your export keeps stopping at exactly 2,000 rows."): answers
# open with conclusions as often, and missing a claim is worse than flagging framing.
OPENING_CLAIMS = [
    "So the Pro plan costs $49 a month, billed annually.",
    "So your export stops at 2,000 rows because the Free plan caps every export there.",
    "So, it's $40 a month.",
    "So long as you cancel before 1 June, you won't be charged for the next year.",
    "It looks like your order shipped on 3 March and should arrive by Friday.",
    "I understand your plan renews on 1 June, so you have until 25 May to cancel.",
    "Hi Sam! Looks like your renewal went through on 2 June for $240.",
    "You've asked about refunds, and they take 5 to 7 business days to reach your card.",
]


@pytest.mark.parametrize("sentence", OPENING_CLAIMS)
@pytest.mark.parametrize("cited", [{1}, set()], ids=["cited after", "nothing cited"])
def test_a_claim_opening_an_answer_stays_a_claim(sentence: str, cited: set[int]) -> None:
    answer = [sentence, FILLER, "Hope that helps!"]
    assert hybrid.classify_in_answer(answer, 0, cited) is CLAIM


SIGNATURES = [
    "Regards, Deepa | InfoSec Helpdesk",
    "Cheers, Leah @ Coastline Mobile",
    "Un saludo, Diego \u2013 Benefits Team",
    "Dhanyavaad, e-Seva Support Desk",
    "\u2014 Acme IT Service Desk, Tier 1",
]


@pytest.mark.parametrize("sentence", SIGNATURES)
def test_a_signature_line_closing_an_answer_is_framing(sentence: str) -> None:
    answer = ["Hi Sam,", FILLER, "Thanks for asking.", sentence]
    assert rules.classify_in_answer(answer, 3, {1}) is FRAMING
    # anywhere else it is judged alone: a claim, the unsure rule
    for where in ([sentence, FILLER, "Thanks!"], [FILLER, "Hi.", sentence, "More.", "Bye!"]):
        assert rules.classify_in_answer(where, where.index(sentence), {1}) is CLAIM


# A list item, a bare answer or a table row closing an answer is no signature (the table rows
# found by the same review).
@pytest.mark.parametrize(
    "sentence",
    [
        "- Implants",
        "- Priority email support",
        "Yes",
        "Unlimited",
        "- Pro Plan",
        "SSO | Enterprise Only",
        "GDPR / CCPA Compliant",
        "Visa / Mastercard / Amex",
        "Tier 2 | Business Hours Only",
        "Free Shipping @ Orders Over Fifty Dollars",
        "Level 3 Support Available",
    ],
)
def test_a_list_item_a_bare_answer_or_a_table_row_closing_an_answer_stays_a_claim(
    sentence: str,
) -> None:
    answer = ["The plan covers:", "- Crowns", sentence]
    assert hybrid.classify_in_answer(answer, 2, {1}) is CLAIM


@pytest.mark.parametrize(
    "sentence",
    ["\U0001f4e6 ShipBot", ":computer: ITBot", "\U0001f3e2 OfficeBot", "\u2014 LoomBot \U0001f916"],
)
def test_a_bot_name_behind_an_emoji_is_framing_anywhere(sentence: str) -> None:
    assert rules.classify(sentence) is FRAMING


# found by the same review: an emoji is a list item's bullet as often
@pytest.mark.parametrize(
    "sentence",
    [
        "\u274c No SSO",
        "\u26a0\ufe0f Not Refundable",
        "\u2714\ufe0f Single Sign-On",
        "\U0001f6ab Not Available In Canada",
        "\u2b50 Dedicated Account Manager",
        "\u2705 Free Returns",
    ],
)
@pytest.mark.parametrize("index", [1, 3], ids=["middle", "closing"])
def test_a_list_item_behind_an_emoji_stays_a_claim(sentence: str, index: int) -> None:
    answer = ["Here's what the plan includes:", sentence, "Thanks!", sentence]
    assert hybrid.classify_in_answer(answer, index, {0}) is CLAIM


@pytest.mark.parametrize(
    "sentence",
    [
        "Your case reference is HB-20443.",
        "Your reference for today's chat is SL-88120.",
        "We've logged it as PRV-20817.",
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
        "\u00c9lodie Marchand, Solano Lyon Est",
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
        # found by the hostile review: a reference or a pointer with a claim after it
        "We've logged your refund as RF-2231 and it will be paid within five business days.",
        "We have registered your return under RMA-55120 and a courier will collect it tomorrow.",
        "Your order reference is ORD-48213.",
        "Your current policy runs through the end of the month.",
        "The notes on your account show the refund was approved on Tuesday.",
        "Information on your claim shows it was paid out in full.",
        "Shipping info is on the order page and shows your parcel arriving on Friday.",
        "Instructions in the manual say to hold the reset button for ten seconds.",
        "Your handbook walks through the parental leave policy, which gives every parent "
        "sixteen weeks.",
        "A technician has been assigned and will replace your meter on Friday.",
        # table rows, which the model retrained on more answers read as headings
        "Pro Plan | Unlimited Projects | Priority Support",
        "\u2705 Unlimited Projects / Priority Support",
        "GDPR / CCPA Compliant",
    ],
)
def test_account_facts_near_those_words_stay_claims(sentence: str) -> None:
    assert hybrid.classify(sentence) is CLAIM


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


def test_coverage_reads_a_signature_closing_an_answer_as_framing() -> None:
    sentences = ["Hi Sam!", FILLER, "Upgrading lifts the cap the same day.", SIGNATURES[0]]
    verdict = check_coverage("a1", None, sentences, {1}, hybrid)
    assert verdict.framing == [0, 3]
    assert verdict.uncited == [2]


def test_coverage_reads_a_claim_opening_an_answer_as_a_claim() -> None:
    # found by the hostile review: each was framing, and the answer "covered"
    sentences = [
        "So the refund window is 30 days from delivery.",
        "It looks like your order arrived on 3 March, so you have until 2 April to send it back.",
        "Let me know if you need anything else!",
    ]
    verdict = check_coverage("a1", None, sentences, set(), hybrid)
    assert verdict.uncited == [0, 1]


hostile = st.text(max_size=120) | st.sampled_from(OPENING_CLAIMS + SIGNATURES)


@given(st.lists(hostile, min_size=1, max_size=8), st.data())
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
    long = "Regards, " + "Deepa | InfoSec Helpdesk " * 25
    assert rules.classify_in_answer([FILLER, long], 1, {0}) is CLAIM
    assert hybrid.classify_in_answer([FILLER, long], 1, {0}) is CLAIM


@pytest.mark.parametrize("classifier", [rules, hybrid], ids=["rules", "hybrid"])
@pytest.mark.parametrize("index", [-1, -3, 3, 10])
def test_an_index_outside_the_answer_is_refused_by_name(
    classifier: RuleClassifier | HybridClassifier, index: int
) -> None:
    # -1 once read the last sentence as if it opened the answer (Python's negative index)
    answer = [FILLER, FILLER, "Regards, Deepa | InfoSec Helpdesk"]
    with pytest.raises(IndexError, match=f"sentence {index} of an answer of 3 sentences"):
        classifier.classify_in_answer(answer, index, {0})


# Openings that restate the user's words and go on to answer, or say what will happen: the
# claim is the assistant's. Written by two hostile reviews of rules that read restatements into
# an answer's opening (withdrawn both times: a rule safe against these bought 4 of 980 framing
# flags held out); any such rule must keep them claims.
@pytest.mark.parametrize(
    "sentence",
    [
        "You mentioned the Pro plan, and it costs $49 a month.",
        "You asked about refunds, and they take 5 to 7 business days to reach your card.",
        "It sounds like your card was charged twice \u2014 that's a known issue fixed in 2.3.",
        "You said refunds take 14 days, which is right.",
        "From what you describe, you'll get a full refund of $40.",
        "It sounds like your plan qualifies for the 20% discount.",
        "It sounds like a known bug in v2.3; upgrading to 2.4 fixes it.",
        # found by the hostile review of this rule: corrections, answers after a colon, a dash
        # or brackets, other joining words, conclusions, diagnoses and reported actions
        "You mentioned 30 days, but the window is actually 14 days.",
        "You wrote that the limit is 5 GB, but the limit on your plan is 50 GB.",
        "You asked about refunds: they take 5-7 business days.",
        "You asked for the support number, 0800 123 456.",
        "You asked why the fee went up \u2014 prices rose 8% on 1 April for all annual plans.",
        "You mentioned the Basic plan \u2014 it includes 3 seats and 10 GB of storage.",
        "You said you're open to a visit (we're open 8am-6pm, Monday to Saturday).",
        "You mentioned the 14-day window, which applies only to EU customers.",
        "You said you're in Ontario, where the cooling-off period is 10 days.",
        "You said the device is 2 years old, so the 3-year warranty still applies.",
        "You described error code E42, meaning the water inlet filter is blocked.",
        "You mentioned the 30-day trial, though it was shortened to 14 days in 2024.",
        "You asked about refunds, and they usually take 5 days.",
        "You said to cancel it, and I've cancelled order #4411 today.",
        "From what you describe, the damage is excluded under clause 7(b).",
        "From what you said, you're owed compensation of \u20ac250 under EU261.",
        "It sounds like your router is affected by firmware bug FW-2291, fixed in 4.1.2.",
        "It sounds like you hit the 2,000-row export limit on the Free plan.",
        "Just to confirm we've cancelled your subscription and refunded $12 to your Visa.",
        "Just to make sure I give you the right figure: the UK return window is 30 days.",
    ],
)
def test_a_restating_cue_that_goes_on_to_answer_stays_a_claim(sentence: str) -> None:
    assert hybrid.classify_in_answer([sentence, FILLER, "Thanks!"], 0, {1}) is CLAIM
    assert hybrid.classify_in_answer(["Hi Sam,", sentence, FILLER], 1, {2}) is CLAIM


# A short exclamation closing an answer is a wish, in whatever language (each an uncited claim
# before: words the model never saw); not a bare answer, a figure or a statement.
@pytest.mark.parametrize(
    "sentence",
    ["Gute Fahrt!", "Mukavaa p\u00e4iv\u00e4\u00e4!", "Sweet dreams! \U0001f634", "Stay legendary!",
     "Fly smart, fly Aerolux! \u2708\ufe0f", "\u00c0 lundi !", "Boas pedaladas!"],
)  # fmt: skip
def test_a_wish_closing_an_answer_is_framing(sentence: str) -> None:
    answer = ["Hi Sam,", FILLER, sentence]
    assert hybrid.classify_in_answer(answer, 2, {1}) is FRAMING


@pytest.mark.parametrize(
    "sentence",
    ["Yes!", "No!", "Nope! \U0001f605", "Always!", "Shipping is free!", "Refunds take 14 days!",
     # found by the hostile review of the rule: answers in other languages, words the model
     # never learned, a curly apostrophe
     "\u00a1Env\u00edo gratis!", "Livraison offerte !", "Kostenloser Versand!", "Gratis!",
     "Frete gr\u00e1tis!", "Spedizione gratuita!", "Ja!", "Nein!", "S\u00ed!", "Oui !",
     "Tak!", "N\u00e3o!", "Claro!", "Genau!", "Natuurlijk!", "Bien s\u00fbr !", "Zero fees!",
     "Zero downtime!", "Vegan!", "Not anymore!", "Certainly!", "Indeed!",
     "Mondays to Fridays!", "Have it free!", "Good news: it\u2019s included!"],
)  # fmt: skip
def test_an_exclamation_that_answers_closing_an_answer_stays_a_claim(sentence: str) -> None:
    answer = ["Hi Sam,", FILLER, sentence]
    assert hybrid.classify_in_answer(answer, 2, {1}) is CLAIM
    # the whole answer: it answers, whatever it says
    assert hybrid.classify_in_answer([sentence], 0, set()) is CLAIM


@pytest.mark.parametrize(
    "sentence",
    [
        "Ng\u0101 mihi, People & Culture",
        "Met vriendelijke groet, Sanne \u2014 Freight Desk, Polderlink Logistics",
        "Pozdrawiam serdecznie, Marta",
        "Med v\u00e4nlig h\u00e4lsning, Erik | Kundtj\u00e4nst",
    ],
)
def test_a_sign_off_in_another_language_closing_an_answer_is_framing(sentence: str) -> None:
    answer = ["Hi Sam,", FILLER, sentence]
    assert rules.classify_in_answer(answer, 2, {1}) is FRAMING
