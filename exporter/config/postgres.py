"""Where a chunk store in Postgres keeps what a chunk record holds: its layout.

A team's chunks live in the tables its RAG library made: LangChain's ``PGVector``
(``langchain_pg_embedding`` joined to ``langchain_pg_collection``), langchain-postgres' newer
``PGVectorStore`` (a table of its own with ``langchain_id``, ``content`` and
``langchain_metadata``), LlamaIndex's ``PGVectorStore`` (``data_<name>``), or anything else
through a query of the team's own. A layout names the table and the metadata keys that hold
the document id, version, offset and chunker; the defaults are what those libraries and their
splitters write. Nothing here connects: :mod:`exporter.postgres` reads with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from exporter.errors import SettingsError
from exporter.pipeline.repairs import MARK_FIELDS

__all__ = [
    "LAYOUTS",
    "ChunkLayout",
    "LayoutName",
    "is_postgres_uri",
    "redacted_uri",
]

LayoutName = Literal["langchain", "langchain-v2", "llamaindex", "query"]
LAYOUTS: tuple[LayoutName, ...] = ("langchain", "langchain-v2", "llamaindex", "query")

# What the libraries write, read from their source (docs/postgres.md says where):
# LangChain's document loaders put the file in metadata["source"]; a splitter with
# add_start_index=True puts the chunk's offset in "start_index" (-1 when it could not find the
# chunk). LlamaIndex puts the document in "ref_doc_id" (the string "None" when there is none)
# and the offsets in _node_content's "start_char_idx". Neither library has a version of a
# document: "doc_version" is a key the team writes, and a row without it is a bad chunk record.
DEFAULT_KEYS: dict[LayoutName, tuple[str, str, str]] = {
    # (document id, offset, chunker)
    "langchain": ("source", "start_index", "chunker"),
    "langchain-v2": ("source", "start_index", "chunker"),
    "llamaindex": ("ref_doc_id", "start_char_idx", "chunker"),
    "query": ("", "", ""),
}
DEFAULT_VERSION_KEY = "doc_version"
DEFAULT_COLLECTION = "langchain"
DEFAULT_TABLES: dict[LayoutName, str | None] = {
    "langchain": None,  # fixed: langchain_pg_embedding and langchain_pg_collection
    "langchain-v2": None,  # PGVectorStore has no default table name: --chunks-table
    "llamaindex": "data_llamaindex",
    "query": None,
}
# A table name as a person types it: optionally schema-qualified, each part a plain identifier
# (quoted identifiers with dots or quotes in them go through --chunks-query).
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}(?:\.[A-Za-z_][A-Za-z0-9_$]{0,62})?")
# A metadata key: anything printable but empty, bounded.
MAX_KEY_CHARS = 200


@dataclass(frozen=True, slots=True)
class ChunkLayout:
    """Which rows are chunks, and which columns and metadata keys hold a chunk's fields."""

    name: LayoutName = "langchain"
    collection: str = DEFAULT_COLLECTION
    table: str | None = None
    query: str | None = None
    doc_id_key: str = "source"
    doc_version_key: str = DEFAULT_VERSION_KEY
    offset_key: str = "start_index"
    chunker_key: str = "chunker"

    @classmethod
    def of(
        cls,
        name: str,
        *,
        collection: str | None = None,
        table: str | None = None,
        query: str | None = None,
        doc_id_key: str | None = None,
        doc_version_key: str | None = None,
        offset_key: str | None = None,
        chunker_key: str | None = None,
    ) -> ChunkLayout:
        """The layout ``name`` with the options given (None: the layout's default), checked:
        a SettingsError names the option that cannot work."""
        if name not in LAYOUTS:
            raise SettingsError(f"--chunks-layout {name!r}: expected one of {', '.join(LAYOUTS)}")
        layout: LayoutName = name
        if query is not None and layout != "query":
            raise SettingsError(
                f"--chunks-query is a layout of its own: drop --chunks-layout {name}"
            )
        if layout == "query" and not (query or "").strip():
            raise SettingsError("--chunks-layout query needs --chunks-query SQL")
        if collection is not None and layout != "langchain":
            raise SettingsError(f"--collection is for --chunks-layout langchain, not {name}")
        if table is not None and layout in ("langchain", "query"):
            raise SettingsError(
                f"--chunks-table is not for --chunks-layout {name}"
                + (
                    " (its tables are fixed: --collection picks the rows)"
                    if name == "langchain"
                    else ""
                )
            )
        table = table if table is not None else DEFAULT_TABLES[layout]
        if layout == "langchain-v2" and table is None:
            raise SettingsError(
                "--chunks-layout langchain-v2 needs --chunks-table (PGVectorStore's table has "
                "no default name)"
            )
        if table is not None and _TABLE.fullmatch(table) is None:
            raise SettingsError(
                f"--chunks-table {table!r}: expected a table name, optionally schema.table "
                "(anything else: --chunks-query)"
            )
        doc_id, offset, chunker = DEFAULT_KEYS[layout]
        keys = {
            "--doc-id-key": doc_id_key if doc_id_key is not None else doc_id,
            "--doc-version-key": doc_version_key
            if doc_version_key is not None
            else DEFAULT_VERSION_KEY,
            "--offset-key": offset_key if offset_key is not None else offset,
            "--chunker-key": chunker_key if chunker_key is not None else chunker,
        }
        if layout == "query":
            given = [
                option
                for option, value in zip(
                    keys, (doc_id_key, doc_version_key, offset_key, chunker_key), strict=True
                )
                if value is not None
            ]
            if given:
                raise SettingsError(
                    f"{given[0]} is for a library's layout: a query names its own columns"
                )
        else:
            for option, key in keys.items():
                if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
                    raise SettingsError(
                        f"{option} {key[:40]!r}: expected a metadata key of 1 to "
                        f"{MAX_KEY_CHARS} printable characters"
                    )
        return cls(
            name=layout,
            collection=collection if collection is not None else DEFAULT_COLLECTION,
            table=table,
            query=query,
            doc_id_key=keys["--doc-id-key"],
            doc_version_key=keys["--doc-version-key"],
            offset_key=keys["--offset-key"],
            chunker_key=keys["--chunker-key"],
        )

    def describe(self) -> str:
        """The rows as error messages name them."""
        if self.name == "langchain":
            return f"langchain_pg_embedding (collection {self.collection!r})"
        if self.name == "query":
            return "--chunks-query"
        return str(self.table)


def is_postgres_uri(value: str) -> bool:
    """Whether an input names a Postgres database (a libpq URI) rather than a file."""
    return value.startswith(("postgresql://", "postgres://"))


def redacted_uri(uri: str) -> str:
    """``uri`` without its password (in the user part or as a ``password`` parameter): what
    error messages, verdicts and summaries may show."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri.split("://", 1)[0] + "://..."
    netloc = parts.netloc
    if "@" in netloc:
        user, _, hosts = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{hosts}"
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "password"]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


# The fields a citation record's columns may be named for (docs/records.md), and the two that
# may hold its span as integer columns instead of one array; "record" names one JSON column
# holding the whole record or an answer event.
CITATION_FIELDS = (
    "citation_id", "answer_id", "doc_id", "doc_version", "chunk_id", "chunk_span", "quote",
    "prefix", "suffix", "emitted_at", "topic", "source", "sentence_index", "claim", "doc_span",
    "doc_sha256",
)  # fmt: skip
SPAN_COLUMNS = ("chunk_start", "chunk_end")
REQUIRED_CITATION_FIELDS = (
    "citation_id", "answer_id", "doc_id", "doc_version", "chunk_id", "chunk_span", "quote",
)  # fmt: skip
WHOLE_RECORD = "record"


@dataclass(frozen=True, slots=True)
class CitationTable:
    """Where citations are in Postgres: a table whose columns are named like the record's
    fields (or renamed by ``columns``, field to column), or a query of the user's own."""

    table: str | None = None
    query: str | None = None
    columns: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls, *, table: str | None, query: str | None, columns: list[str] | None
    ) -> CitationTable:
        """Checked: a SettingsError names the option that cannot work."""
        if (table is None) == (query is None):
            raise SettingsError(
                "--citations postgresql://... needs --citations-table TABLE or "
                "--citations-query SQL (one of them)"
            )
        if query is not None and not query.strip():
            raise SettingsError("--citations-query is empty")
        if table is not None and _TABLE.fullmatch(table) is None:
            raise SettingsError(
                f"--citations-table {table!r}: expected a table name, optionally schema.table "
                "(anything else: --citations-query)"
            )
        if columns and query is not None:
            raise SettingsError(
                "--citations-column renames a table's columns: a query names its own"
            )
        mapping: dict[str, str] = {}
        for given in columns or ():
            field_name, equals, column = given.partition("=")
            known = (*CITATION_FIELDS, *SPAN_COLUMNS, *MARK_FIELDS, WHOLE_RECORD)
            if not equals or field_name not in known or not column:
                raise SettingsError(
                    f"--citations-column {given[:80]!r}: expected FIELD=COLUMN, FIELD one of "
                    f"{', '.join(known)}"
                )
            if len(column.encode("utf-8", "surrogatepass")) > 63:
                raise SettingsError(
                    f"--citations-column {field_name}: a column name is at most 63 bytes"
                )
            mapping[field_name] = column
        by_column: dict[str, str] = {}
        for field_name, column in mapping.items():
            if column in by_column:
                raise SettingsError(
                    f"--citations-column: {by_column[column]} and {field_name} both name column "
                    f"{column[:63]!r} (one column holds one field)"
                )
            by_column[column] = field_name
        if WHOLE_RECORD in mapping and len(mapping) > 1:
            raise SettingsError(
                "--citations-column record=COLUMN holds the whole record: no other column "
                "is read with it"
            )
        return cls(table=table, query=query, columns=tuple(sorted(mapping.items())))

    @classmethod
    def from_mapping(cls, values: dict[str, Any], name: str) -> CitationTable:
        """The table a mapping file declares (``name`` is the file, for messages), once for
        every command that reads or writes the citations: ``table`` (or ``query``, read-only)
        and a ``[columns]`` table of FIELD = "column"; a SettingsError names the key."""
        unknown = sorted(set(values) - {"table", "query", "columns"})
        if unknown:
            raise SettingsError(
                f"{name}: unknown key {unknown[0][:40]!r} (expected table or query, and columns)"
            )
        table, query, columns = values.get("table"), values.get("query"), values.get("columns")
        for key, value in (("table", table), ("query", query)):
            if value is not None and not isinstance(value, str):
                raise SettingsError(f"{name}: {key} must be a string")
        if columns is not None and not (
            isinstance(columns, dict)
            and all(isinstance(column, str) for column in columns.values())
        ):
            raise SettingsError(f'{name}: columns must be a table of FIELD = "column"')
        known = (*CITATION_FIELDS, *SPAN_COLUMNS, *MARK_FIELDS, WHOLE_RECORD)
        for field_name in columns or {}:
            if field_name not in known:
                raise SettingsError(
                    f"{name}: [columns] {field_name[:40]!r} is no field of a citation (one of "
                    f"{', '.join(known)})"
                )
        renamed = [f"{field_name}={column}" for field_name, column in (columns or {}).items()]
        try:
            return cls.of(table=table, query=query, columns=renamed or None)
        except SettingsError as exc:
            message = str(exc)
            for option, key in _MAPPING_KEYS:
                message = message.replace(option, key)
            raise SettingsError(f"{name}: {message}") from None

    def describe(self) -> str:
        return "--citations-query" if self.table is None else self.table


# CitationTable.of's messages name the sweep's options; a mapping file's keys are these
_MAPPING_KEYS = (
    ("--citations postgresql://... needs", "a citations mapping needs"),
    ("--citations-table TABLE", "table"),
    ("--citations-query SQL", "query"),
    ("--citations-table", "table"),
    ("--citations-query", "query"),
    ("--citations-column", "columns"),
)
