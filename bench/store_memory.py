"""Benchmark: the chunk store's resident memory per million chunks of realistic text.

Prints figures; asserts nothing.

    python bench/store_memory.py [--chunks 100000 250000 500000 1000000] [--chunk-chars 800]
                                 [--typeset-share 0.05]

1. Writes (once, to a temporary file) JSONL chunk records as the scenarios make them: documents
   of product-documentation-like text (``exporter.simulate.text``), rendered as the original
   extractor does (a ``--typeset-share`` of them as a new one does: curly quotes, dashes,
   ligatures, so their strings take 2 bytes a character in CPython), cut on sentence boundaries
   into chunks of at most ``--chunk-chars`` characters, ids like the scenario's, ``doc_offset``
   set.
2. For each size, in a fresh process (so its RSS is clean): reads the first N records line by
   line into a :class:`~exporter.checks.store.ChunkStore` as the exporter does (``parse_json``,
   ``decode_chunk``, ``apply``), and reports VmRSS of /proc/self/status (after
   ``gc.collect()``) before and after, the delta, the delta per million chunks and per byte of
   JSON; then builds every document's view as the relocator does on first use
   (``store.document(doc_id).folded``) and reports that second delta the same way.
"""

from __future__ import annotations

import argparse
import gc
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from exporter.simulate.chunker import cut_by_groups, pack_sentences
from exporter.simulate.scenario import SOURCES
from exporter.simulate.text import Style, make_document, render

MIB = 1024 * 1024


def _write_chunks(path: Path, count: int, chunk_chars: int, typeset_share: float, seed: int) -> int:
    """Write ``count`` chunk records; returns their total characters of text."""
    written = characters = 0
    with path.open("wb") as out:
        for index in range(1, count + 1):
            rng = random.Random(f"{seed}:doc:{index}")
            document = make_document(rng, rng.randint(30, 90), boilerplate=rng.random() < 0.3)
            typeset = rng.random() < typeset_share
            rendering = render(document, Style(72 if typeset else 80, typeset, index))
            groups = pack_sentences(rendering.spans, chunk_chars)
            doc_id = f"doc-{index:07d}"
            source = rng.choice(SOURCES)
            chunker = f"pdfx-{2 if typeset else 1}/sentence-{chunk_chars}"
            for chunk in cut_by_groups(rendering.text, rendering.spans, groups):
                record = {
                    "doc_id": doc_id,
                    "doc_version": "v1",
                    "chunk_id": f"{doc_id}#{chunk.ordinal}",
                    "text": chunk.text,
                    "ordinal": chunk.ordinal,
                    "doc_offset": chunk.doc_offset,
                    "source": source,
                    "chunker": chunker,
                }
                out.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
                written += 1
                characters += len(chunk.text)
                if written == count:
                    return characters
    return characters


def _rss() -> int:
    """This process's resident memory in bytes, after a full collection."""
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError("no VmRSS in /proc/self/status")


def measure(path: str, count: int) -> None:
    """Child process: load ``count`` records, then every document's view; print JSON figures."""
    from exporter.checks.store import ChunkStore
    from exporter.records.decode import decode_chunk, parse_json
    from exporter.records.schema import Chunk

    store = ChunkStore()
    before = _rss()
    json_bytes = documents = 0
    last_doc = ""
    started = time.perf_counter()
    with open(path, "rb") as source:
        for line in source:
            chunk = decode_chunk(parse_json(line))
            assert isinstance(chunk, Chunk)
            store.apply(chunk)
            json_bytes += len(line)
            if chunk.doc_id != last_doc:
                documents += 1
                last_doc = chunk.doc_id
            if store.chunk_count == count:
                break
    load_seconds = time.perf_counter() - started
    loaded = _rss()
    started = time.perf_counter()
    for index in range(1, documents + 1):
        view = store.document(f"doc-{index:07d}")
        assert view is not None
        view.folded  # noqa: B018 - built on first use: that is what is measured
    view_seconds = time.perf_counter() - started
    viewed = _rss()
    figures = {
        "chunks": store.chunk_count,
        "documents": store.document_count,
        "json_bytes": json_bytes,
        "before": before,
        "loaded": loaded,
        "viewed": viewed,
        "load_seconds": load_seconds,
        "view_seconds": view_seconds,
    }
    sys.stdout.buffer.write(orjson.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chunks", type=int, nargs="+", default=[100_000, 250_000, 500_000, 1_000_000]
    )
    parser.add_argument("--chunk-chars", type=int, default=800, help="most characters a chunk")
    parser.add_argument("--typeset-share", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--measure", nargs=2, metavar=("FILE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure[0], int(args.measure[1]))
        return

    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "chunks.jsonl"
        started = time.perf_counter()
        characters = _write_chunks(
            path, max(args.chunks), args.chunk_chars, args.typeset_share, args.seed
        )
        print(
            f"{max(args.chunks):,} chunks of at most {args.chunk_chars} characters "
            f"({characters / max(args.chunks):.0f} on average), {args.typeset_share:.0%} of "
            f"documents typeset (non-ASCII), {path.stat().st_size / MIB:,.0f} MiB of JSONL "
            f"written in {time.perf_counter() - started:.0f} s; Python "
            f"{sys.version.split()[0]}, one fresh process per size",
            flush=True,
        )
        print(
            f"{'chunks':>9} {'docs':>7} {'JSON MiB':>9} {'RSS before':>10} {'after':>7} "
            f"{'delta':>7} {'per 1M':>7} {'/JSON':>6} {'load s':>6} | {'views':>6} "
            f"{'per 1M':>7} {'/JSON':>6} {'total':>7}   (MiB unless said)",
            flush=True,
        )
        for count in sorted(args.chunks):
            done = subprocess.run(
                [sys.executable, __file__, "--measure", str(path), str(count)],
                capture_output=True,
                check=True,
            )
            f = orjson.loads(done.stdout)
            json_mib = f["json_bytes"] / MIB
            delta = (f["loaded"] - f["before"]) / MIB
            views = (f["viewed"] - f["loaded"]) / MIB
            per_million = 1e6 / f["chunks"]
            print(
                f"{f['chunks']:9,} {f['documents']:7,} {json_mib:9,.0f} "
                f"{f['before'] / MIB:10,.0f} {f['loaded'] / MIB:7,.0f} {delta:7,.0f} "
                f"{delta * per_million:7,.0f} {delta / json_mib:6.2f} {f['load_seconds']:6.1f} | "
                f"{views:6,.0f} {views * per_million:7,.0f} {views / json_mib:6.2f} "
                f"{f['viewed'] / MIB:7,.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
