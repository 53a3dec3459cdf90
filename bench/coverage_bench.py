"""Benchmark: what coverage adds to the sweep of the 180,000-citation archive.

Prints figures; asserts nothing (performance targets live here, not in timed tests).
Needs the package installed (``citation-exporter`` on PATH), as ``./scripts/test`` does in .venv.

    python bench/coverage_bench.py [--answers 72000] [--repeat 3]

The archive is sweep_bench's (cached under bench/out/), whose answer events carry their
sentences. Its sweep with ``--no-coverage`` is the baseline: the difference is coverage's whole
cost (decoding the sentences, classifying the uncited ones, the verdict and its counts). The
target: under 10% of the sweep. Also shown: the same archive with ``sentences`` removed from
every answer event (what reading the sentences' bytes costs, coverage or not), and the sweep
writing ``--coverage-out``. Timed with ``--jobs 1``, where the cost is not hidden behind a
second CPU, and with the default workers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sweep_bench  # noqa: E402


def _without_sentences(directory: Path) -> Path:
    """A copy of the archive whose answer events carry no sentences (cached beside it)."""
    bare = directory.with_name(directory.name + "-no-sentences")
    citations = bare / "citations.jsonl"
    if not citations.exists():
        bare.mkdir(parents=True, exist_ok=True)
        (bare / "chunks.jsonl").unlink(missing_ok=True)
        (bare / "chunks.jsonl").symlink_to(directory / "chunks.jsonl")
        with (directory / "citations.jsonl").open("rb") as source, citations.open("wb") as out:
            for line in source:
                record = orjson.loads(line)
                if isinstance(record, dict):
                    record.pop("sentences", None)
                out.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
    return bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=72000, help="default: %(default)s")
    parser.add_argument("--seed", type=int, default=11, help="default: %(default)s")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (default: 3)")
    args = parser.parse_args()

    directory = sweep_bench._scenario(args.answers, args.seed)
    bare = _without_sentences(directory)
    coverage_out = ("--coverage-out", str(directory / "coverage.jsonl"))
    for jobs, label in ((1, "--jobs 1"), (None, "default jobs")):
        bare_time, summary, _ = sweep_bench._time_sweep(bare, jobs, args.repeat)
        off, _, _ = sweep_bench._time_sweep(directory, jobs, args.repeat, "--no-coverage")
        on, judged, _ = sweep_bench._time_sweep(directory, jobs, args.repeat)
        written, _, _ = sweep_bench._time_sweep(directory, jobs, args.repeat, *coverage_out)
        coverage = judged["coverage"]
        assert isinstance(coverage, dict)
        print(
            f"{label}: {summary['citations']:,} citations; --no-coverage {off:.2f} s, "
            f"coverage {on:.2f} s ({on / off - 1:+.1%}), writing --coverage-out {written:.2f} s "
            f"({written / off - 1:+.1%}); the archive without sentences {bare_time:.2f} s"
        )
    print(
        f"coverage judged {coverage['answers']:,} answers: {coverage['claims']:,} claims, "
        f"{coverage['framing']:,} framing, {coverage['uncited']:,} uncited "
        f"({coverage['uncited_ratio']:.2%})"
    )


if __name__ == "__main__":
    main()
