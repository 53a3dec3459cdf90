"""Relocation: one confident place, or an honest reason why not; never a guess."""

from __future__ import annotations

import random
import time

import pytest
from conftest import chunk_record, store_of
from hypothesis import given
from hypothesis import strategies as st

from exporter.checks.compare import FoldedQuote
from exporter.checks.relocate import (
    AMBIGUOUS,
    BY_CONTEXT,
    BY_POSITION_HINT,
    FOUND,
    NOT_FOUND,
    STRADDLES,
    UNIQUE,
    Budget,
    OutOfBudgetError,
    PositionHint,
    Relocation,
    relocate,
)
from exporter.checks.store import DocumentView
from exporter.records.fingerprint import document_fingerprint

QUOTE = "Backup snapshots are kept for 35 days unless the contract says otherwise."
FILLER = [
    "Administrators can invite up to 40 guests per workspace.",
    "The dashboard refreshes its figures every few minutes.",
    "Audit logs can be exported to any storage bucket you own.",
    "Custom domains need a verified certificate before use.",
    "Webhook endpoints are retried with exponential backoff.",
    "Encryption keys rotate automatically once a quarter.",
]


def view_of(*texts: str, offsets: bool = True) -> DocumentView:
    records = []
    at = 0
    for ordinal, text in enumerate(texts):
        extra = {"doc_offset": at} if offsets else {}
        records.append(chunk_record("d", ordinal, text, **extra))
        at += len(text) + 1
    view = store_of(*records).document("d")
    assert view is not None
    return view


def find(quote: str, view: DocumentView, **kwargs: object) -> tuple[str, str | None, str | None]:
    """(outcome, text now at the place, method)."""
    result = relocate(FoldedQuote(quote), view, threshold=98.0, **kwargs)  # type: ignore[arg-type]
    if result.place is None:
        return result.outcome, None, None
    return result.outcome, view.text[result.place.start : result.place.end], result.place.method


def test_exact_quote_in_another_chunk() -> None:
    view = view_of(" ".join(FILLER[:3]), " ".join([FILLER[3], QUOTE, FILLER[4]]))
    outcome, text, method = find(QUOTE, view)
    assert (outcome, text, method) == (FOUND, QUOTE, "exact")


def test_retypeset_quote_is_found_normalised_with_raw_offsets_covering_it() -> None:
    typeset = (
        "Backup snap-\nshots are kept for 35\u00a0days un\u00adless the contract says "
        "other\u00adwise."
    )
    view = view_of(FILLER[0] + " " + typeset + " " + FILLER[1])
    outcome, text, method = find(QUOTE, view)
    assert (outcome, text, method) == (FOUND, typeset, "normalised")


def test_slightly_edited_long_quote_is_found_fuzzily() -> None:
    edited = QUOTE.replace("the contract", "the contrct")
    view = view_of(" ".join([FILLER[0], edited, FILLER[1]]))
    outcome, text, method = find(QUOTE, view)
    assert (outcome, text, method) == (FOUND, edited, "fuzzy")


def test_fuzzy_match_survives_inserted_words() -> None:
    """A sliding window of the quote's length cannot grow; the pigeonhole search can."""
    quote = " ".join(FILLER[:5])
    edited = quote.replace("to 40 guests", "to 40 (forty) guests")
    view = view_of(FILLER[5] + " " + edited)
    outcome, text, method = find(quote, view)
    assert outcome == FOUND and method == "fuzzy"
    assert text == edited


def test_changed_sentence_is_not_found() -> None:
    view = view_of(" ".join(FILLER))
    assert find(QUOTE, view)[0] == NOT_FOUND


def test_a_changed_number_is_not_repaired_onto_the_new_sentence() -> None:
    view = view_of(QUOTE.replace("35 days", "95 days"))
    assert find(QUOTE, view)[0] == NOT_FOUND


def test_short_quote_is_only_matched_exactly() -> None:
    view = view_of("Prices rise in March. Prices rose in May.")
    assert find("Prices rise in May.", view)[0] == NOT_FOUND
    assert find("Prices rose in May.", view)[:2] == (FOUND, "Prices rose in May.")


def test_duplicate_without_context_is_ambiguous() -> None:
    view = view_of(" ".join([FILLER[0], QUOTE, FILLER[1]]), " ".join([FILLER[2], QUOTE]))
    assert find(QUOTE, view)[0] == AMBIGUOUS


def test_context_picks_the_right_duplicate_whichever_comes_first() -> None:
    view = view_of(" ".join([FILLER[0], QUOTE, FILLER[1]]), " ".join([FILLER[2], QUOTE]))
    second = relocate(
        FoldedQuote(QUOTE), view, threshold=98.0, prefix=FILLER[2][-32:] + " ", suffix=""
    )
    assert second.outcome == FOUND and second.placement is not None
    assert second.placement.chunk.chunk_id == "d#1"
    first = relocate(FoldedQuote(QUOTE), view, threshold=98.0, suffix=" " + FILLER[1][:32])
    assert first.outcome == FOUND and first.placement is not None
    assert first.placement.chunk.chunk_id == "d#0"


def test_context_that_fits_neither_duplicate_stays_ambiguous() -> None:
    view = view_of(" ".join([FILLER[0], QUOTE, FILLER[1]]), " ".join([FILLER[2], QUOTE]))
    outcome = relocate(
        FoldedQuote(QUOTE), view, threshold=98.0, prefix="Completely unrelated words here. "
    ).outcome
    assert outcome == AMBIGUOUS


def test_an_exact_copy_does_not_bypass_the_context_check() -> None:
    """Hypothesis' client takes the first exact copy; context must decide between copies."""
    view = view_of(" ".join([FILLER[3], QUOTE]), " ".join([FILLER[4], QUOTE, FILLER[5]]))
    result = relocate(
        FoldedQuote(QUOTE),
        view,
        threshold=98.0,
        prefix=FILLER[4][-30:] + " ",
        suffix=" " + FILLER[5][:30],
    )
    assert result.outcome == FOUND and result.placement is not None
    assert result.placement.chunk.chunk_id == "d#1"


def test_quote_across_two_chunks_straddles() -> None:
    half = len(QUOTE) // 2
    # the chunks touch: their offsets make the document continuous across the cut
    view = store_of(
        chunk_record("d", 0, FILLER[0] + " " + QUOTE[:half], doc_offset=0),
        chunk_record("d", 1, QUOTE[half:] + " " + FILLER[1], doc_offset=len(FILLER[0]) + 1 + half),
    ).document("d")
    assert view is not None
    assert find(QUOTE, view)[0] == STRADDLES


def test_quote_across_two_chunks_without_offsets_straddles() -> None:
    words = QUOTE.split(" ")
    view = view_of(" ".join(words[:5]), " ".join(words[5:]), offsets=False)
    assert find(QUOTE, view)[0] == STRADDLES


def test_overlapping_chunks_holding_the_same_span_are_one_place() -> None:
    text = " ".join([FILLER[0], QUOTE, FILLER[1], FILLER[2]])
    at = text.index(QUOTE)
    view = store_of(
        chunk_record("d", 0, text[: at + len(QUOTE) + 10], doc_offset=0),
        chunk_record("d", 1, text[at - 5 :], doc_offset=at - 5),
    ).document("d")
    assert view is not None
    result = relocate(FoldedQuote(QUOTE), view, threshold=98.0, cited_chunk_id="d#1")
    assert result.outcome == FOUND and result.placement is not None
    assert result.placement.chunk.chunk_id == "d#1", "the cited chunk is preferred"


@given(
    st.lists(st.sampled_from(FILLER), min_size=1, max_size=8),
    st.integers(0, 8),
    st.integers(0, 5),
    st.randoms(use_true_random=False),
)
def test_relocated_spans_always_hold_the_quote(
    filler: list[str], position: int, chunk_size: int, rng: random.Random
) -> None:
    """Wherever the quote lands and however the document is cut, the raw span holds it."""
    sentences = [s for s in filler if s != QUOTE]
    sentences.insert(min(position, len(sentences)), QUOTE)
    text = " ".join(sentences)
    cut_every = 40 + chunk_size * 37
    records = [
        chunk_record("d", i, text[at : at + cut_every], doc_offset=at)
        for i, at in enumerate(range(0, len(text), cut_every))
    ]
    rng.shuffle(records)
    view = store_of(*records).document("d")
    assert view is not None
    result = relocate(FoldedQuote(QUOTE), view, threshold=98.0)
    start = text.index(QUOTE)
    assert result.place is not None
    assert (result.place.start, result.place.end) == (start, start + len(QUOTE))
    if result.outcome == FOUND:
        assert result.placement is not None
        chunk = result.placement.chunk
        local = result.place.start - result.placement.start
        assert chunk.text[local : local + len(QUOTE)] == QUOTE
    else:
        assert result.outcome == STRADDLES


@pytest.mark.parametrize("quote", ["\u200b\u200b", "\u00ad"])
def test_quote_that_folds_to_nothing_is_not_found(quote: str) -> None:
    assert find(quote, view_of("any text at all"))[0] == NOT_FOUND


# Position hints
_LONG_FILLER = " ".join(FILLER * 6)


def _two_copies(gap: str = _LONG_FILLER) -> tuple[DocumentView, int, int]:
    """A document with QUOTE twice, ``gap`` apart, and the two copies' starts."""
    text = " ".join([FILLER[0], QUOTE, gap, QUOTE, FILLER[1]])
    view = view_of(text[:900], text[900:])
    first = view.text.index(QUOTE)
    return view, first, view.text.index(QUOTE, first + 1)


def _hinted(
    view: DocumentView, at: int, document: str | None = None, **kwargs: object
) -> Relocation:
    """Relocate QUOTE hinted at ``at`` in ``document`` as it was (the view's text, by default)."""
    fingerprint = document_fingerprint(view.text if document is None else document)
    hint = PositionHint(at, at + len(QUOTE), fingerprint)
    return relocate(
        FoldedQuote(QUOTE),
        view,
        threshold=98.0,
        hint=hint,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_hint_that_holds_picks_its_copy_and_says_so() -> None:
    view, first, second = _two_copies()
    for at in (first, second):
        result = _hinted(view, at)
        assert result.outcome == FOUND and result.place is not None
        assert (result.place.start, result.how) == (at, BY_POSITION_HINT)


def test_a_hint_that_holds_nowhere_decides_nothing() -> None:
    """After a re-extraction the hinted offsets hold other text: the copies stay ambiguous."""
    view, first, second = _two_copies()
    for at in (first - 1, first + 3, second + 40, len(view.text) + 10):
        assert _hinted(view, at).outcome == AMBIGUOUS


def test_a_hint_decides_between_adjacent_copies() -> None:
    """A chunk-size change keeps every position: however close the copies, the hint holds."""
    view, first, second = _two_copies(gap="")
    assert second - first < len(QUOTE) + 3
    for at in (first, second):
        result = _hinted(view, at)
        assert result.place is not None and (result.place.start, result.how) == (
            at,
            BY_POSITION_HINT,
        )


def test_a_hint_in_a_document_whose_text_moved_decides_nothing() -> None:
    """ja/setfacl.1 rendered at 100 columns instead of 80: the re-wrap moved the copy closing
    the next option's paragraph onto the very offsets the cited copy had, byte for byte. Only
    the document's fingerprint tells that its text moved."""
    view, first, second = _two_copies()
    for before in (view.text[1:], view.text + " " * 120, view.text.replace(" ", "  ", 1)):
        assert _hinted(view, first, before).outcome == AMBIGUOUS
        assert _hinted(view, second, before).outcome == AMBIGUOUS


def test_a_fingerprint_ignores_only_the_kind_of_whitespace() -> None:
    """A chunker that drops the newline between two chunks leaves a gap the view fills with a
    space; a re-wrap that swaps spaces for line breaks moves nothing: both keep the hint."""
    view, first, _ = _two_copies()
    rewrapped = view.text.replace(" ", "\n", 5)
    assert _hinted(view, first, rewrapped).how == BY_POSITION_HINT


def test_a_hint_in_a_document_whose_blocks_were_reordered_decides_nothing() -> None:
    """From a hostile review: an extractor that reads two columns in the other order keeps the
    document's length, and the hinted offsets now hold the other column's copy byte for byte."""
    lead_a, lead_b = "Alpha install notes. ", "Beta section is here "
    column_a = lead_a + QUOTE + " Alpha is the default backend.\n"
    column_b = lead_b + QUOTE + " Beta is experimental here!!\n"
    assert len(lead_a) == len(lead_b)
    before, after = column_a + column_b, column_b + column_a
    assert len(before) == len(after)
    cut = len(column_b)
    chunks = [chunk_record("d", 0, after[:cut], doc_offset=0)]
    chunks.append(chunk_record("d", 1, after[cut:], doc_offset=cut))
    view = store_of(*chunks).document("d")
    assert view is not None and view.text == after
    cited = before.index(QUOTE)
    assert view.text[cited : cited + len(QUOTE)] == QUOTE  # the other copy, where the cited was
    hint = PositionHint(cited, cited + len(QUOTE), document_fingerprint(before))
    assert relocate(FoldedQuote(QUOTE), view, threshold=98.0, hint=hint).outcome == AMBIGUOUS


def test_a_copy_rewrapped_at_the_hinted_offsets_does_not_hold_it() -> None:
    """A re-extraction that moved a copy onto the hinted offsets changed its line breaks too:
    only the quote byte for byte holds a hint."""
    rewrapped = QUOTE.replace(" kept for", "\nkept for")
    text = " ".join([FILLER[0], rewrapped, _LONG_FILLER, QUOTE, FILLER[1]])
    view = view_of(text)
    at = view.text.index(rewrapped)
    assert _hinted(view, at).outcome == AMBIGUOUS
    held = _hinted(view, view.text.index(QUOTE))
    assert held.outcome == FOUND and held.how == BY_POSITION_HINT


def test_a_hint_is_ignored_when_the_view_is_not_in_document_offsets() -> None:
    text = " ".join([FILLER[0], QUOTE, _LONG_FILLER, QUOTE, FILLER[1]])
    view = view_of(text[:900], text[900:], offsets=False)
    assert _hinted(view, view.text.index(QUOTE)).outcome == AMBIGUOUS


def test_context_comes_before_the_hint_and_a_hint_never_overrides_it() -> None:
    view, first, second = _two_copies()
    # the suffix of the first copy decides, whatever the hint says
    by_context = _hinted(view, second, suffix=" " + _LONG_FILLER[:40])
    assert by_context.outcome == FOUND and by_context.place is not None
    assert (by_context.place.start, by_context.how) == (first, BY_CONTEXT)
    # a context too weak to decide, but fitting the first copy better: the hint at the second
    # copy must not win against it
    weak = " " + _LONG_FILLER[:12] + "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
    assert _hinted(view, second, suffix=weak).outcome == AMBIGUOUS
    # a context that fits both copies alike (a repeated paragraph) leaves the decision to the hint
    view, first, second = _two_copies(gap=_LONG_FILLER + " " + FILLER[0])
    for at in (first, second):
        result = _hinted(view, at, prefix=FILLER[0][-20:] + " ")
        assert result.outcome == FOUND and result.place is not None
        assert (result.place.start, result.how) == (at, BY_POSITION_HINT)


def test_a_unique_place_says_so() -> None:
    view = view_of(" ".join([FILLER[0], QUOTE, FILLER[1]]))
    hint = PositionHint(0, len(QUOTE), document_fingerprint(view.text))
    result = relocate(FoldedQuote(QUOTE), view, threshold=98.0, hint=hint)
    assert result.outcome == FOUND and result.how == UNIQUE


def _spin(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_relocation_budget_is_spent_by_cpu_time() -> None:
    budget = Budget(0.02)
    budget.check()  # the clock starts
    _spin(0.005)
    budget.check()
    _spin(0.03)
    with pytest.raises(OutOfBudgetError):
        budget.check()


def test_time_that_passes_without_cpu_spends_no_budget() -> None:
    # a process descheduled (a busy neighbour) is past the budget by the wall clock, not by
    # its own CPU time: the wall clock alone must not end the relocation
    budget = Budget(0.02)
    budget.check()
    time.sleep(0.05)
    budget.check()
    _spin(0.03)
    with pytest.raises(OutOfBudgetError):
        budget.check()
