"""How a row of a layout becomes a chunk record, and what a database is called in messages:
without a server (tests/test_postgres_chunks.py sweeps real ones)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.config.postgres import ChunkLayout, redacted_uri
from exporter.postgres.layouts import query_record, row_record
from exporter.records.limits import Oversized

LANGCHAIN = ChunkLayout.of("langchain")
LLAMAINDEX = ChunkLayout.of("llamaindex")
values = st.one_of(st.none(), st.text(max_size=40), st.integers().map(str))


@given(
    key=st.one_of(st.none(), st.text(max_size=20)),
    text=st.one_of(st.none(), st.text(max_size=200)),
    doc_id=values,
    doc_version=values,
    offset=values,
    chunker=values,
    node_content=st.one_of(st.none(), st.text(max_size=80), st.just('{"start_char_idx": 5}')),
    layout=st.sampled_from([LANGCHAIN, LLAMAINDEX]),
)
def test_any_row_is_one_record_or_its_size(
    *,
    key: str | None,
    text: str | None,
    doc_id: str | None,
    doc_version: str | None,
    offset: str | None,
    chunker: str | None,
    node_content: str | None,
    layout: ChunkLayout,
) -> None:
    size = None if text is None else len(text.encode("utf-8", "surrogatepass"))
    row = (key, text, size, doc_id, doc_version, offset, chunker, node_content)
    made = row_record(layout, row, 1 << 16)
    assert isinstance(made.record, bytes)
    record = json.loads(made.record)
    assert isinstance(record, dict)
    assert record["chunk_id"] == key
    assert (doc_version is None) == (layout.doc_version_key in made.missing)


def test_a_text_the_server_held_back_is_its_size() -> None:
    made = row_record(LANGCHAIN, ("c1", None, 9_000_000, "d", "v", None, None, None), 1 << 20)
    assert made.record == Oversized(9_000_000)


@pytest.mark.parametrize(
    ("layout", "offset", "node_content", "expected"),
    [
        (LANGCHAIN, "12", None, 12),
        (LANGCHAIN, "-1", None, None),  # a LangChain splitter that could not find its chunk
        (LANGCHAIN, "twelve", None, "twelve"),  # left for the decoder to refuse by name
        (LANGCHAIN, "9999999999999999999", None, 9999999999999999999),  # beyond 64 bits
        (LLAMAINDEX, None, '{"start_char_idx": 40, "end_char_idx": 50}', 40),
        (LLAMAINDEX, "7", '{"start_char_idx": null}', 7),
        (LLAMAINDEX, None, "not json", None),
        (LLAMAINDEX, "-1", None, -1),  # LlamaIndex never writes -1: the decoder refuses it
    ],
)
def test_offsets(
    layout: ChunkLayout, offset: str | None, node_content: str | None, expected: Any
) -> None:
    row = ("c1", "text", 4, "doc", "v1", offset, None, node_content)
    record = json.loads(row_record(layout, row, 1 << 20).record)  # type: ignore[arg-type]
    assert record.get("doc_offset") == expected


@given(st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=20)), min_size=1, max_size=6))
def test_any_query_row_is_one_record_or_its_size(row: list[Any]) -> None:
    """Columns become one JSON object; one text column is the record as written, for the
    decoder to judge like a line of a file."""
    names = tuple(f"column_{n}" for n in range(len(row)))
    record, _ = query_record(names, tuple(row), 1 << 16)
    assert isinstance(record, bytes)
    if len(row) == 1 and isinstance(row[0], str):
        assert record == row[0].encode()
    else:
        assert isinstance(json.loads(record), dict)


def test_one_json_column_is_the_record() -> None:
    record, key = query_record(("r",), ({"chunk_id": "c", "text": "t"},), 1 << 10)
    assert json.loads(record) == {"chunk_id": "c", "text": "t"}  # type: ignore[arg-type]
    assert key == "c"
    assert query_record(("r",), ({"text": "x" * 2000},), 1 << 10)[0] == Oversized(2011)


@given(st.text(min_size=1, max_size=30))
def test_no_password_survives_redaction(password: str) -> None:
    secret = quote(password, safe="")
    for uri in (
        f"postgresql://rag:{secret}@db.internal:5432/rag?sslmode=require",
        f"postgres://rag@db.internal/rag?password={secret}&application_name=x",
    ):
        shown = urlsplit(redacted_uri(uri))
        assert shown.password is None
        assert shown.username == "rag"
        assert "password" not in parse_qs(shown.query)
