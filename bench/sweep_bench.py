"""Benchmark: the whole ``citation-exporter sweep`` command on a 180,000-citation archive.

Prints figures; asserts nothing (performance targets live here, not in timed tests).
Needs the package installed (``citation-exporter`` on PATH), as ``./scripts/test`` does in .venv.

    python bench/sweep_bench.py [--answers 72000] [--naive-sample 20000] [--repeat 3]
                                [--hint-share 0]

1. Generates (once, cached under bench/out/) a scenario of about 180,000 citations of which about
   8% drifted (documents re-chunked with a larger chunk size, or re-extracted); with
   ``--hint-share`` that share of them carries ``doc_span`` (the repairs hints decided are
   printed).
2. Times the real command end to end, JSON in and out, as a subprocess: best of ``--repeat``
   runs, with the default worker count and with ``--jobs 1``; each also with
   ``--judge-sample 0``, for what drawing (and lexically judging) the default sample costs.
3. Times the straightforward implementation (bench/naive.py) on the first ``--naive-sample``
   citations in the same run and extrapolates its per-citation cost to the whole archive.
4. Times the floor (bench/floor.py: parse, look up, compare, write, and nothing else) on the
   whole archive in process, and a command's start (``citation-exporter --version``): the
   largest speed-up over the straightforward implementation any sweep in this language could
   show here, on one core and on two.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import floor  # noqa: E402
import naive  # noqa: E402

SHARES = {
    "--resize-share": "0.09",
    "--retypeset-share": "0.025",
    "--refresh-share": "0.04",
    "--silent-edit-share": "0.005",
    "--delete-share": "0.01",
}


SCENARIO_VERSION = "s2"


def _scenario(answers: int, seed: int, hint_share: float) -> Path:
    # the generator's version is part of the name: a cached archive of an older one (answers
    # without real sentences, say) would be measured for what it no longer is
    # hints are doc_span and doc_sha256 (an archive cached with another witness is not reused)
    hinted = f"-hints{hint_share:g}-sha256" if hint_share else ""
    directory = HERE / "out" / f"scenario-{answers}-{seed}-{SCENARIO_VERSION}{hinted}"
    if not (directory / "scenario.json").exists():
        command = [
            "citation-exporter",
            "simulate",
            "--out",
            str(directory),
            "--answers",
            str(answers),
            "--seed",
            str(seed),
        ]
        for flag, value in SHARES.items():
            command += [flag, value]
        if hint_share:
            command += ["--hint-share", str(hint_share)]
        subprocess.run(command, check=True)
    return directory


# Runs a command and reports on stderr the peak resident memory of its largest process and the
# CPU seconds (user and system) of all its processes.
_PEAK_RSS = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "used = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(used.ru_maxrss, used.ru_utime + used.ru_stime, file=sys.stderr); "
    "sys.exit(done.returncode)"
)


def _time_sweep(
    directory: Path, jobs: int | None, repeat: int, *extra: str
) -> tuple[float, dict[str, object], int, float]:
    """Best wall time of the sweep, its JSON summary, its peak RSS in KiB and its least CPU
    time (every process of it)."""
    command = [
        sys.executable,
        "-c",
        _PEAK_RSS,
        "citation-exporter",
        "sweep",
        "--chunks",
        str(directory / "chunks.jsonl"),
        "--citations",
        str(directory / "citations.jsonl"),
        "--out",
        str(directory / "verdicts.jsonl"),
        "--format",
        "json",
    ]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    command += extra
    best, summary, peak, cpu = float("inf"), {}, 0, float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"sweep failed: {done.stderr.decode()}")
        best = min(best, elapsed)
        summary = json.loads(done.stdout)
        rss, seconds = done.stderr.decode().split()[-2:]
        peak, cpu = max(peak, int(rss)), min(cpu, float(seconds))
    return best, summary, peak, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=72000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--naive-sample", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hint-share", type=float, default=0.0)
    args = parser.parse_args()
    # the commands as an installed package runs them, with their bytecode cached: where
    # writing bytecode is switched off, every start would compile every module again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    directory = _scenario(args.answers, args.seed, args.hint_share)
    wall, summary, peak, _ = _time_sweep(directory, None, args.repeat)
    wall_one, _, peak_one, cpu_one = _time_sweep(directory, 1, args.repeat)
    # the sample for the entailment judge (2,000 by default) against none: what drawing it costs
    no_sample = ("--judge-sample", "0")
    wall_bare, *_ = _time_sweep(directory, None, args.repeat, *no_sample)
    wall_one_bare, *_ = _time_sweep(directory, 1, args.repeat, *no_sample)
    entailment = summary["entailment"]
    assert isinstance(entailment, dict)
    citations = int(summary["citations"])  # type: ignore[call-overload]

    started = time.perf_counter()
    sampled = naive.run(
        str(directory / "chunks.jsonl"),
        str(directory / "citations.jsonl"),
        os.devnull,
        args.naive_sample,
    )
    naive_per_citation = (time.perf_counter() - started) / sampled
    naive_total = naive_per_citation * citations
    floor_per_citation = floor.per_citation(
        str(directory / "chunks.jsonl"), str(directory / "citations.jsonl")
    )
    start_up = floor.start_up()

    print(
        f"archive: {citations:,} citations, drift ratio {summary['drift_ratio']:.2%}, "
        f"superseded ratio {summary['superseded_ratio']:.2%} ({directory})"
    )
    print(
        f"repairs by what told copies apart: {summary['repairs_decided_by']}; unrepaired "
        f"reasons: {[(r['reason'], r['count']) for r in summary['reasons'] if r['status'] == 'drift_unrepaired']}"  # noqa: E501
    )
    print(
        f"sweep command, default jobs ({os.cpu_count()} CPUs): {wall:.2f} s wall "
        f"({citations / wall:,.0f} citations/s, {wall / citations * 1e6:.1f} us per citation), "
        f"peak RSS {peak / 1024:.0f} MiB in the largest process"
    )
    print(
        f"sweep command, --jobs 1:                 {wall_one:.2f} s wall "
        f"({citations / wall_one:,.0f} citations/s), peak RSS {peak_one / 1024:.0f} MiB, "
        f"{cpu_one:.2f} s CPU ({cpu_one / citations * 1e6:.1f} us per citation)"
    )
    print(
        f"  of which the judge's sample ({entailment['sampled']:,} of "
        f"{entailment['judgeable']:,} judgeable, lexical judge): +{wall - wall_bare:.2f} s "
        f"default jobs ({wall_bare:.2f} s with --judge-sample 0), +{wall_one - wall_one_bare:.2f}"
        f" s --jobs 1 ({wall_one_bare:.2f} s)"
    )
    print(
        f"straightforward implementation: {naive_per_citation * 1e3:.3f} ms per citation "
        f"(measured on {sampled:,}), {naive_total:.1f} s extrapolated to the archive"
    )
    print(
        f"speed-up: {naive_total / wall:.1f}x (default jobs), {naive_total / wall_one:.1f}x "
        "(--jobs 1)"
    )
    # the store's load is left out of the floor's command: the bound is generous
    floor_one = start_up + floor_per_citation * citations
    floor_two = start_up + floor_per_citation * citations / 2
    times_floor = cpu_one / citations / floor_per_citation
    print(
        f"floor (parse, look up, compare, write; nothing else): {floor_per_citation * 1e6:.2f} "
        f"us per citation on one core, a command's start {start_up:.2f} s: no sweep here can "
        f"beat {naive_total / floor_one:.0f}x on one core, {naive_total / floor_two:.0f}x on two "
        f"perfectly shared; the sweep's --jobs 1 CPU is {times_floor:.1f} times the floor's"
    )


if __name__ == "__main__":
    main()
