"""Benchmark: loading the chunk store from Postgres against loading the same rows from JSONL.

Prints figures; asserts nothing.

    python bench/postgres_bench.py [--rows 100000 1000000] [--text-chars 600]

For each size, writes that many chunk rows into LangChain PGVector's tables (COPY) and the same
records as a JSON Lines file, then loads each into a chunk store in a process of its own (as a
sweep does before its first citation): seconds, rows a second, and the process's peak RSS,
with the ratios of Postgres to the file measured in the same run. The store itself is in
memory either way; what the figures tell apart is the reading: the server-side cursor holds
2,000 rows at a time, so Postgres should cost what the file costs plus the driver.

Uses the server named by $CITATION_POSTGRES_URI (a role that may create databases), or starts
scripts/postgres-local in a directory of its own (PG_STATE, PG_PORT as it reads them).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("PG_STATE", "/tmp/citation-drift-exporter-postgres-bench")
os.environ.setdefault("PG_PORT", "15460")

from postgres_support import LANGCHAIN_DDL, fresh_database, postgres_server  # noqa: E402

LOAD = """
import sys, time
from exporter.file_sweep import load_store
from exporter.pipeline.summary import SweepSummary
from exporter.sources.jsonl import JsonLines
from exporter.config.postgres import ChunkLayout
started = time.perf_counter()
if sys.argv[1].startswith("postgresql://"):
    from exporter.postgres import PostgresChunks
    source = PostgresChunks(sys.argv[1], ChunkLayout.of("langchain"))
else:
    source = JsonLines(sys.argv[1])
store = load_store(source, SweepSummary())
took = time.perf_counter() - started
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec from the forking parent
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        rss = int(line.split()[1]) * 1024
print(store.chunk_count, took, rss)
"""


def _text(number: int, chars: int) -> str:
    words = f"Refunds for order {number} are issued within {number % 30 + 1} days of the return. "
    return (words * (chars // len(words) + 1))[:chars]


def _fill(uri: str, path: Path, rows: int, chars: int) -> None:
    """``rows`` chunks in LangChain's tables and in ``path``, the same records."""
    with psycopg.connect(uri) as connection, path.open("w", encoding="utf-8") as out:
        connection.execute(LANGCHAIN_DDL)
        connection.execute(
            "INSERT INTO langchain_pg_collection (uuid, name) VALUES "
            "('00000000-0000-0000-0000-000000000001', 'langchain')"
        )
        with connection.cursor().copy(
            "COPY langchain_pg_embedding (id, collection_id, document, cmetadata) FROM STDIN"
        ) as copy:
            for number in range(rows):
                record = {
                    "chunk_id": f"doc-{number // 8:07}#{number % 8}",
                    "doc_id": f"doc-{number // 8:07}",
                    "doc_version": "v1",
                    "text": _text(number, chars),
                    "doc_offset": (number % 8) * chars,
                }
                metadata = {
                    "source": record["doc_id"],
                    "doc_version": "v1",
                    "start_index": record["doc_offset"],
                }
                copy.write_row(
                    (
                        record["chunk_id"],
                        "00000000-0000-0000-0000-000000000001",
                        record["text"],
                        json.dumps(metadata),
                    )
                )
                out.write(json.dumps(record) + "\n")
        # rows in id order, as the layout reads them: the file in the same order
    _sort_file(path)


def _sort_file(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.sort(key=lambda line: json.loads(line)["chunk_id"])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _load(source: str) -> tuple[int, float, int]:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, source],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    chunks, took, rss = done.stdout.split()
    return int(chunks), float(took), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--text-chars", type=int, default=600)
    args = parser.parse_args()
    with postgres_server() as server:
        for rows in args.rows:
            with fresh_database(server) as uri, tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "chunks.jsonl"
                started = time.perf_counter()
                _fill(uri, path, rows, args.text_chars)
                print(f"{rows:,} rows of {args.text_chars} characters written in "
                      f"{time.perf_counter() - started:.0f} s")  # fmt: skip
                file_chunks, file_took, file_rss = _load(str(path))
                db_chunks, db_took, db_rss = _load(uri)
                assert file_chunks == db_chunks == rows
                out = io.StringIO()
                for name, took, rss in (
                    ("jsonl", file_took, file_rss),
                    ("postgres", db_took, db_rss),
                ):
                    print(f"  {name:8} {took:7.2f} s  {rows / took:10,.0f} rows/s  "
                          f"peak RSS {rss / 2**20:8,.0f} MiB", file=out)  # fmt: skip
                print(out.getvalue(), end="")
                print(f"  postgres / jsonl: time x{db_took / file_took:.2f}, "
                      f"peak RSS x{db_rss / file_rss:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
