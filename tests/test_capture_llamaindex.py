"""exporter.capture.from_llamaindex on llama-index-core's own engines, with no network.

The responses are made by a real ``CitationQueryEngine`` over a real ``VectorStoreIndex``
(``MockEmbedding``) whose LLM answers by citing the numbered sources its prompt shows, as a
model would. Both behaviours of the engine are proven: the installed one (from 0.14.24 a
citation node has a fresh id and no offsets) and the one before it, reproduced from 0.14.23's
``_create_citation_nodes`` (each piece keeps its parent's id).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.response.schema import Response
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode

from exporter.capture import Captured, Chunk, chunk_of_node, from_llamaindex
from exporter.cli import main

POLICY = (
    "Refunds are issued within 14 days of the return.  Items must be unused.\n\n"
    "Shipping is free over £40. Express delivery costs £5 and takes one day.\n\n"
    "Gift cards cannot be refunded. They never expire."
)
WARRANTY = "The warranty lasts two years. It covers defects, not wear. Claims need a receipt."


class CitingLLM(CustomLLM):
    """Answers with one sentence per numbered source in its prompt, citing it by number."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "Now it's your turn" not in prompt:  # an engine that shows no numbered sources
            return CompletionResponse(text="Refunds take 14 days. The warranty lasts two years.")
        shown = prompt.split("Now it's your turn", 1)[1]
        sources = re.findall(r"Source (\d+):\n(\S+ \S+ \S+)", shown)
        return CompletionResponse(
            text=" ".join(f"As the text says, {words} [{number}]." for number, words in sources)
        )

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


class CitationQueryEngineUpTo01423(CitationQueryEngine):
    """The engine as it was up to llama-index-core 0.14.23: its ``_create_citation_nodes``."""

    def _create_citation_nodes(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        new_nodes: list[NodeWithScore] = []
        for node in nodes:
            text_chunks = self.text_splitter.split_text(
                node.node.get_content(metadata_mode=self._metadata_mode)
            )
            for text_chunk in text_chunks:
                text = f"Source {len(new_nodes) + 1}:\n{text_chunk}\n"
                new_node = NodeWithScore(
                    node=TextNode.model_validate(node.node.model_dump()), score=node.score
                )
                new_node.node.set_content(text)
                new_nodes.append(new_node)
        return new_nodes


def _nodes(chunk_size: int = 64, tag: str = "n") -> list[BaseNode]:
    documents = [
        Document(text=POLICY, id_="policy", metadata={"doc_version": "v3"}),
        Document(text=WARRANTY, id_="warranty", metadata={"doc_version": "v1"}),
    ]
    splitter = SentenceSplitter(
        chunk_size=chunk_size, chunk_overlap=0, id_func=lambda i, doc: f"{doc.id_}#{tag}{i}"
    )
    return splitter.get_nodes_from_documents(documents)


def _query(engine_class: type[CitationQueryEngine] = CitationQueryEngine) -> Response:
    index = VectorStoreIndex(_nodes(), embed_model=MockEmbedding(embed_dim=8))
    engine = engine_class.from_args(
        index,
        llm=CitingLLM(),
        similarity_top_k=10,
        citation_chunk_size=20,
        citation_chunk_overlap=0,
    )
    response = engine.query("What are the refund and warranty terms?")
    assert isinstance(response, Response)
    return response


NODES = _nodes()
RESPONSE = _query()


def _capture(response: object = RESPONSE, nodes: Any = NODES, **options: Any) -> Captured:
    return from_llamaindex(response, nodes, answer_id="a-1", **options)


@pytest.mark.parametrize("engine", [CitationQueryEngine, CitationQueryEngineUpTo01423])
def test_each_cited_source_is_the_text_found_in_the_store(
    engine: type[CitationQueryEngine],
) -> None:
    response = _query(engine)
    pieces = [n.node.get_content() for n in response.source_nodes]
    assert len(pieces) >= 4 and all(p.startswith("Source ") for p in pieces)
    if engine is CitationQueryEngine:  # the installed engine: fresh ids, no offsets
        assert {n.node.node_id for n in response.source_nodes}.isdisjoint(n.node_id for n in NODES)
        assert {n.node.start_char_idx for n in response.source_nodes} == {None}
    captured = _capture(response)
    assert captured.refusals == ()
    event = captured.event
    assert event is not None
    assert len(event["citations"]) == len(pieces)
    by_id = {n.node_id: n for n in NODES}
    for number, citation in enumerate(event["citations"]):
        piece = pieces[number].split("\n", 1)[1].rstrip("\n")
        node = by_id[citation["chunk_id"]]
        start, end = citation["chunk_span"]
        assert citation["quote"] == piece == node.get_content()[start:end]
        assert citation["doc_id"] == node.ref_doc_id
        document = POLICY if node.ref_doc_id == "policy" else WARRANTY
        assert document[slice(*citation["doc_span"])] == piece
        assert f"[{number + 1}]" in event["sentences"][citation["sentence_index"]]


def test_a_dict_response_and_dict_nodes_capture_alike() -> None:
    dumped = {
        "response": RESPONSE.response,
        "source_nodes": [n.model_dump(mode="json") for n in RESPONSE.source_nodes],
    }
    nodes = [json.loads(json.dumps(n.model_dump(mode="json"))) for n in NODES]
    assert _capture(dumped, nodes) == _capture()
    assert _capture(nodes=[chunk_of_node(n) for n in NODES]) == _capture()


def test_an_engine_without_numbers_cites_each_source_whole() -> None:
    index = VectorStoreIndex(NODES, embed_model=MockEmbedding(embed_dim=8))
    response = index.as_query_engine(llm=CitingLLM(), similarity_top_k=2).query("Refunds?")
    assert not re.search(r"\[\d+\]", str(response.response))
    for nodes in (NODES, []):  # the store's nodes, or none: a whole node is its own chunk
        captured = _capture(response, nodes)
        assert captured.refusals == ()
        assert captured.event is not None
        citations = captured.event["citations"]
        shown = [n.node.get_content() for n in response.source_nodes]
        assert [c["quote"] for c in citations] == shown
        assert all("sentence_index" not in c for c in citations)


def test_a_refused_source_of_an_answer_without_numbers_hides_no_claim() -> None:
    """Without numbers a source is cited whole, by no sentence: refused, it names none, so
    the answer's uncited claims stay uncited (once it made every one of them unjudged)."""
    piece = NodeWithScore(node=TextNode(text="Source 1:\nNot in any node.\n", id_="fresh"))
    piece.node.relationships = RESPONSE.source_nodes[0].node.relationships
    response = Response(response="It says so. And so.", source_nodes=[piece])
    captured = _capture(response)
    assert [(r.reason, r.sentence) for r in captured.refusals] == [("quote_not_in_source", None)]
    assert captured.event is not None
    assert "refused_citation_sentences" not in captured.event


def test_a_node_is_the_chunk_the_postgres_layout_reads() -> None:
    node = NODES[0]
    assert chunk_of_node(node) == Chunk(
        doc_id="policy", doc_version="v3", chunk_id="policy#n0", text=node.get_content(),
        doc_offset=0,
    )  # fmt: skip
    unversioned = TextNode(text="x", id_="c")
    with pytest.raises(ValueError, match="names no document"):
        chunk_of_node(unversioned)


def test_each_unusable_source_is_a_refusal_with_its_reason() -> None:
    piece = NodeWithScore(node=TextNode(text="Source 1:\nNot in any node.\n", id_="fresh"))
    piece.node.relationships = RESPONSE.source_nodes[0].node.relationships
    response = Response(
        response="It says so [1]. And so [2]. And more [9].",
        source_nodes=[piece, RESPONSE.source_nodes[1]],
    )
    captured = _capture(response)
    assert [(r.reason, r.index) for r in captured.refusals] == [
        ("quote_not_in_source", 0),
        ("no_such_source", 8),
    ]
    assert captured.event is not None and len(captured.event["citations"]) == 1
    # the sentences the refused numbers stood in: coverage counts those claims unjudged
    assert [r.sentence for r in captured.refusals] == [0, 2]
    assert captured.event["refused_citation_sentences"] == [0, 2]
    # the store's nodes not given: nothing to find a piece in
    assert {r.reason for r in _capture(nodes=[]).refusals} == {"chunk_not_given"}


@pytest.mark.parametrize(
    "response",
    [None, 7, "text", {"response": None}, {"response": "x", "source_nodes": "nodes"},
     {"response": "x [1]", "source_nodes": [{"node": {"text": 5}}]},
     {"response": "x [1]", "source_nodes": [{"node": None}]}],
)  # fmt: skip
def test_hostile_responses_are_refusals_never_exceptions(response: object) -> None:
    captured = _capture(response)
    assert captured.refusals
    assert captured.event is None or captured.event["citations"] == []


@pytest.mark.parametrize("nodes", [None, "nodes", {"a": 1}, [None, 5, {"text": "x"}]])
def test_unreadable_store_nodes_are_said_in_the_refusal(nodes: object) -> None:
    captured = _capture(nodes=nodes)
    assert captured.refusals and {r.reason for r in captured.refusals} <= {
        "chunk_not_given",
        "unreadable_response",
    }


def _chunk_lines(nodes: list[Any]) -> str:
    lines = []
    for node in nodes:
        chunk = chunk_of_node(node)
        record = {name: getattr(chunk, name) for name in
                  ("doc_id", "doc_version", "chunk_id", "text", "doc_offset")}  # fmt: skip
        lines.append(json.dumps(record) + "\n")
    return "".join(lines)


def _sweep(tmp_path: Path, nodes: list[Any], event: dict[str, Any], name: str) -> list[Any]:
    chunks, events = tmp_path / f"{name}.chunks.jsonl", tmp_path / f"{name}.events.jsonl"
    chunks.write_text(_chunk_lines(nodes))
    events.write_text(json.dumps(event) + "\n")
    out = tmp_path / f"{name}.verdicts.jsonl"
    main(
        ["sweep", "--chunks", str(chunks), "--citations", str(events), "--out", str(out),
         "--no-progress", "--format", "json", "--judge-sample", "0"]
    )  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_captured_answers_sweep_ok_and_repair_after_a_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = _capture().event
    assert event is not None
    assert {v["status"] for v in _sweep(tmp_path, NODES, event, "before")} == {"ok"}
    # a re-index with another chunk size: other node ids, other boundaries
    reindexed = _nodes(chunk_size=32, tag="r")
    assert {n.node_id for n in reindexed}.isdisjoint(n.node_id for n in NODES)
    verdicts = _sweep(tmp_path, reindexed, event, "after")
    capsys.readouterr()
    texts = {n.node_id: n.get_content() for n in reindexed}
    statuses = []
    for verdict, citation in zip(verdicts, event["citations"], strict=True):
        holders = [node_id for node_id, text in texts.items() if citation["quote"] in text]
        statuses.append(verdict["status"])
        if not holders:  # the new boundaries cut the quote: no one chunk holds it now
            assert verdict["status"] == "drift_unrepaired"
            continue
        assert verdict["status"] == "drift_repaired"
        start, end = verdict["repair"]["chunk_span"]
        assert verdict["repair"]["chunk_id"] in holders
        assert texts[verdict["repair"]["chunk_id"]][start:end] == citation["quote"]
    assert statuses.count("drift_repaired") >= 3


@pytest.mark.parametrize("engine", [CitationQueryEngine, CitationQueryEngineUpTo01423])
def test_the_index_docstore_gives_the_nodes_of_the_documents_cited(
    engine: type[CitationQueryEngine],
) -> None:
    index = VectorStoreIndex(_nodes(), embed_model=MockEmbedding(embed_dim=8))
    response = engine.from_args(
        index, llm=CitingLLM(), similarity_top_k=10, citation_chunk_size=20
    ).query("What are the refund and warranty terms?")
    from_docstore = from_llamaindex(response, index.docstore, answer_id="a-1")
    assert from_docstore.refusals == ()
    assert from_docstore == from_llamaindex(response, NODES, answer_id="a-1")


def test_numbers_past_the_bound_still_name_their_sentences() -> None:
    """Past max_citations_per_answer a number is not read, but the sentence it stands in is
    known: named in the event, so that claim is unjudged, not flagged uncited."""
    text = " ".join(f"Claim number {n} holds [2]." for n in range(600))
    captured = from_llamaindex(
        {"response": text, "source_nodes": [{"node": {"text": "x", "id_": "n1"}}]}, [],
        answer_id="a",
    )  # fmt: skip
    assert captured.event is not None
    assert captured.event["refused_citation_sentences"] == list(range(600))
    [past] = [r for r in captured.refusals if r.reason == "too_many_citations"]
    assert past.detail == "100 citations past the first 500 were not read"


@pytest.mark.parametrize(
    "text",
    [
        "Refunds are issued within 30 days [1]. Plans renew yearly.",
        "Refunds are issued within 30 days. [1] Plans renew yearly.",
        "Refunds are issued within 30 days. [1][1] Plans renew yearly.",
    ],
)
def test_a_number_after_the_stop_cites_the_sentence_before(text: str) -> None:
    """Models write "30 days. [1] Plans ..." too: the splitter puts the number at the start of
    the next sentence, but it cites the one it follows (a refused one once hid that claim)."""
    refused = from_llamaindex(
        {"response": text, "source_nodes": [{"node": {"text": "x", "id_": "n1"}}]}, [],
        answer_id="a",
    )  # fmt: skip
    assert refused.event is not None
    assert refused.event["refused_citation_sentences"] == [0]
