"""The query a layout reads its chunks with, and how one of its rows becomes a chunk record.

Every library layout's query returns the same columns: the row's key, the text (NULL when it
is longer than the record limit, so a huge row is never fetched: only its size), its size,
and the metadata values the layout's keys name, extracted by the server (``->>`` on JSON and
JSONB alike; a key that is missing, or metadata that is no object, is NULL). A query of the
user's own returns columns named like the chunk record, or one JSON column holding it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

import orjson
from psycopg import sql

from exporter.config.postgres import ChunkLayout
from exporter.records.change_events import node_offset
from exporter.records.limits import Oversized

__all__ = [
    "LayoutQuery",
    "LookupBy",
    "citation_record",
    "containment_probes",
    "layout_query",
    "lookup_query",
    "query_record",
    "row_record",
]

# the columns of a library layout's query, in order
COLUMNS = (
    "key", "text", "size", "doc_id", "doc_version", "offset", "chunker", "node_content",
)  # fmt: skip
_INTEGER = re.compile(r"-?[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class LayoutQuery:
    """A layout's query and its parameters, and what its rows are called in messages."""

    statement: sql.Composed | sql.SQL
    params: dict[str, Any]
    key_column: str
    metadata_column: str
    # tables that must exist, for a message naming the layout rather than the server's
    tables: tuple[str, ...] = field(default=())


def _table(name: str) -> sql.Identifier:
    return sql.Identifier(*name.split(".", 1))


@dataclass(frozen=True, slots=True)
class _Shape:
    """A library layout's query in parts: what it selects from where, the rows that are its
    chunks (None: all), the expressions of the chunk id and document id, and the order."""

    select: sql.Composed | sql.SQL
    scope: sql.Composed | sql.SQL | None
    key: sql.Composed | sql.SQL
    metadata: sql.Composed | sql.SQL
    order: sql.Composed | sql.SQL


_LANGCHAIN_COLUMNS = (
    "SELECT e.id::text, "
    "CASE WHEN octet_length(e.document) <= %(max)s THEN e.document END, "
    "octet_length(e.document), "
    "e.cmetadata ->> %(doc_id_key)s, e.cmetadata ->> %(version_key)s, "
    "e.cmetadata ->> %(offset_key)s, e.cmetadata ->> %(chunker_key)s, NULL::text"
)
_LANGCHAIN_COLLECTION = "JOIN langchain_pg_collection c ON c.uuid = e.collection_id"


def _shape(layout: ChunkLayout) -> tuple[_Shape, str, str, tuple[str, ...]]:
    """The parts of ``layout``'s query, its key and metadata columns' names, its tables."""
    select: sql.Composed | sql.SQL
    if layout.name == "langchain":
        select = sql.SQL(
            _LANGCHAIN_COLUMNS + " FROM langchain_pg_embedding e " + _LANGCHAIN_COLLECTION
        )
        shape = _Shape(
            select,
            sql.SQL("c.name = %(collection)s"),
            sql.SQL("e.id"),
            sql.SQL("e.cmetadata"),
            sql.SQL("e.id"),
        )
        return shape, "id", "cmetadata", ("langchain_pg_embedding", "langchain_pg_collection")
    assert layout.table is not None
    table = _table(layout.table)
    if layout.name == "langchain-v2":
        select = sql.SQL(
            "SELECT t.langchain_id::text, "
            "CASE WHEN octet_length(t.content) <= %(max)s THEN t.content END, "
            "octet_length(t.content), "
            "t.langchain_metadata ->> %(doc_id_key)s, t.langchain_metadata ->> %(version_key)s, "
            "t.langchain_metadata ->> %(offset_key)s, t.langchain_metadata ->> %(chunker_key)s, "
            "NULL::text FROM {table} t"
        ).format(table=table)
        key = sql.SQL("t.langchain_id")
        shape = _Shape(select, None, key, sql.SQL("t.langchain_metadata"), key)
        return shape, "langchain_id", "langchain_metadata", (layout.table,)
    assert layout.name == "llamaindex"
    # ref_doc_id is the string "None" when a node has no document; doc_id is the same value
    # under its older name. The offset is in _node_content, a JSON string of the node.
    select = sql.SQL(
        "SELECT t.node_id, "
        "CASE WHEN octet_length(t.text) <= %(max)s THEN t.text END, "
        "octet_length(t.text), "
        "COALESCE(NULLIF(t.metadata_ ->> %(doc_id_key)s, 'None'), "
        "NULLIF(t.metadata_ ->> 'doc_id', 'None')), "
        "t.metadata_ ->> %(version_key)s, t.metadata_ ->> %(offset_key)s, "
        "t.metadata_ ->> %(chunker_key)s, "
        "CASE WHEN octet_length(t.metadata_ ->> '_node_content') <= %(max)s "
        "THEN t.metadata_ ->> '_node_content' END "
        "FROM {table} t"
    ).format(table=table)
    shape = _Shape(select, None, sql.SQL("t.node_id"), sql.SQL("t.metadata_"), sql.SQL("t.id"))
    return shape, "node_id", "metadata_", (layout.table,)


def _params(layout: ChunkLayout, max_bytes: int) -> dict[str, Any]:
    params: dict[str, Any] = {
        "max": max_bytes,
        "doc_id_key": layout.doc_id_key,
        "version_key": layout.doc_version_key,
        "offset_key": layout.offset_key,
        "chunker_key": layout.chunker_key,
    }
    if layout.name == "langchain":
        params["collection"] = layout.collection
    return params


def _where(*conditions: sql.Composed | sql.SQL | None) -> sql.Composed | sql.SQL:
    present = [condition for condition in conditions if condition is not None]
    if not present:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(present)


def layout_query(layout: ChunkLayout, max_bytes: int) -> LayoutQuery:
    """The query that reads ``layout``'s chunks, never fetching a text above ``max_bytes``."""
    assert layout.name != "query"
    shape, key_column, metadata_column, tables = _shape(layout)
    statement = shape.select + _where(shape.scope) + sql.SQL(" ORDER BY ") + shape.order
    return LayoutQuery(statement, _params(layout, max_bytes), key_column, metadata_column, tables)


LookupBy = Literal["documents", "chunks"]


def lookup_query(
    layout: ChunkLayout,
    max_bytes: int,
    by: LookupBy,
    *,
    containment: bool = False,
    fallback: bool = False,
) -> LayoutQuery:
    """The query of lookup mode: ``layout``'s chunks of the documents in ``%(ids)s`` (a text
    array), or the chunks with those ids, in the order :func:`layout_query` reads them. The
    caller keeps only rows whose document is one it asked for (a filter may find more).

    The document filter is the metadata key compared as text, the key written into the
    statement (an expression index on it, as LlamaIndex makes on ``metadata_ ->>
    'ref_doc_id'``, serves only a constant); with ``containment`` (LangChain's JSONB
    ``cmetadata``) it is one ``@>`` probe of LangChain's GIN index per value in
    ``%(probes)s`` (a jsonb array: :func:`containment_probes`). ``fallback`` (LlamaIndex)
    also finds rows that name their document under ``doc_id`` only, as the sweep reads them,
    at the cost of a scan. A query of the user's own is filtered on its ``doc_id`` and
    ``chunk_id`` columns.
    """
    params = _params(layout, max_bytes)
    if layout.name == "query":
        assert layout.query is not None
        column = sql.Identifier("doc_id" if by == "documents" else "chunk_id")
        statement = (
            sql.SQL("SELECT q.* FROM (\n")
            + sql.SQL(_own_query(layout.query))
            + sql.SQL("\n) AS q WHERE q.{} = ANY(%(ids)s)").format(column)
        )
        return LayoutQuery(statement, params, "chunk_id", "", ())
    shape, key_column, metadata_column, tables = _shape(layout)
    if by == "chunks":
        # a UUID key (PGVectorStore's) is compared as one: the caller passes only ids that
        # are a UUID's text; the other layouts' keys are text
        cast = sql.SQL("::uuid[]" if layout.name == "langchain-v2" else "::text[]")
        condition = shape.key + sql.SQL(" = ANY(%(ids)s") + cast + sql.SQL(")")
    elif containment:
        # driven by the probes, each its own @> probe of LangChain's GIN index: the subquery
        # fenced (OFFSET 0) so that the planner cannot turn it into a join that tests every
        # row against every id (it did, reading the table a thousand times for a thousand ids)
        statement = (
            sql.SQL(_LANGCHAIN_COLUMNS)
            + sql.SQL(
                " FROM unnest(%(probes)s::jsonb[]) AS wanted(probe) CROSS JOIN LATERAL "
                "(SELECT * FROM langchain_pg_embedding i WHERE i.cmetadata @> wanted.probe "
                "OFFSET 0) e "
            )
            + sql.SQL(_LANGCHAIN_COLLECTION)
            + _where(shape.scope)
            + sql.SQL(" ORDER BY ")
            + shape.order
        )
        return LayoutQuery(statement, params, key_column, metadata_column, tables)
    else:
        key = _constant(layout.doc_id_key)
        condition = sql.SQL("(") + shape.metadata + sql.SQL(f" ->> {key}) = ANY(%(ids)s::text[])")
        if fallback:
            metadata = shape.metadata
            condition = (
                sql.SQL("(")
                + condition
                + sql.SQL(" OR (COALESCE(")
                + metadata
                + sql.SQL(f" ->> {key}, 'None') = 'None' AND (")
                + metadata
                + sql.SQL(" ->> 'doc_id') = ANY(%(ids)s::text[])))")
            )
    statement = shape.select + _where(shape.scope, condition) + sql.SQL(" ORDER BY ") + shape.order
    return LayoutQuery(statement, params, key_column, metadata_column, tables)


def containment_probes(key: str, ids: Iterable[str]) -> list[str]:
    """The ``@>`` probes that find the rows whose ``cmetadata ->> key`` is one of ``ids``: the
    id as a JSON string, and as the JSON number, boolean, object or array it may spell
    (``->>`` gives a number's text too); the caller rechecks what they find."""
    probes = []
    for value in ids:
        probes.append(orjson.dumps({key: value}).decode())
        try:
            spelled = orjson.loads(value)
        except orjson.JSONDecodeError:
            continue
        if spelled is not None and not isinstance(spelled, str):
            probes.append(orjson.dumps({key: spelled}).decode())
    return probes


def _constant(text: str) -> str:
    """``text`` as an SQL string constant inside a statement run with parameters: quotes
    doubled (standard_conforming_strings), and % doubled, which is no placeholder."""
    return "'" + text.replace("'", "''").replace("%", "%%") + "'"


# a trailing semicolon, and any comment after it: the query is wrapped as a subquery
_TRAILING = re.compile(r";?\s*(?:--[^\n]*\s*)*$")


def _own_query(query: str) -> str:
    """The user's query as a subquery's text: a % in it is no placeholder, and a trailing
    semicolon or comment cannot end the statement that wraps it."""
    text = query.strip()
    match = _TRAILING.search(text)
    if match is not None and ";" in match.group(0):
        text = text[: match.start()]
    return text.replace("%", "%%")


@dataclass(frozen=True, slots=True)
class RowRecord:
    """One row as a chunk record's bytes (or its size, too big to read), with what a message
    about it should add: the metadata keys it lacked."""

    record: bytes | Oversized
    key: str | None
    missing: tuple[str, ...]


def row_record(layout: ChunkLayout, row: tuple[Any, ...], max_bytes: int) -> RowRecord:
    """The chunk record of a library layout's row (columns as :data:`COLUMNS`)."""
    key, text, size, doc_id, doc_version, offset, chunker, node_content = row
    if text is None and size is not None:
        return RowRecord(Oversized(int(size)), key, ())
    missing: list[str] = []
    record: dict[str, Any] = {"chunk_id": key, "text": text}
    if doc_id is None:
        missing.append(layout.doc_id_key)
    else:
        record["doc_id"] = doc_id
    if doc_version is None:
        missing.append(layout.doc_version_key)
    else:
        record["doc_version"] = doc_version
    if node_content is not None and layout.name == "llamaindex":
        offset = node_offset(node_content, layout.offset_key, offset)
    if offset is not None:
        record["doc_offset"] = _offset(offset)
        if record["doc_offset"] == -1 and layout.name.startswith("langchain"):
            # a LangChain splitter writes -1 when it could not find the chunk in the document
            del record["doc_offset"]
    if chunker is not None:
        record["chunker"] = chunker
    encoded = _dumps(record)
    if len(encoded) > max_bytes:
        return RowRecord(Oversized(len(encoded)), key, ())
    return RowRecord(encoded, key, tuple(missing))


def _offset(value: Any) -> Any:
    """An offset as the record carries it: an integer when it reads as one (``->>`` gives
    text), else as it came, for the decoder to refuse by name."""
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    return value


def query_record(
    names: tuple[str, ...], row: tuple[Any, ...], max_bytes: int
) -> tuple[bytes | Oversized, str | None]:
    """The chunk record of a row of the user's own query, and its chunk id if it has one: one
    column holding the record (JSON, JSONB or text), or columns named like its fields (NULL
    ones left out)."""
    if len(row) == 1 and isinstance(row[0], (dict, str, bytes)):
        value = row[0]
        encoded = (
            value.encode("utf-8", "surrogatepass")
            if isinstance(value, str)
            else bytes(value)
            if isinstance(value, bytes)
            else _dumps(value)
        )
        key = value.get("chunk_id") if isinstance(value, dict) else None
    else:
        record = {
            name: _plain(value) for name, value in zip(names, row, strict=True) if value is not None
        }
        encoded = _dumps(record)
        key = record.get("chunk_id")
    if len(encoded) > max_bytes:
        return Oversized(len(encoded)), None
    return encoded, key if isinstance(key, str) else None


def _dumps(value: Any) -> bytes:
    """JSON of a row's value; an integer beyond 64 bits (a ``numeric`` column, a number in a
    JSON one) is what orjson cannot write, and the standard library can."""
    try:
        return orjson.dumps(value, default=_plain)
    except TypeError:
        return json.dumps(value, default=_plain, ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )


def citation_record(
    names: tuple[str, ...], row: tuple[Any, ...], max_bytes: int
) -> bytes | Oversized:
    """The citation record (or answer event) of a row whose columns are named like its fields
    (already renamed), or of one JSON column holding it: a span in two integer columns
    (``chunk_start``, ``chunk_end``) becomes ``chunk_span``, an integer array stays one."""
    if len(row) == 1 and isinstance(row[0], (dict, str, bytes)):
        return query_record(names, row, max_bytes)[0]
    record = {
        name: _plain(value) for name, value in zip(names, row, strict=True) if value is not None
    }
    if "chunk_span" not in record and ("chunk_start" in record or "chunk_end" in record):
        record["chunk_span"] = [record.pop("chunk_start", None), record.pop("chunk_end", None)]
    encoded = _dumps(record)
    return Oversized(len(encoded)) if len(encoded) > max_bytes else encoded


def _plain(value: Any) -> Any:
    """A column value as JSON has it: a whole ``numeric`` as an integer, a time in RFC 3339,
    others as text."""
    if isinstance(value, Decimal):  # Infinity and NaN as text, for the decoder to refuse
        return (
            int(value) if value.is_finite() and value == value.to_integral_value() else str(value)
        )
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool, list, dict)) or value is None:
        return value
    return str(value)
