"""Sweeps of citations kept in an application's table in Postgres, on a real server.

The same citations give the same verdicts, byte for byte, whether read from a table (columns
named like the record, renamed ones, a span in two columns, one JSON column of answer events)
or a query, or from the JSON Lines file they came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_support import write_jsonl

from exporter.cli import main
from exporter.config.postgres import redacted_uri
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

NOW = "2026-06-01T00:00:00Z"
FLAT_FIELDS = (
    "citation_id", "answer_id", "doc_id", "doc_version", "chunk_id", "chunk_span", "quote",
    "prefix", "suffix", "emitted_at", "topic", "sentence_index",
)  # fmt: skip


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A re-indexed store, its answers (answer events and bare citations, mixed), and the
    same citations flattened into one record each, as an application's table holds them."""
    folder = tmp_path_factory.mktemp("scenario")
    paths = write_scenario(build_scenario(ScenarioConfig(seed=26, answers=500)), folder)
    flat: list[dict[str, Any]] = []
    for line in paths["citations"].read_text().splitlines():
        record = json.loads(line)
        for citation in record.get("citations", [record]):
            merged = {
                **{k: record.get(k) for k in ("answer_id", "topic", "emitted_at")},
                **citation,
            }
            flat.append({k: merged[k] for k in FLAT_FIELDS if merged.get(k) is not None})
    return {**paths, "flat": write_jsonl(folder / "flat.jsonl", flat)}


def _exit(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _sweep(
    chunks: Path, citations: str, out: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    code = _exit(
        [
            "sweep", "--chunks", str(chunks), "--citations", citations, "--out", str(out),
            "--no-progress", "--now", NOW, *extra,
        ]
    )  # fmt: skip
    return code, capsys.readouterr().err


def _fill_flat(uri: str, path: Path, *, split_span: bool, renamed: bool) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    quote = "cited_text" if renamed else "quote"
    span = "span_start integer, span_end integer" if split_span else "chunk_span integer[]"
    with psycopg.connect(uri) as connection:
        connection.execute(
            f"CREATE TABLE answer_citations (seq serial PRIMARY KEY, citation_id text, answer_id "
            f"text, doc_id text, doc_version text, chunk_id text, {span}, {quote} text, prefix "
            "text, suffix text, emitted_at text, topic text, sentence_index integer)"
        )
        columns = [c for c in FLAT_FIELDS if c != "chunk_span"]
        span_columns = ["span_start", "span_end"] if split_span else ["chunk_span"]
        names = [quote if c == "quote" else c for c in columns] + span_columns
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO answer_citations ({', '.join(names)}) VALUES "
                f"({', '.join(['%s'] * len(names))})",
                [
                    [row.get(c) for c in columns]
                    + (list(row["chunk_span"]) if split_span else [row["chunk_span"]])
                    for row in rows
                ],
            )


@pytest.mark.parametrize(
    ("shape", "options"),
    [
        ("columns", ["--citations-table", "answer_citations"]),
        (
            "renamed, span in two columns",
            [
                "--citations-table", "public.answer_citations",
                "--citations-column", "quote=cited_text",
                "--citations-column", "chunk_start=span_start",
                "--citations-column", "chunk_end=span_end",
            ],
        ),
        (
            "query",
            [
                "--citations-query",
                "SELECT citation_id, answer_id, doc_id, doc_version, chunk_id, chunk_span, quote, "
                "prefix, suffix, emitted_at, topic, sentence_index FROM answer_citations "
                "ORDER BY seq",
            ],
        ),
    ],
)  # fmt: skip
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_table_of_citations_sweeps_as_its_file_does(
    *,
    database: str,
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    shape: str,
    options: list[str],
    jobs: str,
) -> None:
    _fill_flat(
        database,
        scenario["flat"],
        split_span=shape.startswith("renamed"),
        renamed=shape.startswith("renamed"),
    )
    from_file, from_table = tmp_path / "file.jsonl", tmp_path / "table.jsonl"
    file_code, _ = _sweep(
        scenario["chunks"], str(scenario["flat"]), from_file, capsys, "--jobs", jobs
    )
    code, err = _sweep(scenario["chunks"], database, from_table, capsys, "--jobs", jobs, *options)
    assert from_table.read_bytes() == from_file.read_bytes(), err
    assert code == file_code
    assert len(from_file.read_text().splitlines()) > 500


def test_answer_events_in_a_json_column_sweep_as_their_file_does(
    database: str, scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Answer events (with their sentences: coverage too) kept whole in a JSONB column; the
    scenario's file holds malformed lines as well, kept as text."""
    lines = scenario["citations"].read_text().splitlines()
    with psycopg.connect(database) as connection:
        connection.execute("CREATE TABLE events (id bigserial PRIMARY KEY, payload text)")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO events (payload) VALUES (%s)", [(line,) for line in lines]
            )
    out_file, out_table = tmp_path / "file.jsonl", tmp_path / "table.jsonl"
    coverage_file, coverage_table = tmp_path / "cov-file.jsonl", tmp_path / "cov-table.jsonl"
    file_code, _ = _sweep(scenario["chunks"], str(scenario["citations"]), out_file, capsys,
                          "--coverage-out", str(coverage_file))  # fmt: skip
    code, err = _sweep(
        scenario["chunks"], database, out_table, capsys, "--citations-table", "events",
        "--citations-column", "record=payload", "--coverage-out", str(coverage_table),
    )  # fmt: skip
    assert out_table.read_bytes() == out_file.read_bytes(), err
    assert coverage_table.read_bytes() == coverage_file.read_bytes()
    assert code == file_code


@pytest.mark.parametrize(
    ("prepare", "options", "expected"),
    [
        (None, ["--citations-table", "answer_citations"], "no table answer_citations"),
        ("CREATE TABLE c (citation_id text, answer_id text, quote text)",
         ["--citations-table", "c"],
         "table c has no column for doc_id, doc_version, chunk_id, chunk_span (name them: "
         "--citations-column FIELD=COLUMN"),
        ("CREATE TABLE c (citation_id text)", ["--citations-table", "c", "--citations-column",
         "quote=text_cited"], "table c has no column quote=text_cited (its columns: citation_id)"),
        (None, ["--citations-query", "SELECT * FROM nowhere"], 'relation "nowhere" does not exist'),
    ],
)  # fmt: skip
def test_citations_that_cannot_be_read_are_one_line_and_exit_2(
    *,
    database: str,
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    prepare: str | None,
    options: list[str],
    expected: str,
) -> None:
    if prepare:
        with psycopg.connect(database) as connection:
            connection.execute(prepare)
    code, err = _sweep(scenario["chunks"], database, tmp_path / "out.jsonl", capsys, *options)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert redacted_uri(database) in err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], "needs --citations-table TABLE or --citations-query SQL"),
        (["--citations-table", "a", "--citations-query", "SELECT 1"], "(one of them)"),
        (["--citations-table", "a", "--citations-column", "colour=x"], "expected FIELD=COLUMN"),
        (
            ["--citations-query", "SELECT 1", "--citations-column", "quote=x"],
            "a query names its own",
        ),
    ],
)
def test_citation_options_that_cannot_work_are_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], expected: str
) -> None:
    chunks = write_jsonl(tmp_path / "chunks.jsonl", [])
    code, err = _sweep(
        chunks, "postgresql://u:hidden@127.0.0.1:1/db", tmp_path / "o.jsonl", capsys, *options
    )
    assert code == 2
    assert expected in err
    assert "hidden" not in err


def test_a_time_column_is_rfc_3339(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = write_jsonl(
        tmp_path / "chunks.jsonl",
        [{"chunk_id": "d#0", "doc_id": "d", "doc_version": "v1", "text": "Refunds take a week."}],
    )
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE c AS SELECT 'c1'::text AS citation_id, 'a1'::text AS answer_id, "
            "'d'::text AS doc_id, 'v1'::text AS doc_version, 'd#0'::text AS chunk_id, "
            "ARRAY[0, 7] AS chunk_span, 'Refunds'::text AS quote, "
            "'2026-05-01 12:00:00+00'::timestamptz AS emitted_at"
        )
    code, err = _sweep(chunks, database, tmp_path / "out.jsonl", capsys, "--citations-table", "c")
    verdict = json.loads((tmp_path / "out.jsonl").read_text())
    assert code == 0, err
    assert verdict["status"] == "ok"


def _docs_mapping() -> str:
    """The mapping file docs/postgres.md shows (the test proves what the page says)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
    start = page.index("```toml\n# citations.toml") + len("```toml\n")
    return page[start : page.index("```", start)]


MAPPING = _docs_mapping()


def test_a_mapping_file_declares_the_table_once_and_sweeps_as_the_options_do(
    database: str, scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill_flat(database, scenario["flat"], split_span=True, renamed=True)
    mapping = tmp_path / "citations.toml"
    mapping.write_text(MAPPING)
    by_options, by_file = tmp_path / "options.jsonl", tmp_path / "mapping.jsonl"
    options = [
        "--citations-table", "public.answer_citations",
        "--citations-column", "quote=cited_text",
        "--citations-column", "chunk_start=span_start",
        "--citations-column", "chunk_end=span_end",
    ]  # fmt: skip
    code, _ = _sweep(scenario["chunks"], database, by_options, capsys, *options)
    mapped_code, mapped_err = _sweep(
        scenario["chunks"], database, by_file, capsys, "--citations-mapping", str(mapping)
    )
    assert by_file.read_bytes() == by_options.read_bytes(), mapped_err
    assert mapped_code == code
    assert by_file.stat().st_size > 0


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('table = "c"\ncolour = "red"\n', "unknown key 'colour'"),
        ("table = 3\n", "table must be a string"),
        ('table = "c"\ncolumns = ["quote"]\n', 'columns must be a table of FIELD = "column"'),
        ('table = "c"\n[columns]\nqoute = "q"\n', "'qoute' is no field of a citation"),
        ('table = "c"\n[columns]\n"doc_id=x" = "y"\n', "is no field of a citation"),
        ('table = "c"\nquery = "SELECT 1"\n', "needs table or query (one of them)"),
        ("[columns]\n", "needs table or query"),
        ('table = "c; DROP TABLE x"\n', "expected a table name"),
        ("table = ", "is not valid TOML"),
        ("\x00" * 70_000, "larger than"),
    ],
)
def test_a_mapping_file_that_cannot_work_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    mapping = tmp_path / "citations.toml"
    mapping.write_text(text)
    code, err = _sweep(
        tmp_path / "chunks.jsonl",
        "postgresql://app:secret@127.0.0.1:1/app",
        tmp_path / "out.jsonl",
        capsys,
        "--citations-mapping",
        str(mapping),
    )
    assert code == 2
    assert named in err and "citations.toml" in err, err
    assert "secret" not in err and len(err.strip().splitlines()) == 1, err


def test_a_mapping_file_with_the_options_it_replaces_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = tmp_path / "citations.toml"
    mapping.write_text(MAPPING)
    code, err = _sweep(
        tmp_path / "chunks.jsonl",
        "postgresql://app@127.0.0.1:1/app",
        tmp_path / "out.jsonl",
        capsys,
        "--citations-mapping", str(mapping),
        "--citations-table", "other",
    )  # fmt: skip
    assert code == 2 and "--citations-table or --citations-mapping" in err, err
    code, err = _sweep(
        tmp_path / "chunks.jsonl",
        str(tmp_path / "citations.jsonl"),
        tmp_path / "out.jsonl",
        capsys,
        "--citations-mapping",
        str(mapping),
    )
    assert code == 2 and "--citations-mapping is for citations in Postgres" in err, err
