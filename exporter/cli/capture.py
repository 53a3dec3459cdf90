"""``citation-exporter capture``: logged responses -> answer events, for a backfill.

The store is read as ``sweep`` reads it (a JSON Lines file, .gz, or Postgres by its layout);
each response line is captured against it (exporter.capture.backfill says the line's shape);
every line is accounted for: an event written, or counted as not captured with its reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

import orjson

from exporter.capture.backfill import FRAMEWORKS, LineError, Tally, capture_line, refusal_record
from exporter.capture.offsets import UNITS
from exporter.cli.common import EXIT_OK, UsageError
from exporter.cli.sources import add_chunk_store_arguments, chunk_source
from exporter.errors import InputError, OutputError, RecordError
from exporter.file_sweep import load_store
from exporter.files.jsonl import open_output
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import parse_json
from exporter.records.limits import DEFAULT_LIMITS
from exporter.sources.jsonl import JsonLines

__all__ = ["MAX_RESPONSE_BYTES", "add_parser", "run"]

#: The longest response line read: a response carries its answer and citations (and a
#: LlamaIndex one its source nodes' text), so it may be larger than the event it becomes.
MAX_RESPONSE_BYTES = 16 * DEFAULT_LIMITS.max_message_bytes
# Problems printed as examples; all of them are counted, and each refusal is in --refusals.
_EXAMPLES = 5

EXAMPLES = """\
examples:
  # Anthropic Messages API responses logged with the chunk ids of each request's documents
  citation-exporter capture --from anthropic responses.jsonl --documents chunks.jsonl \\
      --out events.jsonl
  # LlamaIndex responses, the store in Postgres as LlamaIndex's PGVectorStore wrote it
  citation-exporter capture --from llamaindex responses.jsonl.gz \\
      --documents postgresql://app@db/app --chunks-layout llamaindex --out events.jsonl.gz
  # every refused citation, with its line and reason
  citation-exporter capture --from langchain responses.jsonl --documents chunks.jsonl \\
      --out events.jsonl --refusals refused.jsonl

a line of RESPONSES (one JSON object):
  {"answer_id": "a-17", "topic": "billing", "emitted_at": "2026-11-30T09:12:00Z",
   "response": <what the framework returned, as JSON>,
   "documents": ["chunk id", ...], "search_results": [["chunk id", ...], ...]}
  documents: the chunks the request showed, in order (Anthropic: a list of chunk ids for a
  custom-content document, null for one not from the store); LlamaIndex needs none.

exit status: 0 every line read (each response an event or counted as not captured), 2 a file
that cannot be read or written, or a usage error.
"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "capture",
        help="write answer events from logged Anthropic, LangChain or LlamaIndex responses "
        "(a backfill)",
        description="Write the answer events of logged responses, as exporter.capture writes "
        "them at answer time: each citation's quote is the chunk's own text at the span "
        "written, checked against what the response says it cited, or the citation is "
        "refused with its reason. The events are what 'sweep --citations' and the exporter "
        "read.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "responses", metavar="RESPONSES", help="JSON Lines of logged responses (.gz, - stdin)"
    )
    parser.add_argument(
        "--from",
        dest="framework",
        required=True,
        choices=FRAMEWORKS,
        help="what wrote the responses",
    )
    parser.add_argument(
        "--documents",
        "--chunks",
        dest="chunks",
        required=True,
        metavar="STORE",
        help="the chunk store the answers cited: chunk records as JSON Lines (.gz) or "
        "postgresql://... (then --chunks-layout or --chunks-query)",
    )
    parser.add_argument(
        "--out", required=True, metavar="EVENTS", help="where the answer events go (.gz, - stdout)"
    )
    parser.add_argument(
        "--refusals", metavar="FILE", help="JSON Lines of every citation refused, and why"
    )
    parser.add_argument(
        "--unit",
        choices=UNITS,
        default="code_point",
        help="Anthropic's char_location offsets: code points (default), UTF-16 code units (a "
        "JavaScript producer), UTF-8 bytes",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="summary")
    add_chunk_store_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """The command; what cannot be read or written is one line and exit 2."""
    try:
        return _run(args)
    except (InputError, OutputError) as exc:
        raise UsageError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    inputs = [args.responses, args.chunks]
    if args.responses == "-" and args.chunks == "-":
        raise UsageError("only one of RESPONSES and --documents can read stdin")
    if args.refusals is not None and args.refusals == args.out:
        raise UsageError("--refusals and --out must be different files")
    loaded = SweepSummary()
    store = load_store(chunk_source(args), loaded)
    tally = Tally()
    problems: list[str] = []
    responses = JsonLines(args.responses)
    with (
        open_output(args.out, inputs) as out,
        _refusals_file(args.refusals, [*inputs, args.out]) as refused,
        contextlib.closing(responses.records(MAX_RESPONSE_BYTES)) as lines,
    ):
        for number, line in lines:
            where = responses.where(number)
            try:
                if not isinstance(line, bytes):
                    raise LineError(
                        f"a line of {line.size:,} bytes, above the {MAX_RESPONSE_BYTES:,} a "
                        "response may have; not read"
                    )
                parsed = parse_json(line)
                captured = capture_line(args.framework, parsed, store, tally, unit=args.unit)
            except (LineError, RecordError) as error:
                tally.unreadable()
                _example(problems, f"{where}: {error}")
                continue
            tally.add(captured)
            if captured.event is not None:
                out.write(orjson.dumps(captured.event, option=orjson.OPT_APPEND_NEWLINE))
            answer_id = parsed.get("answer_id")
            for refusal in captured.refusals:
                if refused is not None:
                    record = refusal_record(number, answer_id, refusal)
                    refused.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
                _example(problems, f"{where}: {refusal.reason}: {refusal.detail}")
    _print(args, tally, loaded, problems)
    return EXIT_OK


@contextlib.contextmanager
def _refusals_file(path: str | None, inputs: list[str]) -> Iterator[IO[bytes] | None]:
    if path is None:
        yield None
        return
    with open_output(path, inputs) as stream:
        yield stream


def _example(problems: list[str], problem: str) -> None:
    if len(problems) < _EXAMPLES:
        problems.append(problem if len(problem) <= 300 else problem[:297] + "...")


def _print(
    args: argparse.Namespace, tally: Tally, loaded: SweepSummary, problems: list[str]
) -> None:
    refused = sum(tally.refused.values())
    if args.format == "json":
        print(
            json.dumps(
                {
                    "responses": tally.responses,
                    "events": tally.events,
                    "citations": tally.citations,
                    "not_captured": tally.not_captured,
                    "refused": dict(sorted(tally.refused.items())),
                    "unknown_chunk_ids": tally.unknown_chunks,
                    "chunks": loaded.chunks_loaded,
                    "invalid_chunk_records": loaded.invalid_chunk_records,
                    "examples": problems,
                    "chunk_errors": loaded.errors[:_EXAMPLES],
                },
                indent=1,
            )
        )
        return
    stream = sys.stderr if args.out == "-" else sys.stdout
    print(
        f"capture --from {args.framework}: {_count(tally.responses, 'response')} read; "
        f"{_count(tally.events, 'answer event')} written to {args.out} "
        f"({_count(tally.citations, 'citation')})",
        file=stream,
    )
    if tally.not_captured:
        print(f"  not captured: {_count(tally.not_captured, 'response')} (no event)", file=stream)
    if refused:
        reasons = ", ".join(f"{reason} {n:,}" for reason, n in tally.refused.most_common())
        where = f" (each in {args.refusals})" if args.refusals else " (--refusals FILE lists each)"
        print(f"  citations refused: {refused:,}: {reasons}{where}", file=stream)
    if tally.unknown_chunks:
        print(
            f"  chunk ids not in {args.chunks}: {tally.unknown_chunks:,} (their citations "
            "refused as unmapped_document)",
            file=stream,
        )
    if loaded.invalid_chunk_records:
        print(f"  invalid chunk records skipped: {loaded.invalid_chunk_records:,}", file=stream)
        for error in loaded.errors[:_EXAMPLES]:
            print(f"  e.g. {error}", file=stream)
    for problem in problems:
        print(f"  e.g. {problem}", file=stream)


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")
