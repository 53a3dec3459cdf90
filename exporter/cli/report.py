"""``citation-exporter report``: the sweep's HTML page from verdict files written earlier, and the
options ``sweep --report`` shares with it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from exporter.cli.common import (
    EXIT_CODES,
    EXIT_GATE_FAILED,
    EXIT_OK,
    UsageError,
    add_gate_options,
    gate_from,
    ratio,
    refuse_unwritable,
)
from exporter.files.jsonl import (
    InputError,
    OutputError,
    open_input,
    open_output,
    read_lines,
)
from exporter.outputs.html_report import AuditAssumptions, render_report
from exporter.outputs.verdict_reader import (
    JudgedRecords,
    add_coverage_record,
    verdict_from_record,
)
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import InvalidJson, parse_json
from exporter.records.limits import DEFAULT_LIMITS

__all__ = [
    "add_parser",
    "add_report_options",
    "audit_assumptions",
    "read_verdicts",
    "run",
    "write_report",
]

EXAMPLES = """\
examples:
  # the page of a sweep, from its verdict file (and its coverage verdicts, if written)
  citation-exporter sweep --chunks chunks.jsonl.gz --citations citations.jsonl.gz \\
      --out verdicts.jsonl.gz --coverage-out coverage.jsonl.gz --judge-out judged.jsonl.gz
  citation-exporter report verdicts.jsonl.gz coverage.jsonl.gz judged.jsonl.gz \\
      --out sweep.html --fail-above 1%

  # or at once, during the sweep (the same page, with its live document counts)
  citation-exporter sweep --example --report sweep.html
"""


def _fraction(text: str) -> float:
    value = ratio(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.01 <= value <= 1_000:
        raise argparse.ArgumentTypeError("must be between 0.01 and 1000")
    return value


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The hand audit the page weighs the sweep against (the issue's defaults)."""
    audit = parser.add_argument_group(
        "the hand audit the report compares with (what a weekly review would read and catch)"
    )
    defaults = AuditAssumptions()
    audit.add_argument(
        "--audit-answers",
        type=int,
        default=defaults.answers_per_week,
        metavar="N",
        help="answers a weekly hand audit reads (default: %(default)s)",
    )
    audit.add_argument(
        "--citations-per-answer",
        type=_positive_number,
        default=defaults.citations_per_answer,
        metavar="N",
        help="citations an answer carries (default: %(default)s)",
    )
    audit.add_argument(
        "--reviewer-catch-rate",
        type=_fraction,
        default=defaults.catch_rate,
        metavar="RATIO",
        help="share of near-topic mismatches a reviewer notices (default: %(default)s)",
    )
    audit.add_argument(
        "--minutes-per-citation",
        type=_positive_number,
        default=defaults.minutes_per_citation,
        metavar="N",
        help="a reviewer's minutes for one citation (default: %(default)s)",
    )


def audit_assumptions(args: argparse.Namespace) -> AuditAssumptions:
    if not 0 < args.audit_answers <= 1_000_000:
        raise UsageError("--audit-answers must be between 1 and 1,000,000")
    return AuditAssumptions(
        args.audit_answers,
        args.citations_per_answer,
        args.reviewer_catch_rate,
        args.minutes_per_citation,
    )


def write_report(
    option: str, path: str, summary: SweepSummary, inputs: list[str], label: str, **options: Any
) -> None:
    """Render the page to ``path`` (written under a temporary name, renamed when complete;
    never over one of ``inputs``); ``label`` says what was swept. A label or title of bytes
    that are not UTF-8 (a file name) shows them as U+FFFD."""
    page = render_report(summary, inputs=label, **options).encode("utf-8", "replace")
    try:
        with open_output(path, inputs) as out:
            out.write(page)
    except OutputError as exc:
        message = str(exc)
        shown = message if message.startswith(option) else f"{option} {path}: {message}"
        raise UsageError(shown) from None
    except (OSError, InputError) as exc:
        raise UsageError(f"{option} {path}: {exc}") from None


def add_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        usage="%(prog)s FILE [FILE ...] --out FILE [options]",
        help="the sweep's HTML page from verdict files written earlier",
        description="Render the HTML report of a sweep from its verdict file (sweep --out), "
        "and its coverage verdicts and judged sample (--coverage-out, --judge-out) when "
        "given: counts per status, "
        "reason and source, the shift chart with its clusters and examples, superseded "
        "documents, coverage, and a hand audit's arithmetic. No chunk store is needed. A "
        "line that is no verdict is counted and named in the page; the rest is reported.",
        epilog=EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument(
        "verdicts", nargs="+", metavar="FILE", help="verdict files (.jsonl, .jsonl.gz, - stdin)"
    )
    report.add_argument("--out", required=True, metavar="FILE", help="the HTML page to write")
    report.add_argument("--title", default="Citation sweep report", help="the page's title")
    report.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the page and exit 0 when no valid verdict was read (by default that is "
        "exit 2: an empty or broken verdict file is more often a wrong file than a clean sweep)",
    )
    add_gate_options(report, gated_by_default=False)
    add_report_options(report)


def read_verdicts(paths: list[str], summary: SweepSummary, judged: JudgedRecords) -> int:
    """Every verdict of the files into ``summary``; returns how many lines were none."""
    max_bytes = DEFAULT_LIMITS.max_message_bytes
    unreadable = 0
    for path in paths:
        try:
            with open_input(path) as source:
                for number, line in read_lines(source.stream, max_bytes):
                    where = f"{path}:{number}"
                    if not isinstance(line, bytes):
                        summary.note_error(f"{where}: {line.describe(max_bytes)}")
                        unreadable += 1
                    elif not _take(line, where, summary, judged):
                        unreadable += 1
        except InputError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
    return unreadable


def _take(line: bytes, where: str, summary: SweepSummary, judged: JudgedRecords) -> bool:
    """One line into ``summary``; whether it was a verdict."""
    try:
        record = parse_json(line)
        if type(record) is dict and record.get("check") == "coverage":
            add_coverage_record(summary.coverage, record)
        elif type(record) is dict and record.get("check") == "entailment":
            judged.add(record)
        else:
            verdict, evidence = verdict_from_record(record)
            summary.add(verdict, evidence)
        return True
    except (InvalidJson, ValueError) as exc:
        summary.note_error(f"{where}: not a verdict: {exc}")
        return False


def run(args: argparse.Namespace) -> int:
    assumptions = audit_assumptions(args)
    gate = gate_from(args)
    refuse_unwritable("--out", args.out, args.verdicts)
    summary, judged = SweepSummary(from_verdicts=True), JudgedRecords()
    unreadable = read_verdicts(args.verdicts, summary, judged)
    write_report(
        "--out",
        args.out,
        summary,
        args.verdicts,
        ", ".join(args.verdicts),
        gate=gate,
        assumptions=assumptions,
        title=args.title,
        from_verdicts=True,
        unreadable=unreadable,
        judged=judged.to_json(),
    )
    print(
        f"{args.out}: {summary.citations:,} verdicts, drift ratio {summary.drift_ratio:.2%}"
        + (f", {unreadable:,} lines not verdicts" if unreadable else ""),
        file=sys.stderr,
    )
    if not summary.valid and not args.allow_empty:
        raise UsageError(
            f"no valid verdict was read from {', '.join(args.verdicts)}: is it the right file? "
            "(the page says so; --allow-empty exits 0)"
        )
    if gate is not None and not summary.passed(gate):
        return EXIT_GATE_FAILED
    return EXIT_OK
