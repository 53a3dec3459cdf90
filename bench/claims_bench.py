"""Benchmark: how well and how fast the coverage sentence classifier sorts claims from framing.

Prints figures; asserts nothing (tests/test_claims.py holds the floors, no timed tests anywhere).

    python bench/claims_bench.py [--classifier rules] [--classifications 200000]

1. Quality, on the labelled set tests/data/coverage/sentences.jsonl (see its README): for the
   ``tune`` and the ``measure`` split, the confusion matrix and the precision, recall and F1 of
   the *claim* class. Recall is the figure that matters most: a claim called framing is never
   checked for a citation. Only ``tune`` may be looked at sentence by sentence
   (``--show-tune-failures``); ``measure`` is for measuring and its failures are never printed.
2. Speed: the labelled sentences classified over and over (``--classifications`` in all) on one
   thread, as sentences per second and microseconds per sentence: each one new to the
   classifier (the rules' cache of recent sentences emptied before every call, the cost a
   sentence seen for the first time has), and as answers repeat them (cache kept); then
   hostile sentences of
   ``--hostile-mb`` megabytes each (one letter repeated, whitespace, every script with control
   characters and lone surrogates, repeated framing), as microseconds per call.

``--classifier`` takes what the ``coverage_classifier`` setting takes: ``rules`` (the default
classifier) or ``module.path:attribute``, so a replacement can be compared on the same figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.checks import claims  # noqa: E402
from exporter.checks.claims import (  # noqa: E402
    DEFAULT_CLASSIFIER,
    HybridClassifier,
    RuleClassifier,
    SentenceClassifier,
    SentenceKind,
    load_classifier,
)

DATA = ROOT / "tests" / "data" / "coverage" / "sentences.jsonl"
# whole answers written blind to the classifier, with which sentences were cited (ANSWERS.md)
ANSWERS = ROOT / "tests" / "data" / "coverage" / "answers.jsonl"
sys.path.insert(0, str(ROOT / "tests"))

from labelled_sets import (  # noqa: E402
    AnswerScores,
    answer_scores,
    measure_sets,
    second_reader_scores,
    second_readings,
)

MEASURE_SETS = measure_sets(ANSWERS.parent)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _quality(classifier: SentenceClassifier, rows: list[dict[str, str]], split: str) -> None:
    """Prints the confusion matrix and the claim-class scores of one split."""
    tp = fp = fn = tn = 0
    for row in rows:
        predicted = classifier.classify(row["text"]) is SentenceKind.CLAIM
        actual = row["label"] == "claim"
        tp += predicted and actual
        fp += predicted and not actual
        fn += actual and not predicted
        tn += not predicted and not actual
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    print(f"{split}: {len(rows)} sentences ({tp + fn} claims, {fp + tn} framing)")
    print("                    predicted claim  predicted framing")
    print(f"  labelled claim    {tp:>15}  {fn:>17}")
    print(f"  labelled framing  {fp:>15}  {tn:>17}")
    print(f"  claim precision {precision:.3f}  recall {recall:.3f}  F1 {f1:.3f}")


def _forgetting(classifier: SentenceClassifier) -> Callable[[], None] | None:
    """What empties the built-in classifier's caches, so each sentence is new to it."""
    if not isinstance(classifier, RuleClassifier | HybridClassifier):
        return None

    def forget() -> None:
        claims._classify.cache_clear()
        claims._classify_hybrid.cache_clear()
        claims._framing_where.cache_clear()

    return forget


def _speed(classifier: SentenceClassifier, sentences: list[str], classifications: int) -> None:
    """Prints the classification rate over the labelled sentences repeated, each one new to
    the classifier (no cache) and as repeated (the cache of the rules, when they are used)."""
    rounds = max(1, classifications // len(sentences))
    classify = classifier.classify
    forget = _forgetting(classifier)
    for label, cached in (("each new", False), ("repeated", True)):
        started = time.perf_counter()
        for _ in range(rounds):
            for sentence in sentences:
                if not cached and forget is not None:
                    forget()
                classify(sentence)
        elapsed = time.perf_counter() - started
        done = rounds * len(sentences)
        print(
            f"speed, {label}: {done:,} classifications of the labelled sentences in "
            f"{elapsed:.2f} s: {done / elapsed:,.0f} sentences/s, "
            f"{elapsed / done * 1e6:.2f} us per sentence"
        )


def _hostile(classifier: SentenceClassifier, megabytes: float) -> None:
    """Prints the cost of one call on each kind of huge sentence."""
    size = int(megabytes * 1_000_000)
    mixed = "Tĥé 数据 ünïcode \x00\x07\u200b\ud800 עברית العربية 🙂 ?!**- "
    cases = {
        "one letter": "a" * size,
        "whitespace": " \n\t" * (size // 3),
        "every script": (mixed * (size // len(mixed) + 1))[:size],
        "framing repeated": ("Thanks! I hope this helps. " * (size // 27 + 1))[:size],
    }
    for name, text in cases.items():
        calls = 20
        started = time.perf_counter()
        for _ in range(calls):
            kind = classifier.classify(text)
        elapsed = (time.perf_counter() - started) / calls
        print(
            f"hostile {megabytes:g} MB sentence, {name}: {elapsed * 1e6:.1f} us per call ({kind})"
        )


def _hostile_edges(classifier: SentenceClassifier) -> None:
    """Prints the cost of the sentences dearest to the rules that read a sentence's place: a
    line that almost parses as a signature in many ways, and long ones, alone in their answer
    (its opening and its closing at once)."""
    classify_in_answer = getattr(classifier, "classify_in_answer", None)
    if classify_in_answer is None:
        return
    forget = _forgetting(classifier)
    cases = {
        "hyphenated capitals": "A-" * 39 + "!",
        "spaced capitals": "A " * 39 + "!",
        "closing and names": "Regards, " + "Aa-" * 23 + "!",
        "numbers": "So " + "1." * 240 + "x",
        "words": "Regards, " + "your export " * 40 + "!",
    }
    # the closing wish is read only after another sentence ("Hi.") in a closing of its own
    closing = {
        "wish, punctuation": "Have " + "a-" * 36 + "!",
        "wish, exclamations": "Gute " + "!" * 74,
        "bare answer, spaced": "Yes " + "! " * 27,
    }
    for name, answer in [
        *((name, [text]) for name, text in cases.items()),
        *((name, ["Hi.", text]) for name, text in closing.items()),
    ]:
        calls = 200
        started = time.perf_counter()
        for _ in range(calls):
            if forget is not None:
                forget()
            kind = classify_in_answer(answer, len(answer) - 1, ())
        elapsed = (time.perf_counter() - started) / calls
        print(f"hostile answer edge, {name}: {elapsed * 1e6:.1f} us per call ({kind})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--classifier",
        default=DEFAULT_CLASSIFIER,
        help="'hybrid' (the default), 'rules' or 'module.path:attribute', as the "
        "coverage_classifier setting",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled sentences (JSONL)")
    parser.add_argument(
        "--classifications",
        type=int,
        default=200_000,
        help="how many classifications the speed figure is measured over (default 200000)",
    )
    parser.add_argument(
        "--hostile-mb",
        type=float,
        default=1.0,
        help="size of each hostile sentence in megabytes (default 1)",
    )
    parser.add_argument(
        "--show-tune-failures",
        action="store_true",
        help="list the tune sentences the classifier gets wrong (never the measure ones)",
    )
    args = parser.parse_args()

    classifier = load_classifier(args.classifier)
    rows = _rows(args.data)
    for split in ("tune", "measure"):
        _quality(classifier, [row for row in rows if row["split"] == split], split)
    print("blind answers (tests/data/coverage/answers.jsonl), as coverage flags them:")
    tune_sets = sorted(ANSWERS.parent.glob("answers_tune*.jsonl"))
    # each set scored once, for its own line and the pooled ones below
    measured: dict[Path, AnswerScores] = {}
    for path, split in [
        (ANSWERS, "tune"),
        *((path, "tune") for path in tune_sets),
        (ANSWERS, "measure"),
        *((path, "measure") for path in MEASURE_SETS),
    ]:
        scores = answer_scores(path, split, classifier)
        if path in MEASURE_SETS:
            measured[path] = scores
        print(f"  {path.name} " + scores.line(split))
    if MEASURE_SETS:  # one writer's set is one writer's: the figure to expect is them all
        pooled = AnswerScores.pooled(measured[path] for path in MEASURE_SETS)
        print(
            f"  the {len(MEASURE_SETS)} sets answers_measure*.jsonl together "
            + pooled.line("measure")
        )
    # the same sets labelled again by a second reader, blind to the first labels: how far
    # people agree, and what a reader's flags are worth against the first labels
    readings = [
        (path, *second_reader_scores(path, second))
        for path, second in second_readings(ANSWERS.parent)
    ]
    for path, scores, agree in readings:
        print(
            f"  {path.name}, a second reader: labels agree on {agree} of {scores.sentences}; "
            + scores.line("measure")
        )
    if readings:
        together = AnswerScores.pooled(scores for _, scores, _ in readings)
        classified = AnswerScores.pooled(
            measured.get(path) or answer_scores(path, "measure", classifier)
            for path, _, _ in readings
        )
        print(f"  those {len(readings)} sets, a second reader " + together.line("measure"))
        print(f"  those {len(readings)} sets, the classifier " + classified.line("measure"))
    if args.show_tune_failures:
        for row in rows:
            if row["split"] == "tune" and classifier.classify(row["text"]) != row["label"]:
                print(f"  tune failure {row['id']}: labelled {row['label']}: {row['text']}")
    _speed(classifier, [row["text"] for row in rows], args.classifications)
    _hostile(classifier, args.hostile_mb)
    _hostile_edges(classifier)


if __name__ == "__main__":
    main()
