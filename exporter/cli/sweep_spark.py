"""``citation-exporter sweep --engine spark``: the sweep's checks run by Spark.

The verdicts (in input order), the summary and the exit status are the in-process sweep's;
coverage and the entailment sample are not judged yet, so the options that would write or
spend on them are refused rather than ignored. This module imports PySpark: the sweep command
imports it for ``--engine spark`` only.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException, PythonException
from pyspark.sql import DataFrame, SparkSession

from exporter.checks.claims import DEFAULT_CLASSIFIER
from exporter.checks.engine import Policy
from exporter.cli.common import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    UsageError,
    print_summary,
    refuse_overwriting,
    sweep_gate,
    sweep_inputs,
    sweep_policy,
)
from exporter.files.jsonl import InputError, OutputError, open_output
from exporter.pipeline.summary import SweepSummary
from exporter.records.limits import bounded
from exporter.spark import DEFAULT_CITATIONS_PER_TASK, SparkSweep, numbered_lines, sweep
from exporter.spark.session import spark_session

__all__ = ["run"]

_DEFAULT_MASTER = "local[*]"
_IN_PROCESS_ONLY = (
    ("--report", "report"),  # on Spark: write --out, then `citation-exporter report` on it
    ("--previous", "previous"),  # and `citation-exporter report --previous`
    ("--coverage-out", "coverage_out"),
    ("--judge-out", "judge_out"),
    ("--judge", "judge"),
    ("--judge-base-url", "judge_base_url"),
    ("--judge-model", "judge_model"),
    ("--judge-budget-usd", "judge_sweep_budget_usd"),
    ("--now", "now"),
)
# Verdict lines written at a time.
_WRITE_LINES = 4096
# Java causes followed, at most, to the innermost.
_MAX_CAUSES = 16


def _refuse_in_process_options(args: argparse.Namespace) -> None:
    given = [option for option, name in _IN_PROCESS_ONLY if getattr(args, name) is not None]
    if args.judge_sweep_sample:
        given.append("--judge-sample")
    if args.coverage_classifier != DEFAULT_CLASSIFIER:
        given.append("--coverage-classifier")
    if given:
        raise UsageError(
            f"{given[0]} needs the in-process engine: --engine spark does not judge coverage "
            "or the entailment sample yet"
        )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return bounded(lines[0]) if lines else ""


def _why(exc: Exception) -> str:
    """What failed, in one line: for a failed job, its two innermost Java causes (what Spark
    could not do, and why: a corrupt file and the decompressor's complaint, say)."""
    if not isinstance(exc, Py4JJavaError):
        return _first_line(str(exc)) or type(exc).__name__
    causes: list[str] = []
    throwable = exc.java_exception
    for _ in range(_MAX_CAUSES):
        if throwable is None:
            break
        causes.append(_first_line(str(throwable.toString())))
        throwable = throwable.getCause()
    return "; ".join(causes[-2:])


@contextmanager
def _spark_failures() -> Iterator[None]:
    """A Spark job that fails (an unreadable or corrupt input, a lost executor) is one line,
    exit 2; an exception raised by the checks' own Python code is a bug, and passes through."""
    try:
        yield
    except PythonException:
        raise
    except (PySparkException, Py4JJavaError) as exc:
        raise UsageError(f"--engine spark: the Spark job failed: {_why(exc)}") from None


def _lines(spark: SparkSession, option: str, path: str) -> DataFrame:
    try:
        return numbered_lines(spark, path)
    except InputError as exc:
        raise UsageError(f"cannot read {option} {exc}") from None


def _write_verdicts(found: SparkSweep, path: str, inputs: tuple[str, str]) -> None:
    """The verdicts, in input order, streamed from Spark a partition at a time."""
    ordered = found.verdicts.orderBy("line", "position").select("verdict")
    try:
        with open_output(path, inputs) as out:
            lines: list[str] = []
            for row in ordered.toLocalIterator():
                lines.append(row[0])
                if len(lines) == _WRITE_LINES:
                    out.write(("\n".join(lines) + "\n").encode())
                    lines.clear()
            if lines:
                out.write(("\n".join(lines) + "\n").encode())
    except OutputError as exc:
        where = "standard output" if path == "-" else path
        raise UsageError(f"--out {where}: {exc}") from None


def _sweep(
    spark: SparkSession, args: argparse.Namespace, chunks: str, citations: str, policy: Policy
) -> SweepSummary:
    started = time.perf_counter()
    found = sweep(
        _lines(spark, "--chunks", chunks),
        _lines(spark, "--citations", citations),
        policy,
        citations_per_task=args.citations_per_task or DEFAULT_CITATIONS_PER_TASK,
    )
    try:
        if args.out:
            _write_verdicts(found, args.out, (chunks, citations))
        summary = found.summary(chunks, citations)
    finally:
        found.unpersist()
    summary.took(time.perf_counter() - started)
    return summary


def run(args: argparse.Namespace) -> int:
    _refuse_in_process_options(args)
    chunks, citations, workdir = sweep_inputs(args)
    if "-" in (chunks, citations):
        raise UsageError(
            "--engine spark reads --chunks and --citations as files (any path Spark reads), "
            "not standard input"
        )
    policy = sweep_policy(args, coverage=False, judged=False)
    with workdir or nullcontext():
        refuse_overwriting(args, chunks, citations)
        session = spark_session(args.master or _DEFAULT_MASTER, dict(args.spark_conf))
        with session as spark, _spark_failures():
            summary = _sweep(spark, args, chunks, citations, policy)
    gate = sweep_gate(args)
    print_summary(args, summary, gate)
    missing = summary.missing_input()
    if missing is not None and not args.allow_empty:
        raise UsageError(f"{missing} (--allow-empty passes a sweep with nothing to judge by)")
    return EXIT_OK if summary.passed(gate) else EXIT_GATE_FAILED
