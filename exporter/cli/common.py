"""What every subcommand shares: exit codes, the usage error, argument types, limit options."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from exporter.checks.claims import SentenceClassifier
from exporter.checks.engine import Policy
from exporter.defaults import comma_separated, ratio_value, similarity_threshold
from exporter.errors import UsageError
from exporter.files.jsonl import OutputError, refuse_overwriting_inputs
from exporter.outputs.report import summary_json, summary_text
from exporter.pipeline.gate import Gate
from exporter.pipeline.summary import SweepSummary
from exporter.records.limits import DEFAULT_LIMITS, Limits
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

__all__ = [
    "EXIT_CODES",
    "EXIT_GATE_FAILED",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "add_gate_options",
    "add_limit_options",
    "available_cpus",
    "gate_from",
    "limits_from",
    "positive",
    "print_summary",
    "ratio",
    "refuse_overwriting",
    "refuse_unwritable",
    "sweep_gate",
    "sweep_inputs",
    "sweep_policy",
    "threshold",
    "topics",
    "write_summary",
]

# Exit codes are a contract: a deploy gate reads 1 as "drift above the gate" and nothing else.
EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_CODES = """\
exit status:
  0    done; with a gate (sweep, report --fail-above): no line of it was crossed
  1    the gate failed: drift above --fail-above, missing documents above
       --fail-missing-above or invalid records above --fail-invalid-above (the
       summary says which; nothing else is ever 1)
  2    usage error, unreadable input or unwritable output (one line on stderr says which)
  3    internal error: a bug (the traceback is printed)
  130  interrupted
"""


_LIMIT_HELP = {
    "max_message_bytes": "lines (and Kafka messages) longer than this are not read; "
    "each is reported as oversized",
    "max_chunk_chars": "chunk records whose text is longer are rejected",
    "max_doc_offset": "chunk records placed further into their document are rejected",
    "max_citations_per_answer": "answers with more citations are rejected whole, in one error",
    "max_sentences_per_answer": "answers with more sentences have their coverage judged "
    "invalid (oversized); their citations are still checked",
    "max_quote_chars": "longer quotes (after folding) are matched and searched verbatim "
    "only, never approximately",
    "relocation_budget_ms": "CPU milliseconds one citation's relocation may take; past it "
    "the citation is drift_unrepaired (relocation_budget_exceeded)",
}


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """``--max-...`` options for every bound on what one input may cost."""
    group = parser.add_argument_group(
        "limits (bounded work and memory per input; defaults suit real answer systems)"
    )
    for name, help_text in _LIMIT_HELP.items():
        default = getattr(DEFAULT_LIMITS, name)
        group.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=default,
            metavar="N",
            help=f"{help_text} (default: {default:,})",
        )


def limits_from(args: argparse.Namespace) -> Limits:
    values: dict[str, Any] = {name: getattr(args, name) for name in _LIMIT_HELP}
    try:
        return Limits(**values)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).replace('_', '-')}") from None


def ratio(text: str) -> float:
    """A share typed as ``0.01`` or ``1%`` (a bare 1 or more is refused: see ratio_value)."""
    try:
        return ratio_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_gate_options(parser: argparse.ArgumentParser, *, gated_by_default: bool) -> None:
    """The gate's lines: drift (all, or unrepaired alone), missing documents, invalid records."""
    group = parser.add_argument_group(
        "the gate (exit 1 when any line is crossed; a ratio is written 1% or 0.01)"
    )
    default = "1%%" if gated_by_default else "no gate"
    group.add_argument(
        "--fail-above",
        type=ratio,
        default=0.01 if gated_by_default else None,
        metavar="RATIO",
        help="the drift line: fail when drifted / valid citations exceeds this (a bare 1 or "
        f"more is refused: it would mean 100%%) (default: {default})",
    )
    group.add_argument(
        "--fail-missing-above",
        type=ratio,
        metavar="RATIO",
        help="the missing-documents line: fail when citations whose document is gone / valid "
        "citations exceeds this (default: the drift line's)",
    )
    group.add_argument(
        "--fail-invalid-above",
        type=ratio,
        metavar="RATIO",
        help="the invalid-records line: fail when citations that could not be checked (not "
        "JSON, a broken field, over a limit) / all citations read exceeds this; with most "
        "records broken the valid few say nothing of the archive (default: the drift line's)",
    )
    group.add_argument(
        "--gate-drift",
        choices=("all", "unrepaired"),
        default="all",
        help="which drift the drift line counts: all of it (default), or only what could not "
        "be repaired, for teams that apply the repairs automatically",
    )


def gate_from(args: argparse.Namespace) -> Gate | None:
    """The gate the options describe; None when there is none (report without --fail-above)."""
    if args.fail_above is None:
        if (
            args.fail_missing_above is not None
            or args.fail_invalid_above is not None
            or args.gate_drift != "all"
        ):
            raise UsageError(
                "--fail-missing-above, --fail-invalid-above and --gate-drift need --fail-above"
            )
        return None
    missing = args.fail_above if args.fail_missing_above is None else args.fail_missing_above
    invalid = args.fail_above if args.fail_invalid_above is None else args.fail_invalid_above
    return Gate(
        drift_above=args.fail_above,
        missing_above=missing,
        invalid_above=invalid,
        unrepaired_only=args.gate_drift == "unrepaired",
        allow_empty=args.allow_empty,
    )


def sweep_gate(args: argparse.Namespace) -> Gate:
    """The sweep's gate: it always has one (its --fail-above has a default)."""
    gate = gate_from(args)
    assert gate is not None
    return gate


def threshold(text: str) -> float:
    try:
        value = similarity_threshold(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def dollars(text: str) -> float:
    """An amount of money: a finite number, zero or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"must be an amount of dollars, 0 or more, got {text[:40]}"
        )
    return value


def count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, got {text}")
    return value


def timestamp(text: str) -> datetime:
    """An RFC 3339 time; one without an offset is UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an RFC 3339 time like 2026-11-30T12:00:00Z, got {text[:40]!r}"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def topics(text: str) -> frozenset[str]:
    return comma_separated(text)


# --- what the sweep's engines share ----------------------------------------------------------


def sweep_policy(
    args: argparse.Namespace,
    *,
    coverage: bool,
    judged: bool,
    classifier: SentenceClassifier | None = None,
) -> Policy:
    """How a sweep judges its citations, from its options: one place for every engine.

    Drifted citations keep their evidence (the report's examples, the verdicts' spans); with
    ``judged``, every judgeable citation keeps its judge input for the sample to draw from.
    """
    chosen: dict[str, Any] = {} if classifier is None else {"classifier": classifier}
    return Policy(
        threshold=args.threshold,
        high_severity_topics=args.high_severity_topics,
        limits=limits_from(args),
        coverage=coverage,
        judge_rate=1.0 if judged else 0.0,
        keep_evidence=True,
        **chosen,
    )


def sweep_inputs(
    args: argparse.Namespace,
) -> tuple[str, str, tempfile.TemporaryDirectory[str] | None]:
    if args.example:
        if args.chunks or args.citations:
            raise UsageError("--example generates its own inputs; drop --chunks/--citations")
        workdir = tempfile.TemporaryDirectory(prefix="citation-example-")
        paths = write_scenario(build_scenario(ScenarioConfig(answers=4000)), Path(workdir.name))
        print(
            "example: 4,000 answers over a store where some documents were re-chunked, "
            "re-extracted, refreshed, silently edited or deleted (in a temporary directory, "
            "removed afterwards; `citation-exporter simulate --out DIR` writes one to keep)",
            file=sys.stderr,
        )
        return str(paths["chunks"]), str(paths["citations"]), workdir
    if not args.chunks or not args.citations:
        raise UsageError("sweep needs --chunks FILE and --citations FILE (or --example)")
    if args.chunks == "-" and args.citations == "-":
        raise UsageError("only one of --chunks and --citations can read stdin")
    return args.chunks, args.citations, None


def refuse_overwriting(args: argparse.Namespace, chunks: str, citations: str) -> None:
    """Outputs must not be inputs, nor each other, nor share standard output."""
    outputs = [
        (option, path)
        for option, path in (
            ("--out", args.out),
            ("--coverage-out", args.coverage_out),
            ("--judge-out", args.judge_out),
            ("--report", args.report),
        )
        if path
    ]
    to_stdout = [option for option, path in outputs if path == "-"]
    if len(to_stdout) > 1:
        raise UsageError(f"only one of {' and '.join(to_stdout)} can write to standard output")
    seen: dict[Path, str] = {}
    try:
        for option, path in outputs:
            refuse_overwriting_inputs(path, (chunks, citations), option=option)
            if path == "-":
                continue
            resolved = Path(path).resolve()
            if resolved in seen:
                raise UsageError(f"{seen[resolved]} and {option} name the same file")
            seen[resolved] = option
    except OSError as exc:
        raise UsageError(str(exc)) from None
    if args.report:  # the page is written last: say now that it cannot be
        refuse_unwritable("--report", args.report, [chunks, citations])


def refuse_unwritable(option: str, path: str, inputs: list[str]) -> None:
    """Say before the work, not after it, that the page cannot be written at ``path``."""
    if path == "-":
        return
    try:
        refuse_overwriting_inputs(path, inputs, option=option)
    except (OSError, OutputError) as exc:
        raise UsageError(str(exc)) from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: {folder} is not a folder this user can write in")
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a folder")


def write_summary(text: str, stream: IO[str]) -> None:
    try:
        stream.write(text)
        stream.flush()
    except OSError as exc:
        name = "standard error" if stream is sys.stderr else "standard output"
        raise UsageError(f"cannot write the summary to {name}: {exc}") from None


def print_summary(args: argparse.Namespace, summary: SweepSummary, gate: Gate) -> None:
    """The summary, on standard output unless a verdict output took it."""
    to_stdout = "-" in (args.out, args.coverage_out, args.judge_out, args.report)
    report_to: IO[str] = sys.stderr if to_stdout else sys.stdout
    if args.format == "json":
        report = orjson.dumps(summary_json(summary, gate)).decode()
        write_summary(report + "\n", report_to)
    else:
        text = summary_text(summary, gate)
        write_summary(text + "\n", report_to)
    written = written_line(args) if args.format == "text" else None
    if written is not None:
        # the text summary's last line (a JSON summary is read by a program that named its
        # outputs itself, and a successful sweep writes nothing to stderr)
        write_summary(written + "\n", report_to)


# What a sweep may write, by option, as its last line names it.
_OUTPUTS = (
    ("out", "verdicts"),
    ("coverage_out", "coverage verdicts"),
    ("judge_out", "judged sample"),
    ("report", "report"),
)


def written_line(args: argparse.Namespace) -> str | None:
    """The one line that says which files a sweep wrote (None when it wrote none: standard
    output is not a file to look for)."""
    written = [
        f"{what} {path}"
        for option, what in _OUTPUTS
        if (path := getattr(args, option, None)) and path != "-"
    ]
    return f"wrote: {', '.join(written)}" if written else None
