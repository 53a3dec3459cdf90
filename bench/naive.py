"""The straightforward per-citation implementation the sweep is measured against.

What a careful engineer writes first, with the same folding rules and outcomes: the standard
``json`` module, a character-by-character normalisation with a Python offset map, ``fuzz.ratio``
on the span, and relocation by normalising and scanning every chunk of the document with
``partial_ratio_alignment``. No document index, no caching, no fast paths.
"""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from collections import defaultdict
from typing import Any

from rapidfuzz import fuzz

_FOLD = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u00b4", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-"),
}
_INVISIBLE = set("\u00ad\u200b\u200c\u200d\u2060\ufeff")


def normalise(text: str) -> tuple[str, list[int]]:
    """Fold ``text`` one character at a time; ``offsets[i]`` is the raw index of output i."""
    out: list[str] = []
    offsets: list[int] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in _INVISIBLE:
            i += 1
            continue
        if char.isspace():
            j = i
            while j < len(text) and (text[j].isspace() or text[j] in _INVISIBLE):
                j += 1
            if out and out[-1] == "-" and "\n" in text[i:j] and j < len(text) and text[j].isalpha():
                out.pop()
                offsets.pop()
            elif not out or out[-1] != " ":
                out.append(" ")
                offsets.append(i)
            i = j
            continue
        folded = _FOLD.get(char) or unicodedata.normalize("NFKC", char)
        if folded == "-" and out and out[-1] == "-":
            i += 1
            continue
        if out and out[-1] == "-" and folded.isalpha() and len(out) > 1 and out[-2].isalpha():
            out.pop()
            offsets.pop()
        for piece in folded:
            out.append(piece)
            offsets.append(i)
        i += 1
    return "".join(out), offsets


def check(
    citation: dict[str, Any],
    chunks: dict[str, dict[str, Any]],
    by_doc: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    doc_chunks = by_doc.get(citation["doc_id"])
    verdict = {
        "citation_id": citation["citation_id"],
        "answer_id": citation.get("answer_id"),
        "doc_id": citation["doc_id"],
        "repair": None,
    }
    if not doc_chunks:
        return verdict | {"status": "document_missing", "action": "drop_citation"}
    live_version = doc_chunks[-1]["doc_version"]
    quote, _ = normalise(citation["quote"])
    quote = quote.strip()
    start, end = citation["chunk_span"]
    chunk = chunks.get(citation["chunk_id"])
    if chunk is not None and end <= len(chunk["text"]):
        text, _ = normalise(chunk["text"][start:end])
        if fuzz.ratio(quote, text.strip()) >= 98:
            return verdict | {"status": "ok", "action": "keep"}
    if citation["doc_version"] != live_version:
        return verdict | {"status": "superseded", "action": "pin_archived_version"}
    best = (0.0, None, 0, 0)
    for candidate in doc_chunks:
        folded, offsets = normalise(candidate["text"])
        found = fuzz.partial_ratio_alignment(quote, folded)
        if found is not None and found.score > best[0]:
            raw_end = offsets[found.dest_end - 1] + 1 if found.dest_end else 0
            best = (found.score, candidate["chunk_id"], offsets[found.dest_start], raw_end)
    if best[0] >= 98:
        return verdict | {
            "status": "drift_repaired",
            "action": "rewrite_offsets",
            "repair": {"chunk_id": best[1], "chunk_span": [best[2], best[3]]},
        }
    return verdict | {"status": "drift_unrepaired", "action": "degrade_to_document"}


def run(chunks_path: str, citations_path: str, out_path: str, limit: int | None = None) -> int:
    """Sweep like the real command; returns the number of citations checked."""
    chunks: dict[str, dict[str, Any]] = {}
    with open(chunks_path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record.get("deleted"):
                chunks.pop(record["chunk_id"], None)
            else:
                chunks[record["chunk_id"]] = record
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chunk in chunks.values():
        by_doc[chunk["doc_id"]].append(chunk)
    checked = 0
    with open(citations_path, encoding="utf-8") as lines, open(out_path, "w") as out:
        for line in lines:
            if limit is not None and checked >= limit:
                break
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            for citation in record.get("citations", [record]):
                citation.setdefault("answer_id", record.get("answer_id"))
                try:
                    verdict = check(citation, chunks, by_doc)
                except (KeyError, TypeError, ValueError):
                    verdict = {"status": "invalid"}
                out.write(json.dumps(verdict) + "\n")
                checked += 1
    return checked


if __name__ == "__main__":
    started = time.perf_counter()
    count = run(
        sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None
    )
    elapsed = time.perf_counter() - started
    print(f"{count} citations in {elapsed:.2f} s ({elapsed / count * 1e6:.0f} us per citation)")
