"""Debezium change events of a chunks table, as chunk records: Postgres -> Debezium -> Kafka ->
the exporter with no code of the user's.

A team that streams its tables into Kafka with Debezium points the chunk topic at the topic of
its chunks table. Each message is a change event (Kafka Connect's JSON converter, with or
without ``schemas.enable``: with it, the envelope sits under ``payload`` beside a ``schema``):
``op`` ``r`` (a snapshot row), ``c``, ``u`` and ``d``, with the row ``before`` and ``after``.
``r``, ``c`` and ``u`` write the ``after`` row; ``d`` deletes the chunk ``before`` names (or
the message's key names); the tombstone Debezium sends after a delete (the same key, no value)
deletes it again, harmlessly.

A row becomes a chunk record by its table's layout, as ``sweep --chunks postgresql://...``
reads one (exporter.config.postgres): LangChain's ``langchain_pg_embedding`` (``id``,
``document``, ``cmetadata``), langchain-postgres' ``PGVectorStore`` (``langchain_id``,
``content``, ``langchain_metadata``), LlamaIndex's ``data_<name>`` (``node_id``, ``text``,
``metadata_``), or a table whose columns are named like the chunk record. ``auto`` (the
default) tells them apart by their columns. JSON and JSONB columns arrive as strings
(Debezium's ``io.debezium.data.Json``) and are parsed here. A row that cannot make a chunk
raises :class:`~exporter.errors.RecordError` naming the column or key it lacks: the
caller dead-letters it, as any bad chunk record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from exporter.errors import RecordError

__all__ = [
    "CHANGE_LAYOUTS",
    "ChangeColumns",
    "change_event_chunk",
    "is_change_event",
    "node_offset",
    "tombstone_chunk_id",
]

CHANGE_LAYOUTS = ("auto", "record", "langchain", "langchain-v2", "llamaindex")
_ROW_OPS = frozenset(("r", "c", "u"))
# a layout's (key column, text column, metadata column), in the order auto tries them
_LAYOUT_COLUMNS = {
    "langchain": ("id", "document", "cmetadata"),
    "langchain-v2": ("langchain_id", "content", "langchain_metadata"),
    "llamaindex": ("node_id", "text", "metadata_"),
}
_DEFAULT_KEYS = {
    # (document id, offset), as the libraries write them
    "langchain": ("source", "start_index"),
    "langchain-v2": ("source", "start_index"),
    "llamaindex": ("ref_doc_id", "start_char_idx"),
}
# fields of a chunk record a table of the record's own shape may hold
_RECORD_FIELDS = ("chunk_id", "doc_id", "doc_version", "text", "doc_offset", "ordinal",
                  "source", "chunker", "deleted")  # fmt: skip


@dataclass(frozen=True, slots=True)
class ChangeColumns:
    """Which layout a chunks table has, and which metadata keys hold a chunk's fields (None:
    the layout's own default)."""

    layout: str = "auto"
    doc_id_key: str | None = None
    doc_version_key: str = "doc_version"
    offset_key: str | None = None
    chunker_key: str = "chunker"

    def __post_init__(self) -> None:
        if self.layout not in CHANGE_LAYOUTS:
            raise ValueError(f"expected one of {', '.join(CHANGE_LAYOUTS)}, got {self.layout!r}")


def _envelope(value: Any) -> dict[str, Any] | None:
    """The change event's envelope (under ``payload`` with schemas on), or None."""
    if type(value) is not dict:
        return None
    payload = value.get("payload")
    if "schema" in value and type(payload) is dict:
        value = payload
    if type(value.get("op")) is str and ("after" in value or "before" in value):
        envelope: dict[str, Any] = value
        return envelope
    return None


def is_change_event(value: Any) -> bool:
    """Whether a parsed chunk message is a Debezium change event (not a chunk record)."""
    return _envelope(value) is not None


def change_event_chunk(
    value: Any, key: bytes | None, columns: ChangeColumns | None = None
) -> dict[str, Any]:
    """The chunk record (or ``{"chunk_id": ..., "deleted": true}``) a change event says."""
    columns = columns if columns is not None else ChangeColumns()
    event = _envelope(value)
    if event is None:
        raise RecordError("not a Debezium change event")
    op = event["op"]
    table = _table(event)
    if op in _ROW_OPS:
        row = event.get("after")
        if type(row) is not dict:
            raise RecordError(f"change event of {table} with op '{op}' has no 'after' row")
        return _chunk(row, table, columns)
    if op == "d":
        row = event.get("before")
        chunk_id = _deleted_id(row if type(row) is dict else {}, key, columns)
        if chunk_id is None:
            raise RecordError(
                f"delete of {table} names no chunk id (its 'before' has only the primary key: "
                "set REPLICA IDENTITY FULL on the table, or key it by its chunk id)"
            )
        return {"chunk_id": chunk_id, "deleted": True}
    raise RecordError(f"change event of {table} with op {op[:8]!r}: not a row change")


def tombstone_chunk_id(key: bytes) -> str | None:
    """The chunk id of a tombstone's key: Debezium keys it by the row's primary key as JSON
    (``{"id": "..."}``, with schemas on under ``payload``); other producers by the id itself.
    None when the key names no chunk id (LlamaIndex's numeric ``id``)."""
    if not key.startswith(b"{"):
        return key.decode("utf-8", "replace")
    try:
        parsed = orjson.loads(key)
    except orjson.JSONDecodeError:
        return key.decode("utf-8", "replace")
    if type(parsed) is dict and "schema" in parsed and type(parsed.get("payload")) is dict:
        parsed = parsed["payload"]
    if type(parsed) is not dict:
        return key.decode("utf-8", "replace")
    for column in ("chunk_id", "id", "langchain_id", "node_id"):
        if type(parsed.get(column)) is str:
            return str(parsed[column])
    return None


def _table(event: dict[str, Any]) -> str:
    source = event.get("source")
    if type(source) is dict and type(source.get("table")) is str:
        schema = source.get("schema")
        return f"{schema}.{source['table']}" if type(schema) is str else str(source["table"])
    return "the chunks table"


def _layout(row: dict[str, Any], table: str, columns: ChangeColumns) -> str:
    if columns.layout != "auto":
        return columns.layout
    for name, (key, text, metadata) in _LAYOUT_COLUMNS.items():
        if key in row and text in row and metadata in row:
            return name
    if "chunk_id" in row:
        return "record"
    raise RecordError(
        f"row of {table} has none of the layouts' columns (chunk_id; id, document, cmetadata; "
        "langchain_id, content, langchain_metadata; node_id, text, metadata_): set "
        "chunks_layout"
    )


def _chunk(row: dict[str, Any], table: str, columns: ChangeColumns) -> dict[str, Any]:
    layout = _layout(row, table, columns)
    if layout == "record":
        return {field: row[field] for field in _RECORD_FIELDS if row.get(field) is not None}
    key_column, text_column, metadata_column = _LAYOUT_COLUMNS[layout]
    for column in (key_column, text_column):
        if column not in row:
            raise RecordError(f"row of {table} has no column {column!r} (layout {layout})")
    metadata = _metadata(row.get(metadata_column), table, metadata_column)
    doc_id_key, offset_key = _DEFAULT_KEYS[layout]
    doc_id_key = columns.doc_id_key or doc_id_key
    offset_key = columns.offset_key or offset_key
    record: dict[str, Any] = {"chunk_id": row[key_column], "text": row[text_column]}
    doc_id = _present(metadata.get(doc_id_key))
    if layout == "llamaindex" and doc_id is None:
        doc_id = _present(metadata.get("doc_id"))
    if doc_id is None:
        raise RecordError(f"row of {table}: its {metadata_column} has no {doc_id_key!r}")
    version = metadata.get(columns.doc_version_key)
    if version is None:
        raise RecordError(
            f"row of {table}: its {metadata_column} has no {columns.doc_version_key!r}"
        )
    record["doc_id"], record["doc_version"] = _text(doc_id), _text(version)
    offset = metadata.get(offset_key)
    if layout == "llamaindex":
        offset = node_offset(metadata.get("_node_content"), offset_key, offset)
    if offset is not None and not (offset == -1 and layout.startswith("langchain")):
        record["doc_offset"] = offset
    chunker = metadata.get(columns.chunker_key)
    if chunker is not None:
        record["chunker"] = _text(chunker)
    return record


def _text(value: Any) -> Any:
    """A metadata value that names something, as text: ``3`` is the version ``"3"``, as
    ``->>`` reads it in a sweep of the same table; anything else is left for the decoder."""
    if type(value) in (int, float, bool):
        return orjson.dumps(value).decode()
    return value


def _present(value: Any) -> Any:
    """A document id, or None: LlamaIndex writes the string "None" for a node with none."""
    return None if value is None or value == "None" else value


def _metadata(value: Any, table: str, column: str) -> dict[str, Any]:
    """A JSON or JSONB column's object: Debezium sends it as a string."""
    if value is None:
        return {}
    if type(value) is str:
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise RecordError(f"row of {table}: its {column} is not JSON") from None
    if type(value) is not dict:
        raise RecordError(f"row of {table}: its {column} is not a JSON object")
    return value


def node_offset(node_content: Any, key: str, fallback: Any) -> Any:
    """The offset a LlamaIndex node's serialised content (``_node_content``, a JSON string)
    holds under ``key``, else ``fallback`` (the metadata's own value, if any)."""
    if type(node_content) is not str:
        return fallback
    try:
        node = orjson.loads(node_content)
    except orjson.JSONDecodeError:
        return fallback
    if type(node) is dict and node.get(key) is not None:
        return node[key]
    return fallback


def _deleted_id(row: dict[str, Any], key: bytes | None, columns: ChangeColumns) -> str | None:
    layouts = list(_LAYOUT_COLUMNS) if columns.layout in ("auto", "record") else [columns.layout]
    candidates = ["chunk_id", *(_LAYOUT_COLUMNS[name][0] for name in layouts)]
    for column in candidates:
        if type(row.get(column)) is str:
            return str(row[column])
    if columns.layout != "llamaindex" and key:
        return tombstone_chunk_id(key)
    return None
