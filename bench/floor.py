"""The floor of any sweep written in this Python: what no implementation can skip, and nothing else.

Per citation: parse its JSON line (orjson), find its chunk's text (a dict), compare the text at
its span with its quote, and write a verdict line (orjson). No validation, no folding, no
relocation of the ones that failed, no coverage, no judge, no summary: a sweep that does its
job costs more. Measured beside the straightforward implementation (``naive.py``) and the sweep
in one run, it says how large a speed-up any implementation in this language can show here.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

import orjson


def chunk_texts(chunks_path: str) -> dict[str, str]:
    """Each live chunk's text by its id (the last record of an id wins, a deletion drops it)."""
    texts: dict[str, str] = {}
    with open(chunks_path, "rb") as lines:
        for line in lines:
            record = orjson.loads(line)
            if record.get("deleted"):
                texts.pop(record["chunk_id"], None)
            else:
                texts[record["chunk_id"]] = record["text"]
    return texts


def check_all(texts: dict[str, str], lines: list[bytes]) -> tuple[int, bytes]:
    """(citations, verdict lines) of every line: the least work a verdict takes."""
    out: list[bytes] = []
    count = 0
    for line in lines:
        record = orjson.loads(line)
        citations = record.get("citations", (record,))
        for citation in citations:
            count += 1
            text = texts.get(citation["chunk_id"])
            start, end = citation["chunk_span"]
            held = text is not None and text[start:end] == citation["quote"]
            verdict = {
                "citation_id": citation["citation_id"],
                "answer_id": citation.get("answer_id", record.get("answer_id")),
                "doc_id": citation["doc_id"],
                "status": "ok" if held else "failed",
            }
            out.append(orjson.dumps(verdict))
    return count, b"\n".join(out)


def per_citation(chunks_path: str, citations_path: str, repeat: int = 3) -> float:
    """Seconds per citation of :func:`check_all` (best of ``repeat``), the store held frozen as
    a sweep holds it."""
    texts = chunk_texts(chunks_path)
    with open(citations_path, "rb") as handle:
        lines = handle.read().splitlines()
    gc.freeze()
    best = float("inf")
    count = 0
    for _ in range(repeat):
        started = time.perf_counter()
        count, written = check_all(texts, lines)
        with open(os.devnull, "wb") as sink:
            sink.write(written)
        best = min(best, time.perf_counter() - started)
    gc.unfreeze()
    return best / max(count, 1)


def start_up(repeat: int = 3) -> float:
    """Seconds a ``citation-exporter`` command takes to start and do nothing (``--version``):
    the interpreter and the imports every command pays."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(["citation-exporter", "--version"], capture_output=True, check=True)
        best = min(best, time.perf_counter() - started)
    return best


if __name__ == "__main__":
    print(f"{per_citation(sys.argv[1], sys.argv[2]) * 1e6:.2f} us per citation")
