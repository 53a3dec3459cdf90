"""The sweep benchmark's floor (bench/floor.py) does the least a verdict takes, and all of it:
every citation of every line gets a verdict, ``ok`` exactly where its span holds its quote."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import floor


def test_the_floor_writes_a_verdict_for_every_citation_and_ok_only_where_the_span_holds(
    tmp_path: Path,
) -> None:
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_bytes(
        b"\n".join(
            orjson.dumps(record)
            for record in (
                {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0",
                 "text": "Refunds take 14 days."},
                {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#1", "text": "gone"},
                {"chunk_id": "d#1", "deleted": True},
            )
        )
    )  # fmt: skip
    cited = {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "quote": "take 14 days"}
    lines = [
        orjson.dumps({"answer_id": "a", "citations": [
            {**cited, "citation_id": "c1", "chunk_span": [8, 20]},
            {**cited, "citation_id": "c2", "chunk_span": [7, 19]},
        ]}),
        orjson.dumps({**cited, "answer_id": "b", "citation_id": "c3", "chunk_id": "d#1",
                      "chunk_span": [0, 4]}),
    ]  # fmt: skip
    count, written = floor.check_all(floor.chunk_texts(str(chunks)), lines)
    verdicts = [orjson.loads(line) for line in written.split(b"\n")]
    assert count == 3
    assert [(v["citation_id"], v["answer_id"], v["status"]) for v in verdicts] == [
        ("c1", "a", "ok"),
        ("c2", "a", "failed"),
        ("c3", "b", "failed"),  # its chunk was deleted
    ]
