"""exporter.capture.from_langchain on langchain-core's own Document, with the answer shapes of
LangChain's citation how-to (CitedAnswer: source ids; QuotedAnswer: a quote per source)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pydantic import BaseModel

from exporter.capture import Chunk, chunk_of_document, from_langchain
from exporter.cli import main


class Citation(BaseModel):
    source_id: int
    quote: str


class QuotedAnswer(BaseModel):
    answer: str
    citations: list[Citation]


class CitedAnswer(BaseModel):
    answer: str
    citations: list[int]


TEXT = (
    "Refunds are issued within 30 days of purchase. Annual plans renew automatically. "
    "Refunds are issued to the original card."
)
DOCUMENTS = [
    Document(
        id="e-1",
        page_content=TEXT,
        metadata={"source": "refunds.md", "doc_version": "v3", "start_index": 120},
    ),
    Document(
        id="e-2",
        page_content="Seats can be added at any time. Added seats are prorated.",
        metadata={"source": "seats.md", "doc_version": "v1", "start_index": -1},
    ),
]


def test_a_document_is_the_chunk_the_postgres_layout_reads() -> None:
    assert chunk_of_document(DOCUMENTS[0]) == Chunk(
        doc_id="refunds.md", doc_version="v3", chunk_id="e-1", text=TEXT, doc_offset=120
    )
    # -1: a splitter that could not find the chunk in its document
    assert chunk_of_document(DOCUMENTS[1]).doc_offset is None


def test_model_written_quotes_are_recorded_as_the_text_found() -> None:
    answer = QuotedAnswer(
        answer="Hi! Refunds go back to your card. Extra seats are prorated.",
        citations=[
            # not verbatim: the model's case and punctuation
            Citation(source_id=0, quote="refunds are issued to the original card"),
            Citation(source_id=1, quote="Added seats are prorated."),
            Citation(source_id=1, quote="Seats are free forever."),
            Citation(source_id=5, quote="anything"),
        ],
    )
    captured = from_langchain(answer, DOCUMENTS, answer_id="a-1")
    assert [(r.reason, r.index) for r in captured.refusals] == [
        ("quote_not_in_source", 2),
        ("no_such_document", 3),
    ]
    event = captured.event
    assert event is not None
    assert event["sentences"] == [
        "Hi!",
        "Refunds go back to your card.",
        "Extra seats are prorated.",
    ]
    first, second = event["citations"]
    # found approximately (another case), widened to whole words
    assert first["quote"] == "Refunds are issued to the original card"
    assert TEXT[slice(*first["chunk_span"])] == first["quote"]
    assert first["doc_span"] == [120 + first["chunk_span"][0], 120 + first["chunk_span"][1]]
    assert first["sentence_index"] == 1
    assert second["quote"] == "Added seats are prorated."
    assert second["sentence_index"] == 2
    assert "doc_span" not in second


def test_source_ids_alone_cite_the_chunk_whole() -> None:
    answer = CitedAnswer(answer="Seats can be added any time.", citations=[1])
    captured = from_langchain(answer.model_dump(), DOCUMENTS, answer_id="a-2")
    assert captured.refusals == ()
    assert captured.event is not None
    [citation] = captured.event["citations"]
    assert citation["quote"] == DOCUMENTS[1].page_content
    assert citation["sentence_index"] == 0


def test_a_quote_found_twice_is_refused_not_guessed() -> None:
    answer = QuotedAnswer(answer="x", citations=[Citation(source_id=0, quote="Refunds are issued")])
    captured = from_langchain(answer, DOCUMENTS, answer_id="a")
    assert [r.reason for r in captured.refusals] == ["quote_not_in_source"]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (Document(page_content="x", metadata={"source": "s", "doc_version": "v"}), "no id"),
        (Document(id="i", page_content="x", metadata={"doc_version": "v"}), "'source'"),
        (Document(id="i", page_content="x", metadata={"source": "s"}), "'doc_version'"),
        ({"id": "i", "page_content": 5, "metadata": {"source": "s", "doc_version": "v"}}, "string"),
        ({"id": "i", "page_content": "x", "metadata": ["no"]}, "not an object"),
    ],
)
def test_a_document_that_is_no_chunk_is_a_refusal(document: Any, problem: str) -> None:
    answer = {"answer": "x", "citations": [0]}
    captured = from_langchain(answer, [document], answer_id="a")
    [refusal] = captured.refusals
    assert refusal.reason == "unreadable_citation" and problem in refusal.detail


@pytest.mark.parametrize(
    "answer", [None, "text", {"answer": 5}, {"answer": "x", "citations": "0"}, {"citations": []}]
)
def test_an_unreadable_answer_is_no_event(answer: object) -> None:
    captured = from_langchain(answer, DOCUMENTS, answer_id="a")
    assert captured.event is None
    assert [r.reason for r in captured.refusals] == ["unreadable_response"]


@pytest.mark.parametrize("citation", [True, -1, 2**80, "0", {"source_id": 0}, {"quote": "x"}])
def test_wrong_typed_citations_are_refusals(citation: object) -> None:
    captured = from_langchain({"answer": "x", "citations": [citation]}, DOCUMENTS, answer_id="a")
    assert len(captured.refusals) == 1
    assert captured.event is not None and captured.event["citations"] == []


def test_captured_answers_sweep_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = QuotedAnswer(
        answer="Refunds go back to your card. Plans renew.",
        citations=[
            Citation(source_id=0, quote="refunds are issued to the original card"),
            Citation(source_id=0, quote="Annual plans renew automatically"),
        ],
    )
    event = from_langchain(answer, DOCUMENTS, answer_id="a-1").event
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "".join(
            json.dumps({"doc_id": c.doc_id, "doc_version": c.doc_version, "chunk_id": c.chunk_id,
                        "text": c.text}) + "\n"
            for c in map(chunk_of_document, DOCUMENTS)
        )
    )  # fmt: skip
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(event) + "\n")
    out = tmp_path / "verdicts.jsonl"
    code = main(
        ["sweep", "--chunks", str(chunks), "--citations", str(events), "--out", str(out),
         "--no-progress", "--format", "json", "--judge-sample", "0"]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["ok", "ok"]


def test_a_refused_quote_names_the_sentence_it_supported() -> None:
    """A quote whose source is not among the documents is refused, but the quote was read:
    the sentence it supports is named in the event, so only that claim is unjudged."""
    answer = QuotedAnswer(
        answer="Refunds are issued within 30 days of purchase. Seats cost $5 each. Ask us.",
        citations=[
            Citation(source_id=0, quote="Refunds are issued within 30 days of purchase."),
            Citation(source_id=7, quote="Seats cost $5 each."),
        ],
    )
    captured = from_langchain(answer, DOCUMENTS, answer_id="a")
    assert [(r.reason, r.sentence) for r in captured.refusals] == [("no_such_document", 1)]
    assert captured.event is not None
    assert captured.event["refused_citation_sentences"] == [1]
