"""Properties of capture: offsets convert exactly, and no response raises or writes a citation
whose span does not hold its quote."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.capture import Chunk, from_anthropic, from_llamaindex
from exporter.capture.offsets import OffsetError, to_code_points
from exporter.capture.sentences import sentence_spans

_TEXT = st.text(st.characters(codec=None), max_size=60)


@given(_TEXT, st.data())
def test_an_offset_in_any_unit_converts_to_its_code_point(text: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(text)))
    head = text[:at]
    assert to_code_points(text, at, "code_point") == at
    assert to_code_points(text, len(head.encode("utf-16-le", "surrogatepass")) // 2, "utf16") == at
    assert to_code_points(text, len(head.encode("utf-8", "surrogatepass")), "utf8") == at


@given(_TEXT, st.integers(-3, 400), st.sampled_from(["code_point", "utf16", "utf8"]))
def test_any_offset_converts_or_is_refused(text: str, offset: int, unit: Any) -> None:
    try:
        at = to_code_points(text, offset, unit)
    except OffsetError as error:
        assert error.reason in {"offset_past_text", "offset_splits_character"}
    else:
        assert 0 <= at <= len(text)


@given(st.text(max_size=300))
def test_sentences_are_ordered_trimmed_pieces_of_the_text(text: str) -> None:
    spans = sentence_spans(text)
    end = 0
    for start, stop in spans:
        assert end <= start < stop <= len(text)
        piece = text[start:stop]
        assert piece == piece.strip() and piece
        end = stop


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=5)
    ),
    max_leaves=20,
)
_CITATION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "char_location",
                "content_block_location",
                "search_result_location",
                "page_location",
                "x",
            ]
        ),
    },
    optional={
        "document_index": st.integers(-1, 3) | _JSON,
        "search_result_index": st.integers(-1, 2),
        "start_char_index": st.integers(-2, 90),
        "end_char_index": st.integers(-2, 90),
        "start_block_index": st.integers(-1, 3),
        "end_block_index": st.integers(-1, 3),
        "cited_text": st.text(max_size=40) | _JSON,
    },
)
CHUNKS = [
    Chunk(
        doc_id="d",
        doc_version="v",
        chunk_id="d#0",
        text="Refunds take 30 days. 😀 Refunds take 30 days.",
    ),
    [
        Chunk(doc_id="e", doc_version="v", chunk_id="e#0", text="One."),
        Chunk(doc_id="e", doc_version="v", chunk_id="e#1", text="Two."),
    ],
]


@settings(max_examples=300)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": st.just("text"), "text": st.text(max_size=40)},
            optional={"citations": st.lists(_CITATION | _JSON, max_size=3)},
        )
        | _JSON,
        max_size=4,
    ),
    st.sampled_from(["code_point", "utf16", "utf8"]),
)
def test_no_response_raises_and_every_span_holds_its_quote(content: list[Any], unit: Any) -> None:
    captured = from_anthropic(
        {"content": content}, CHUNKS, answer_id="a", search_results=[CHUNKS[1]], unit=unit
    )
    chunks = {"d#0": CHUNKS[0], "e#0": CHUNKS[1][0], "e#1": CHUNKS[1][1]}  # type: ignore[index]
    for citation in (captured.event or {}).get("citations", []):
        start, end = citation["chunk_span"]
        assert chunks[citation["chunk_id"]].text[start:end] == citation["quote"]  # type: ignore[union-attr]
        assert citation["quote"].strip() == citation["quote"] != ""
        if "sentence_index" in citation:  # absent only for a citing block of whitespace
            assert 0 <= citation["sentence_index"] < len(captured.event["sentences"])  # type: ignore[index]


_STORE = [
    {"id_": "p#0", "text": "Refunds take 30 days. Refunds take 30 days. Gifts never expire.",
     "metadata": {"doc_version": "v1"}, "relationships": {"1": {"node_id": "p"}}},
    {"id_": "p#1", "text": "Gifts never expire.", "start_char_idx": 64,
     "metadata": {"doc_version": "v1"}, "relationships": {"1": {"node_id": "p"}}},
]  # fmt: skip
_PIECE = st.builds(
    lambda number, text: f"Source {number}:\n{text}\n",
    st.integers(0, 4),
    st.sampled_from(["Refunds take 30 days.", "Gifts never expire.", "30 days", "", " "])
    | st.text(max_size=30),
)
_SOURCE_NODE = st.fixed_dictionaries(
    {"node": st.fixed_dictionaries(
        {"text": _PIECE | _JSON},
        optional={"id_": st.sampled_from(["p#0", "p#1", "fresh"]) | _JSON,
                  "relationships": st.just({"1": {"node_id": "p"}}) | _JSON,
                  "metadata": st.just({"doc_version": "v1"}) | _JSON},
    ) | _JSON},
)  # fmt: skip


@settings(max_examples=300)
@given(
    st.text(st.sampled_from("ab [],0123. \n"), max_size=60),
    st.lists(_SOURCE_NODE | _JSON, max_size=4),
    st.sampled_from([_STORE, [], _STORE[:1]]),
)
def test_no_llamaindex_response_raises_and_every_span_holds_its_quote(
    answer: str, sources: list[Any], store: list[Any]
) -> None:
    captured = from_llamaindex({"response": answer, "source_nodes": sources}, store, answer_id="a")
    texts = {node["id_"]: node["text"] for node in _STORE}
    for citation in (captured.event or {}).get("citations", []):
        start, end = citation["chunk_span"]
        text = texts.get(citation["chunk_id"])
        if text is not None:  # else a source node that is its own chunk
            assert text[start:end] == citation["quote"]
        assert citation["quote"].strip() == citation["quote"] != ""


def test_an_answer_with_a_lone_surrogate_is_refused_saying_so() -> None:
    """Found by an attack: it was 'reading it raised TypeError'."""
    chunk = Chunk(doc_id="d", doc_version="v", chunk_id="c", text="Refunds take 30 days.")
    for captured in (
        from_anthropic(
            {"content": [{"type": "text", "text": "Hi \ud800."}]}, [chunk], answer_id="a"
        ),
        from_llamaindex({"response": "Hi \ud800 [1].", "source_nodes": []}, [], answer_id="a"),
    ):
        assert captured.event is None
        (refusal,) = captured.refusals
        assert refusal.reason == "unreadable_response" and "lone surrogate" in refusal.detail
