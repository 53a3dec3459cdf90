"""exporter.capture.from_anthropic on the anthropic package's own response models.

Proof that a captured answer is what the checks expect: swept against the store it was captured
from, every citation is ok; swept after a re-chunking, every citation is drift_repaired to the
place its quote is now. And proof that nothing a response holds raises into the caller.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message

from exporter.capture import Captured, Chunk, document_fingerprint, from_anthropic
from exporter.checks.claims import HybridClassifier
from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.cli import main
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import Origin
from exporter.records.decode import parse_json

REFUNDS = Chunk(
    doc_id="refunds",
    doc_version="v3",
    chunk_id="refunds#0",
    text="Refunds are issued within 30 days of purchase. Annual plans renew automatically. "
    "Refunds are issued to the original card.",
    doc_offset=0,
)
EMOJI = Chunk(
    doc_id="status",
    doc_version="v1",
    chunk_id="status#2",
    text="🚀 Launch day: exports are free for everyone. 📦 Shipping takes 3 days.",
)
FAQ = [
    Chunk(doc_id="faq", doc_version="v1", chunk_id="faq#0", text="Seats can be added at any time."),
    Chunk(doc_id="faq", doc_version="v1", chunk_id="faq#1", text="Added seats are prorated."),
]
RESULT = [
    Chunk(doc_id="kb", doc_version="v9", chunk_id="kb#4", text="SSO is part of the Business plan."),
]


def _message(content: list[dict[str, Any]]) -> Message:
    return Message.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": content,
        }
    )


def _char(document: int, start: int, end: int, cited: str) -> dict[str, Any]:
    return {
        "type": "char_location",
        "document_index": document,
        "start_char_index": start,
        "end_char_index": end,
        "cited_text": cited,
        "document_title": None,
    }


# as recorded responses are: the cited text carries its sentence's trailing space
ANSWER = _message(
    [
        {"type": "text", "text": "Thanks for asking! "},
        {
            "type": "text",
            "text": "Refunds are issued within 30 days of purchase.",
            "citations": [_char(0, 0, 48, "Refunds are issued within 30 days of purchase. ")],
        },
        {"type": "text", "text": " "},
        {
            "type": "text",
            "text": "Exports are free on launch day.",
            "citations": [_char(1, 2, 46, "Launch day: exports are free for everyone. ")],
        },
        {"type": "text", "text": " "},
        {
            "type": "text",
            "text": "Added seats are prorated.",
            "citations": [
                {
                    "type": "content_block_location",
                    "document_index": 2,
                    "start_block_index": 0,
                    "end_block_index": 2,
                    "cited_text": "Seats can be added at any time.Added seats are prorated.",
                    "document_title": "FAQ",
                }
            ],
        },
        {"type": "text", "text": " "},
        {
            "type": "text",
            "text": "SSO needs the Business plan.",
            "citations": [
                {
                    "type": "search_result_location",
                    "search_result_index": 0,
                    "start_block_index": 0,
                    "end_block_index": 1,
                    "cited_text": "SSO is part of the Business plan.",
                    "source": "https://kb.example/sso",
                    "title": "SSO",
                }
            ],
        },
    ]
)


def _capture(message: object = ANSWER, **options: Any) -> Captured:
    options.setdefault("search_results", [RESULT])
    return from_anthropic(message, [REFUNDS, EMOJI, FAQ], answer_id="ans-1", **options)


def test_a_cited_answer_becomes_an_answer_event() -> None:
    captured = _capture(fingerprints={"refunds": document_fingerprint(REFUNDS.text)})
    assert captured.refusals == ()
    event = captured.event
    assert event is not None
    assert event["sentences"] == [
        "Thanks for asking!",
        "Refunds are issued within 30 days of purchase.",
        "Exports are free on launch day.",
        "Added seats are prorated.",
        "SSO needs the Business plan.",
    ]
    first, second, *blocks = event["citations"]
    # the trailing space of cited_text is not quoted; the quote is the chunk's own text
    assert first["quote"] == "Refunds are issued within 30 days of purchase."
    assert first["chunk_span"] == [0, 46]
    assert first["doc_span"] == [0, 46]
    assert first["doc_sha256"] == document_fingerprint(REFUNDS.text)
    assert first["sentence_index"] == 1
    assert first["suffix"] == REFUNDS.text[46:78]
    assert second["quote"] == "Launch day: exports are free for everyone."
    assert second["sentence_index"] == 2
    assert "doc_span" not in second  # the chunk does not say where it sits in its document
    # a citation of two content blocks is one citation of each block's chunk
    assert [(c["chunk_id"], c["quote"]) for c in blocks] == [
        ("faq#0", "Seats can be added at any time."),
        ("faq#1", "Added seats are prorated."),
        ("kb#4", "SSO is part of the Business plan."),
    ]
    assert [c["sentence_index"] for c in blocks] == [3, 3, 4]
    assert len({c["citation_id"] for c in event["citations"]}) == 5


@pytest.mark.parametrize(
    ("unit", "start", "end"),
    # the emoji is one code point, two UTF-16 code units and four UTF-8 bytes
    [("code_point", 2, 44), ("utf16", 3, 45), ("utf8", 5, 47)],
)
def test_offsets_in_each_unit_land_on_the_same_text(unit: str, start: int, end: int) -> None:
    message = _message(
        [
            {
                "type": "text",
                "text": "Exports are free.",
                "citations": [_char(0, start, end, "Launch day: exports are free for everyone.")],
            }
        ]
    )
    captured = from_anthropic(message, [EMOJI], answer_id="a", unit=unit)  # type: ignore[arg-type]
    assert captured.refusals == ()
    assert captured.event is not None
    assert captured.event["citations"][0]["chunk_span"] == [2, 44]


def test_a_span_in_the_wrong_unit_is_found_by_its_cited_text() -> None:
    # counted in UTF-8 bytes but read as code points: the span is 3 characters late; the text
    # the API says it cited is in the chunk once, and that is what is recorded
    message = _message(
        [
            {
                "type": "text",
                "text": "x",
                "citations": [_char(0, 5, 47, "Launch day: exports are free for everyone.")],
            }
        ]
    )
    captured = from_anthropic(message, [EMOJI], answer_id="a")
    assert captured.refusals == ()
    assert captured.event is not None
    assert captured.event["citations"][0]["chunk_span"] == [2, 44]


@pytest.mark.parametrize(
    ("citation", "reason"),
    [
        (_char(7, 0, 5, "Refunds"), "no_such_document"),
        (_char(0, 0, 5000, "Refunds"), "offset_past_text"),
        (_char(0, 10, 5, "Refunds"), "offset_past_text"),
        (_char(0, -1, 5, "Refunds"), "offset_past_text"),
        (_char(0, 0, 20, "Shipping is free worldwide."), "quote_not_in_source"),
        (_char(0, 47, 48, " "), "empty_quote"),
        # "Refunds are issued" is in the chunk twice: no guess between them
        (_char(0, 30, 48, "Refunds are issued"), "quote_not_in_source"),
        (_char(2, 0, 5, "Seats"), "not_plain_text"),
        (
            {"type": "page_location", "document_index": 0, "start_page_number": 1,
             "end_page_number": 2, "cited_text": "Refunds"},
            "page_location",
        ),
        (
            {"type": "web_search_result_location", "url": "https://x.example", "title": "x",
             "encrypted_index": "e", "cited_text": "Refunds"},
            "web_search_result",
        ),
        (
            {"type": "content_block_location", "document_index": 2, "start_block_index": 1,
             "end_block_index": 5, "cited_text": "x"},
            "no_such_block",
        ),
        (
            {"type": "content_block_location", "document_index": 2, "start_block_index": 0,
             "end_block_index": 1, "cited_text": "Something else entirely."},
            "quote_not_in_source",
        ),
        (
            {"type": "search_result_location", "search_result_index": 3, "start_block_index": 0,
             "end_block_index": 1, "cited_text": "x", "source": "s"},
            "no_such_document",
        ),
    ],
)  # fmt: skip
def test_each_unusable_citation_is_a_refusal_with_its_reason(
    citation: dict[str, Any], reason: str
) -> None:
    message = _message(
        [
            {"type": "text", "text": "Refunds take a month. ", "citations": [citation]},
            {
                "type": "text",
                "text": "Plans renew.",
                "citations": [_char(0, 47, 81, "Annual plans renew automatically.")],
            },
        ]
    )
    captured = _capture(message)
    assert [r.reason for r in captured.refusals] == [reason]
    assert captured.refusals[0].index == 0
    assert captured.event is not None
    # the rest of the answer is kept
    assert [c["quote"] for c in captured.event["citations"]] == [
        "Annual plans renew automatically."
    ]


def test_a_surrogate_split_by_a_utf16_offset_is_refused() -> None:
    message = _message(
        [{"type": "text", "text": "x", "citations": [_char(0, 1, 20, "Launch day")]}]
    )
    captured = from_anthropic(message, [EMOJI], answer_id="a", unit="utf16")
    assert [r.reason for r in captured.refusals] == ["offset_splits_character"]


def test_a_document_not_from_the_store_is_refused() -> None:
    message = _message([{"type": "text", "text": "x", "citations": [_char(0, 0, 7, "Refunds")]}])
    captured = from_anthropic(message, [None], answer_id="a")
    assert [r.reason for r in captured.refusals] == ["unmapped_document"]


@pytest.mark.parametrize(
    "message",
    [
        None,
        42,
        "a string",
        {"content": "not a list"},
        {"content": [{"type": "text", "text": 7}]},
        {"content": [{"type": "text"}] * 20_000},
    ],
)
def test_an_unreadable_response_is_no_event_and_no_exception(message: object) -> None:
    captured = from_anthropic(message, [REFUNDS], answer_id="a")
    assert captured.event is None
    assert [r.reason for r in captured.refusals] == ["unreadable_response"]


class _Hostile:
    type = "char_location"

    @property
    def document_index(self) -> int:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "citation",
    [
        _Hostile(),
        {"type": "char_location", "document_index": "0", "start_char_index": 0,
         "end_char_index": 5, "cited_text": "Refun"},
        {"type": "char_location", "document_index": True, "start_char_index": 0,
         "end_char_index": 5, "cited_text": "Refun"},
        {"type": "char_location", "document_index": 0, "start_char_index": 0,
         "end_char_index": 5, "cited_text": None},
        {"type": ["not", "hashable"]},
        "a string",
        None,
    ],
)  # fmt: skip
def test_wrong_typed_or_hostile_citations_are_refusals(citation: object) -> None:
    message = {"content": [{"type": "text", "text": "Refunds.", "citations": [citation]}]}
    captured = from_anthropic(message, [REFUNDS], answer_id="a")
    assert len(captured.refusals) == 1
    assert captured.event is not None and captured.event["citations"] == []


def test_a_dict_response_and_the_sdk_model_capture_alike() -> None:
    assert _capture(ANSWER.model_dump()) == _capture(ANSWER)


def test_the_event_is_one_the_exporter_reads(tmp_path: Path) -> None:
    event = _capture().event
    assert parse_json(json.dumps(event)) == event


def _sweep(
    tmp_path: Path, chunks: list[Chunk], events: list[dict[str, Any]], name: str
) -> list[dict[str, Any]]:
    chunk_file = tmp_path / f"{name}-chunks.jsonl"
    chunk_file.write_text(
        "".join(
            json.dumps({k: v for k, v in vars_of(chunk).items() if v is not None}) + "\n"
            for chunk in chunks
        )
    )
    events_file = tmp_path / f"{name}-events.jsonl"
    events_file.write_text("".join(json.dumps(event) + "\n" for event in events))
    out = tmp_path / f"{name}-verdicts.jsonl"
    main(
        ["sweep", "--chunks", str(chunk_file), "--citations", str(events_file), "--out", str(out),
         "--no-progress", "--format", "json", "--judge-sample", "0"]
    )  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def vars_of(chunk: Chunk) -> dict[str, Any]:
    return {name: getattr(chunk, name) for name in Chunk.__dataclass_fields__}


def test_captured_answers_sweep_ok_and_repair_after_a_rechunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = [REFUNDS, EMOJI, *FAQ, *RESULT]
    event = _capture(fingerprints={"refunds": document_fingerprint(REFUNDS.text)}).event
    assert event is not None
    verdicts = _sweep(tmp_path, store, [event], "before")
    assert [v["status"] for v in verdicts] == ["ok"] * 5
    # a re-index that puts a page marker before every chunk and cuts the refunds document in two
    rechunked = [
        Chunk(
            doc_id="refunds",
            doc_version="v3",
            chunk_id="refunds#a",
            text="[p1] " + REFUNDS.text[:48],
            doc_offset=0,
        ),
        Chunk(
            doc_id="refunds",
            doc_version="v3",
            chunk_id="refunds#b",
            text=REFUNDS.text[48:],
            doc_offset=53,
        ),
        *(replace(c, text="[p1] " + c.text) for c in (EMOJI, *FAQ, *RESULT)),
    ]
    verdicts = _sweep(tmp_path, rechunked, [event], "after")
    capsys.readouterr()
    assert [v["status"] for v in verdicts] == ["drift_repaired"] * 5
    for verdict, citation in zip(verdicts, event["citations"], strict=True):
        chunk = next(c for c in rechunked if c.chunk_id == verdict["repair"]["chunk_id"])
        start, end = verdict["repair"]["chunk_span"]
        assert chunk.text[start:end] == citation["quote"]


# --- found by an attack on capture (each failed before its fix) ---------------------------------


def test_a_quote_found_only_inside_a_longer_word_is_refused() -> None:
    chunk = Chunk(doc_id="d", doc_version="v", chunk_id="c", text="Shipping takes 110 days.")
    message = {"content": [{"type": "text", "text": "x", "citations": [_char(0, 0, 3, "10 days")]}]}
    captured = from_anthropic(message, [chunk], answer_id="a")
    assert [r.reason for r in captured.refusals] == ["quote_not_in_source"]


class _RaisingDict(dict[str, Any]):
    def __contains__(self, key: object) -> bool:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "message",
    [
        _RaisingDict(content=[]),
        {"content": range(10**19)},
        {"content": [{"type": "text", "text": "x", "citations": range(10**19)}]},
    ],
)
def test_a_response_whose_own_code_raises_is_refused(message: object) -> None:
    captured = from_anthropic(message, [REFUNDS], answer_id="a")
    assert (captured.refusals and captured.event is None) or captured.event["citations"] == []  # type: ignore[index]


def test_citations_read_are_bounded_and_the_rest_said_once() -> None:
    citation = _char(0, 0, 5, "not in the chunk at all")
    message = {"content": [{"type": "text", "text": "x. ", "citations": [citation] * 500}] * 4}
    captured = from_anthropic(message, [REFUNDS], answer_id="a")
    assert captured.refused == {"quote_not_in_source": 500, "too_many_citations": 1}


def test_the_callers_own_mistakes_raise_at_once() -> None:
    with pytest.raises(ValueError, match="unit"):
        from_anthropic(ANSWER, [REFUNDS], answer_id="a", unit="utf32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="answer_id"):
        from_anthropic(ANSWER, [REFUNDS], answer_id="a" * 1024)
    with pytest.raises(ValueError, match="emitted_at"):
        from_anthropic(ANSWER, [REFUNDS], answer_id="a", emitted_at="yesterday")


def test_refused_citations_leave_their_claims_unjudged_not_uncited(tmp_path: Path) -> None:
    """Issue 22: an answer whose citations could not be used is not an answer that cites
    nothing. Captured with its one citation refused (a page range), its claim once counted as
    uncited; the event now names the sentence it cited, and coverage counts that claim apart."""
    message = _message(
        [
            {"type": "text", "text": "Thanks for asking! "},
            {
                "type": "text",
                "text": "Refunds are issued within 30 days of purchase.",
                "citations": [
                    {"type": "page_location", "document_index": 0, "start_page_number": 1,
                     "end_page_number": 2, "cited_text": "Refunds"}
                ],
            },
        ]
    )  # fmt: skip
    captured = _capture(message)
    assert captured.refused == {"page_location": 1}
    event = captured.event
    assert event is not None and event["citations"] == []
    assert event["refused_citation_sentences"] == [1]
    assert "refused_citation_sentences" not in (_capture().event or {})
    (tmp_path / "chunks.jsonl").write_text(
        json.dumps({k: v for k, v in vars_of(REFUNDS).items() if v is not None}) + "\n"
    )
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n")
    coverage = tmp_path / "coverage.jsonl"
    main(
        ["sweep", "--chunks", str(tmp_path / "chunks.jsonl"), "--citations",
         str(tmp_path / "events.jsonl"), "--out", str(tmp_path / "verdicts.jsonl"),
         "--coverage-out", str(coverage), "--no-progress", "--judge-sample", "0", "--allow-empty"]
    )  # fmt: skip
    [verdict] = [json.loads(line) for line in coverage.read_text().splitlines()]
    assert verdict["status"] == "unjudged"
    assert verdict["uncited"] == [] and verdict["unjudged"] == [1]
    # and the report says so: it once said only "0 have no citation"
    page = tmp_path / "report.html"
    report = ["report", str(coverage), str(tmp_path / "verdicts.jsonl"), "--out", str(page)]
    assert main([*report, "--allow-empty"]) == 0
    assert '<strong id="unjudged">1</strong> in 1 answer could not be judged' in page.read_text()


def test_a_refused_citation_hides_no_other_uncited_claim() -> None:
    """Only the sentence the refused citation named is unjudged: the answer's other claims,
    cited by nothing, are still flagged (a count of refusals once hid them all)."""
    message = _message(
        [
            {
                "type": "text",
                "text": "Refunds are issued within 30 days.",
                "citations": [
                    {"type": "page_location", "document_index": 0, "start_page_number": 1,
                     "end_page_number": 2, "cited_text": "Refunds"}
                ],
            },
            {"type": "text", "text": " Seats cost $5 each. Plans can be paused for a year."},
        ]
    )  # fmt: skip
    event = _capture(message).event
    assert event is not None and event["refused_citation_sentences"] == [0]
    coverage = check_message(
        json.dumps(event).encode(), b"k", Origin("answers", 0, 0), store=ChunkStore([REFUNDS]),
        policy=Policy(classifier=HybridClassifier()),
    ).coverage  # fmt: skip
    assert coverage is not None
    assert (coverage.uncited, coverage.unjudged) == ([1, 2], [0])


def test_a_citation_list_that_cannot_be_read_names_its_blocks_sentence() -> None:
    class Hostile:
        type = "text"
        text = "Refunds are issued within 30 days."

        @property
        def citations(self) -> object:
            raise RuntimeError("boom")

    captured = _capture({"content": [Hostile()]})
    assert captured.refused == {"unreadable_citation": 1}
    assert captured.event is not None
    assert captured.event["refused_citation_sentences"] == [0]


def test_citations_left_unread_name_their_sentences_too() -> None:
    """Past the bound a citation is not read, but the sentence it supports is known."""
    citation = _char(0, 0, 5, "not in the chunk at all")
    blocks = [
        {"type": "text", "text": f"Claim number {n}. ", "citations": [citation] * 500}
        for n in range(2)
    ]
    message = {"content": [*blocks, {"type": "text", "text": "Seats cost $5 each."}]}
    captured = _capture(message)
    assert captured.refused["too_many_citations"] == 1
    assert captured.event is not None
    assert captured.event["refused_citation_sentences"] == [0, 1]
