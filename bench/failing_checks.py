"""The check of the citations whose span does not hold its quote verbatim, repeated: a workload
to count instructions of, where timing cannot tell a few percent apart.

    valgrind --tool=callgrind python bench/failing_checks.py DIR 0 [--lines 8000]
    valgrind --tool=callgrind python bench/failing_checks.py DIR 2 [--lines 8000]

``DIR`` is a scenario of ``bench/sweep_bench.py`` (``bench/out/scenario-...``). The store is
loaded, the non-verbatim citations of the first ``--lines`` lines are checked once (their
documents' views built and folded), then ``PASSES`` more times. The difference between the
instruction counts callgrind collects with 2 passes and with 0, halved and divided by the
citations printed, is the instructions one such check takes: exact, whatever else the machine
is doing. Run it on ``PYTHONPATH=`` an exported older tree (``git archive REV exporter``) and
on this one to compare.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from exporter.checks.engine import Policy, check_citation
from exporter.checks.store import ChunkStore
from exporter.records.decode import decode_chunk, decode_citations, parse_json
from exporter.records.schema import Citation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("passes", type=int)
    parser.add_argument("--lines", type=int, default=8000)
    args = parser.parse_args()
    store = ChunkStore()
    with open(args.scenario / "chunks.jsonl", "rb") as chunks:
        for line in chunks:
            store.apply(decode_chunk(parse_json(line)))
    with open(args.scenario / "citations.jsonl", "rb") as citations:
        lines = citations.read().splitlines()[: args.lines]
    decoded = [
        c for line in lines for c in decode_citations(parse_json(line)) if type(c) is Citation
    ]
    failing = [
        c
        for c in decoded
        if (chunk := store.chunk(c.chunk_id)) is None or chunk.text[c.start : c.end] != c.quote
    ]
    policy = Policy()
    for _ in range(args.passes + 1):  # the first pass builds and folds the documents' views
        for citation in failing:
            check_citation(citation, store, policy)
    print(f"{len(failing):,} non-verbatim citations, checked {args.passes + 1} times")


if __name__ == "__main__":
    main()
