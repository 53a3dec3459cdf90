"""Benchmark: how well and how fast the lexical entailment judge finds plain disagreements.

Prints figures; asserts nothing (tests/test_lexical_judge.py holds the floors, no timed tests).

    python bench/lexical_bench.py [--judgements 100000] [--hostile-mb 1]

1. Quality, on the labelled set tests/data/entailment/pairs.jsonl (see its README): for the
   ``tune`` and the ``measure`` split, the confusion matrix (labelled rows, judged columns) and
   the precision and recall of ``not_entailed``. Precision is the figure that matters: a
   faithful claim called not_entailed is a false alarm, and the bar is 0.95. Recall matters
   less (the model judge is asked whatever the lexical one leaves unknown). Only ``tune`` may
   be looked at pair by pair (``--show-tune-failures``); ``measure`` is for measuring and its
   failures are never printed.
2. Speed: the labelled pairs judged over and over (``--judgements`` in all) on one thread, as
   pairs per second and microseconds per pair; then hostile pairs, as milliseconds per call:
   claims and evidence of ``--hostile-mb`` megabytes (not read: unknown at once), and evidence
   of exactly the largest size that is read (MAX_EVIDENCE_CHARS) built to be slow: one letter,
   digits and dashes, every script with control characters and lone surrogates, quantities and
   negations repeated.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.entailment.lexical import (  # noqa: E402
    MAX_CLAIM_CHARS,
    MAX_EVIDENCE_CHARS,
    LexicalJudge,
)

DATA = ROOT / "tests" / "data" / "entailment" / "pairs.jsonl"
LABELS = ("entailed", "not_entailed", "unknown")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _quality(judge: LexicalJudge, rows: list[dict[str, str]], split: str) -> None:
    """Prints the confusion matrix and the not_entailed scores of one split."""
    cells: Counter[tuple[str, str]] = Counter()
    for row in rows:
        cells[row["label"], judge.judge(row["claim"], row["evidence"]).result.value] += 1
    labelled = Counter(row["label"] for row in rows)
    counts = ", ".join(f"{labelled[label]} {label}" for label in LABELS)
    print(f"{split}: {len(rows)} pairs ({counts})")
    corner = "labelled / judged"
    print(f"  {corner:<20}" + "".join(f"{label:>14}" for label in LABELS))
    for actual in LABELS:
        print(f"  {actual:<20}" + "".join(f"{cells[actual, judged]:>14}" for judged in LABELS))
    tp = cells["not_entailed", "not_entailed"]
    called = sum(cells[actual, "not_entailed"] for actual in LABELS)
    precision = tp / called if called else 0.0
    recall = tp / labelled["not_entailed"] if labelled["not_entailed"] else 0.0
    wrong_entailed = sum(cells[actual, "entailed"] for actual in LABELS if actual != "entailed")
    print(
        f"  not_entailed precision {precision:.3f} ({tp} of {called})  "
        f"recall {recall:.3f} ({tp} of {labelled['not_entailed']}); "
        f"entailed said wrongly {wrong_entailed} times"
    )


def _speed(judge: LexicalJudge, pairs: list[tuple[str, str]], judgements: int) -> None:
    """Prints the judging rate over the labelled pairs, repeated."""
    rounds = max(1, judgements // len(pairs))
    decide = judge.judge
    started = time.perf_counter()
    for _ in range(rounds):
        for claim, evidence in pairs:
            decide(claim, evidence)
    elapsed = time.perf_counter() - started
    done = rounds * len(pairs)
    print(
        f"speed: {done:,} judgements of the labelled pairs in {elapsed:.2f} s: "
        f"{done / elapsed:,.0f} pairs/s, {elapsed / done * 1e6:.1f} us per pair"
    )


def _hostile(judge: LexicalJudge, megabytes: float) -> None:
    """Prints the cost of one call on each kind of huge or crafted pair."""
    size = int(megabytes * 1_000_000)
    mixed = "Tĥé 数据 ünïcode \x00\x07\u200b\ud800 עברית العربية 🙂 ?!**- 3 days $5 not 1 800 555 "

    def fill(piece: str, length: int) -> str:
        return (piece * (length // len(piece) + 1))[:length]

    claim = "Refunds take 30 days, cost $5 and are not available on 1 May 2025."
    cases = {
        f"{megabytes:g} MB claim": (fill("Refunds take 30 days. ", size), claim),
        f"{megabytes:g} MB evidence": (claim, fill("Refunds take 60 days. ", size)),
        "largest read, one letter": (claim, "a" * MAX_EVIDENCE_CHARS),
        "largest read, digits and dashes": (claim, fill("1-2 ", MAX_EVIDENCE_CHARS)),
        "largest read, every script": (claim, fill(mixed, MAX_EVIDENCE_CHARS)),
        "largest read, quantities": (claim, fill("3 days 4 weeks $5 10% ", MAX_EVIDENCE_CHARS)),
        "largest read, negations": (claim, fill("not no never ", MAX_EVIDENCE_CHARS)),
        "largest claim and evidence": (
            fill("not 3 days ", MAX_CLAIM_CHARS),
            fill("no 4 days $5 ", MAX_EVIDENCE_CHARS),
        ),
    }
    for name, (claim_text, evidence) in cases.items():
        calls = 10
        started = time.perf_counter()
        for _ in range(calls):
            judgement = judge.judge(claim_text, evidence)
        elapsed = (time.perf_counter() - started) / calls
        print(f"hostile, {name}: {elapsed * 1e3:.2f} ms per call ({judgement.result.value})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled pairs (JSONL)")
    parser.add_argument(
        "--judgements",
        type=int,
        default=100_000,
        help="how many judgements the speed figure is measured over (default 100000)",
    )
    parser.add_argument(
        "--hostile-mb",
        type=float,
        default=1.0,
        help="size of the huge hostile claim and evidence in megabytes (default 1)",
    )
    parser.add_argument(
        "--show-tune-failures",
        action="store_true",
        help="list the tune pairs the judge gets wrong (never the measure ones)",
    )
    args = parser.parse_args()

    judge = LexicalJudge()
    rows = _rows(args.data)
    for split in ("tune", "measure"):
        _quality(judge, [row for row in rows if row["split"] == split], split)
    if args.show_tune_failures:
        for row in rows:
            if row["split"] != "tune":
                continue
            judgement = judge.judge(row["claim"], row["evidence"])
            wrong = judgement.result.value == "not_entailed" and row["label"] != "not_entailed"
            missed = row["label"] == "not_entailed" and judgement.result.value != "not_entailed"
            if wrong or missed:
                print(
                    f"  tune {'false alarm' if wrong else 'miss'} {row['id']} ({row['family']}): "
                    f"{row['claim']} | {row['evidence'][:100]} -> {judgement.reason}"
                )
    _speed(judge, [(row["claim"], row["evidence"]) for row in rows], args.judgements)
    _hostile(judge, args.hostile_mb)


if __name__ == "__main__":
    main()
