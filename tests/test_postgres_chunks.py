"""Sweeps of a chunk store in Postgres, on a real server (scripts/postgres-local).

The tables are the ones LangChain and LlamaIndex create (tests/postgres_support.py says how
they differ here: the vector column is real[]). Whatever the layout, the same rows give the
same verdicts, byte for byte, as the JSON Lines export of them; every failure is one line,
exit 2, naming the database without its password.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_support import (
    chunk_records,
    fill_langchain,
    fill_llamaindex,
    write_jsonl,
)

from exporter.cli import main
from exporter.config.postgres import ChunkLayout, redacted_uri
from exporter.errors import InputError
from exporter.file_sweep import load_store
from exporter.pipeline.summary import SweepSummary
from exporter.postgres import PostgresChunks
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

NOW = "2026-06-01T00:00:00Z"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A store after a re-index (re-chunked, re-extracted, edited, deleted documents) and the
    citations of answers written before it, with the store's rows as a JSONL export."""
    folder = tmp_path_factory.mktemp("scenario")
    paths = write_scenario(build_scenario(ScenarioConfig(seed=25, answers=600)), folder)
    rows = chunk_records(paths["chunks"])
    return {**paths, "rows": write_jsonl(folder / "rows.jsonl", rows)}


def _rows(scenario: dict[str, Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in scenario["rows"].read_text().splitlines()]


def _exit(argv: list[str]) -> int:
    """The exit status of ``citation-exporter ARGV``: usage errors exit by SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _sweep(
    chunks: str, citations: Path, out: Path, *extra: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], str]:
    code = main(
        [
            "sweep",
            "--chunks",
            chunks,
            "--citations",
            str(citations),
            "--out",
            str(out),
            "--no-progress",
            "--format",
            "json",
            "--now",
            NOW,
            *extra,
        ]
    )
    captured = capsys.readouterr()
    summary = json.loads(captured.out) if captured.out.strip() else {}
    return code, summary, captured.err


def _comparable(value: Any) -> Any:
    """A summary without what differs between any two runs or sources: timings, rates, when
    the store was read, the files written."""
    if isinstance(value, dict):
        return {
            key: _comparable(item)
            for key, item in value.items()
            if not key.endswith(("seconds", "per_second", "_at")) and key != "wrote"
        }
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("layout", ["langchain", "llamaindex", "llamaindex-jsonb", "query"])
def test_verdicts_from_postgres_equal_those_from_the_jsonl_export(
    *,
    database: str,
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    layout: str,
    jobs: str,
) -> None:
    rows = _rows(scenario)
    if layout == "langchain":
        fill_langchain(database, rows, collection="support-docs")
        options = ["--chunks-layout", "langchain", "--collection", "support-docs"]
    elif layout.startswith("llamaindex"):
        fill_llamaindex(database, rows, table="data_support", jsonb=layout.endswith("jsonb"))
        options = ["--chunks-layout", "llamaindex", "--chunks-table", "data_support"]
    else:
        with psycopg.connect(database) as connection:
            connection.execute(
                "CREATE TABLE kb_chunks (chunk_id text PRIMARY KEY, doc_id text, doc_version "
                "text, body text, doc_offset integer, chunker text, seq serial)"
            )
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO kb_chunks (chunk_id, doc_id, doc_version, body, doc_offset, "
                    "chunker) VALUES (%(chunk_id)s, %(doc_id)s, %(doc_version)s, %(text)s, "
                    "%(doc_offset)s, %(chunker)s)",
                    [{"doc_offset": None, "chunker": None, **row} for row in rows],
                )
        options = [
            "--chunks-query",
            "SELECT chunk_id, doc_id, doc_version, body AS text, doc_offset, chunker "
            "FROM kb_chunks ORDER BY seq",
        ]
    from_file, from_database = tmp_path / "file.jsonl", tmp_path / "db.jsonl"
    file_code, file_summary, _ = _sweep(
        str(scenario["rows"]), scenario["citations"], from_file, "--jobs", jobs, capsys=capsys
    )
    code, summary, err = _sweep(
        database, scenario["citations"], from_database, "--jobs", jobs, *options, capsys=capsys
    )
    assert from_database.read_bytes() == from_file.read_bytes(), err
    assert code == file_code
    assert _comparable(summary) == _comparable(file_summary)


def test_the_store_is_one_snapshot_while_ingest_goes_on(database: str) -> None:
    """Rows written, changed and deleted while a read is under way are not seen by it: one
    REPEATABLE READ transaction, however many fetches the read takes."""
    records = [
        {"chunk_id": f"c{n:05}", "doc_id": f"d{n // 10}", "doc_version": "v1", "text": f"t{n}"}
        for n in range(5_000)
    ]
    fill_langchain(database, records)
    source = PostgresChunks(database, ChunkLayout.of("langchain"))
    read = source.records(1 << 20)
    seen = [next(read)]
    writer = threading.Thread(target=_churn, args=(database,))
    writer.start()
    writer.join()
    seen += list(read)
    assert source.complete
    assert len(seen) == 5_000
    texts = {json.loads(record)["text"] for _, record in seen if isinstance(record, bytes)}
    assert texts == {f"t{n}" for n in range(5_000)}


def _churn(uri: str) -> None:
    with psycopg.connect(uri) as connection:
        connection.execute("DELETE FROM langchain_pg_embedding WHERE id > 'c04000'")
        connection.execute("UPDATE langchain_pg_embedding SET document = 'changed'")


def test_llamaindex_offsets_come_from_node_content_and_none_is_no_document(
    database: str, tmp_path: Path
) -> None:
    fill_llamaindex(
        database,
        [
            {
                "chunk_id": "n1",
                "doc_id": "d1",
                "doc_version": "v1",
                "text": "alpha",
                "doc_offset": 7,
            },
            {"chunk_id": "n2", "doc_id": "d1", "doc_version": "v1", "text": "beta"},
        ],
    )
    with psycopg.connect(database) as connection:
        connection.execute(
            "INSERT INTO data_llamaindex (text, metadata_, node_id) VALUES ('orphan', "
            """'{"ref_doc_id": "None", "doc_id": "None", "doc_version": "v1"}', 'n3')"""
        )
    source = PostgresChunks(database, ChunkLayout.of("llamaindex"))
    records = []
    wheres = []
    for number, record in source.records(1 << 20):
        assert isinstance(record, bytes)
        records.append(json.loads(record))
        wheres.append(source.where(number))
    assert records[0] == {
        "chunk_id": "n1",
        "doc_id": "d1",
        "doc_version": "v1",
        "text": "alpha",
        "doc_offset": 7,
    }
    assert "doc_offset" not in records[1]
    assert "doc_id" not in records[2]
    assert wheres[2].endswith(
        "data_llamaindex row 3 (node_id='n3') (its metadata_ has no 'ref_doc_id')"
    )


def test_rows_that_are_no_chunk_are_counted_by_key_and_the_rest_loaded(database: str) -> None:
    good = [
        {
            "chunk_id": f"c{n}",
            "doc_id": "doc-a",
            "doc_version": "v1",
            "text": "text",
            "doc_offset": 4 * n,
        }
        for n in range(3)
    ]
    broken = [
        {"chunk_id": "no-version", "doc_id": "doc-x", "text": "text"},
        {
            "chunk_id": "bad-offset",
            "doc_id": "doc-x",
            "doc_version": "v1",
            "text": "t",
            "doc_offset": "x",
        },
    ]
    fill_langchain(database, good + broken)
    with psycopg.connect(database) as connection:
        # a splitter that could not find its chunk writes start_index -1: no offset, no error
        connection.execute(
            "UPDATE langchain_pg_embedding SET cmetadata = jsonb_set(cmetadata, "
            "'{start_index}', '-1') WHERE id = 'c0'"
        )
    summary = SweepSummary()
    store = load_store(PostgresChunks(database, ChunkLayout.of("langchain")), summary)
    assert store.chunk_count == 3
    assert summary.invalid_chunk_records == 2
    assert any(
        "(id='no-version') (its cmetadata has no 'doc_version')" in e for e in summary.errors
    )
    assert any("(id='bad-offset')" in e and "doc_offset" in e for e in summary.errors)
    assert all(
        e.startswith(redacted_uri(database) + " langchain_pg_embedding") for e in summary.errors
    )


@pytest.mark.parametrize(
    ("prepare", "options", "expected"),
    [
        (None, ["--chunks-layout", "langchain"], "no table langchain_pg_embedding"),
        ("langchain", ["--chunks-layout", "langchain", "--collection", "docs"],
         "no collection 'docs' in langchain_pg_collection (there: 'langchain'; --collection NAME)"),
        (None, ["--chunks-layout", "llamaindex"], "no table data_llamaindex"),
        ("CREATE TABLE data_llamaindex (id serial, body text)", ["--chunks-layout", "llamaindex"],
         "column t.node_id does not exist: not a llamaindex layout's table"),
        (None, ["--chunks-query", "SELEC chunk_id FROM x"], 'syntax error at or near "SELEC"'),
        ("CREATE SEQUENCE s", ["--chunks-query", "SELECT nextval('s')::text AS chunk_id"],
         "cannot execute nextval() in a read-only transaction"),
    ],
)  # fmt: skip
def test_a_store_that_cannot_be_read_is_one_line_and_exit_2(
    *,
    database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    prepare: str | None,
    options: list[str],
    expected: str,
) -> None:
    if prepare == "langchain":
        fill_langchain(database, [])
    elif prepare:
        with psycopg.connect(database) as connection:
            connection.execute(prepare)
    citations = write_jsonl(tmp_path / "c.jsonl", [])
    code = _exit(
        ["sweep", "--chunks", database, "--citations", str(citations), "--no-progress", *options]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert expected in err
    assert redacted_uri(database) in err


def test_connection_failures_name_the_host_and_why_never_the_password(
    postgres: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    citations = write_jsonl(tmp_path / "c.jsonl", [])
    secret = "s3cret-pa55word"
    for uri, why in (
        (f"postgresql://exporter:{secret}@127.0.0.1:1/citations", "Connection refused"),
        (postgres.replace("exporter@", f"exporter:{secret}@"), "password authentication failed"),
        (postgres + f"?password={secret}&sslmode=disable", "password authentication failed"),
    ):
        code = _exit(
            ["sweep", "--chunks", uri, "--citations", str(citations), "--no-progress",
             "--chunks-layout", "langchain"]
        )  # fmt: skip
        captured = capsys.readouterr()
        assert code == 2
        assert why in captured.err
        assert "127.0.0.1" in captured.err
        assert secret not in captured.err + captured.out
        assert len(captured.err.strip().splitlines()) == 1


def test_the_password_is_in_no_output(
    database: str, scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill_langchain(database, _rows(scenario))
    password = Path(os.environ["PGPASSFILE"]).read_text().strip().rsplit(":", 1)[1]
    uri = database.replace("exporter@", f"exporter:{password}@")
    report = tmp_path / "report.html"
    code, summary, err = _sweep(
        uri, scenario["citations"], tmp_path / "out.jsonl", "--chunks-layout", "langchain",
        "--report", str(report), capsys=capsys,
    )  # fmt: skip
    assert code in (0, 1), err
    written = (tmp_path / "out.jsonl").read_text() + report.read_text() + json.dumps(summary) + err
    assert password not in written
    assert redacted_uri(uri) in report.read_text()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], "needs --chunks-layout (langchain, langchain-v2, llamaindex) or --chunks-query SQL"),
        (["--chunks-layout", "langchain-v2"], "langchain-v2 needs --chunks-table"),
        (["--chunks-layout", "llamaindex", "--collection", "x"], "--collection is for"),
        (["--chunks-layout", "llamaindex", "--chunks-table", "a;drop"], "expected a table name"),
        (["--chunks-query", "SELECT 1", "--doc-id-key", "x"], "a query names its own columns"),
        (["--chunks-layout", "langchain", "--doc-version-key", ""], "expected a metadata key"),
    ],
)
def test_layout_options_that_cannot_work_are_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], expected: str
) -> None:
    citations = write_jsonl(tmp_path / "c.jsonl", [])
    uri = "postgresql://u:hidden@127.0.0.1:1/db"
    code = _exit(["sweep", "--chunks", uri, "--citations", str(citations), *options])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err
    assert "hidden" not in err


def test_layout_options_without_a_database_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_jsonl(tmp_path / "c.jsonl", [])
    code = _exit(["sweep", "--chunks", str(files), "--citations", str(files), "--collection", "x"])
    assert code == 2
    assert "--collection is for a chunk store in Postgres" in capsys.readouterr().err


def test_an_input_error_names_the_source() -> None:
    source = PostgresChunks(
        "postgresql://a:b@127.0.0.1:1/x?connect_timeout=2", ChunkLayout.of("langchain")
    )
    with pytest.raises(
        InputError, match=r"^postgresql://a@127.0.0.1:1/x\?connect_timeout=2: cannot connect"
    ):
        list(source.records(100))
    assert not source.complete


@pytest.mark.parametrize(
    "chunks", ["postgresql://u:hidden@127.0.0.1:1/db", "postgres://127.0.0.1/db", "chunks.jsonl"]
)
def test_the_spark_engine_refuses_a_store_in_postgres(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chunks: str
) -> None:
    citations = write_jsonl(tmp_path / "c.jsonl", [])
    extra = ["--chunks-layout", "langchain"] if chunks.endswith(".jsonl") else []
    code = _exit(
        ["sweep", "--engine", "spark", "--chunks", chunks, "--citations", str(citations), *extra]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--engine spark reads JSON Lines files" in err
    assert "hidden" not in err


def test_a_bad_row_of_a_query_is_counted_by_its_chunk_id(database: str) -> None:
    """Found by the Debezium test: a query's bad row made where() fail (an internal error)."""
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE chunks AS SELECT 'bad#0'::text AS chunk_id, 'bad'::text AS doc_id, "
            "'x'::text AS text"
        )
    summary = SweepSummary()
    query = ChunkLayout.of("query", query="SELECT * FROM chunks")
    load_store(PostgresChunks(database, query), summary)
    assert summary.invalid_chunk_records == 1
    (error,) = summary.errors
    assert "--chunks-query row 1 (chunk_id='bad#0'): missing required field 'doc_version'" in error
