"""PostgreSQL -> Debezium -> Kafka -> the exporter, on real components, with no code of ours in
between: Debian's PostgreSQL (scripts/postgres-local, logical replication), Debezium's
Postgres connector in a Kafka Connect standalone worker (scripts/debezium-local, jars from
Maven Central), the broker of scripts/kafka-local, and ``citation-exporter run`` reading the
connector's topic as its chunk topic.

Rows that existed before the connector started load the store (the snapshot); an insert, an
update and a delete in Postgres are followed by the inline checks; a row that cannot be a
chunk is a dead letter naming what it lacks; a sweep of the same table afterwards agrees.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import psycopg
import pytest
from kafka_support import (
    ExporterProcess,
    consume,
    consume_values,
    create_topics,
    free_port,
    produce,
    total,
)

from exporter.cli import main

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parent.parent
DEBEZIUM_LOCAL = REPO / "scripts" / "debezium-local"
POLICY = "Refunds are issued within 30 days of purchase."


def _password(uri: str) -> str:
    """The role's password, as libpq would find it: PGPASSWORD, else the password file."""
    if os.environ.get("PGPASSWORD"):
        return os.environ["PGPASSWORD"]
    parts = urlsplit(uri)
    for line in Path(os.environ["PGPASSFILE"]).read_text().splitlines():
        host, port, _, user, password = line.split(":", 4)
        if host == parts.hostname and port == str(parts.port) and user == parts.username:
            return password
    raise AssertionError("no password for the test role")


def _documented_connector() -> dict[str, str]:
    """The connector configuration docs/postgres.md gives: the ``properties`` block of its
    Debezium section, run here as written but for what names this test's own database."""
    page = (REPO / "docs" / "postgres.md").read_text()
    section = page.split("## Chunk changes from Debezium", 1)[1]
    block = section.split("```properties\n", 1)[1].split("```", 1)[0]
    return dict(line.split("=", 1) for line in block.splitlines() if line.strip())


def _connector_properties(path: Path, uri: str, tag: str) -> Path:
    parts = urlsplit(uri)
    properties = {
        **_documented_connector(),
        "name": f"chunks-{tag}",
        "database.hostname": str(parts.hostname),
        "database.port": str(parts.port),
        "database.user": str(parts.username),
        "database.password": _password(uri),
        "database.dbname": parts.path.lstrip("/"),
        "topic.prefix": f"cdc{tag}",
        "slot.name": f"slot_{tag}",
        "publication.name": f"pub_{tag}",
    }
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path


@pytest.fixture
def connector(
    bootstrap: str, database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str]]:
    """A chunks table with two rows, and a running connector whose snapshot holds them: the
    database's URI and the topic of the table's changes."""
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE chunks (chunk_id text PRIMARY KEY, doc_id text, doc_version text, "
            "text text, doc_offset integer, chunker text)"
        )
        connection.execute(
            "INSERT INTO chunks VALUES ('refunds#0', 'refunds', 'v1', %s, 0, 'split-1'), "
            "('shipping#0', 'shipping', 'v1', 'Orders ship within two days.', 0, 'split-1')",
            (POLICY,),
        )
    tag = uuid.uuid4().hex[:10]
    schemas = "true" if getattr(request, "param", False) else "false"
    env = {
        **os.environ,
        "DEBEZIUM_STATE": str(tmp_path / "debezium"),
        "KAFKA_BOOTSTRAP": bootstrap,
        "CONNECT_PORT": str(free_port()),
        "CONNECT_SCHEMAS": schemas,
    }
    properties = _connector_properties(tmp_path / "connector.properties", database, tag)
    subprocess.run([str(DEBEZIUM_LOCAL), "start", str(properties)], env=env, check=True)
    try:
        yield database, f"cdc{tag}.public.chunks"
    finally:
        subprocess.run([str(DEBEZIUM_LOCAL), "stop"], env=env, check=False)
        log = tmp_path / "debezium" / "logs" / "connect.log"
        errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
        assert not errors, errors[:3]
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("SELECT pg_drop_replication_slot(%s)", (f"slot_{tag}",))


def _answer(
    answer_id: str, chunk_id: str, doc_id: str, quote: str, start: int
) -> tuple[bytes, bytes]:
    citation = {
        "citation_id": f"{answer_id}-c", "doc_id": doc_id, "doc_version": "v1",
        "chunk_id": chunk_id, "chunk_span": [start, start + len(quote)], "quote": quote,
    }  # fmt: skip
    return answer_id.encode(), orjson.dumps({"answer_id": answer_id, "citations": [citation]})


def _verdict(bootstrap: str, topic: str, answer_id: str) -> dict[str, Any]:
    found = consume_values(bootstrap, topic, 1, lambda v: v.get("answer_id") == answer_id, 60.0)
    assert found, f"no verdict for {answer_id}"
    return found[-1]


@pytest.mark.parametrize(
    "connector", [False, True], ids=["schemas-off", "schemas-on"], indirect=True
)
def test_chunk_changes_stream_from_postgres_to_the_inline_checks(
    bootstrap: str, connector: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database, changes = connector
    assert len(consume(bootstrap, changes, 2, 60.0)) >= 2  # the snapshot's two rows
    topics = dataclasses.replace(create_topics(bootstrap), chunks=changes)
    exporter = ExporterProcess(
        bootstrap, topics, tmp_path / "exporter.log", publish_all_verdicts="true"
    )
    try:
        exporter.wait_ready()
        assert total(exporter.scrape(), "citation_store_chunks") == 2
        produce(bootstrap, topics.answers, [_answer("a1", "refunds#0", "refunds", POLICY, 0)])
        assert _verdict(bootstrap, topics.verdicts, "a1")["status"] == "ok"

        # a re-extraction puts a heading before the text: the update moves the span
        with psycopg.connect(database) as connection:
            connection.execute(
                "UPDATE chunks SET text = '# Refunds\n' || text WHERE chunk_id = 'refunds#0'"
            )
            connection.execute("DELETE FROM chunks WHERE chunk_id = 'shipping#0'")
            # a row no chunk can be: no version (a dead letter naming it)
            connection.execute(
                "INSERT INTO chunks (chunk_id, doc_id, text) VALUES ('bad#0', 'bad', 'x')"
            )
        # the update, the delete and its tombstone, the bad insert
        exporter.wait_for("citation_exporter_events_total", 6, topic=changes)
        assert total(exporter.scrape(), "citation_store_chunks") == 1
        produce(
            bootstrap,
            topics.answers,
            [
                _answer("a2", "refunds#0", "refunds", POLICY, 0),
                _answer("a3", "shipping#0", "shipping", "Orders ship within two days.", 0),
            ],
        )
        moved = _verdict(bootstrap, topics.verdicts, "a2")
        assert moved["status"] == "drift_repaired"
        assert moved["repair"]["shift"] == len("# Refunds\n")
        assert _verdict(bootstrap, topics.verdicts, "a3")["status"] == "document_missing"
        (letter,) = consume(bootstrap, topics.dlq, 1, 30.0)
        headers = dict(letter.headers)
        assert headers["source_topic"].decode() == changes
        assert "missing required field 'doc_version'" in headers["error"].decode()
        assert (
            total(exporter.scrape(), "citation_exporter_invalid_events_total", topic=changes) == 1
        )
    finally:
        assert exporter.stop() == 0

    # a sweep of the same table now agrees with the inline checks
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(
        b"".join(
            value + b"\n"
            for _, value in (
                _answer("a2", "refunds#0", "refunds", POLICY, 0),
                _answer("a3", "shipping#0", "shipping", "Orders ship within two days.", 0),
            )
        )
    )
    out = tmp_path / "swept.jsonl"
    code = main(
        ["sweep", "--chunks", database, "--chunks-query", "SELECT * FROM chunks ORDER BY chunk_id",
         "--citations", str(answers), "--out", str(out), "--no-progress"]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 1
    swept = {v["answer_id"]: v for v in map(json.loads, out.read_text().splitlines())}
    assert swept["a2"]["status"] == "drift_repaired"
    assert swept["a2"]["repair"]["shift"] == len("# Refunds\n")
    assert swept["a3"]["status"] == "document_missing"
