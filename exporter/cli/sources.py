"""``--chunks`` and ``--citations`` as files or as a database: the options that say where.

``--chunks FILE`` is JSON Lines; ``--chunks postgresql://...`` is the store read where it
lives, in the layout ``--chunks-layout`` names or by ``--chunks-query``; ``--citations
postgresql://...`` is an application's table (``--citations-table``, its columns renamed by
``--citations-column``, or all of that declared once in ``--citations-mapping FILE``, the file
``apply`` writes through too) or ``--citations-query``. psycopg (the ``postgres`` extra) is
imported only then.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from exporter.config.postgres import (
    LAYOUTS,
    ChunkLayout,
    CitationTable,
    is_postgres_uri,
    redacted_uri,
)
from exporter.errors import SettingsError, UsageError
from exporter.small_files import UnusableFile, load_toml, read_small_file
from exporter.sources import ChunkSource, CitationSource
from exporter.sources.jsonl import JsonLines

__all__ = [
    "add_chunk_store_arguments",
    "add_citation_table_arguments",
    "chunk_source",
    "citation_mapping",
    "citation_source",
    "refuse_chunk_store",
]

# A mapping file is a few lines; anything larger is not one.
MAX_MAPPING_BYTES = 64 * 1024

_CITATION_OPTIONS = (
    ("--citations-mapping", "citations_mapping"),
    ("--citations-table", "citations_table"),
    ("--citations-query", "citations_query"),
    ("--citations-column", "citations_column"),
)
_STORE_OPTIONS = (
    ("--chunks-layout", "chunks_layout"),
    ("--collection", "collection"),
    ("--chunks-table", "chunks_table"),
    ("--chunks-query", "chunks_query"),
    ("--doc-id-key", "doc_id_key"),
    ("--doc-version-key", "doc_version_key"),
    ("--offset-key", "offset_key"),
    ("--chunker-key", "chunker_key"),
)


def add_chunk_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a chunk store in Postgres (docs/postgres.md)."""
    group = parser.add_argument_group(
        "a chunk store in Postgres (--chunks postgresql://USER@HOST:PORT/DB; the password from "
        "PGPASSWORD, ~/.pgpass or PGPASSFILE, never printed; PG* variables and a service file "
        "as libpq reads them)"
    )
    group.add_argument(
        "--chunks-layout",
        choices=[name for name in LAYOUTS if name != "query"],
        help="the tables a library made: langchain (PGVector's langchain_pg_embedding, "
        "--collection), langchain-v2 (PGVectorStore, --chunks-table), llamaindex "
        "(PGVectorStore's data_<name>, --chunks-table; default data_llamaindex)",
    )
    group.add_argument(
        "--collection",
        metavar="NAME",
        help="the LangChain collection whose chunks to read (default: langchain)",
    )
    group.add_argument("--chunks-table", metavar="[SCHEMA.]TABLE", help="the layout's table")
    group.add_argument(
        "--chunks-query",
        metavar="SQL",
        help="any other schema: a query returning columns named like the chunk record "
        "(chunk_id, doc_id, doc_version, text, doc_offset, chunker, deleted), or one JSON "
        "column holding it; run read-only",
    )
    group.add_argument(
        "--doc-id-key",
        metavar="KEY",
        help="metadata key of the document id (default: source for LangChain, ref_doc_id for "
        "LlamaIndex)",
    )
    group.add_argument(
        "--doc-version-key",
        metavar="KEY",
        help="metadata key of the document's version (default: doc_version; neither library "
        "writes one, and a row without it is a bad chunk record)",
    )
    group.add_argument(
        "--offset-key",
        metavar="KEY",
        help="metadata key of the chunk's offset in its document (default: start_index for "
        "LangChain, start_char_idx of _node_content for LlamaIndex)",
    )
    group.add_argument(
        "--chunker-key", metavar="KEY", help="metadata key of the chunker (default: chunker)"
    )


def refuse_chunk_store(args: argparse.Namespace, why: str) -> None:
    """A UsageError when ``--chunks`` or ``--citations`` names a database or one of their
    options is given: for an engine that reads files only (``why`` says which)."""
    options = (*_STORE_OPTIONS, *_CITATION_OPTIONS)
    given = [option for option, name in options if getattr(args, name, None) is not None]
    named = [value for value in (args.chunks, args.citations) if value]
    if any(is_postgres_uri(value) for value in named) or given:
        raise UsageError(
            f"{why} reads JSON Lines files: sweep from Postgres with the local engine (the default)"
        )


def chunk_source(args: argparse.Namespace) -> ChunkSource:
    """The source ``--chunks`` names, with its layout checked (a UsageError says what is
    wrong before anything is read)."""
    chunks: str = args.chunks
    given = [option for option, name in _STORE_OPTIONS if getattr(args, name, None) is not None]
    if not is_postgres_uri(chunks):
        if given:
            raise UsageError(
                f"{given[0]} is for a chunk store in Postgres: --chunks postgresql://..."
            )
        return JsonLines(chunks)
    if args.chunks_layout is None and args.chunks_query is None:
        raise UsageError(
            f"--chunks {redacted_uri(chunks)} needs --chunks-layout "
            f"({', '.join(name for name in LAYOUTS if name != 'query')}) or --chunks-query SQL"
        )
    try:
        layout = ChunkLayout.of(
            "query" if args.chunks_layout is None else args.chunks_layout,
            collection=args.collection,
            table=args.chunks_table,
            query=args.chunks_query,
            doc_id_key=args.doc_id_key,
            doc_version_key=args.doc_version_key,
            offset_key=args.offset_key,
            chunker_key=args.chunker_key,
        )
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    try:
        from exporter.postgres import PostgresChunks  # noqa: PLC0415 - the optional extra
    except ImportError as exc:
        raise UsageError(
            "--chunks postgresql://... needs psycopg: pip install "
            f"'citation-drift-exporter[postgres]' ({exc})"
        ) from None
    return PostgresChunks(chunks, layout)


def add_citation_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of citations kept in Postgres (docs/postgres.md)."""
    group = parser.add_argument_group(
        "citations in Postgres (--citations postgresql://...; read-only, one snapshot)"
    )
    group.add_argument(
        "--citations-table",
        metavar="[SCHEMA.]TABLE",
        help="a table whose columns are named like the citation record's fields (chunk_span an "
        "integer array, or chunk_start and chunk_end), read in its primary key's order",
    )
    group.add_argument(
        "--citations-column",
        metavar="FIELD=COLUMN",
        action="append",
        help="the table's COLUMN holds the record's FIELD (repeat for each; record=COLUMN: one "
        "JSON column holding the whole citation or answer event)",
    )
    group.add_argument(
        "--citations-query",
        metavar="SQL",
        help="any other schema: a query returning columns named like the record's fields, or "
        "one JSON column holding a citation or an answer event",
    )
    group.add_argument(
        "--citations-mapping",
        metavar="FILE",
        type=Path,
        help="a TOML file declaring the table and its columns once, for every command that "
        'reads or writes the citations: table = "[schema.]table" (or query = "SQL") and a '
        '[columns] table of FIELD = "column"; instead of the three options above',
    )


def citation_mapping(path: Path) -> CitationTable:
    """The citations table a mapping file declares; UsageError naming the file and why."""
    try:
        values = load_toml(read_small_file(path, MAX_MAPPING_BYTES))
    except UnusableFile as exc:
        raise UsageError(f"--citations-mapping {path}: {exc}") from None
    try:
        return CitationTable.from_mapping(values, str(path))
    except SettingsError as exc:
        raise UsageError(f"--citations-mapping {exc}") from None


def citation_source(args: argparse.Namespace) -> CitationSource:
    """The source ``--citations`` names, its options checked before anything is read."""
    citations: str = args.citations
    given = [option for option, name in _CITATION_OPTIONS if getattr(args, name, None) is not None]
    if not is_postgres_uri(citations):
        if given:
            raise UsageError(
                f"{given[0]} is for citations in Postgres: --citations postgresql://..."
            )
        return JsonLines(citations)
    try:
        if args.citations_mapping is not None:
            others = [option for option in given if option != "--citations-mapping"]
            if others:
                raise SettingsError(
                    f"{others[0]} or --citations-mapping: the mapping file declares the table"
                )
            mapping = citation_mapping(args.citations_mapping)
        else:
            mapping = CitationTable.of(
                table=args.citations_table,
                query=args.citations_query,
                columns=args.citations_column,
            )
    except SettingsError as exc:
        raise UsageError(str(exc).replace("postgresql://...", redacted_uri(citations))) from None
    try:
        from exporter.postgres import PostgresCitations  # noqa: PLC0415 - the optional extra
    except ImportError as exc:
        raise UsageError(
            "--citations postgresql://... needs psycopg: pip install "
            f"'citation-drift-exporter[postgres]' ({exc})"
        ) from None
    return PostgresCitations(citations, mapping)
