"""The record contract: what decodes, and what each broken record is told."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.records.decode import (
    RecordError,
    _explained_citation,
    decode_chunk,
    decode_citations,
    parse_json,
)
from exporter.records.schema import Chunk, ChunkDeletion, Citation, InvalidCitation

GOOD: dict[str, Any] = {
    "citation_id": "c1",
    "answer_id": "a1",
    "doc_id": "d1",
    "doc_version": "v3",
    "chunk_id": "d1#2",
    "chunk_span": [10, 42],
    "quote": "Refunds are issued within 30 days.",
}


def test_citation_record_decodes_with_optional_fields() -> None:
    record = GOOD | {
        "prefix": "before ",
        "suffix": " after",
        "emitted_at": "2026-10-01T12:00:00Z",
        "topic": "pricing",
        "source": "acme",
        "sentence_index": 2,
        "unknown_field": "ignored for forward compatibility",
    }
    [decoded] = decode_citations(record)
    assert decoded == Citation(
        "c1",
        "a1",
        "d1",
        "v3",
        "d1#2",
        10,
        42,
        "Refunds are issued within 30 days.",
        "before ",
        " after",
        "2026-10-01T12:00:00Z",
        "pricing",
        "acme",
        2,
    )


def test_answer_event_citations_inherit_answer_id_and_topic() -> None:
    answer = {
        "answer_id": "a9",
        "emitted_at": "2026-10-01T12:00:00+02:00",
        "topic": "security",
        "sentences": ["One.", "Two."],
        "citations": [
            {k: v for k, v in GOOD.items() if k != "answer_id"},
            GOOD | {"citation_id": "c2", "answer_id": "a9", "topic": "legal"},
        ],
    }
    first, second = decode_citations(answer)
    assert isinstance(first, Citation) and isinstance(second, Citation)
    assert (first.answer_id, first.topic) == ("a9", "security")
    assert (second.answer_id, second.topic) == ("a9", "legal")


def test_one_bad_citation_in_an_answer_does_not_spoil_the_others() -> None:
    answer = {
        "answer_id": "a9",
        "emitted_at": "2026-10-01T12:00:00Z",
        "citations": [
            GOOD | {"answer_id": "a9"},
            GOOD | {"answer_id": "a9", "citation_id": "c2", "quote": ""},
        ],
    }
    good, bad = decode_citations(answer)
    assert isinstance(good, Citation)
    assert bad == InvalidCitation(
        "'quote' must be a non-empty string, got an empty string", "c2", "a9", "d1", index=1
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"quote": None}, "'quote' must be a non-empty string, got null", id="null"),
        pytest.param({"quote": "  \n"}, "'quote' must contain text", id="blank quote"),
        pytest.param({"doc_id": 7}, "'doc_id' must be a non-empty string, got int", id="type"),
        pytest.param(
            {"chunk_span": [5, 5]}, "0 <= start < end <= 2**53 - 1, got [5, 5]", id="empty span"
        ),
        pytest.param({"chunk_span": [-1, 5]}, "0 <= start < end", id="negative span"),
        pytest.param({"chunk_span": [1, 2, 3]}, "[start, end]", id="three numbers"),
        pytest.param({"chunk_span": [1.0, 2]}, "[start, end]", id="float offset"),
        pytest.param({"chunk_span": [True, 2]}, "[start, end]", id="bool offset"),
        pytest.param({"emitted_at": "yesterday"}, "RFC 3339 timestamp", id="timestamp"),
        pytest.param({"sentence_index": -2}, "non-negative integer", id="sentence index"),
        pytest.param({"prefix": 3}, "'prefix' must be a string, got int", id="prefix"),
        pytest.param({"doc_span": [7, 7]}, "'doc_span' must be [start, end]", id="empty hint"),
        pytest.param({"doc_span": "1010-1042"}, "'doc_span' must be [start", id="hint text"),
        pytest.param({"doc_span": [-1, 31]}, "'doc_span' must be", id="negative hint"),
        pytest.param({"doc_span": [1000, 2**53]}, "2**53 - 1", id="hint beyond offsets"),
        pytest.param(
            {"doc_span": [1010, 1043]},
            "'doc_span' [1010, 1043] must cover as many characters as 'chunk_span' [10, 42]",
            id="hint of another length",
        ),
        pytest.param({"doc_sha256": "ab" * 31}, "'doc_sha256' must be 64 hex", id="short hash"),
        pytest.param({"doc_sha256": "xy" * 32}, "'doc_sha256' must be 64 hex", id="not hex"),
        pytest.param({"doc_sha256": 7}, "'doc_sha256' must be 64 hexadecimal", id="hash number"),
    ],
)
def test_broken_citations_say_what_is_wrong(change: dict[str, Any], message: str) -> None:
    [item] = decode_citations(GOOD | change)
    assert isinstance(item, InvalidCitation)
    assert message in item.error
    assert item.citation_id == "c1"


def test_missing_field_is_named() -> None:
    record = {k: v for k, v in GOOD.items() if k != "chunk_id"}
    [item] = decode_citations(record)
    assert isinstance(item, InvalidCitation)
    assert item.error == "missing required field 'chunk_id'"


def test_citation_answer_id_must_match_its_answer() -> None:
    answer = {"answer_id": "a9", "citations": [GOOD]}
    [item] = decode_citations(answer)
    assert isinstance(item, InvalidCitation)
    assert "'answer_id' 'a1' differs from its answer's 'a9'" in item.error


def test_broken_answer_header_invalidates_each_of_its_citations() -> None:
    answer = {"answer_id": "a9", "emitted_at": "not a time", "citations": [GOOD, GOOD]}
    items = list(decode_citations(answer))
    assert len(items) == 2
    assert all(isinstance(i, InvalidCitation) and "answer event" in i.error for i in items)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([1, 2], id="list"),
        pytest.param("text", id="string"),
        pytest.param({"answer_id": "a", "citations": "x"}, id="citations not a list"),
    ],
)
def test_non_records_yield_exactly_one_invalid_item(value: object) -> None:
    [item] = decode_citations(value)
    assert isinstance(item, InvalidCitation)


def test_answer_with_no_citations_yields_nothing() -> None:
    assert list(decode_citations({"answer_id": "a", "citations": []})) == []


def test_chunk_records_and_deletions() -> None:
    chunk = decode_chunk(
        {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "text": "", "doc_offset": 0}
    )
    assert chunk == Chunk("d", "v1", "d#0", "", doc_offset=0)
    assert decode_chunk({"chunk_id": "d#0", "deleted": True}) == ChunkDeletion("d#0")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        pytest.param({"chunk_id": "x", "doc_id": "d", "doc_version": "v"}, "'text'", id="text"),
        pytest.param({"doc_id": "d", "doc_version": "v", "text": "t"}, "'chunk_id'", id="id"),
        pytest.param(
            {"chunk_id": "x", "doc_id": "d", "doc_version": "v", "text": "t", "ordinal": "1"},
            "'ordinal' must be a non-negative integer",
            id="ordinal",
        ),
        pytest.param(
            {"chunk_id": "x", "doc_id": "d", "doc_version": "v", "text": "t", "ordinal": 2**53},
            "'ordinal' 9,007,199,254,740,992 is more than the limit",
            id="ordinal past 2**53",
        ),
        pytest.param({"deleted": True}, "'chunk_id'", id="deletion without id"),
    ],
)
def test_broken_chunks_raise_a_named_error(record: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError, match=message):
        decode_chunk(record)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b'{"a": ', "not valid JSON", id="truncated"),
        pytest.param(b"\xff\xfe", "not valid JSON", id="not utf-8"),
        pytest.param(b'{"a": "b\n', "not valid JSON", id="newline in a string"),
    ],
)
def test_parse_json_errors(data: bytes, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        parse_json(data)


def test_parse_json_reports_truncation_not_the_newline() -> None:
    with pytest.raises(RecordError, match="unexpected end of data"):
        parse_json(b'{"citation_id": "cit-trunc\n')


_values = (
    st.none()
    | st.booleans()
    | st.integers(-3, 50)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
    | st.lists(st.integers(-2, 60), max_size=3)
)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                *GOOD,
                *("prefix", "suffix", "topic", "source", "emitted_at", "sentence_index"),
                *("claim", "doc_span", "doc_sha256"),
            ]
        ),
        _values
        | st.tuples(st.integers(-2, 60), st.integers(-2, 60)).map(list)
        | st.sampled_from(["ab" * 32, "AB" * 32, "ab" * 31, "g" * 64, "ab" * 32 + "\n"]),
    ),
    st.sampled_from([None, "a1", "zz"]),
)
def test_fast_and_explained_decoders_accept_the_same_records(
    changes: dict[str, Any], answer_id: str | None
) -> None:
    """The straight-line decoder must accept exactly what the field-by-field one accepts."""
    record = GOOD | changes
    [fast] = (
        decode_citations(record)
        if answer_id is None
        else decode_citations({"answer_id": answer_id, "citations": [record]})
    )
    try:
        explained: Citation | None = _explained_citation(record, answer_id, None, None)
    except RecordError:
        explained = None
    if explained is None:
        assert isinstance(fast, InvalidCitation)
    else:
        assert fast == explained


def test_a_citation_may_carry_its_position_in_the_document() -> None:
    [citation] = decode_citations(GOOD | {"doc_span": [1010, 1042], "doc_sha256": "AB" * 32})
    assert isinstance(citation, Citation)
    assert (citation.doc_start, citation.doc_end, citation.doc_sha256) == (1010, 1042, "ab" * 32)
    [without] = decode_citations(GOOD | {"doc_span": None, "doc_sha256": None})
    assert isinstance(without, Citation)
    assert (without.doc_start, without.doc_end, without.doc_sha256) == (None, None, None)


def test_a_citation_may_carry_the_claim_it_supports() -> None:
    [citation] = decode_citations(GOOD | {"claim": "Refunds take 30 days."})
    assert isinstance(citation, Citation) and citation.claim == "Refunds take 30 days."
    [invalid] = decode_citations(GOOD | {"claim": 30})
    assert isinstance(invalid, InvalidCitation)
    assert invalid.error == "'claim' must be a string, got int"


CITATION_FIELDS = {
    "citation_id": "c1",
    "answer_id": "a1",
    "doc_id": "d",
    "doc_version": "v1",
    "chunk_id": "d#0",
    "chunk_span": [0, 3],
    "quote": "abc",
}


@pytest.mark.parametrize(
    ("wrong", "right"), [("chunk_spans", "chunk_span"), ("chunkid", "chunk_id"), ("Quote", "quote")]
)
def test_a_misspelled_field_is_named_beside_the_missing_one(wrong: str, right: str) -> None:
    record = dict(CITATION_FIELDS)
    record[wrong] = record.pop(right)
    [item] = decode_citations(record)
    assert isinstance(item, InvalidCitation)
    assert item.error == f"missing required field '{right}' (the record has '{wrong}': misspelled?)"


def test_a_missing_field_with_no_look_alike_is_named_alone() -> None:
    record = dict(CITATION_FIELDS, zzz=1)
    del record["quote"]
    [item] = decode_citations(record)
    assert isinstance(item, InvalidCitation) and item.error == "missing required field 'quote'"


@given(st.dictionaries(st.text(max_size=300), st.integers(), max_size=80))
def test_the_error_of_a_missing_field_is_one_short_line_whatever_the_keys(
    extra: dict[str, int],
) -> None:
    record: dict[str, Any] = {k: v for k, v in CITATION_FIELDS.items() if k != "chunk_span"}
    record.update({k: v for k, v in extra.items() if k not in CITATION_FIELDS})
    [item] = decode_citations(record)
    assert isinstance(item, InvalidCitation)
    assert item.error.startswith("missing required field 'chunk_span'")
    assert "\n" not in item.error and len(item.error) < 300
