"""Benchmark: ``sweep --engine spark`` on the 180,000-citation archive, against the in-process
sweep, and the per-core throughput a cluster's size follows from.

Prints figures; asserts nothing. Needs the package with its spark extra installed
(``citation-exporter`` on PATH) and Java 17+.

    python bench/spark_bench.py [--answers 72000] [--repeat 2] [--executor-cores 4]

1. Uses (or generates, cached under bench/out/) the archive of bench/sweep_bench.py.
2. Times the in-process sweep (``--judge-sample 0``: Spark draws no sample, so neither does the
   comparison) with the default workers and with ``--jobs 1``, and the Spark sweep on
   ``local[2]``, each the whole command as a subprocess, best of ``--repeat``; the Spark
   summary's own time leaves out Spark's start (a JVM, its first jobs' warm-up included).
3. Per core, warm: the sweep through the API (numbering, decoding, shuffles, checks and the
   summary; no verdict file) on ``local[1]`` and ``local[2]``, each timed on its second run in
   one session, as a long job on a cluster runs: citations and cited documents per second per
   core. From it, the executors of ``--executor-cores`` cores that sweep 10^7, 10^8 and 10^9
   citations within an hour, if a cluster keeps ``--efficiency`` of that rate per core.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sweep_bench import _scenario  # noqa: E402

from exporter.checks.engine import Policy  # noqa: E402

ARCHIVES = (10**7, 10**8, 10**9)
HOUR = 3600.0


def _run(directory: Path, out: Path, repeat: int, *extra: str) -> tuple[float, dict[str, object]]:
    """Best wall time of the sweep command, and its JSON summary."""
    command = [
        "citation-exporter",
        "sweep",
        "--chunks",
        str(directory / "chunks.jsonl"),
        "--citations",
        str(directory / "citations.jsonl"),
        "--out",
        str(out),
        "--format",
        "json",
        "--no-progress",
        *extra,
    ]
    best, summary = math.inf, {}
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"sweep failed: {done.stderr.decode()[-2000:]}")
        if elapsed < best:
            best, summary = elapsed, json.loads(done.stdout)
    return best, summary


def _cited_documents(verdicts: Path) -> int:
    with verdicts.open("rb") as lines:
        return len({json.loads(line)["doc_id"] for line in lines})


def _warm_seconds(directory: Path, master: str) -> float:
    """Seconds of the second of two sweeps through the API in one session on ``master``."""
    from exporter.spark import numbered_lines, sweep
    from exporter.spark.session import spark_session

    seconds = math.inf
    with spark_session(master, {}) as spark:
        for _ in range(2):
            started = time.perf_counter()
            found = sweep(
                numbered_lines(spark, str(directory / "chunks.jsonl")),
                numbered_lines(spark, str(directory / "citations.jsonl")),
                Policy(coverage=False),
            )
            found.summary()
            found.unpersist()
            seconds = time.perf_counter() - started
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=72000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--executor-cores", type=int, default=4)
    parser.add_argument("--efficiency", type=float, default=0.7)
    args = parser.parse_args()

    directory = _scenario(args.answers, args.seed)
    out = HERE / "out"
    bare = ("--judge-sample", "0")
    process, summary = _run(directory, out / "verdicts-process.jsonl", args.repeat, *bare)
    process_one, _ = _run(
        directory, out / "verdicts-process-1.jsonl", args.repeat, "--jobs", "1", *bare
    )
    spark_args = ("--engine", "spark", "--master", "local[2]")
    spark_wall, spark_summary = _run(
        directory, out / "verdicts-spark.jsonl", args.repeat, *spark_args
    )
    warm_one = _warm_seconds(directory, "local[1]")
    warm_two = _warm_seconds(directory, "local[2]")

    citations = int(summary["citations"])  # type: ignore[call-overload]
    same = (out / "verdicts-spark.jsonl").read_bytes() == (
        out / "verdicts-process.jsonl"
    ).read_bytes()
    documents = _cited_documents(out / "verdicts-process.jsonl")
    inner = float(spark_summary["elapsed_seconds"])  # type: ignore[arg-type]
    print(f"archive: {citations:,} citations of {documents:,} cited documents ({directory})")
    print(
        f"in-process sweep, default jobs: {process:6.2f} s wall ({citations / process:,.0f} "
        f"citations/s); --jobs 1: {process_one:.2f} s ({citations / process_one:,.0f}/s)"
    )
    print(
        f"spark sweep, local[2]:          {spark_wall:6.2f} s wall, {inner:.2f} s after Spark's "
        f"start ({citations / inner:,.0f} citations/s), verdicts identical to the in-process "
        f"sweep's: {'yes' if same else 'NO'}"
    )
    per_core = citations / warm_one
    print(
        f"warm, one core (local[1]): {warm_one:.2f} s, {per_core:,.0f} citations/s, "
        f"{documents / warm_one:,.1f} documents/s ({citations / documents:,.0f} citations a "
        f"document); local[2]: {warm_two:.2f} s, {warm_one / warm_two / 2:.0%} of it per core "
        "on this 2-CPU machine"
    )
    print(
        f"\nexecutors of {args.executor_cores} cores to sweep within an hour, at "
        f"{args.efficiency:.0%} of the measured per-core rate:"
    )
    for archive in ARCHIVES:
        cores = archive / (per_core * args.efficiency * HOUR)
        executors = math.ceil(cores / args.executor_cores)
        print(f"  {archive:>13,} citations: {cores:8.1f} cores -> {executors:,} executors")


if __name__ == "__main__":
    main()
