"""A real PostgreSQL server for the integration tests, and the tables RAG libraries make.

The server is ``$CITATION_POSTGRES_URI`` when set (a role that may create databases), else one
started by ``scripts/postgres-local`` (Debian's PostgreSQL, in a throwaway data directory).
Each test gets a database of its own.

The tables are the libraries' own DDL (read from their source: langchain-postgres 0.0.x
``vectorstores.py``, llama-index-vector-stores-postgres 0.9 ``base.py``, as
``../shared/notes/citation-sources.md`` records it) with one change: pgvector's extension is
not installable on these machines, so the ``vector`` column is ``real[]``. Nothing a sweep
reads is in that column. The libraries cannot fill these tables themselves here (their
inserts send the embedding as a pgvector literal, which ``real[]`` refuses), so the tests
insert the rows the libraries would write: LangChain's metadata as JSONB with ``source`` and
``start_index``; LlamaIndex's as JSON with ``_node_content`` a JSON string of the node (its
``text`` emptied) and ``ref_doc_id``, ``doc_id`` and ``document_id``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

REPO = Path(__file__).resolve().parent.parent
POSTGRES_LOCAL = REPO / "scripts" / "postgres-local"
STATE = Path(os.environ.get("PG_STATE", "/tmp/citation-drift-exporter-postgres"))

LANGCHAIN_DDL = """
CREATE TABLE langchain_pg_collection (uuid UUID NOT NULL, name VARCHAR NOT NULL, cmetadata JSON,
  PRIMARY KEY (uuid), UNIQUE (name));
CREATE TABLE langchain_pg_embedding (id VARCHAR NOT NULL, collection_id UUID,
  embedding real[], document VARCHAR, cmetadata JSONB, PRIMARY KEY (id),
  FOREIGN KEY (collection_id) REFERENCES langchain_pg_collection (uuid) ON DELETE CASCADE);
CREATE INDEX ix_cmetadata_gin ON langchain_pg_embedding USING gin (cmetadata jsonb_path_ops);
"""

LANGCHAIN_V2_DDL = """
CREATE TABLE {table} (langchain_id UUID PRIMARY KEY, content TEXT NOT NULL,
  embedding real[] NOT NULL, langchain_metadata JSON);
"""

LLAMAINDEX_DDL = """
CREATE TABLE public.{table} (id BIGSERIAL NOT NULL, text VARCHAR NOT NULL, metadata_ {json},
  node_id VARCHAR, embedding real[], PRIMARY KEY (id));
CREATE INDEX {table}_idx_1 ON public.{table} USING btree ((metadata_ ->> 'ref_doc_id'));
"""


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a URI of a running server whose role may create databases (the password from
    PGPASSFILE)."""
    given = os.environ.get("CITATION_POSTGRES_URI")
    if given:
        yield given
        return
    status = subprocess.run([str(POSTGRES_LOCAL), "status"], capture_output=True, check=False)
    started_here = status.returncode != 0
    if started_here:
        subprocess.run([str(POSTGRES_LOCAL), "start"], check=True, stdout=subprocess.DEVNULL)
    os.environ["PGPASSFILE"] = str(STATE / "pgpass")
    uri = subprocess.run(
        [str(POSTGRES_LOCAL), "uri"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield uri
    finally:
        if started_here:
            subprocess.run([str(POSTGRES_LOCAL), "stop"], check=False)


def with_database(uri: str, name: str) -> str:
    parts = urlsplit(uri)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


@contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """A database of its own for one test, dropped afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield with_database(server, name)
    finally:
        _drop(server, name)


def _drop(server: str, name: str) -> None:
    """Drop a test's database; an autovacuum worker busy in it (the server's own role, which
    FORCE may not end) is waited for, a second at a time, at most a minute."""
    for _ in range(60):
        try:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            return
        except psycopg.errors.InsufficientPrivilege:
            time.sleep(1.0)
    raise AssertionError(f"database {name} could not be dropped in a minute")


def chunk_records(path: Path) -> list[dict[str, Any]]:
    """The live chunks of a JSONL store (deletions applied), as the rows of a table hold them:
    the fields every layout can carry."""
    live: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("deleted"):
            live.pop(record["chunk_id"], None)
            continue
        live[record["chunk_id"]] = {
            key: record[key]
            for key in ("chunk_id", "doc_id", "doc_version", "text", "doc_offset", "chunker")
            if key in record
        }
    return list(live.values())


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def fill_langchain(
    uri: str, records: Sequence[dict[str, Any]], collection: str = "langchain"
) -> None:
    """LangChain PGVector's tables holding ``records`` in ``collection``, as its
    ``add_documents`` writes them (``id`` the Document's id; metadata as JSONB)."""
    with psycopg.connect(uri) as connection:
        connection.execute(LANGCHAIN_DDL)
        collection_id = uuid.uuid4()
        connection.execute(
            "INSERT INTO langchain_pg_collection (uuid, name, cmetadata) VALUES (%s, %s, %s)",
            (collection_id, collection, json.dumps(None)),
        )
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO langchain_pg_embedding (id, collection_id, embedding, document, "
                "cmetadata) VALUES (%s, %s, %s, %s, %s)",
                [
                    (
                        record["chunk_id"],
                        collection_id,
                        [0.1, 0.2, 0.3],
                        record["text"],
                        json.dumps(_langchain_metadata(record)),
                    )
                    for record in records
                ],
            )


def _langchain_metadata(record: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"source": record["doc_id"]}
    if "doc_version" in record:
        metadata["doc_version"] = record["doc_version"]
    if "doc_offset" in record:
        metadata["start_index"] = record["doc_offset"]
    if "chunker" in record:
        metadata["chunker"] = record["chunker"]
    return metadata


def fill_llamaindex(
    uri: str, records: Sequence[dict[str, Any]], table: str = "data_llamaindex", jsonb: bool = False
) -> None:
    """LlamaIndex PGVectorStore's ``data_<name>`` table holding ``records``, as its
    ``add`` writes them (``metadata_`` by ``node_to_metadata_dict``)."""
    with psycopg.connect(uri) as connection:
        connection.execute(LLAMAINDEX_DDL.format(table=table, json="JSONB" if jsonb else "JSON"))
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO public.{table} (text, metadata_, node_id, embedding) "
                "VALUES (%s, %s, %s, %s)",
                [
                    (
                        record["text"],
                        json.dumps(_llamaindex_metadata(record)),
                        record["chunk_id"],
                        [0.5],
                    )
                    for record in records
                ],
            )


def _llamaindex_metadata(record: dict[str, Any]) -> dict[str, Any]:
    user = {"doc_version": record["doc_version"]}
    if "chunker" in record:
        user["chunker"] = record["chunker"]
    start = record.get("doc_offset")
    node = {
        "id_": record["chunk_id"],
        "embedding": None,
        "metadata": user,
        "excluded_embed_metadata_keys": [],
        "excluded_llm_metadata_keys": [],
        "relationships": {
            "1": {"node_id": record["doc_id"], "node_type": "4", "metadata": {}, "hash": "h",
                  "class_name": "RelatedNodeInfo"},
        },
        "text": "",
        "mimetype": "text/plain",
        "start_char_idx": start,
        "end_char_idx": None if start is None else start + len(record["text"]),
        "text_template": "{metadata_str}\n\n{content}",
        "metadata_template": "{key}: {value}",
        "metadata_seperator": "\n",
        "class_name": "TextNode",
    }  # fmt: skip
    return {
        **user,
        "_node_content": json.dumps(node),
        "_node_type": "TextNode",
        "document_id": record["doc_id"],
        "doc_id": record["doc_id"],
        "ref_doc_id": record["doc_id"],
    }
