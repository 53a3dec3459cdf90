"""``citation-exporter capture``: a backfill of logged responses, every line accounted for.

The responses are the SDKs' own objects dumped as JSON, as a team logs them; the events it
writes are swept against the same store, and every citation is ok.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from exporter.capture import from_anthropic
from exporter.cli import main

POLICY = "Refunds are issued within 30 days. Annual plans renew automatically."
WARRANTY = "The warranty lasts two years. It covers defects, not wear."
CHUNKS = [
    {"doc_id": "policy", "doc_version": "v3", "chunk_id": "policy#0", "text": POLICY,
     "doc_offset": 0},
    {"doc_id": "warranty", "doc_version": "v1", "chunk_id": "warranty#0", "text": WARRANTY,
     "doc_offset": 0},
]  # fmt: skip


def _message(text: str, start: int, end: int, cited: str, document: int = 0) -> dict[str, Any]:
    citation = {"type": "char_location", "document_index": document, "start_char_index": start,
                "end_char_index": end, "cited_text": cited, "document_title": None}  # fmt: skip
    return Message.model_validate(
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
         "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
         "content": [{"type": "text", "text": text, "citations": [citation]}]}
    ).model_dump(mode="json")  # fmt: skip


ANTHROPIC = [
    {"answer_id": "a-1", "documents": ["policy#0"], "topic": "billing",
     "response": _message("Refunds take 30 days.", 0, 35, "Refunds are issued within 30 days. ")},
    {"answer_id": "a-2", "documents": ["policy#0", "warranty#0"],
     "emitted_at": "2026-11-30T09:12:00Z",
     "response": _message("Two years of warranty.", 0, 29, "The warranty lasts two years.", 1)},
]  # fmt: skip


def _llamaindex_line() -> dict[str, Any]:
    piece = TextNode(
        text="Source 1:\nIt covers defects, not wear.\n", metadata={"doc_version": "v1"}
    )
    piece.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="warranty")
    response = Response(
        response="Wear is not covered [1].", source_nodes=[NodeWithScore(node=piece)]
    )
    nodes = [n.model_dump(mode="json") for n in response.source_nodes]
    dumped = {"response": response.response, "source_nodes": nodes}
    return {"answer_id": "l-1", "response": dumped}


def _langchain_line() -> dict[str, Any]:
    return {
        "answer_id": "c-1",
        "documents": ["warranty#0", "policy#0"],
        "response": {"answer": "Plans renew by themselves.",
                     "citations": [{"source_id": 1, "quote": "annual plans renew automatically"}]},
    }  # fmt: skip


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return _write(tmp_path / "chunks.jsonl", CHUNKS)


def _capture(
    tmp_path: Path, framework: str, lines: list[Any], store: Path, *extra: str
) -> tuple[int, Path]:
    responses = _write(tmp_path / f"{framework}.responses.jsonl", lines)
    out = tmp_path / f"{framework}.events.jsonl"
    code = main(["capture", "--from", framework, str(responses), "--documents", str(store),
                 "--out", str(out), *extra])  # fmt: skip
    return code, out


@pytest.mark.parametrize(
    ("framework", "lines"),
    [("anthropic", ANTHROPIC), ("langchain", [_langchain_line()]),
     ("llamaindex", [_llamaindex_line()])],
)  # fmt: skip
def test_logged_responses_become_events_that_sweep_ok(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], framework: str, lines: Any
) -> None:
    code, out = _capture(tmp_path, framework, lines, store)
    summary = capsys.readouterr().out
    assert code == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["answer_id"] for e in events] == [line["answer_id"] for line in lines]
    assert summary.startswith(f"capture --from {framework}: {len(lines)} response")
    assert all(c["doc_sha256"] for e in events for c in e["citations"])
    verdicts = tmp_path / "verdicts.jsonl"
    code = main(["sweep", "--chunks", str(store), "--citations", str(out), "--out", str(verdicts),
                 "--no-progress", "--judge-sample", "0"])  # fmt: skip
    capsys.readouterr()
    assert code == 0
    statuses = [json.loads(line)["status"] for line in verdicts.read_text().splitlines()]
    assert statuses == ["ok"] * sum(len(e["citations"]) for e in events)


def test_the_events_are_what_the_library_writes(tmp_path: Path, store: Path) -> None:
    _, out = _capture(tmp_path, "anthropic", ANTHROPIC[:1], store)
    chunk = CHUNKS[0]
    from exporter.capture import Chunk, document_fingerprint

    expected = from_anthropic(
        ANTHROPIC[0]["response"],
        [Chunk(**chunk)],
        answer_id="a-1",
        topic="billing",
        fingerprints={"policy": document_fingerprint(POLICY)},
    ).event
    assert json.loads(out.read_text()) == expected


def test_every_line_is_accounted_for(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[Any] = [
        ANTHROPIC[0],
        {**ANTHROPIC[0], "answer_id": "a-9", "documents": ["gone#0"]},  # a chunk not in the store
        [1, 2],
        {"answer_id": "", "response": {}},
        {"answer_id": "a-3"},
        {"answer_id": "a-4", "response": {"content": "x"}},
        {"answer_id": "a-5", "response": {}, "documents": [7]},
    ]
    responses = _write(tmp_path / "r.jsonl", lines)
    with responses.open("a") as handle:
        handle.write("not json\n\n" + json.dumps({"answer_id": "a-6", "response": "x" * 20}) + "\n")
    refusals, out = tmp_path / "refused.jsonl", tmp_path / "events.jsonl"
    code = main(["capture", "--from", "anthropic", str(responses), "--documents", str(store),
                 "--out", str(out), "--refusals", str(refusals), "--format", "json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["responses"] == 9 == summary["events"] + summary["not_captured"]
    assert summary["events"] == 2 and summary["unknown_chunk_ids"] == 1
    assert summary["refused"] == {"unmapped_document": 1, "unreadable_response": 2}
    assert len(summary["examples"]) == 5
    refused = [json.loads(line) for line in refusals.read_text().splitlines()]
    assert [(r["line"], r["answer_id"], r["reason"]) for r in refused] == [
        (2, "a-9", "unmapped_document"),
        (6, "a-4", "unreadable_response"),
        (10, "a-6", "unreadable_response"),
    ]


def test_the_text_summary_names_lines_and_reasons(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [ANTHROPIC[0], {"answer_id": "a-2", "response": {}, "documents": "policy#0"}]
    code, _ = _capture(tmp_path, "anthropic", lines, store)
    summary = capsys.readouterr().out
    assert code == 0
    assert "2 responses read; 1 answer event written" in summary
    assert "(1 citation)" in summary
    assert "not captured: 1 response (no event)" in summary
    assert (
        "anthropic.responses.jsonl:2: 'documents' must be a list of chunk ids, not str" in summary
    )


def test_a_compressed_log_and_an_oversized_line(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from exporter.cli.capture import MAX_RESPONSE_BYTES

    responses = tmp_path / "r.jsonl.gz"
    huge = {"answer_id": "big", "response": {"content": [], "pad": "x" * MAX_RESPONSE_BYTES}}
    with gzip.open(responses, "wt") as handle:
        handle.write(json.dumps(huge) + "\n" + json.dumps(ANTHROPIC[0]) + "\n")
    out = tmp_path / "events.jsonl.gz"
    code = main(["capture", "--from", "anthropic", str(responses), "--documents", str(store),
                 "--out", str(out), "--format", "json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["events"] == 1 and summary["not_captured"] == 1
    assert "bytes, above the 16,777,216 a response may have" in summary["examples"][0]
    with gzip.open(out, "rt") as handle:
        assert [json.loads(line)["answer_id"] for line in handle] == ["a-1"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "anthropic", "{r}", "--documents", "{d}", "--out", "{r}"], "same file"),
        (["--from", "anthropic", "{t}/none.jsonl", "--documents", "{d}", "--out", "{t}/o"],
         "none.jsonl"),
        (["--from", "anthropic", "{r}", "--documents", "{t}/none", "--out", "{t}/o"], "none"),
        (["--from", "openai", "{r}", "--documents", "{d}", "--out", "{t}/o"], "invalid choice"),
        (["--from", "anthropic", "{r}", "--documents", "{d}", "--out", "{t}/o",
          "--chunks-layout", "llamaindex"], "--chunks-layout is for a chunk store in Postgres"),
        (["--from", "anthropic", "{r}", "--documents", "{d}", "--out", "{t}/o",
          "--refusals", "{t}/o"], "different files"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    responses = _write(tmp_path / "r.jsonl", ANTHROPIC)
    values = {"r": str(responses), "d": str(store), "t": str(tmp_path)}
    with pytest.raises(SystemExit) as exit_info:
        main(["capture", *(arg.format(**values) for arg in argv)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in error
    assert json.loads(responses.read_text().splitlines()[0])["answer_id"] == "a-1"


def test_help_teaches_the_line_shape(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["capture", "--help"])
    shown = capsys.readouterr().out
    assert "a line of RESPONSES" in shown and "--documents" in shown and "--refusals" in shown


def test_a_backfill_reads_a_store_that_llamaindex_keeps_in_postgres(
    tmp_path: Path, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from postgres_support import fill_llamaindex

    fill_llamaindex(database, CHUNKS)
    responses = _write(tmp_path / "r.jsonl", [_llamaindex_line()])
    out = tmp_path / "events.jsonl"
    store = ["--documents", database, "--chunks-layout", "llamaindex"]
    code = main(["capture", "--from", "llamaindex", str(responses), *store, "--out", str(out),
                 "--format", "json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["chunks"] == 2 and summary["refused"] == {}
    (event,) = [json.loads(line) for line in out.read_text().splitlines()]
    (citation,) = event["citations"]
    assert (
        citation["chunk_id"] == "warranty#0" and citation["quote"] == "It covers defects, not wear."
    )
    assert citation["doc_span"] == [30, 58] and len(citation["doc_sha256"]) == 64
