"""The lexical entailment judge: plain disagreements are found, paraphrases are left alone, and
no input makes it raise or run long.

The labelled set and its guide are ``tests/data/entailment/``. The ``measure`` split is only ever
scored here (floors on precision and recall of ``not_entailed``), never searched for failures.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from random import Random

import pytest
from conftest import cpu_seconds
from hypothesis import given
from hypothesis import strategies as st
from labelled_sets import precision_recall

from exporter.entailment.lexical import (
    MAX_CLAIM_CHARS,
    MAX_EVIDENCE_CHARS,
    MAX_REASON_CHARS,
    LexicalJudge,
)
from exporter.entailment.results import EntailmentResult, SyncJudge

ENTAILED = EntailmentResult.ENTAILED
NOT_ENTAILED = EntailmentResult.NOT_ENTAILED
UNKNOWN = EntailmentResult.UNKNOWN
DATA = Path(__file__).parent / "data" / "entailment" / "pairs.jsonl"
judge = LexicalJudge()


def test_it_is_a_sync_judge() -> None:
    typed: SyncJudge = judge
    assert typed.name == "lexical"
    judgement = judge.judge("Refunds take 30 days.", "Refunds take 60 days.")
    assert judgement.judge == "lexical"
    assert judgement.seconds >= 0
    assert (judgement.cost_usd, judgement.prompt_tokens, judgement.completion_tokens) == (0, 0, 0)


# --- plain disagreements ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "evidence", "reason"),
    [
        # the example
        ("Refunds within 30 days.", "Refunds within 60 days of purchase.", "30 days vs 60 days"),
        # number words, hyphenated units, exact conversions on either side
        ("The trial lasts five days.", "The trial lasts 7 days.", "5 days vs 7 days"),
        ("It comes with a 30-day trial.", "The trial lasts 14 days.", "30 days vs 14 days"),
        ("Returns are accepted for two weeks.", "Returns within 30 days.", "2 weeks vs 30 days"),
        ("Links expire after 90 minutes.", "Links expire after 1 hour.", "90 minutes vs 1 hour"),
        # amounts: currency forms merged, currencies and periods kept apart
        ("The plan costs $1,200.", "The plan costs 1500 USD.", "$1,200 vs $1,500"),
        ("Seats are €8 each.", "Each seat is billed at €12 per month.", "8 EUR vs 12 EUR/month"),
        ("The fee is $25.", "A fee of thirty dollars applies.", "$25 vs $30"),
        ("Bonuses are $2k.", "Bonuses are $1,500.", "$2,000 vs $1,500"),
        # percentages, dates, times of day, years, phone numbers, counts
        ("Annual billing saves 20%.", "Annual billing saves 15 percent.", "20% vs 15%"),
        ("Prices change on March 1.", "Prices change on 1 April 2025.", "Mar 1 vs Apr 1"),
        ("The contract began 2024-01-15.", "Effective January 1, 2024.", "Jan 15 vs Jan 1"),
        ("Orders before 3 pm ship.", "Orders received by 14:00 ship.", "15:00 vs 14:00"),
        ("Certified since 2019.", "We were first certified in 2021.", "year 2019 vs year 2021"),
        ("Call 1-800-555-0199.", "Phone: +1 (800) 555-0142.", "phone ...5550199 vs phone"),
        ("The plan has 10 seats.", "The plan has 5 seats.", "10 seat vs 5 seat"),
        ("Uploads up to 25 MB.", "The maximum upload is 10MB.", "25 mb vs 10 mb"),
        # ranges: a bound outside what the evidence gives
        ("Delivery takes 2-4 business days.", "Delivery: 3-5 business days.", "2 business days"),
    ],
)
def test_quantities_given_differently(claim: str, evidence: str, reason: str) -> None:
    judgement = judge.judge(claim, evidence)
    assert judgement.result is NOT_ENTAILED, judgement.reason
    assert judgement.reason is not None
    assert judgement.reason.startswith(reason), judgement.reason


@pytest.mark.parametrize(
    ("claim", "evidence", "reason"),
    [
        ("Gift cards can be refunded.", "Gift cards cannot be refunded.", "'not' in the evidence"),
        ("Pets are covered.", "Pets aren't covered.", "'not' in the evidence only"),
        ("Data is stored outside the EU.", "Data is never stored outside the EU.", "'never'"),
        ("Refunds are not available on monthly plans.", "Refunds are available on monthly plans.",
         "negation: 'not' in the claim only"),
        ("You can change the address after dispatch.",
         "After dispatch, the address can no longer be changed.", "'no' in the evidence only"),
    ],
)  # fmt: skip
def test_negation_on_one_side(claim: str, evidence: str, reason: str) -> None:
    judgement = judge.judge(claim, evidence)
    assert judgement.result is NOT_ENTAILED
    assert judgement.reason is not None
    assert reason in judgement.reason


# --- what stays unknown: paraphrases and everything a word-level reader cannot settle ----------


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        # the same number written another way
        ("Returns are accepted for five days.", "Returns are accepted for 5 days."),
        ("The annual plan costs $1,200.", "The yearly subscription is priced at 1200 USD."),
        ("The trial is 30 days long.", "All plans include a 30-day free trial."),
        ("You have two weeks to return it.", "Items may be returned within 14 days."),
        ("Support replies within 48 hours.", "Support answers within two days."),
        ("The warranty covers one year.", "A 12-month limited warranty applies."),
        ("Coverage is capped at $1 million.", "The policy limit is $1,000,000."),
        ("Attachments can be up to 10 MB.", "The maximum attachment size is 10MB."),
        ("Orders placed before 2pm ship the same day.", "Orders received by 14:00 ship today."),
        ("Annual billing saves 20%.", "Yearly billing gets you 20 percent off."),
        ("Students get 50% off.", "Students pay half price; teachers get 30% off."),
        ("The office is closed on 25 December.", "Offices close on Dec 25 and reopen Dec 27."),
        # the claim's number among others in a whole chunk
        ("The Pro plan allows 10 users.", "Basic: 50 GB, 2 users. Pro: 1 TB, 10 users, 24/7 help."),
        # conversions that are not exact, and business days, compare nothing
        ("Refunds arrive within a month.", "Refunds are credited within 30 days."),
        ("Refunds take about 7 days.", "Refunds take 5-10 business days."),
        ("A replacement takes 2 weeks.", "A replacement ships within 10 business days."),
        # approximate claims, and values inside a range the evidence gives
        ("Delivery takes about 10 days.", "Delivery takes 7-14 days."),
        ("Delivery takes 4 to 6 days.", "Delivery takes 3-7 days."),
        # arithmetic from the evidence's amounts
        ("That is $348 a year.", "The plan is $29 per month."),
        ("Three seats cost $30 a month.", "Seats are $10 per user per month."),
        ("With 20% off, the $100 plan costs $80.", "A 20% discount applies to the $100 price."),
        ("You pay 80% of list price.", "Partners get a 20% discount on list prices."),
        # identifiers are not quantities: steps, list markers, versions, codes, sections
        ("In step 2, choose Export.", "1. Open Settings. 2. Choose Export. 3. Pick a format."),
        ("Choose Export in step 3.", "Step 1: Open Settings. Step 2: Choose Export."),
        ("The v2 API supports pagination.", "Pagination is in API v3; v1 returns all results."),
        ("The API returns 503 on overload.", "Overloaded requests receive HTTP 429."),
        ("Section 8.2 allows termination.", "8.3 Termination. Either party may terminate."),
        # a year is not an amount, an amount is not a year
        ("The onboarding fee is $2,025.", "A $2,025 onboarding fee applies to the 2024 cohort."),
        # currencies are not converted
        ("Pro costs about €35 a month.", "Pro: $39 per user per month."),
        # conditions, hedges and restrictions are the model judge's question
        ("Refunds are available within 30 days.", "Refunds within 30 days, unless activated."),
        ("SSO is only on Enterprise.", "SSO is on Enterprise, and on Business as an add-on."),
        ("Not all plans include phone support.", "Phone support is only on the Enterprise plan."),
        ("No credit card is required for the trial.", "You can start the trial without a card."),
        ("There is no fee for cancelling.", "Cancelling is free of charge."),
        ("The warranty doesn't cover drops.", "Drops are excluded from the warranty."),
        # negations on both sides, double negations, negations in another clause or sentence
        ("Pets aren't covered.", "This policy does not cover pets."),
        ("You can't cancel without notice.", "Cancellation is not possible without notice."),
        ("It is not uncommon for customs to add days.", "Customs checks often add days."),
        ("Refunds are available for monthly plans.",
         "Refunds are available for monthly plans, but not for annual plans."),
        ("Orders ship from Leeds.", "All orders ship from Leeds. We do not ship to PO boxes."),
        ("Refunds are issued no later than day 5.", "Refunds are issued by day 5."),
        # nothing to compare
        ("You can export your data from Settings.", "Data exports start from Settings > Data."),
        ("The Pro plan costs $29.", "All plans include unlimited projects."),
    ],
)  # fmt: skip
def test_paraphrases_and_the_undecidable_stay_unknown(claim: str, evidence: str) -> None:
    judgement = judge.judge(claim, evidence)
    assert judgement.result is UNKNOWN, judgement.reason


def test_entailed_only_when_the_evidence_is_the_claim() -> None:
    for claim, evidence in [
        ("Refunds are issued within 30 days.", "Refunds are issued within 30 days."),
        ("Two\u2011factor login is required.", "Two-factor login is required."),
        ("The plan costs $29 per month.", "The  plan costs $29 per month.\n"),
        ("Restores are possible for 30 days.", "restores are possible for 30 days"),
        ("Claims must be filed in time.", "\u201cClaims must be filed in time.\u201d"),
    ]:
        assert judge.judge(claim, evidence).result is ENTAILED
    for claim, evidence in [
        ("SSO is on Enterprise.", "SSO is on Enterprise only."),
        ("Refunds take 3-5 days.", "Refunds take 3.5 days."),  # not the same text
        ("Yes.", "Yes."),  # fewer than three words: too little to call anything established
        ("", ""),
    ]:
        assert judge.judge(claim, evidence).result is not ENTAILED


# --- hostile input ----------------------------------------------------------------------------


def test_too_long_to_read_is_unknown_and_quick() -> None:
    megabyte = "Refunds take 30 days. " * 50_000
    judged = []
    seconds = cpu_seconds(
        lambda: judged.extend(
            (judge.judge(megabyte, "Refunds take 60 days."),
             judge.judge("Refunds take 60 days.", megabyte))
        )
    )  # fmt: skip
    assert seconds < 0.5
    long_claim, long_evidence = judged
    assert long_claim.result is UNKNOWN and long_evidence.result is UNKNOWN
    assert long_claim.reason is not None and "claim too long" in long_claim.reason
    assert long_evidence.reason is not None and "evidence too long" in long_evidence.reason
    assert judge.judge("x" * MAX_CLAIM_CHARS, "y").reason != long_claim.reason
    assert judge.judge("x", "y" * MAX_EVIDENCE_CHARS).reason != long_evidence.reason


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("", ""),
        ("\ud800 5 days", "\udfff 6 days \ud800"),
        ("\x00\x07 $5", "\u200b\u200b $6"),
        ("٣٠ days", "٦٠ days"),  # digits of other scripts are not read as numbers
        ("30 days", "1-" * (MAX_EVIDENCE_CHARS // 2)),
        ("not " * (MAX_CLAIM_CHARS // 4), "no never " * (MAX_EVIDENCE_CHARS // 9)),
        ("3 days " * (MAX_CLAIM_CHARS // 7), "4 days $5 10% " * (MAX_EVIDENCE_CHARS // 14)),
        ("9" * MAX_CLAIM_CHARS + " days", "1" * MAX_EVIDENCE_CHARS + " days"),
        ("$" + "9" * 400, "$" + "9" * 500),
    ],
)
def test_hostile_pairs(claim: str, evidence: str) -> None:
    # 25 times the slowest pair's 20 ms here: two CI runs measured 0.63 s of wall time and then
    # 0.55 s of the worker process's CPU time on one of them, which alone takes 20 ms
    judged = []
    assert cpu_seconds(lambda: judged.append(judge.judge(claim, evidence))) < 0.5
    judgement = judged[0]
    assert judgement.result in (ENTAILED, NOT_ENTAILED, UNKNOWN)
    assert judgement.reason is not None and len(judgement.reason) <= MAX_REASON_CHARS
    judgement.reason.encode("utf-8")  # built from parsed values, so never a lone surrogate


def test_a_failure_inside_is_unknown_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    from exporter.entailment import lexical

    def broken(claim: str, evidence: str) -> str:
        raise RuntimeError("bug")

    monkeypatch.setattr(lexical, "_quantity_disagreement", broken)
    judgement = judge.judge("Refunds take 30 days.", "Refunds take 60 days.")
    assert judgement.result is UNKNOWN
    assert judgement.reason == "lexical judge failed: RuntimeError"


# --- the labelled set -------------------------------------------------------------------------


def _scores(split: str) -> tuple[float, float, int]:
    """Precision and recall of ``not_entailed`` on one split, and the split's size."""
    return precision_recall(
        DATA,
        split,
        lambda row: judge.judge(row["claim"], row["evidence"]).result is NOT_ENTAILED,
        lambda row: row["label"] == "not_entailed",
    )


# Measured with bench/lexical_bench.py: tune precision 1.000 and recall 0.718 (the rules were
# written looking at tune), measure 0.959 and 0.653 (49 pairs of 162 called not_entailed, 47 of
# them rightly; 72 are labelled not_entailed). Precision must stay at least 0.95 (the issue's
# bar: a false alarm is the failure to avoid); recall floors a few points below the measured.
@pytest.mark.parametrize(
    ("split", "precision_floor", "recall_floor"),
    [("tune", 0.95, 0.68), ("measure", 0.95, 0.62)],
)
def test_labelled_set_floors(split: str, precision_floor: float, recall_floor: float) -> None:
    precision, recall, total = _scores(split)
    assert total > 150
    assert precision >= precision_floor, f"{split}: not_entailed precision {precision:.3f}"
    assert recall >= recall_floor, f"{split}: not_entailed recall {recall:.3f}"


def test_labelled_set_shape() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 240
    assert [row["id"] for row in rows] == [f"e{i:04d}" for i in range(1, len(rows) + 1)]
    assert len({(row["claim"], row["evidence"]) for row in rows}) == len(rows)
    for row in rows:
        assert set(row) <= {"id", "claim", "evidence", "label", "family", "split", "note"}
        assert row["label"] in ("entailed", "not_entailed", "unknown")
        assert row["split"] in ("tune", "measure")
    # the splits alternate within each label and family
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        groups.setdefault((row["label"], row["family"]), []).append(row["split"])
    for splits in groups.values():
        assert all(a != b for a, b in itertools.pairwise(splits))


# --- properties -------------------------------------------------------------------------------

any_character = st.characters(codec=None, categories=None, exclude_categories=())
hostile_text = (
    st.text()
    | st.text(alphabet=any_character, max_size=300)
    | st.text(alphabet=st.sampled_from("0123456789 ,.-/:$€%amp dayswekno't"), max_size=300)
    | st.builds(
        lambda piece, times: piece * times,
        st.text(alphabet=any_character, min_size=1, max_size=12),
        st.integers(min_value=1, max_value=20_000),
    )
)
WORDS = [
    *["refunds", "are", "not", "available", "never", "no", "plan", "annual", "monthly", "seats"],
    *["users", "days", "weeks", "five", "thirty", "free", "only", "unless", "without", "can't"],
    *["isn't", "don't", "covered", "included", "the", "a", "of", "for", "within", "but", "and"],
    *["or", "$", "€", "%", ",", ".", ";", "-", "'n"],
]
sentence = st.lists(st.sampled_from(WORDS) | st.text(max_size=8), max_size=30).map(" ".join)


@given(hostile_text | sentence, hostile_text | sentence)
def test_any_text_gets_a_judgement(claim: str, evidence: str) -> None:
    judgement = judge.judge(claim, evidence)
    assert judgement.result in (ENTAILED, NOT_ENTAILED, UNKNOWN)
    assert judgement.reason is not None and len(judgement.reason) <= MAX_REASON_CHARS


@given(hostile_text | sentence)
def test_a_claim_never_contradicts_itself(claim: str) -> None:
    assert judge.judge(claim, claim).result is not NOT_ENTAILED


NUMBER_WORDS = {"five", "thirty"}
no_numbers = st.lists(
    st.sampled_from([word for word in WORDS if word not in NUMBER_WORDS])
    | st.text(alphabet=st.characters(exclude_categories=["Nd"]), max_size=8),
    min_size=1,
    max_size=30,
)


@given(no_numbers, st.randoms(use_true_random=False))
def test_reordered_words_never_contradict(words: list[str], random: Random) -> None:
    reordered = list(words)
    random.shuffle(reordered)
    assert judge.judge(" ".join(reordered), " ".join(words)).result is not NOT_ENTAILED
