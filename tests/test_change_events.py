"""Debezium change events on the chunk topic: each op, both converter shapes, every layout.

The envelopes are as Debezium 3.6's Postgres connector writes them with Kafka Connect's JSON
converter (../shared/notes/debezium-local.md; tests/test_debezium.py runs the real connector).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.errors import RecordError
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.records.change_events import (
    ChangeColumns,
    change_event_chunk,
    is_change_event,
    tombstone_chunk_id,
)

SOURCE = {"version": "3.6.1.Final", "connector": "postgresql", "name": "cdc", "db": "rag",
          "schema": "public", "table": "chunks", "snapshot": "false", "lsn": 26632688}  # fmt: skip
ROW = {"chunk_id": "c-1", "doc_id": "doc-2", "doc_version": "v1", "text": "hello world",
       "doc_offset": 0}  # fmt: skip


def event(op: str, before: Any = None, after: Any = None, *, schemas: bool = False) -> bytes:
    envelope = {"before": before, "after": after, "source": SOURCE, "transaction": None,
                "op": op, "ts_ms": 1796152093335}  # fmt: skip
    if schemas:
        envelope = {"schema": {"type": "struct", "name": "cdc.public.chunks.Envelope"},
                    "payload": envelope}  # fmt: skip
    return orjson.dumps(envelope)


def key(chunk_id: str, *, schemas: bool = False) -> bytes:
    body: dict[str, Any] = {"chunk_id": chunk_id}
    if schemas:
        body = {"schema": {"type": "struct"}, "payload": body}
    return orjson.dumps(body)


def _pipeline() -> Pipeline:
    return Pipeline(ChunkStore(), Policy(), change_columns=ChangeColumns())


def _apply(pipeline: Pipeline, value: bytes | None, message_key: bytes | None) -> Any:
    record = LocalRecord("cdc.public.chunks", 0, 0, message_key, value)
    return pipeline.chunk(record).dead_letter


@pytest.mark.parametrize("schemas", [False, True], ids=["schemas-off", "schemas-on"])
def test_snapshot_insert_update_delete_and_tombstone_follow_the_table(schemas: bool) -> None:
    pipeline = _pipeline()
    store = pipeline.store
    assert (
        _apply(pipeline, event("r", after=ROW, schemas=schemas), key("c-1", schemas=schemas))
        is None
    )
    assert store.chunk_count == 1
    other = {**ROW, "chunk_id": "c-2", "text": "second chunk"}
    assert (
        _apply(pipeline, event("c", after=other, schemas=schemas), key("c-2", schemas=schemas))
        is None
    )
    changed = {**ROW, "text": "hello there world", "doc_version": "v2"}
    # REPLICA IDENTITY DEFAULT: an update's before is null
    assert (
        _apply(pipeline, event("u", None, changed, schemas=schemas), key("c-1", schemas=schemas))
        is None
    )
    assert store.chunk("c-1").text == "hello there world"  # type: ignore[union-attr]
    assert store.live_version("doc-2") == "v2"
    # a delete's before holds only the key columns, the rest null
    before = {"chunk_id": "c-2", "doc_id": None, "doc_version": None, "text": None}
    assert (
        _apply(pipeline, event("d", before, None, schemas=schemas), key("c-2", schemas=schemas))
        is None
    )
    assert store.chunk("c-2") is None
    # then the tombstone: the same key, no value
    assert _apply(pipeline, None, key("c-1", schemas=schemas)) is None
    assert store.chunk("c-1") is None
    assert store.chunk_count == 0


def test_langchain_rows_map_by_their_metadata() -> None:
    row = {"id": "lc-1", "collection_id": "0b1e...", "embedding": None, "document": "Refunds.",
           "cmetadata": json.dumps({"source": "refunds.md", "doc_version": 3, "start_index": -1,
                                    "chunker": "recursive-1000"})}  # fmt: skip
    chunk = change_event_chunk(orjson.loads(event("c", after=row)), None)
    assert chunk == {"chunk_id": "lc-1", "text": "Refunds.", "doc_id": "refunds.md",
                     "doc_version": "3", "chunker": "recursive-1000"}  # fmt: skip


def test_llamaindex_rows_take_the_offset_from_node_content() -> None:
    node = json.dumps({"id_": "n-1", "text": "", "start_char_idx": 120, "end_char_idx": 140})
    metadata = {"_node_content": node, "ref_doc_id": "None", "doc_id": "guide.md",
                "doc_version": "v1", "_node_type": "TextNode"}  # fmt: skip
    row = {"id": 7, "text": "twenty characters...", "metadata_": json.dumps(metadata),
           "node_id": "n-1", "embedding": None}  # fmt: skip
    chunk = change_event_chunk(orjson.loads(event("r", after=row)), None)
    assert chunk == {"chunk_id": "n-1", "text": "twenty characters...", "doc_id": "guide.md",
                     "doc_version": "v1", "doc_offset": 120}  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "after", "before", "op", "expected"),
    [
        (ChangeColumns(), {"x": 1}, None, "c", "none of the layouts' columns"),
        (ChangeColumns(), {"id": "a", "document": "t", "cmetadata": '{"source": "s"}'}, None, "c",
         "row of public.chunks: its cmetadata has no 'doc_version'"),
        (ChangeColumns(), {"id": "a", "document": "t", "cmetadata": "{not json"}, None, "c",
         "its cmetadata is not JSON"),
        (ChangeColumns("llamaindex"), {"node_id": "n", "metadata_": "{}"}, None, "c",
         "has no column 'text' (layout llamaindex)"),
        (ChangeColumns("llamaindex"), None, {"id": 4, "node_id": None}, "d",
         "set REPLICA IDENTITY FULL"),
        (ChangeColumns(), None, None, "t", "with op 't': not a row change"),
        (ChangeColumns(), None, None, "c", "has no 'after' row"),
    ],
)  # fmt: skip
def test_an_event_that_cannot_be_mapped_names_what_it_lacks(
    columns: ChangeColumns, after: Any, before: Any, op: str, expected: str
) -> None:
    with pytest.raises(RecordError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        change_event_chunk(orjson.loads(event(op, before, after)), None, columns)


def test_a_bad_event_is_a_dead_letter_and_the_rest_are_applied() -> None:
    pipeline = _pipeline()
    letter = _apply(
        pipeline, event("c", after={"id": "a", "document": "t", "cmetadata": "{}"}), None
    )
    assert letter is not None and letter.reason == "invalid_record"
    assert "has no 'source'" in letter.error
    assert _apply(pipeline, event("c", after=ROW), key("c-1")) is None
    assert pipeline.store.chunk_count == 1


@pytest.mark.parametrize(
    ("message_key", "chunk_id"),
    [
        (b"plain-id", "plain-id"),
        (b'{"chunk_id": "c-9"}', "c-9"),
        (b'{"id": "lc-1"}', "lc-1"),
        (b'{"schema": {}, "payload": {"langchain_id": "u-1"}}', "u-1"),
        (b'{"id": 7}', None),  # LlamaIndex's bigserial: its delete event said the node
        (b"{not json", "{not json"),
    ],
)
def test_tombstone_keys(message_key: bytes, chunk_id: str | None) -> None:
    assert tombstone_chunk_id(message_key) == chunk_id


def test_a_chunk_record_is_no_change_event() -> None:
    assert not is_change_event(ROW)
    assert not is_change_event({"op": "c"})
    assert is_change_event(orjson.loads(event("c", after=ROW)))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    op=st.sampled_from(["r", "c", "u", "d", "t", "x"]),
    before=json_values,
    after=json_values | st.fixed_dictionaries({"id": json_values, "document": json_values,
                                                "cmetadata": json_values}),
    schemas=st.booleans(),
    layout=st.sampled_from(["auto", "record", "langchain", "langchain-v2", "llamaindex"]),
)  # fmt: skip
def test_any_envelope_is_a_record_or_one_short_error(
    op: str, before: Any, after: Any, schemas: bool, layout: str
) -> None:
    try:
        result = change_event_chunk(orjson.loads(event(op, before, after, schemas=schemas)),
                                    b'{"id": 1}', ChangeColumns(layout))  # fmt: skip
    except RecordError as exc:
        assert len(str(exc)) < 400
    else:
        assert isinstance(result, dict)
