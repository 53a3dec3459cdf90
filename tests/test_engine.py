"""The checks in order, and the failure policy: drift is repaired, superseded is pinned."""

from __future__ import annotations

import pytest
from conftest import chunk_record, citation, store_of

from exporter.checks.engine import Policy, check_citation
from exporter.checks.verdict import Action, FailedCheck, Status

POLICY = Policy()
QUOTE = "Refunds are issued within 30 days of the purchase date."
BEFORE = "Our policy is simple. "
AFTER = " Shipping is free over 50 euros."
TEXT = BEFORE + QUOTE + AFTER


def test_ok_when_the_span_still_holds_the_quote() -> None:
    store = store_of(chunk_record("d", 0, TEXT, source="acme"))
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    assert (verdict.status, verdict.action, verdict.similarity) == (Status.OK, Action.KEEP, 100.0)
    assert verdict.source == "acme", "the chunk's source labels the citation when it has none"


def test_ok_when_only_typography_changed_in_place() -> None:
    typeset = QUOTE.replace(" 30 ", " 30\u00a0").replace("the ", "the\n")
    store = store_of(chunk_record("d", 0, BEFORE + typeset + AFTER))
    verdict = check_citation(
        citation(QUOTE, "d#0", len(BEFORE), len(BEFORE) + len(typeset)), store, POLICY
    )
    assert verdict.status is Status.OK


def test_missing_document() -> None:
    verdict = check_citation(citation(QUOTE, "d#0", 0), store_of(), POLICY)
    assert (verdict.status, verdict.action) == (Status.DOCUMENT_MISSING, Action.DROP_CITATION)


def test_drift_after_rechunking_is_repaired_with_shift_in_document_characters() -> None:
    # answer time: one chunk; now: the same document cut in two
    cut = 10
    store = store_of(
        chunk_record("d", 0, TEXT[:cut], doc_offset=0),
        chunk_record("d", 1, TEXT[cut:], doc_offset=cut),
    )
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    assert verdict.failed_check is FailedCheck.OUT_OF_BOUNDS
    assert (verdict.status, verdict.action) == (Status.DRIFT_REPAIRED, Action.REWRITE_OFFSETS)
    repair = verdict.repair
    assert repair is not None
    assert (repair.chunk_id, repair.start, repair.end, repair.method) == (
        "d#1",
        len(BEFORE) - cut,
        len(BEFORE) - cut + len(QUOTE),
        "exact",
    )
    # the span pointed at document offset 0 + len(BEFORE); the quote is there still
    assert repair.shift == 0


def test_shift_is_where_the_quote_is_minus_where_the_span_points() -> None:
    store = store_of(chunk_record("d", 0, "Inserted header. " + TEXT, doc_offset=0))
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    # the quote sits 17 characters on, within the window around its span: the span moved
    assert verdict.failed_check is FailedCheck.SPAN_SHIFTED
    assert verdict.repair is not None and verdict.repair.shift == len("Inserted header. ")


def test_shift_within_the_same_chunk_when_offsets_are_unknown() -> None:
    store = store_of(chunk_record("d", 0, "Inserted header. " + TEXT))
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    assert verdict.repair is not None and verdict.repair.shift == len("Inserted header. ")


def test_shift_is_unknown_when_the_cited_chunk_is_gone_and_offsets_are_unknown() -> None:
    store = store_of(chunk_record("d", 0, TEXT, chunk_id="d#new"))
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    assert verdict.failed_check is FailedCheck.CHUNK_MISSING
    assert verdict.status is Status.DRIFT_REPAIRED
    assert verdict.repair is not None and verdict.repair.shift is None


def test_superseded_is_never_relocated_even_when_the_quote_is_still_there() -> None:
    store = store_of(chunk_record("d", 0, "New intro. " + TEXT, doc_version="v2"))
    verdict = check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY)
    assert (verdict.status, verdict.action) == (Status.SUPERSEDED, Action.PIN_ARCHIVED_VERSION)
    assert verdict.repair is None
    assert (verdict.recorded_version, verdict.live_version) == ("v1", "v2")
    # the quote sits 11 characters on: a shifted span, but on an older version it is pinned
    assert verdict.reason == "span_shifted"


def test_new_version_whose_span_still_matches_is_ok() -> None:
    store = store_of(chunk_record("d", 0, TEXT, doc_version="v2"))
    assert check_citation(citation(QUOTE, "d#0", len(BEFORE)), store, POLICY).status is Status.OK


@pytest.mark.parametrize(
    ("topic", "action"),
    [
        ("pricing", Action.SUPPRESS_CLAIM),
        ("security", Action.SUPPRESS_CLAIM),
        ("legal", Action.SUPPRESS_CLAIM),
        ("billing", Action.DEGRADE_TO_DOCUMENT),
        (None, Action.DEGRADE_TO_DOCUMENT),
    ],
)
def test_unrepaired_drift_action_depends_on_topic(topic: str | None, action: Action) -> None:
    store = store_of(
        chunk_record("d", 0, "Nothing of the quote remains in this chunk, not one word of it.")
    )
    verdict = check_citation(citation(QUOTE, "d#0", 0, topic=topic), store, POLICY)
    assert (verdict.status, verdict.reason, verdict.action) == (
        Status.DRIFT_UNREPAIRED,
        "quote_not_found",
        action,
    )
    assert verdict.failed_check is FailedCheck.QUOTE_MISMATCH


def test_high_severity_topics_are_configurable() -> None:
    store = store_of(chunk_record("d", 0, "Nothing of the quote remains in this chunk."))
    policy = Policy(high_severity_topics=frozenset({"billing"}))
    verdict = check_citation(citation(QUOTE, "d#0", 0, topic="billing"), store, policy)
    assert verdict.action is Action.SUPPRESS_CLAIM


def test_a_chunk_of_another_document_counts_as_missing() -> None:
    store = store_of(chunk_record("d", 0, TEXT), chunk_record("other", 0, TEXT, chunk_id="x#0"))
    verdict = check_citation(citation(QUOTE, "x#0", len(BEFORE), doc_id="d"), store, POLICY)
    assert verdict.failed_check is FailedCheck.CHUNK_MISSING
    assert verdict.repair is not None and verdict.repair.chunk_id == "d#0"


def test_threshold_is_configurable() -> None:
    near = QUOTE.replace("purchase", "purchases")
    store = store_of(chunk_record("d", 0, BEFORE + near + AFTER))
    cited = citation(QUOTE, "d#0", len(BEFORE), len(BEFORE) + len(near))
    strict = check_citation(cited, store, Policy(threshold=99.5))
    assert (strict.status, strict.reason) == (Status.DRIFT_UNREPAIRED, "quote_not_found")
    assert check_citation(cited, store, Policy(threshold=95.0)).status is Status.OK


@pytest.mark.parametrize("threshold", [0.0, -1.0, 100.5])
def test_policy_rejects_impossible_thresholds(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Policy(threshold=threshold)
