"""Benchmark: ``citation-exporter report`` on a verdict file of a million verdicts, and
``sweep --report`` against the same sweep without it.

Prints figures; asserts nothing (performance targets live here, not in timed tests).
Needs the package installed (``citation-exporter`` on PATH), as ``./scripts/test`` does in .venv.

    python bench/report_bench.py [--verdicts 1000000] [--repeat 3]

1. Sweeps the built-in example once with ``--out``, and repeats its verdicts (ids made unique)
   into a gzip file of ``--verdicts`` lines, cached under bench/out/.
2. Times ``citation-exporter report`` on it as a subprocess, best of ``--repeat``, with the
   child's peak resident memory (getrusage), and the page's size: its examples are sampled,
   so neither grows with the archive beyond the counts.
3. Times ``sweep --example`` with and without ``--report``, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def _run(args: list[str]) -> tuple[float, float]:
    """Seconds and the child's peak RSS in MiB (ru_maxrss of the children so far, KiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(args, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def _verdict_file(count: int) -> Path:
    path = OUT / f"verdicts-{count}.jsonl.gz"
    if path.exists():
        return path
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        sample = Path(work) / "verdicts.jsonl"
        sweep = ["citation-exporter", "sweep", "--example", "--no-progress", "--judge-sample", "0"]
        subprocess.run(
            [*sweep, "--out", str(sample)],
            check=False,
            stdout=subprocess.DEVNULL,
        )
        records = [orjson.loads(line) for line in sample.read_bytes().splitlines()]
    written = 0
    with gzip.open(path, "wb", compresslevel=3) as out:
        copy = 0
        while written < count:
            for record in records:
                if written == count:
                    break
                unique = {**record, "citation_id": f"{record['citation_id']}-{copy}"}
                out.write(orjson.dumps(unique) + b"\n")
                written += 1
            copy += 1
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    verdicts = _verdict_file(args.verdicts)
    print(f"verdict file: {verdicts.name}, {verdicts.stat().st_size / 2**20:.1f} MiB gzipped")
    with tempfile.TemporaryDirectory() as work:
        page = Path(work) / "report.html"
        runs = [
            _run(["citation-exporter", "report", str(verdicts), "--out", str(page)])
            for _ in range(args.repeat)
        ]
        seconds = min(s for s, _ in runs)
        rss = max(m for _, m in runs)
        print(
            f"report of {args.verdicts:,} verdicts: {seconds:.2f} s "
            f"({args.verdicts / seconds:,.0f} verdicts/s), peak RSS {rss:.0f} MiB, "
            f"page {page.stat().st_size / 1024:.0f} KiB"
        )
        sweep = ["citation-exporter", "sweep", "--example", "--no-progress", "--judge-sample", "0"]
        plain = min(_run(sweep)[0] for _ in range(args.repeat))
        reported = min(_run([*sweep, "--report", str(page)])[0] for _ in range(args.repeat))
        print(
            f"sweep --example: {plain:.2f} s; with --report {reported:.2f} s "
            f"(+{reported - plain:.2f} s)"
        )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
