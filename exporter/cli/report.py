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
from exporter.outputs.previous import SweepFileError, read_previous, read_summary, store_from
from exporter.outputs.verdict_reader import (
    JudgedRecords,
    add_coverage_record,
    verdict_from_record,
)
from exporter.pipeline.changes import Changes, PreviousSummary, PreviousVerdicts
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import InvalidJson, parse_json
from exporter.records.limits import DEFAULT_LIMITS

__all__ = [
    "add_parser",
    "add_report_options",
    "audit_assumptions",
    "previous_sweep",
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

  # what changed since Monday's sweep: new failures, fixed, still failing (by citation
  # from its verdict file; from its summary JSON, only how each status's count changed)
  citation-exporter report verdicts.jsonl.gz --summary sweep-summary.json \\
      --previous monday/verdicts.jsonl.gz --out sweep.html
  citation-exporter sweep --chunks chunks.jsonl.gz --citations citations.jsonl.gz \\
      --report sweep.html --previous monday/sweep-summary.json
"""

# The help of --previous, shared by report and sweep --report.
PREVIOUS_HELP = (
    "an earlier sweep to compare with: its verdict file (sweep --out; JSON Lines, gzip or "
    "not), for new failures, fixed and still failing per status and source, citation by "
    "citation; or its summary JSON (sweep --format json), for how each status's count "
    "changed. Read whole before the sweep (a bad line is exit 2); a verdict file costs about "
    "100 bytes of memory per citation (e.g. --previous monday/verdicts.jsonl.gz)"
)


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
    """The sweep the page compares with, and the hand audit it weighs the sweep against (the
    issue's defaults)."""
    parser.add_argument("--previous", metavar="FILE", help=PREVIOUS_HELP)
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


def previous_sweep(path: str | None) -> Changes | PreviousSummary | None:
    """--previous read whole, before any work: a bad file is a usage error naming its line."""
    if path is None:
        return None
    try:
        previous = read_previous(path)
    except SweepFileError as exc:
        raise UsageError(f"--previous {exc}") from None
    except InputError as exc:
        raise UsageError(f"--previous: cannot read {path}: {exc}") from None
    return Changes(previous) if isinstance(previous, PreviousVerdicts) else previous


def _summary_file(path: str | None, summary: SweepSummary) -> None:
    """--summary: what the sweep recorded of its store, into ``summary``."""
    if path is None:
        return
    try:
        store_from(path, read_summary(path), summary)
    except SweepFileError as exc:
        raise UsageError(f"--summary {exc}") from None
    except InputError as exc:
        raise UsageError(f"--summary: cannot read {path}: {exc}") from None


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
    report.add_argument(
        "--summary",
        metavar="FILE",
        help="the sweep's summary JSON (sweep --format json > sweep-summary.json): the page "
        "shows the chunk store's chunker fingerprint and when the store was read, which "
        "verdict files do not carry (without it, or from an older sweep: not recorded)",
    )
    report.add_argument("--title", default="Citation sweep report", help="the page's title")
    report.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the page and exit 0 when no valid verdict was read (by default that is "
        "exit 2: an empty or broken verdict file is more often a wrong file than a clean sweep)",
    )
    add_gate_options(report, gated_by_default=False)
    add_report_options(report)


def read_verdicts(
    paths: list[str],
    summary: SweepSummary,
    judged: JudgedRecords,
    changes: Changes | None = None,
) -> int:
    """Every verdict of the files into ``summary`` (and compared by ``changes``); returns how
    many lines were none."""
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
                    elif not _take(line, where, summary, judged, changes):
                        unreadable += 1
        except InputError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
    return unreadable


def _take(
    line: bytes,
    where: str,
    summary: SweepSummary,
    judged: JudgedRecords,
    changes: Changes | None,
) -> bool:
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
            if changes is not None:
                changes.add(verdict.citation_id, verdict.status, verdict.source)
        return True
    except (InvalidJson, ValueError) as exc:
        summary.note_error(f"{where}: not a verdict: {exc}")
        return False


def run(args: argparse.Namespace) -> int:
    assumptions = audit_assumptions(args)
    gate = gate_from(args)
    inputs = [*args.verdicts, *(p for p in (args.summary, args.previous) if p)]
    refuse_unwritable("--out", args.out, inputs)
    summary, judged = SweepSummary(from_verdicts=True), JudgedRecords()
    _summary_file(args.summary, summary)
    previous = previous_sweep(args.previous)
    changes = previous if isinstance(previous, Changes) else None
    unreadable = read_verdicts(args.verdicts, summary, judged, changes)
    write_report(
        "--out",
        args.out,
        summary,
        inputs,
        ", ".join(args.verdicts),
        gate=gate,
        assumptions=assumptions,
        title=args.title,
        from_verdicts=True,
        unreadable=unreadable,
        judged=judged.to_json(),
        previous=previous,
        previous_name=args.previous or "",
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
    if gate is None:
        return EXIT_OK
    # exit 1 says the gate failed; this line says which of its lines (the sweep's summary does)
    result = summary.judge(gate)
    print(f"gate: {result.verdict()}", file=sys.stderr)
    return EXIT_OK if result.passed else EXIT_GATE_FAILED
