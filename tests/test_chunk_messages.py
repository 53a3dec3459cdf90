"""A chunk record as its Kafka message: keyed by chunk_id, a tombstone for a deletion."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from exporter.records.chunk_messages import chunk_message

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


def test_an_upsert_is_keyed_by_its_chunk_id() -> None:
    line = orjson.dumps({"chunk_id": "d#0", "doc_id": "d", "text": "hello"})
    assert chunk_message(line) == (b"d#0", line)


def test_a_deletion_becomes_a_tombstone() -> None:
    assert chunk_message(b'{"chunk_id": "d#0", "deleted": true}') == (b"d#0", None)


def test_a_citation_with_a_text_field_is_never_a_chunk() -> None:
    line = orjson.dumps({"chunk_id": "d#0", "text": "x", "quote": "x", "chunk_span": [0, 1]})
    assert chunk_message(line) is None


chunk_like = st.fixed_dictionaries(
    {},
    optional={
        key: json_values | st.just(True)
        for key in ("chunk_id", "text", "deleted", "quote", "doc_id")
    },
)


@given(st.binary(max_size=200) | (json_values | chunk_like).map(orjson.dumps))
def test_any_line_is_a_keyed_message_or_none(line: bytes) -> None:
    """Never raises; a message keeps the line whole (or is a tombstone), keyed by a string id."""
    message = chunk_message(line)
    if message is None:
        return
    key, value = message
    record = orjson.loads(line)
    assert type(record) is dict
    assert value is None or value is line
    assert (value is None) == (record.get("deleted") is True)
    chunk_id = record.get("chunk_id")
    assert key == (chunk_id.encode() if type(chunk_id) is str else b"")
