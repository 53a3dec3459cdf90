"""Benchmark: citation-exporter apply on a citations table in Postgres, rows a second.

Prints figures; asserts nothing.

    python bench/apply_bench.py [--rows 100000]

Writes ``--rows`` citations into a table (the migration of docs/apply.md applied) and a
verdict file asking for a rewrite_offsets of every one (as a chunk-size change does), then
times, each as a process of its own: the dry run, the apply (``--commit``: locked in batches,
every change audited), the same apply again (every row already applied), and the revert.

Uses the server named by $CITATION_POSTGRES_URI, or starts scripts/postgres-local in a
directory of its own (PG_STATE, PG_PORT).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("PG_STATE", "/tmp/citation-drift-exporter-postgres-bench")
os.environ.setdefault("PG_PORT", "15460")

from postgres_support import fresh_database, postgres_server  # noqa: E402

QUOTE = "Annual plans renew automatically each year"


def _fill(uri: str, rows: int) -> None:
    migration = (HERE.parent / "docs" / "apply.md").read_text()
    start = migration.index("```sql\nALTER TABLE") + len("```sql\n")
    with psycopg.connect(uri) as connection:
        connection.execute(
            "CREATE TABLE answer_citations (citation_id text PRIMARY KEY, answer_id text, "
            "doc_id text, doc_version text, chunk_id text, chunk_span integer[], quote text)"
        )
        statement = "COPY answer_citations FROM STDIN"
        with connection.cursor() as cursor, cursor.copy(statement) as copy:
            for n in range(rows):
                copy.write_row(
                    (f"c{n:07}", f"a{n:07}", f"d{n % 5000}", "v1", f"d{n % 5000}#{n % 7}",
                     [100, 100 + len(QUOTE)], QUOTE)
                )  # fmt: skip
        connection.execute(migration[start : migration.index("```", start)])


def _verdicts(path: Path, rows: int) -> None:
    digest = hashlib.sha256(QUOTE.encode()).hexdigest()
    with path.open("wb") as out:
        for n in range(rows):
            chunk_id = f"d{n % 5000}#{n % 7}"
            out.write(
                orjson.dumps(
                    {
                        "citation_id": f"c{n:07}",
                        "answer_id": f"a{n:07}",
                        "doc_id": f"d{n % 5000}",
                        "status": "drift_repaired",
                        "action": "rewrite_offsets",
                        "recorded_version": "v1",
                        "live_version": "v1",
                        "repair": {
                            "chunk_id": chunk_id,
                            "chunk_span": [112, 112 + len(QUOTE)],
                            "similarity": 100.0,
                            "method": "exact",
                            "how": "unique",
                            "shift": 12,
                        },
                        "cited": {
                            "chunk_id": chunk_id,
                            "chunk_span": [100, 100 + len(QUOTE)],
                            "quote_sha256": digest,
                        },
                    }
                )
                + b"\n"
            )


def _timed(*argv: str) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "apply", *argv, "--format", "json"],
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started, orjson.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as workdir,
        postgres_server() as server,
        fresh_database(server) as database,
    ):
        _fill(database, args.rows)
        verdicts = Path(workdir) / "verdicts.jsonl"
        _verdicts(verdicts, args.rows)
        table = ["--to", database, "--citations-table", "answer_citations"]
        runs = [
            ("dry run", [str(verdicts), *table]),
            ("apply --commit", [str(verdicts), *table, "--commit"]),
            ("the same again (all already applied)", [str(verdicts), *table, "--commit"]),
        ]
        print(f"{args.rows:,} citations, every one a rewrite_offsets; {os.cpu_count()} CPUs")
        sweep = ""
        for name, argv in runs:
            seconds, result = _timed(*argv)
            sweep = str(result["sweep"])
            print(f"{name:>38}: {seconds:6.1f} s, {args.rows / seconds:8,.0f} rows/s")
        seconds, _ = _timed("--revert", sweep, *table, "--commit")
        print(f"{'--revert --commit':>38}: {seconds:6.1f} s, {args.rows / seconds:8,.0f} rows/s")


if __name__ == "__main__":
    main()
