"""The decisions of ``apply``, without a database: properties over any verdict and any row.

``plan`` reads verdict records from files and a topic anyone can write to: it must take any
JSON value without raising, and act only on a verdict that says what its citation held.
``decide`` must make applying a change idempotent (the row it writes is ``already``), never
change a row that moved since the sweep, and agree with the archive's copy.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from exporter.pipeline.repairs import (
    ACTION_FIELDS,
    ApplyPolicy,
    Change,
    Held,
    Skip,
    decide,
    plan,
    quote_sha256,
    written,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)
KEYS = ["citation_id", "action", "cited", "repair", "recorded_version", "check"]


@given(JSON)
def test_any_json_value_is_planned_or_skipped_never_raised(value: Any) -> None:
    assert isinstance(plan(value), Change | Skip)


@given(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6))
def test_a_verdict_with_wrong_types_is_skipped_by_reason(value: dict[str, Any]) -> None:
    made = plan(value)
    if isinstance(made, Change):
        assert isinstance(value["cited"], dict) and made.action in ACTION_FIELDS
    else:
        assert made.reason


@st.composite
def verdicts(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    quote = draw(st.text(min_size=1, max_size=20))
    start = draw(st.integers(0, 1000))
    action = draw(st.sampled_from(sorted(ACTION_FIELDS)))
    verdict = {
        "citation_id": "c1",
        "action": action,
        "recorded_version": "v1",
        "cited": {"chunk_id": "d#0", "chunk_span": [start, start + len(quote)],
                  "quote_sha256": quote_sha256(quote)},
        "repair": {"chunk_id": draw(st.sampled_from(["d#0", "d#1"])),
                   "chunk_span": [start + draw(st.integers(1, 50)), start + 60],
                   "similarity": 100.0, "how": "unique"},
    }  # fmt: skip
    return verdict, quote


@given(verdicts(), st.booleans(), st.booleans())
def test_applying_is_idempotent_and_a_moved_row_is_a_conflict(
    case: tuple[dict[str, Any], str], moved: bool, edited: bool
) -> None:
    verdict, quote = case
    change = plan(verdict)
    assert isinstance(change, Change)
    span = verdict["cited"]["chunk_span"]
    row = Held("d#0", [span[0] + 1, span[1] + 1] if moved else span, "v1",
               quote + "!" if edited else quote, {})  # fmt: skip
    decision = decide(change, row)
    if moved or edited:
        assert decision == "conflict"
        return
    assert decision == "apply"
    values = written(change, "sweep-x", "2026-06-01T00:00:00Z")
    after = Held(
        values.get("chunk_id", row.chunk_id),
        values.get("chunk_span", row.chunk_span),
        "v1",
        quote,
        {name: value for name, value in values.items() if name not in ("chunk_id", "chunk_span")},
    )
    assert decide(change, after) == "already"


def test_policies_skip_by_their_reason() -> None:
    verdict: dict[str, Any] = {
        "citation_id": "c1",
        "action": "rewrite_offsets",
        "recorded_version": "v1",
        "cited": {"chunk_id": "d#0", "chunk_span": [0, 3], "quote_sha256": quote_sha256("The")},
        "repair": {"chunk_id": "d#0", "chunk_span": [4, 7], "similarity": 100.0},
    }
    verdict["repair"]["how"] = "position_hint"
    assert plan(verdict, ApplyPolicy(frozenset({"unique", "context"}))) == Skip("policy_how", "c1")
    verdict["repair"]["how"], verdict["repair"]["similarity"] = "unique", 80.0
    assert plan(verdict, ApplyPolicy(min_similarity=95)) == Skip("policy_similarity", "c1")
    verdict["action"] = "suppress_claim"
    assert plan(verdict, ApplyPolicy(never_suppress=True)) == Skip("policy_never_suppress", "c1")
    del verdict["cited"]
    assert plan(verdict) == Skip("no_cited", "c1")
