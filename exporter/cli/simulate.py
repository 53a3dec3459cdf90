"""``citation-exporter simulate``: a seeded scenario with expected verdicts, written to files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from exporter.cli.common import EXIT_OK, UsageError, positive, ratio
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

EXAMPLES = """\
examples:
  citation-exporter simulate --out /tmp/scenario --answers 5000 --seed 42
  citation-exporter sweep --chunks /tmp/scenario/chunks.jsonl \\
      --citations /tmp/scenario/citations.jsonl --out /tmp/scenario/verdicts.jsonl

files written: chunks.before.jsonl (the store the answers were written against), chunks.jsonl
(that store followed by the changes, as a compacted topic replays it), citations.jsonl (answer
events, with their sentences, and standalone citations mixed), expected.jsonl (the verdict each
citation should get), expected-coverage.jsonl (which sentences of each answer event are claims,
framing, uncited), misclaims.jsonl (the cited claims that misstate a number of their quote: not
entailed), scenario.json (parameters and counts).
"""


def add_parser(commands: Any) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="write a seeded, realistic scenario with expected verdicts",
        description="Generate documents, chunks, answers with citations, the live store after "
        "a chunk-size change, a re-extraction, a content refresh, silent edits and deletions, "
        "and the expected verdict for every citation; answers carry their sentences, some "
        "claims left uncited, with the expected coverage of every answer.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = ScenarioConfig()
    simulate.add_argument("--out", metavar="DIR", required=True, help="directory to write into")
    simulate.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    simulate.add_argument(
        "--answers", type=positive, default=defaults.answers, help="default: %(default)s"
    )
    simulate.add_argument(
        "--documents", type=positive, default=None, help="default: answers / 40, at least 10"
    )
    simulate.add_argument(
        "--chunk-size",
        type=positive,
        default=defaults.chunk_size,
        metavar="CHARS",
        help="chunk size before the change (default: %(default)s)",
    )
    simulate.add_argument(
        "--new-chunk-size",
        type=positive,
        default=defaults.new_chunk_size,
        metavar="CHARS",
        help="chunk size of re-chunked documents (default: %(default)s)",
    )
    for change in ("resize", "retypeset", "refresh", "silent-edit", "delete"):
        key = f"{change.replace('-', '_')}_share"
        simulate.add_argument(
            f"--{change}-share",
            type=ratio,
            default=getattr(defaults, key),
            metavar="F",
            help=f"share of documents that get the {change} change (default: %(default)s)",
        )
    simulate.add_argument(
        "--context-share",
        type=ratio,
        default=defaults.context_share,
        metavar="F",
        help="share of citations stored with prefix/suffix (default: %(default)s)",
    )
    simulate.add_argument(
        "--uncited-share",
        type=ratio,
        default=defaults.uncited_share,
        metavar="F",
        help="share of answer events asserting a claim no citation supports, for coverage "
        "(default: %(default)s)",
    )
    simulate.add_argument(
        "--framing-share",
        type=ratio,
        default=defaults.framing_share,
        metavar="F",
        help="chance of an opener, and again of a sign-off, around an answer's claims "
        "(default: %(default)s)",
    )
    simulate.add_argument(
        "--misclaim-share",
        type=ratio,
        default=defaults.misclaim_share,
        metavar="F",
        help="share of cited claims that misstate a number of their quote, for the entailment "
        "judges (default: %(default)s)",
    )
    simulate.add_argument(
        "--reworded-share",
        type=ratio,
        default=defaults.reworded_share,
        metavar="F",
        help="share of cited claims restated after a lead-in ('According to the source, ...'): "
        "faithful, but only a model judge can tell (default: %(default)s)",
    )
    simulate.add_argument(
        "--hint-share",
        type=ratio,
        default=defaults.hint_share,
        metavar="F",
        help="share of citations carrying a position hint: doc_span and doc_sha256, where the "
        "quote was in the whole document and that document's fingerprint; a repeated sentence "
        "cited with one needs no prefix/suffix (default: %(default)s)",
    )
    simulate.add_argument(
        "--invalid-lines",
        type=int,
        default=0,
        metavar="N",
        help="malformed citation lines to mix in (default: %(default)s)",
    )
    simulate.add_argument("--gzip", action="store_true", help="write .jsonl.gz files")


def run(args: argparse.Namespace) -> int:
    config = ScenarioConfig(
        seed=args.seed,
        answers=args.answers,
        documents=args.documents,
        chunk_size=args.chunk_size,
        new_chunk_size=args.new_chunk_size,
        resize_share=args.resize_share,
        retypeset_share=args.retypeset_share,
        refresh_share=args.refresh_share,
        silent_edit_share=args.silent_edit_share,
        delete_share=args.delete_share,
        context_share=args.context_share,
        uncited_share=args.uncited_share,
        framing_share=args.framing_share,
        misclaim_share=args.misclaim_share,
        reworded_share=args.reworded_share,
        hint_share=args.hint_share,
        invalid_lines=args.invalid_lines,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        paths = write_scenario(build_scenario(config), Path(args.out), compress=args.gzip)
    except OSError as exc:
        raise UsageError(f"cannot write scenario to {args.out}: {exc}") from None
    summary = orjson.loads(paths["summary"].read_bytes())
    print(
        f"wrote {summary['citations']:,} citations over {summary['documents']:,} documents "
        f"to {args.out}; expected: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(summary["expected_statuses"].items()))
        + "; coverage: {answers:,} answers with sentences, {claims:,} claims, "
        "{uncited:,} uncited".format(**summary["coverage"])
    )
    return EXIT_OK
