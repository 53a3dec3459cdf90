"""The stratified sample a sweep sends to the entailment judge: strata, shares, determinism."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.entailment.sampling import (
    AGE_BANDS,
    FAMILIES,
    KeyFilter,
    StratifiedSample,
    Stratum,
    age_band,
    allocate,
    near_miss_family,
    sample_key,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STRATA = [Stratum(age, family) for age in AGE_BANDS for family in FAMILIES]


@pytest.mark.parametrize(
    ("emitted_at", "band"),
    [
        ("2026-11-29T12:00:00Z", "under_7d"),
        ("2026-11-23T12:00:01+00:00", "under_7d"),
        ("2026-11-23T12:00:00Z", "7_30d"),
        ("2026-10-31T12:00:00Z", "30_180d"),
        ("2026-06-03T12:00:00Z", "over_180d"),
        ("2026-11-29T12:00:00", "under_7d"),  # no offset: read as UTC
        (None, "unknown"),
        ("last tuesday", "unknown"),
        ("2027-01-01T00:00:00Z", "unknown"),  # from the future: says nothing about age
    ],
)
def test_age_bands(emitted_at: str | None, band: str) -> None:
    assert age_band(emitted_at, NOW) == band


def test_near_miss_families_in_order_of_precedence() -> None:
    def family(**changes: object) -> str:
        citation: dict[str, object] = {
            "repaired": False,
            "claim": "Refunds take 30 days.",
            "quote_chars": 40,
            "similarity": 100.0,
        }
        return near_miss_family(**(citation | changes))  # type: ignore[arg-type]

    assert family() == "exact"
    assert family(similarity=99.0) == "folded_below_100"
    assert family(quote_chars=301, similarity=99.0) == "long_quote"
    assert family(claim="Only admins may export.", quote_chars=301) == "conditional"
    assert family(claim="Refunds apply unless opened.", repaired=True) == "repaired_drift"
    assert family(claim="Eligibility is verified.") == "exact"  # "if" inside a word is not "if"
    assert family(claim="UP TO 5 seats.") == "conditional"


def test_every_non_empty_stratum_gets_one_and_the_rest_is_proportional() -> None:
    totals = {STRATA[0]: 9_000, STRATA[1]: 900, STRATA[2]: 90, STRATA[3]: 9, STRATA[4]: 1}
    chosen = allocate(totals, 100)
    assert sum(chosen.values()) == 100
    assert chosen[STRATA[4]] == 1 and chosen[STRATA[3]] >= 1
    assert chosen[STRATA[0]] > 8 * chosen[STRATA[1]]
    assert STRATA[5] not in chosen  # empty strata are not sampled


def test_a_sample_larger_than_the_archive_takes_it_all() -> None:
    totals = {STRATA[0]: 3, STRATA[1]: 0, STRATA[2]: 5}
    assert allocate(totals, 100) == {STRATA[0]: 3, STRATA[2]: 5}


def test_more_strata_than_the_sample_still_represents_each() -> None:
    totals = {stratum: 10 for stratum in STRATA[:7]}
    assert allocate(totals, 3) == dict.fromkeys(STRATA[:7], 1)


@given(
    totals=st.dictionaries(st.sampled_from(STRATA), st.integers(0, 5_000), max_size=25),
    size=st.integers(0, 3_000),
)
def test_allocation_invariants(totals: dict[Stratum, int], size: int) -> None:
    chosen = allocate(totals, size)
    present = {s for s, n in totals.items() if n > 0}
    assert set(chosen) == present
    assert all(1 <= chosen[s] <= totals[s] for s in present)
    whole = sum(totals[s] for s in present)
    assert sum(chosen.values()) == (whole if whole <= size else max(size, len(present)))
    if whole > size > len(present):  # within one of the exact share of what is left
        rest, pool = size - len(present), whole - len(present)
        for s in present:
            exact = 1 + rest * (totals[s] - 1) / pool
            assert abs(chosen[s] - exact) < 1 + 1e-9 or chosen[s] == totals[s]


def _offer(
    sample: StratifiedSample[Any], stratum: Stratum, line: int, document: str, item: Any
) -> None:
    sample.count(stratum)
    sample.offer(stratum, sample_key(sample.seed, line, 0), document, item)


def _offers(sample: StratifiedSample[str], count: int) -> None:
    for number in range(count):
        stratum = STRATA[0] if number % 10 else STRATA[1]
        document = f"doc-{number % 7}" if number % 3 else "big-doc"
        _offer(sample, stratum, number, document, f"cit-{number}")


def test_the_same_offers_and_seed_give_the_same_sample() -> None:
    runs = []
    for _ in range(2):
        sample: StratifiedSample[str] = StratifiedSample(50, seed=9)
        _offers(sample, 5_000)
        runs.append(list(sample.chosen()))
    assert runs[0] == runs[1] and len(runs[0]) == 50
    other: StratifiedSample[str] = StratifiedSample(50, seed=10)
    _offers(other, 5_000)
    assert list(other.chosen()) != runs[0]


def test_the_sample_spreads_over_documents_and_memory_stays_bounded() -> None:
    sample: StratifiedSample[str] = StratifiedSample(40, seed=1)
    for number in range(20_000):
        document = "huge" if number % 20 else f"small-{number}"
        _offer(sample, STRATA[0], number, document, f"{document}/{number}")
    assert sample.totals == {STRATA[0]: 20_000}
    assert all(len(heap) <= 80 for heap in sample._heaps.values())
    kept = [entry[2] for entry in sample._heaps[STRATA[0]]]
    chosen = [item.split("/")[0] for _, item in sample.chosen()]
    # 5% of the stratum's citations are outside "huge"; round-robin over the documents kept
    # takes every one of them before "huge" gets a second
    small = {document for document in kept if document != "huge"}
    assert small and small <= set(chosen) and len(chosen) == 40


def test_a_stratum_offered_once_among_thousands_is_in_the_sample() -> None:
    sample: StratifiedSample[int] = StratifiedSample(30, seed=3)
    for number in range(10_000):
        stratum = STRATA[7] if number == 5_000 else STRATA[number % 2]
        _offer(sample, stratum, number, f"d{number % 13}", number)
    chosen = list(sample.chosen())
    assert (STRATA[7], 5_000) in chosen
    shares = Counter(stratum for stratum, _ in chosen)
    assert shares[STRATA[7]] == 1 and shares[STRATA[0]] + shares[STRATA[1]] == 29
    assert abs(shares[STRATA[0]] - shares[STRATA[1]]) <= 1  # 4,999 and 5,000 offered


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        StratifiedSample(-1)


def test_offering_only_keys_below_the_thresholds_changes_nothing() -> None:
    """Workers send only the candidates whose key is below their stratum's threshold: the
    sample is the one every candidate would have given, however the input was split."""
    everything: StratifiedSample[int] = StratifiedSample(25, seed=4)
    filtered: StratifiedSample[int] = StratifiedSample(25, seed=4)
    for batch in range(40):
        thresholds = filtered.thresholds()
        for number in range(batch * 100, batch * 100 + 100):
            stratum = STRATA[number % 3]
            key = sample_key(4, number, 0)
            for sample in (everything, filtered):
                sample.count(stratum)
            everything.offer(stratum, key, f"d{number % 9}", number)
            if key < thresholds.get(stratum, 1 << 64):
                filtered.offer(stratum, key, f"d{number % 9}", number)
    assert filtered.thresholds() and list(filtered.chosen()) == list(everything.chosen())
    assert sum(len(heap) for heap in filtered._heaps.values()) == 3 * 50


@given(
    workers=st.integers(1, 4),
    keys=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6)), max_size=300),
)
def test_workers_that_send_only_what_they_admit_change_nothing(
    workers: int, keys: list[tuple[int, int]]
) -> None:
    """Each worker process sends only the candidates its own KeyFilter admits (the smallest
    keys it has seen per stratum): the sample is the one every candidate would have given."""
    everything: StratifiedSample[int] = StratifiedSample(4)
    merged: StratifiedSample[int] = StratifiedSample(4)
    filters = [KeyFilter(merged.capacity) for _ in range(workers)]
    for number, (which, key) in enumerate(keys):
        stratum = STRATA[which]
        everything.offer(stratum, key, f"d{number % 5}", number)
        if filters[number % workers].admit(stratum, key):
            merged.offer(stratum, key, f"d{number % 5}", number)
        for sample in (everything, merged):
            sample.count(stratum)
    assert list(merged.chosen()) == list(everything.chosen())


def test_a_key_filter_admits_fewer_as_it_learns() -> None:
    kept = KeyFilter(10)
    admitted = [kept.admit(STRATA[0], key) for key in range(1_000, 0, -1)]  # falling keys
    assert all(admitted)  # each is the smallest so far
    assert not any(kept.admit(STRATA[0], key) for key in range(11, 2_000))
    assert kept.admit(STRATA[1], 5_000)  # strata apart


def test_keys_depend_on_the_seed_and_the_place_only() -> None:
    keys = {sample_key(1, line, index) for line in range(300) for index in range(5)}
    assert len(keys) == 1_500 and all(0 <= key < 1 << 64 for key in keys)
    assert sample_key(1, 7, 2) == sample_key(1, 7, 2) != sample_key(2, 7, 2)
