"""What one hostile citation costs: CPU per check for inputs crafted to be slow.

    python bench/hostile_bench.py            # this checkout
    PYTHONPATH=/path/to/old/checkout python bench/hostile_bench.py   # compare another version

Each case is one citation whose recorded span no longer holds its quote, so the check goes all
the way to relocation, the costliest path; the figure is the CPU time of one ``check_citation``
(median of a few runs, thread CPU time), with the verdict it got. The last lines give the worst
whole message the default limits allow (``max_citations_per_answer`` citations of the worst
case) and the cases that version one took minutes over (issue 8: a 10,000-character quote with a
near-copy in its document took 10 s, 20,000 characters 115 s).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from exporter.checks.engine import Policy, check_citation
from exporter.checks.store import ChunkStore
from exporter.records.decode import decode_chunk
from exporter.records.schema import Citation

_SENTENCE = (
    "the refund policy applies to every plan and all customers within thirty days of purchase "
    "except enterprise contracts which renew annually unless cancelled in writing"
)
WORDS = _SENTENCE.split()


def _text(rng: random.Random, length: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(length // 4 + 1))[:length]


def _store(text: str, chunk: int = 2000) -> ChunkStore:
    """The document ``FILLER + text``, cut into chunks placed by offset."""
    store = ChunkStore()
    text = FILLER + text
    for n, at in enumerate(range(0, len(text), chunk)):
        store.apply(
            decode_chunk(
                {
                    "doc_id": "d",
                    "doc_version": "v1",
                    "chunk_id": f"d#{n}",
                    "text": text[at : at + chunk],
                    "ordinal": n,
                    "doc_offset": at,
                }
            )
        )
    return store


def _near_copy(quote: str, every: int = 97) -> str:
    return "".join(c for i, c in enumerate(quote) if i % every != every // 2)


FILLER = "z" * 2000  # the first chunk, where every recorded span points: never the quote


def _citation(quote: str, **extra: Any) -> Citation:
    return Citation("c", "a", "d", "v1", "d#0", 0, min(len(quote), 2000), quote, **extra)


Case = tuple[str, Callable[[], tuple[Citation, ChunkStore]]]


def _near_copy_case(quote_chars: int, doc_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        rng = random.Random(quote_chars * 7 + doc_chars)
        text = _text(rng, doc_chars)
        start = doc_chars // 2
        quote = _near_copy(text[start : start + quote_chars])
        return _citation(quote), _store(text)

    return f"near-copy quote {quote_chars:,} chars, document {doc_chars:,}", make


def _repeated_case(quote_chars: int, copies: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        rng = random.Random(quote_chars + copies)
        quote = _text(rng, quote_chars)
        text = " ".join(_near_copy(quote, 89 + n % 7) for n in range(copies))
        return _citation(quote), _store(text)

    return f"quote {quote_chars:,} chars, {copies} near-copies in the document", make


def _periodic_case(quote_chars: int, doc_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        text = ("ab" * doc_chars)[:doc_chars]
        quote = ("ab" * quote_chars)[: quote_chars - 1] + "x"
        return _citation(quote), _store(text)

    return f"periodic text 'abab...', quote {quote_chars:,}, document {doc_chars:,}", make


def _long_context_case(context_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        rng = random.Random(context_chars)
        quote = _text(rng, 200)
        text = f"{quote} middle {quote} end"
        return _citation(quote, prefix="p" * context_chars, suffix="s" * context_chars), _store(
            text
        )

    return f"two copies, prefix and suffix of {context_chars:,} chars each", make


def _expanding_case(quote_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        quote = "\ufdfa" * quote_chars  # one character that NFKC folds into 18
        text = "intro " + quote[:-1] + "\ufdfb" + " outro"
        return _citation(quote), _store(text, chunk=200_000)

    return f"{quote_chars:,} characters that fold into 18 each (U+FDFA)", make


def _long_quote_case(quote_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        rng = random.Random(quote_chars)
        text = _text(rng, quote_chars + 1000)
        return _citation(_near_copy(text[500 : 500 + quote_chars])), _store(text, chunk=200_000)

    return f"near-copy quote of {quote_chars:,} chars (above max_quote_chars)", make


def _combining_flood_case(marks: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        quote = "a" + "\u0301\u0316" * (marks // 2)  # canonical reordering is quadratic
        return _citation(quote), _store("intro " + quote[:-1] + " outro", chunk=200_000)

    return f"quote of {marks:,} combining marks of mixed classes", make


def _expanding_span_case(span_chars: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        store = ChunkStore()
        store.apply(
            decode_chunk(
                {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0",
                 "text": "\ufdfa" * span_chars, "doc_offset": 0}
            )
        )  # fmt: skip
        citation = Citation("c", "a", "d", "v1", "d#0", 0, span_chars, "x")
        return citation, store

    return f"a 1-character quote whose span holds {span_chars:,} U+FDFA", make


def _anchor_chain_case(quote_chars: int, hits: int) -> Case:
    def make() -> tuple[Citation, ChunkStore]:
        rng = random.Random(quote_chars)
        quote = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(quote_chars))
        slack = int(0.04 * quote_chars)
        pieces, length = slack + 1, quote_chars // (slack + 1)
        buffer = ["#"] * ((hits * pieces + 2) * (slack + 1) + quote_chars + 100)
        for k in range(pieces):
            for j in range(hits):
                at = (k * hits + j) * (slack + 1) + k * length
                buffer[at : at + length] = quote[k * length : (k + 1) * length]
        return _citation(quote), _store("".join(buffer))

    return f"every piece of a {quote_chars:,}-char quote {hits} times, chained", make


CASES: list[Case] = [
    _near_copy_case(100, 10_000),
    _near_copy_case(300, 100_000),
    _near_copy_case(1_000, 100_000),
    _near_copy_case(1_000, 1_000_000),
    _repeated_case(1_000, 30),
    _repeated_case(1_000, 200),
    _periodic_case(1_000, 200_000),
    _long_context_case(1_000_000),
    _expanding_case(1_000),
    _long_quote_case(10_000),
    _long_quote_case(20_000),
    _combining_flood_case(60_000),
    _expanding_span_case(200_000),
    _anchor_chain_case(1_000, 64),
]


def _rebuild_after_update(text: str, label: str, runs: int) -> tuple[str, float]:
    """CPU of one drifted citation right after its document changed: the view is rebuilt."""
    store = _store(text)
    rng = random.Random(1)
    quote = _near_copy(text[len(text) // 2 : len(text) // 2 + 300])
    times = []
    for n in range(runs):
        update = {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "doc_offset": 0}
        store.apply(decode_chunk({**update, "text": FILLER + str(n + rng.random())}))
        started = time.thread_time()
        check_citation(_citation(quote), store, Policy())
        times.append(time.thread_time() - started)
    return label, statistics.median(times) * 1000


def _measure(make: Callable[[], tuple[Citation, ChunkStore]], runs: int) -> tuple[float, str]:
    citation, store = make()
    store.document("d")  # the view is built once per document, not per citation
    assert store.document("d") is not None
    store.document("d").folded  # noqa: B018 - folded once, as in a sweep
    times, verdict = [], None
    for _ in range(runs):
        started = time.thread_time()
        verdict = check_citation(citation, store, Policy())
        times.append(time.thread_time() - started)
    assert verdict is not None
    return statistics.median(times) * 1000, f"{verdict.status.value} ({verdict.reason})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per case (median)")
    args = parser.parse_args()
    print(f"{'case':<64} {'CPU ms':>9}  verdict")
    worst = 0.0
    for name, make in CASES:
        milliseconds, verdict = _measure(make, args.runs)
        worst = max(worst, milliseconds)
        print(f"{name:<64} {milliseconds:>9.2f}  {verdict}")
    rng = random.Random(3)
    prose = _text(rng, 2_000_000).replace(" the ", " \u201cthe\u201d ")
    for label, milliseconds in (
        _rebuild_after_update(prose, "view rebuilt after an update: 2,000,000 chars of prose", 3),
        _rebuild_after_update(
            "\ufdfa" * 200_000, "view rebuilt after an update: 200,000 chars of U+FDFA", 3
        ),
    ):
        print(f"{label:<64} {milliseconds:>9.2f}")
    limit = getattr(Policy(), "limits", None)
    if limit is not None:
        print(
            f"\nworst case {worst:.2f} ms per citation; the worst message the limits allow "
            f"({limit.max_citations_per_answer} such citations): "
            f"{worst * limit.max_citations_per_answer / 1000:.2f} s "
            f"(relocation_budget_ms={limit.relocation_budget_ms:g}, "
            f"max_quote_chars={limit.max_quote_chars:,})"
        )


if __name__ == "__main__":
    main()
