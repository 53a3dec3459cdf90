"""``citation-exporter apply`` on a real PostgreSQL (scripts/postgres-local) and on an archive.

A store after a re-index, its citations in an application's table (with the migration of
docs/apply.md): swept, applied, swept again. Every repaired citation is ok afterwards, the
superseded ones are pinned, and no other row or column changed (a checksum of each); a row a
concurrent writer changed between the sweep and the apply is a conflict, untouched; the same
verdicts applied again change nothing; revert restores the table exactly; and the JSON Lines
target makes the same changes in a copy of the archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kafka_support import create_topics, free_port, produce, scrape, total
from postgres_support import write_jsonl

from exporter.cli import main
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.slow

NOW = "2026-06-01T00:00:00Z"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "apply.md"
FIELDS = (
    "citation_id", "answer_id", "doc_id", "doc_version", "chunk_id", "chunk_span", "quote",
    "prefix", "suffix", "topic",
)  # fmt: skip


def _migration() -> str:
    """The migration docs/apply.md gives (the test runs what the page says)."""
    page = DOCS.read_text()
    start = page.index("```sql\nALTER TABLE") + len("```sql\n")
    return page[start : page.index("```", start)]


def test_the_reference_schema_is_a_table_apply_and_the_sweep_take(database: str) -> None:
    page = DOCS.read_text()
    start = page.index("```sql\nCREATE TABLE") + len("```sql\n")
    with psycopg.connect(database) as connection:
        connection.execute(page[start : page.index("```", start)])
        connection.execute(_migration())  # on a table that has the columns: nothing to do


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scenario")
    paths = write_scenario(
        build_scenario(
            ScenarioConfig(
                seed=27,
                answers=400,
                documents=20,
                refresh_share=0.15,
                delete_share=0.1,
                resize_share=0.2,
            )
        ),
        folder,
    )
    flat: list[dict[str, Any]] = []
    for line in paths["citations"].read_text().splitlines():
        record = json.loads(line)
        for citation in record.get("citations", [record]):
            merged = {
                "answer_id": record.get("answer_id"),
                "topic": record.get("topic"),
                **citation,
            }
            flat.append({k: merged[k] for k in FIELDS if merged.get(k) is not None})
    return {**paths, "flat": write_jsonl(folder / "flat.jsonl", flat)}


def _fill(database: str, flat: Path) -> None:
    rows = [json.loads(line) for line in flat.read_text().splitlines()]
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE answer_citations (citation_id text PRIMARY KEY, answer_id text, "
            "doc_id text, doc_version text, chunk_id text, chunk_span integer[], quote text, "
            "prefix text, suffix text, topic text, served_count integer DEFAULT 7)"
        )
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO answer_citations (citation_id, answer_id, doc_id, doc_version, "
                "chunk_id, chunk_span, quote, prefix, suffix, topic) VALUES (%(citation_id)s, "
                "%(answer_id)s, %(doc_id)s, %(doc_version)s, %(chunk_id)s, %(chunk_span)s, "
                "%(quote)s, %(prefix)s, %(suffix)s, %(topic)s)",
                [{"prefix": None, "suffix": None, "topic": None, **row} for row in rows],
            )
        connection.execute(_migration())


def _checksums(database: str) -> dict[str, str]:
    with psycopg.connect(database) as connection:
        rows = connection.execute(
            "SELECT citation_id, md5(t::text) FROM answer_citations t ORDER BY citation_id"
        ).fetchall()
    return {str(key): str(digest) for key, digest in rows}


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _sweep(
    chunks: Path, database: str, out: Path, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, Any]]:
    _exit(
        ["sweep", "--chunks", str(chunks), "--citations", database, "--citations-table",
         "answer_citations", "--out", str(out), "--no-progress", "--now", NOW],
        capsys,
    )  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def _apply(database: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, out, err = _exit(
        ["apply", *extra, "--to", database, "--citations-table", "answer_citations",
         "--now", NOW, "--format", "json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_sweep_apply_sweep_repairs_every_drifted_citation_and_touches_nothing_else(
    database: str, scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(database, scenario["flat"])
    before = _checksums(database)
    verdicts = _sweep(scenario["chunks"], database, tmp_path / "v1.jsonl", capsys)
    by_status: dict[str, set[str]] = {}
    for verdict in verdicts:
        by_status.setdefault(verdict["status"], set()).add(verdict["citation_id"])
    repaired, superseded = by_status["drift_repaired"], by_status["superseded"]
    assert repaired and superseded

    # a concurrent writer changes three repairable citations after the sweep
    moved = sorted(repaired)[:3]
    with psycopg.connect(database) as connection:
        connection.execute(
            "UPDATE answer_citations SET chunk_span = ARRAY[0, 1] WHERE citation_id = ANY(%s)",
            (moved,),
        )
    before = {**before, **{k: v for k, v in _checksums(database).items() if k in moved}}

    dry = _apply(database, capsys, str(tmp_path / "v1.jsonl"))
    assert _checksums(database) == before  # a dry run writes nothing
    assert dry["decisions"]["rewrite_offsets apply"] == len(repaired) - 3
    assert dry["decisions"]["rewrite_offsets conflict"] == 3
    assert sorted(dry["conflicts"]) == moved

    applied = _apply(database, capsys, str(tmp_path / "v1.jsonl"), "--commit")
    assert applied["decisions"] == dry["decisions"]
    after = _checksums(database)
    changed = {key for key in after if after[key] != before[key]}
    failing = {v["citation_id"] for v in verdicts if v["action"] not in ("keep", "fix_record")}
    assert changed == failing - set(moved)  # only the citations acted on, not the conflicts

    again = _verdicts_by_id(_sweep(scenario["chunks"], database, tmp_path / "v2.jsonl", capsys))
    assert {again[cid]["status"] for cid in repaired - set(moved)} == {"ok"}
    with psycopg.connect(database) as connection:
        pinned = dict(
            connection.execute(
                "SELECT citation_id, pinned_version FROM answer_citations "
                "WHERE pinned_version IS NOT NULL"
            ).fetchall()
        )
        untouched = connection.execute(
            "SELECT count(*) FROM answer_citations WHERE served_count <> 7"
        ).fetchone()
    assert set(pinned) == superseded
    assert untouched == (0,)

    # the same verdicts again: nothing changes, and it says so
    twice = _apply(database, capsys, str(tmp_path / "v1.jsonl"), "--commit")
    assert _checksums(database) == after
    assert "rewrite_offsets apply" not in twice["decisions"]
    assert twice["decisions"]["rewrite_offsets already"] == len(repaired) - 3

    # revert puts the table back exactly
    reverted = _apply(database, capsys, "--revert", applied["sweep"], "--commit")
    assert sum(n for k, n in reverted["decisions"].items() if k.endswith(" apply")) == len(changed)
    assert _checksums(database) == before


def _verdicts_by_id(verdicts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {verdict["citation_id"]: verdict for verdict in verdicts}


def test_the_archive_gets_the_changes_the_table_gets(
    database: str, scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(database, scenario["flat"])
    _sweep(scenario["chunks"], database, tmp_path / "v.jsonl", capsys)
    _apply(database, capsys, str(tmp_path / "v.jsonl"), "--commit")
    code, _, err = _exit(
        ["apply", str(tmp_path / "v.jsonl"), "--to", str(scenario["flat"]), "--out",
         str(tmp_path / "repaired.jsonl"), "--now", NOW, "--commit"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    originals = [json.loads(line) for line in scenario["flat"].read_text().splitlines()]
    copies = [json.loads(line) for line in (tmp_path / "repaired.jsonl").read_text().splitlines()]
    assert len(copies) == len(originals)
    with psycopg.connect(database) as connection:
        table = {
            row[0]: row[1:]
            for row in connection.execute(
                "SELECT citation_id, chunk_id, chunk_span, pinned_version, degraded, dropped, "
                "suppressed, repair_sweep FROM answer_citations"
            )
        }
    for original, copy in zip(originals, copies, strict=True):
        chunk_id, span, pinned, degraded, dropped, suppressed, sweep = table[copy["citation_id"]]
        assert (copy["chunk_id"], copy["chunk_span"]) == (chunk_id, span)
        assert copy.get("pinned_version") == pinned
        assert (bool(copy.get("degraded")), bool(copy.get("dropped"))) == (degraded, dropped)
        assert bool(copy.get("suppressed")) == suppressed and copy.get("repair_sweep") == sweep
        # every other field as it was
        assert {
            k: v for k, v in copy.items() if k in original and k not in ("chunk_id", "chunk_span")
        } == {k: v for k, v in original.items() if k not in ("chunk_id", "chunk_span")}


def test_what_apply_refuses_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = write_jsonl(tmp_path / "a.jsonl", [])
    for argv, expected in (
        (["apply", str(archive), "--to", str(archive)], "needs --out"),
        (["apply", "--to", "postgresql://u@127.0.0.1:1/db"], "needs the sweep's verdict files"),
        (["apply", str(tmp_path / "none.jsonl"), "--to", str(archive), "--out",
          str(tmp_path / "o.jsonl")], "none.jsonl"),
    ):  # fmt: skip
        code, _, err = _exit(argv, capsys)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


def test_a_crash_mid_apply_leaves_whole_batches_and_the_rerun_equals_one_clean_apply(
    database: str,
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from exporter.postgres import apply as target

    _fill(database, scenario["flat"])
    _sweep(scenario["chunks"], database, tmp_path / "v.jsonl", capsys)
    monkeypatch.setattr(target, "BATCH", 7)
    flushes = 0
    real_flush = target.PostgresTarget._flush

    def crashing(self: Any, *args: Any) -> None:
        nonlocal flushes
        flushes += 1
        real_flush(self, *args)
        if flushes == 2:  # the second batch written, not committed: the first one is
            raise KeyboardInterrupt

    monkeypatch.setattr(target.PostgresTarget, "_flush", crashing)
    interrupted = main(
        ["apply", str(tmp_path / "v.jsonl"), "--to", database, "--citations-table",
         "answer_citations", "--now", NOW, "--commit"]
    )  # fmt: skip
    assert interrupted == 130
    with psycopg.connect(database) as connection:
        done = connection.execute(
            "SELECT count(*) FROM answer_citations WHERE repair_sweep IS NOT NULL"
        ).fetchone()
    assert done == (7,)  # the first batch whole, nothing of the second
    monkeypatch.setattr(target.PostgresTarget, "_flush", real_flush)
    rerun = _apply(database, capsys, str(tmp_path / "v.jsonl"), "--commit")
    assert sum(n for k, n in rerun["decisions"].items() if k.endswith(" already")) == 7
    crashed = _checksums(database)
    # one clean apply of the same verdicts on a fresh copy of the table gives the same rows
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("CREATE DATABASE clean_apply")
    try:
        other = database.rsplit("/", 1)[0] + "/clean_apply"
        _fill(other, scenario["flat"])
        _apply(other, capsys, str(tmp_path / "v.jsonl"), "--commit")
        assert _checksums(other) == crashed
    finally:
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("DROP DATABASE clean_apply WITH (FORCE)")


def _stream(database: str, bootstrap: str, topics: Any, log: Path) -> tuple[Any, int]:
    port = free_port()
    env = {**os.environ, **topics.env(), "CITATION_EXPORTER_BOOTSTRAP_SERVERS": bootstrap}
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter.cli", "apply", "--from-kafka", "--commit", "--to",
         database, "--citations-table", "answer_citations", "--metrics-port", str(port),
         "--group-id", f"apply-{topics.answers}"],
        env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, port


def _until(port: int, name: str, at_least: float, **labels: str) -> float:
    deadline = time.monotonic() + 90
    value = 0.0
    while time.monotonic() < deadline:
        try:
            value = total(scrape(port), name, **labels)
        except OSError:
            value = 0.0
        if value >= at_least:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{name}{labels} reached {value}, wanted {at_least}")


@pytest.mark.kafka
def test_the_verdicts_topic_is_applied_as_it_streams_once_and_all_of_it(
    bootstrap: str,
    database: str,
    scenario: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _fill(database, scenario["flat"])
    _sweep(scenario["chunks"], database, tmp_path / "v.jsonl", capsys)
    lines = (tmp_path / "v.jsonl").read_bytes().splitlines()
    dry = _apply(database, capsys, str(tmp_path / "v.jsonl"))
    expected = sum(n for key, n in dry["decisions"].items() if key.endswith(" apply"))
    assert expected > 0
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.verdicts, [(None, line) for line in lines])
    log = tmp_path / "apply.log"
    process, port = _stream(database, bootstrap, topics, log)
    try:
        assert _until(port, "citation_apply_changes_total", expected, decision="apply") == expected
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    streamed = _checksums(database)
    # the file's apply now finds every change made: nothing to apply, nothing in conflict
    after = _apply(database, capsys, str(tmp_path / "v.jsonl"), "--commit")
    assert not any(key.endswith((" apply", " conflict")) for key in after["decisions"]), after
    assert _checksums(database) == streamed

    # again, with the same group: the committed verdicts are not read again; the same verdicts
    # sent once more are already applied, and change nothing
    produce(bootstrap, topics.verdicts, [(None, line) for line in lines])
    process, port = _stream(database, bootstrap, topics, log)
    try:
        _until(port, "citation_apply_changes_total", expected, decision="already")
        assert total(scrape(port), "citation_apply_changes_total", decision="apply") == 0
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    assert _checksums(database) == streamed


QUOTE = "Annual plans renew automatically each year"


def _synthetic(database: str, rows: int, verdicts: Path) -> None:
    """``rows`` citations and a verdict file rewriting every one (a chunk-size change)."""
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE answer_citations (citation_id text PRIMARY KEY, answer_id text, "
            "doc_id text, doc_version text, chunk_id text, chunk_span integer[], quote text)"
        )
        with connection.cursor() as cursor, cursor.copy("COPY answer_citations FROM STDIN") as copy:
            for n in range(rows):
                copy.write_row(
                    (f"c{n:07}", "a", "d", "v1", f"d#{n % 7}", [100, 100 + len(QUOTE)], QUOTE)
                )
        connection.execute(_migration())
    digest = hashlib.sha256(QUOTE.encode()).hexdigest()
    with verdicts.open("w") as out:
        for n in range(rows):
            chunk_id = f"d#{n % 7}"
            record = {
                "citation_id": f"c{n:07}", "answer_id": "a", "doc_id": "d",
                "status": "drift_repaired", "action": "rewrite_offsets",
                "recorded_version": "v1", "live_version": "v1",
                "repair": {"chunk_id": chunk_id, "chunk_span": [112, 112 + len(QUOTE)],
                           "similarity": 100.0, "method": "exact", "how": "unique", "shift": 12},
                "cited": {"chunk_id": chunk_id, "chunk_span": [100, 100 + len(QUOTE)],
                          "quote_sha256": digest},
            }  # fmt: skip
            out.write(json.dumps(record) + "\n")


def test_kill_9_mid_apply_then_the_same_command_ends_as_one_clean_apply(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = 30_000
    verdicts = tmp_path / "v.jsonl"
    _synthetic(database, rows, verdicts)
    argv = [sys.executable, "-m", "exporter.cli", "apply", str(verdicts), "--to", database,
            "--citations-table", "answer_citations", "--now", NOW, "--commit"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = 0
    deadline = time.monotonic() + 60
    with psycopg.connect(database, autocommit=True) as connection:
        while time.monotonic() < deadline and process.poll() is None:
            exists = connection.execute("SELECT to_regclass('citation_apply_audit')").fetchone()
            if exists is not None and exists[0] is not None:
                found = connection.execute("SELECT count(*) FROM citation_apply_audit").fetchone()
                killed_at = int(found[0]) if found else 0
                if killed_at >= 1000:
                    break
            time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    with psycopg.connect(database) as connection:
        done = connection.execute(
            "SELECT count(*) FROM answer_citations WHERE repair_sweep IS NOT NULL"
        ).fetchone()
        audited = connection.execute("SELECT count(*) FROM citation_apply_audit").fetchone()
    assert done == audited and done is not None and done[0] % 500 == 0  # whole batches
    assert 0 < done[0] < rows, "the kill came before or after the apply: no test"
    again = subprocess.run(argv, capture_output=True, check=False)
    assert again.returncode == 0, again.stderr
    killed = _checksums(database)
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("CREATE DATABASE clean_kill")
    try:
        other = database.rsplit("/", 1)[0] + "/clean_kill"
        _synthetic(other, rows, tmp_path / "v2.jsonl")
        _apply(other, capsys, str(verdicts), "--commit")
        assert _checksums(other) == killed
    finally:
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("DROP DATABASE clean_kill WITH (FORCE)")


def _one_verdict(path: Path, citation_id: str = "c1", **repair: Any) -> Path:
    record = {
        "citation_id": citation_id, "answer_id": "a", "doc_id": "d",
        "status": "drift_repaired", "action": "rewrite_offsets", "recorded_version": "v1",
        "repair": {"chunk_id": "d#0", "chunk_span": [112, 154], "similarity": 100.0,
                   "how": "unique", **repair},
        "cited": {"chunk_id": "d#0", "chunk_span": [100, 142],
                  "quote_sha256": hashlib.sha256(QUOTE.encode()).hexdigest()},
    }  # fmt: skip
    path.write_text(json.dumps(record) + "\n")
    return path


def test_two_rows_of_one_citation_id_are_a_conflict_never_both_rewritten(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(database) as connection:
        connection.execute(
            "CREATE TABLE answer_citations (citation_id text, answer_id text, doc_id text, "
            "doc_version text, chunk_id text, chunk_span integer[], quote text)"
        )
        connection.execute(
            "INSERT INTO answer_citations VALUES ('c1', 'a', 'd', 'v1', 'd#0', '{100,142}', %s), "
            "('c1', 'a', 'd', 'v9', 'd#9', '{1,2}', 'another quote')",
            (QUOTE,),
        )
        connection.execute(_migration())
    before = _checksums(database)
    result = _apply(database, capsys, str(_one_verdict(tmp_path / "v.jsonl")), "--commit")
    assert result["decisions"] == {"rewrite_offsets conflict": 1}
    assert _checksums(database) == before


def test_a_revert_puts_back_only_its_own_tables_changes(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = _one_verdict(tmp_path / "v.jsonl")
    with psycopg.connect(database) as connection:
        for table in ("t1", "t2"):
            connection.execute(
                f"CREATE TABLE {table} (citation_id text PRIMARY KEY, answer_id text, doc_id "
                "text, doc_version text, chunk_id text, chunk_span integer[], quote text)"
            )
            connection.execute(
                f"INSERT INTO {table} VALUES ('c1', 'a', 'd', 'v1', 'd#0', '{{100,142}}', %s)",
                (QUOTE,),
            )
            connection.execute(_migration().replace("answer_citations", table))
    runs = {}
    for table in ("t1", "t2"):
        code, out, err = _exit(
            ["apply", str(verdicts), "--to", database, "--citations-table", table, "--commit",
             "--now", NOW, "--format", "json"], capsys)  # fmt: skip
        assert code == 0, err
        runs[table] = json.loads(out)["sweep"]
    code, out, err = _exit(
        ["apply", "--revert", runs["t1"], "--to", database, "--citations-table", "t1",
         "--commit", "--format", "json"], capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["decisions"] == {"revert rewrite_offsets apply": 1}
    with psycopg.connect(database) as connection:
        spans = [connection.execute(f"SELECT chunk_span FROM {t}").fetchone() for t in ("t1", "t2")]
    assert spans == [([100, 142],), ([112, 154],)]  # t2 still holds its change


@pytest.mark.parametrize(
    ("setup", "argv_extra", "expected"),
    [
        ("ALTER TABLE answer_citations ALTER COLUMN dropped TYPE text", [],
         "dropped (dropped must be boolean)"),
        ("", ["--now", "yesterday-ish"], "expected an RFC 3339 time"),
        ("", ["--only-how", "uniq"], "--only-how 'uniq'"),
        ("DROP TABLE answer_citations", [], "no table answer_citations"),
    ],
)  # fmt: skip
def test_what_the_table_or_options_cannot_take_is_one_line_exit_2(
    *,
    database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    argv_extra: list[str],
    expected: str,
) -> None:
    _synthetic(database, 3, tmp_path / "v.jsonl")
    if setup:
        with psycopg.connect(database) as connection:
            connection.execute(setup)
    code, _, err = _exit(
        ["apply", str(tmp_path / "v.jsonl"), "--to", database, "--citations-table",
         "answer_citations", *argv_extra], capsys)  # fmt: skip
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


def test_verdicts_no_table_could_hold_are_skipped_not_a_crash(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _synthetic(database, 3, tmp_path / "unused.jsonl")
    lines = [
        _one_verdict(tmp_path / "a.jsonl", "c\x00001").read_text(),
        _one_verdict(tmp_path / "b.jsonl", "c0000001", chunk_span=[0, 2**40]).read_text(),
        _one_verdict(tmp_path / "c.jsonl", "c0000002", chunk_id="d#\x00").read_text(),
    ]
    verdicts = tmp_path / "v.jsonl"
    verdicts.write_text("".join(lines))
    result = _apply(database, capsys, str(verdicts), "--commit")
    assert result["skipped"] == {"no_repair": 2, "not_a_verdict": 1}
    assert result["decisions"] == {}


def test_the_archive_keeps_every_integer_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = {"citation_id": "c1", "answer_id": "a", "doc_id": "d", "doc_version": "v1",
              "chunk_id": "d#0", "chunk_span": [100, 142], "quote": QUOTE,
              "served": 12345678901234567890123}  # fmt: skip
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        json.dumps(record) + "\n" + json.dumps({**record, "citation_id": None}) + "\n"
    )
    code, _, err = _exit(
        ["apply", str(_one_verdict(tmp_path / "v.jsonl")), "--to", str(archive), "--out",
         str(tmp_path / "r.jsonl"), "--commit", "--now", NOW], capsys)  # fmt: skip
    assert code == 0, err
    first, second = (tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(first)["served"] == 12345678901234567890123
    assert json.loads(first)["chunk_span"] == [112, 154]
    assert json.loads(second)["chunk_span"] == [100, 142]  # no id: never a match
