"""The sweep on Spark (local[2]): the in-process sweep's verdicts, summary and exit status.

One SparkSession serves the whole test session; each test reads small archives, so the
module's time is mostly Spark's own start (about ten seconds) and a few seconds a sweep.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")
pytest.importorskip("pyarrow", reason="the spark extra is not installed")

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from exporter.checks.engine import Policy
from exporter.cli import main
from exporter.file_sweep import load_store, run_sweep
from exporter.outputs.report import summary_json
from exporter.pipeline.gate import Gate
from exporter.pipeline.summary import SweepSummary
from exporter.records.limits import Limits
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from exporter.sources.jsonl import JsonLines
from exporter.spark import SparkSweep, numbered_lines, sweep, sweep_tables

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# A limit small enough for a test to write a line above it.
LIMITS = Limits(max_message_bytes=65_536)
# What a Spark sweep does not judge, and what differs between any two runs.
NOT_COMPARED = (
    "coverage",
    "entailment",
    "elapsed_seconds",
    "citations_per_second",
    "store_read_at",
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("citation-drift-exporter tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _line(record: object) -> bytes:
    return json.dumps(record).encode()


def _cite(citation_id: str, chunk_id: str, span: list[int], quote: str, **extra: Any) -> dict:
    doc_id = chunk_id.split("#", maxsplit=1)[0]
    return {
        "citation_id": citation_id,
        "answer_id": extra.pop("answer_id", f"ans-{citation_id}"),
        "doc_id": extra.pop("doc_id", doc_id),
        "doc_version": extra.pop("doc_version", "v1"),
        "chunk_id": chunk_id,
        "chunk_span": span,
        "quote": quote,
        **extra,
    }


EDGE_TEXT = "Refunds are issued within 30 days. Annual plans renew automatically each year."


def _edge_chunks() -> list[bytes]:
    """Chunk records whose order matters: deletions, a chunk moving to another document, a
    live version that falls back, and records that cannot be used."""
    chunk = {"doc_id": "edge-a", "doc_version": "v1", "text": EDGE_TEXT}
    return [
        _line({**chunk, "chunk_id": "edge-a#0", "ordinal": 0}),
        _line({**chunk, "chunk_id": "edge-a#1", "ordinal": 1, "doc_version": "v2"}),
        _line({**chunk, "chunk_id": "edge-a#2", "ordinal": 2}),
        _line({"chunk_id": "edge-a#2", "deleted": True}),  # v1 stays live: edge-a#0 holds it
        b"",
        b"   ",
        _line({**chunk, "chunk_id": "edge-b#0", "doc_id": "edge-b"}) + b"\r",
        _line({**chunk, "chunk_id": "edge-m#0", "doc_id": "edge-m"}),
        _line({**chunk, "chunk_id": "edge-m#0", "doc_id": "edge-b", "ordinal": 5}),  # moved
        _line({"chunk_id": "edge-c#0", "doc_id": "edge-c", "doc_version": "v1"}),  # no text
        b"{not json",
        b"x" * (LIMITS.max_message_bytes + 1),
        _line({**chunk, "chunk_id": "edge-d#0", "doc_id": "edge-d"}),
        _line({"chunk_id": "edge-d#0", "deleted": True}),  # the whole document is gone
        # found by review: past 64 bits an ordinal killed the Spark sweep's Arrow column
        _line({**chunk, "chunk_id": "edge-o#0", "doc_id": "edge-o", "ordinal": 2**63}),
    ]


def _edge_citations() -> list[bytes]:
    """Citation lines of every shape a producer gets wrong, and checks that need the
    order of the chunk records."""
    good = _cite("e1", "edge-a#0", [0, 33], "Refunds are issued within 30 days")
    return [
        _line(good),
        _line(
            _cite("e2", "edge-a#1", [0, 33], "Refunds are issued within 30 days", doc_version="v2")
        ),
        _line(_cite("e3", "edge-a#2", [35, 50], "Annual plans renew")),
        _line(_cite("e4", "edge-b#0", [0, 7], "Refunds")) + b"\r",
        _line(_cite("e5", "edge-m#0", [0, 7], "Refunds", doc_id="edge-m")),
        _line(_cite("e6", "edge-m#0", [0, 7], "Refunds", doc_id="edge-b")),
        _line(_cite("e7", "edge-d#0", [0, 7], "Refunds")),
        _line(_cite("e8", "edge-a#0", [5, 30], "plans renew automatically")),
        b"",
        b" \t ",
        b"\xff\xfe not utf-8",
        b"42",
        _line({"answer_id": "bad-list", "citations": "none"}),
        _line({"answer_id": 7, "citations": [good, good]}),
        _line({"answer_id": "mixed", "citations": [good, {"citation_id": "x"}, 3]}),
        _line({"answer_id": "lost", "sentences": ["a claim"]}),
        _line({"answer_id": "many", "citations": [good] * (LIMITS.max_citations_per_answer + 1)}),
        _line({k: v for k, v in good.items() if k != "quote"}),
        b"[" + b"1," * (LIMITS.max_message_bytes // 2) + b"1]",
    ]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A simulated archive (drift, superseded, missing documents, invalid lines) with the
    edge cases mixed in, chunk updates after the scenario's own."""
    directory = tmp_path_factory.mktemp("spark-archive")
    paths = write_scenario(
        build_scenario(ScenarioConfig(seed=5, answers=600, invalid_lines=3, hint_share=0.5)),
        directory,
    )
    chunks = paths["chunks"].read_bytes().splitlines()
    paths["chunks"].write_bytes(b"\n".join([*chunks, *_edge_chunks()]) + b"\n")
    lines = paths["citations"].read_bytes().splitlines()
    edges = _edge_citations()
    middle = len(lines) // 2
    mixed = [*edges[:9], *lines[:middle], *edges[9:], *lines[middle:]]
    paths["citations"].write_bytes(b"\n".join(mixed))  # no newline at the end
    return paths


def _in_process(paths: dict[str, Path], policy: Policy) -> tuple[list[bytes], SweepSummary]:
    summary = SweepSummary(coverage_judged=False)
    store = load_store(JsonLines(str(paths["chunks"])), summary, limits=policy.limits)
    out = io.BytesIO()
    run_sweep(store, JsonLines(str(paths["citations"])), policy, summary, out=out)
    return out.getvalue().splitlines(), summary


def _on_spark(
    spark: SparkSession, paths: dict[str, Path], policy: Policy, **options: Any
) -> SparkSweep:
    return sweep(
        numbered_lines(spark, str(paths["chunks"])),
        numbered_lines(spark, str(paths["citations"])),
        policy,
        **options,
    )


def _ordered(found: SparkSweep) -> list[bytes]:
    rows = found.verdicts.orderBy("line", "position").select("verdict").collect()
    return [row["verdict"].encode() for row in rows]


def _compared(summary: SweepSummary) -> dict[str, Any]:
    report = summary_json(summary, Gate())
    return {key: value for key, value in report.items() if key not in NOT_COMPARED}


def test_verdicts_and_summary_equal_the_in_process_sweep(
    spark: SparkSession, archive: dict[str, Path]
) -> None:
    policy = Policy(limits=LIMITS, coverage=False)
    expected, expected_summary = _in_process(archive, policy)
    found = _on_spark(spark, archive, policy)
    try:
        verdicts = _ordered(found)
        summary = found.summary(str(archive["chunks"]), str(archive["citations"]))
    finally:
        found.unpersist()

    # citation by citation, keyed by where each came from, then the very same lines in order
    def keyed(lines: list[bytes]) -> dict[tuple[int, int, str | None], bytes]:
        seen: Counter[int] = Counter()
        by_place: dict[tuple[int, int, str | None], bytes] = {}
        for line in lines:
            record = json.loads(line)
            number = record["line"]
            by_place[(number, seen[number], record["citation_id"])] = line
            seen[number] += 1
        return by_place

    assert len(keyed(expected)) == len(expected)
    assert keyed(verdicts) == keyed(expected)
    assert verdicts == expected
    statuses = expected_summary.statuses
    assert all(statuses[s] for s in ("drift_repaired", "superseded", "document_missing", "invalid"))
    assert _compared(summary) == _compared(expected_summary)
    assert summary.errors == expected_summary.errors
    assert summary.invalid_chunk_records == 4  # no text, not JSON, oversized, a huge ordinal


def _args(archive: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "sweep",
        "--chunks",
        str(archive["chunks"]),
        "--citations",
        str(archive["citations"]),
        "--out",
        str(out),
        "--format",
        "json",
        "--max-message-bytes",
        str(LIMITS.max_message_bytes),
        *extra,
    ]


@pytest.mark.parametrize("fail_above", ["0.01", "0.5"])
def test_the_gate_agrees(
    spark: SparkSession,
    archive: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fail_above: str,
) -> None:
    common = ["--fail-above", fail_above, "--no-progress"]
    code = main(_args(archive, tmp_path / "process.jsonl", *common, "--judge-sample", "0"))
    report = json.loads(capsys.readouterr().out)
    spark_code = main(_args(archive, tmp_path / "spark.jsonl", *common, "--engine", "spark"))
    spark_report = json.loads(capsys.readouterr().out)
    assert code == spark_code == (1 if fail_above == "0.01" else 0)
    assert (tmp_path / "spark.jsonl").read_bytes() == (tmp_path / "process.jsonl").read_bytes()
    assert spark_report["coverage"] is None and spark_report["entailment"] is None
    compared = (
        "citations",
        "valid_citations",
        "statuses",
        "reasons",
        "drift_ratio",
        "superseded_ratio",
        "passed",
        "repair_methods",
        "shift",
        "chunks_loaded",
        "documents_loaded",
        "invalid_chunk_records",
    )
    for key in compared:
        assert spark_report[key] == report[key], key


def test_a_large_document_is_split_across_tasks(spark: SparkSession, tmp_path: Path) -> None:
    """1,000 citations of one document, at most 100 a task: ten groups, each given the
    document's chunks; the verdicts are still the in-process sweep's."""
    text = " ".join(f"Clause {n} applies to plan {n % 7} until renewal." for n in range(120))
    chunks = [
        {
            "doc_id": "big",
            "doc_version": "v1",
            "chunk_id": f"big#{n}",
            "ordinal": n,
            "text": text[n * 400 : (n + 1) * 400],
        }
        for n in range(math.ceil(len(text) / 400))
    ]
    small = {"doc_id": "small", "doc_version": "v1", "chunk_id": "small#0", "text": text[:400]}
    paths = {"chunks": tmp_path / "chunks.jsonl", "citations": tmp_path / "citations.jsonl"}
    paths["chunks"].write_bytes(b"\n".join(_line(c) for c in [*chunks, small]) + b"\n")
    lines = []
    for n in range(1_000):
        start = (n * 37) % 300
        chunk = chunks[n % len(chunks)]
        shifted = n % 5 == 0  # a fifth drifted: the span points 3 characters early
        span = [start, start + 40]
        quote = (
            chunk["text"][start + 3 : start + 43] if shifted else chunk["text"][start : start + 40]
        )
        lines.append(_line(_cite(f"b{n}", chunk["chunk_id"], span, quote)))
    lines.append(_line(_cite("s1", "small#0", [0, 40], text[:40])))
    paths["citations"].write_bytes(b"\n".join(lines) + b"\n")

    policy = Policy(coverage=False)
    expected, _ = _in_process(paths, policy)
    found = _on_spark(spark, paths, policy, citations_per_task=100)
    try:
        groups = {(row["doc_id"], row["grp"]): row for row in found.groups.collect()}
        assert _ordered(found) == expected
    finally:
        found.unpersist()
    big = [row for (doc_id, _), row in groups.items() if doc_id == "big"]
    assert len(big) == 10
    assert sum(row["citations"] for row in big) == 1_000
    assert max(row["citations"] for row in big) <= 150  # hashed: about 100 each
    assert {row["chunk_events"] for row in big} == {len(chunks)}  # every group has them all
    assert [
        (row["citations"], row["chunk_events"]) for (d, _), row in groups.items() if d == "small"
    ] == [(1, 1)]


def test_tables_from_json_and_parquet(spark: SparkSession, tmp_path: Path) -> None:
    """The entry point for tables: the answers as Spark's JSON reader reads them (the line it
    cannot parse is a _corrupt_record), the chunks as a Parquet table with an order column."""
    scenario = build_scenario(ScenarioConfig(seed=9, answers=150, invalid_lines=1))
    paths = write_scenario(scenario, tmp_path)
    policy = Policy(coverage=False)
    expected, _ = _in_process(paths, policy)
    # one small file is one partition, read in order: the ids number the records in order
    chunk_table = spark.read.json(str(paths["chunks"])).withColumn(
        "seq", sf.monotonically_increasing_id()
    )
    chunk_table.write.parquet(str(tmp_path / "chunks.parquet"))

    verdicts = sweep_tables(
        spark.read.parquet(str(tmp_path / "chunks.parquet")),
        spark.read.json(str(paths["citations"])),
        policy,
        chunk_order="seq",
    )

    def without_line(lines: list[str]) -> list[dict[str, Any]]:
        records = [json.loads(line) for line in lines]
        for record in records:
            del record["line"]  # the table's row ids, not line numbers
        return sorted(records, key=lambda record: json.dumps(record, sort_keys=True))

    found = [row["verdict"] for row in verdicts.select("verdict").collect()]
    assert without_line(found) == without_line([line.decode() for line in expected])
    assert any('"invalid_json"' in line for line in found)


def test_lines_are_numbered_across_splits_and_files(spark: SparkSession, tmp_path: Path) -> None:
    """A file read in many splits, and a directory read as its files in path order, number
    their lines as one file would, blank lines counted and bytes kept as they are."""
    lines = [f'{{"n": {n}, "pad": "{"x" * (n % 50)}"}}'.encode() for n in range(3_000)]
    lines[7] = b""
    lines[8] = b"\xff\xfe\r"
    directory = tmp_path / "parts"
    directory.mkdir()
    (directory / "part-1.jsonl").write_bytes(b"\n".join(lines[:1_000]) + b"\n")
    (directory / "part-2.jsonl").write_bytes(b"\n".join(lines[1_000:]))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8192")
    try:
        numbered = numbered_lines(spark, str(directory))
        assert numbered.rdd.getNumPartitions() > 10
        rows = numbered.collect()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert sorted((row["line"], bytes(row["value"])) for row in rows) == [
        (number, line) for number, line in enumerate(lines, start=1)
    ]


def _usage_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    [message] = capsys.readouterr().err.strip().splitlines()
    return message


def test_what_the_spark_engine_refuses(
    archive: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_args = ["sweep", "--chunks", str(archive["chunks"]), "--citations"]
    spark_args = [*sweep_args, str(archive["citations"]), "--engine", "spark"]
    coverage = _usage_error(capsys, [*spark_args, "--coverage-out", str(tmp_path / "c.jsonl")])
    assert "--coverage-out needs the in-process engine" in coverage
    judged = _usage_error(capsys, [*spark_args, "--judge-sample", "100"])
    assert "--judge-sample needs the in-process engine" in judged
    assert "--judge-out needs" in _usage_error(capsys, [*spark_args, "--judge-out", "j.jsonl"])
    stdin = _usage_error(capsys, [*sweep_args, "-", "--engine", "spark"])
    assert "not standard input" in stdin
    master = _usage_error(capsys, [*sweep_args, str(archive["citations"]), "--master", "local"])
    assert "--master needs --engine spark" in master
    assert not (tmp_path / "c.jsonl").exists()


def test_unreadable_inputs_are_named(
    spark: SparkSession,
    archive: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = tmp_path / "missing.jsonl"
    args = ["sweep", "--engine", "spark", "--citations", str(archive["citations"])]
    message = _usage_error(capsys, [*args, "--chunks", str(missing)])
    assert message.endswith(f"cannot read --chunks {missing}: no such file or directory")


def test_compressed_input_is_read_and_a_corrupt_one_is_one_line(
    spark: SparkSession,
    archive: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Found by review: a truncated .gz failed with about 47 lines, 36 of them Java frames. The
    failing command runs as a user runs it, a process of its own (Spark's logs are its stderr);
    the one that reads the good file runs here, on the tests' session (a second JVM would
    cost half a minute and prove nothing more)."""
    good = tmp_path / "citations.jsonl.gz"
    good.write_bytes(gzip.compress(archive["citations"].read_bytes()))
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    read = main(
        [
            "sweep", "--engine", "spark", "--chunks", str(archive["chunks"]), "--citations",
            str(good), "--format", "json", "--no-progress",
        ]
    )  # fmt: skip
    assert read == 1  # the archive drifts past the gate
    assert json.loads(capsys.readouterr().out)["citations"] > 1_000
    command = [sys.executable, "-m", "exporter.cli", "sweep", "--engine", "spark"]
    command += ["--master", "local[2]", "--chunks", str(archive["chunks"]), "--format", "json"]
    options: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 300}
    failed = subprocess.run([*command, "--citations", str(corrupt)], check=False, **options)
    assert failed.returncode == 2
    lines = failed.stderr.strip().splitlines()
    assert "the Spark job failed" in lines[-1] and "EOF" in lines[-1]
    assert not [line for line in lines if line.lstrip().startswith("at ")], failed.stderr[-3000:]
