"""Anthropic's Messages API: a response with citations -> one answer event.

The request's sources are the caller's chunks, given in the order the request held them:
``documents`` by ``document_index`` (a :class:`~exporter.records.schema.Chunk` for a plain-text
document, a list of chunks, one per content block, for a custom-content document, ``None`` for
a document that is not from the store) and ``search_results`` by ``search_result_index`` (a list
of chunks, one per text block of the result's ``content``).

- ``char_location`` gives offsets into the document's text; Anthropic does not document their
  unit, so ``unit`` is a parameter and every span is checked against ``cited_text`` (which
  carries a sentence's trailing space: the span is trimmed to the text).
- ``content_block_location`` and ``search_result_location`` cite whole blocks: one citation per
  block, each quoting its chunk whole, once their texts joined are the ``cited_text``.
- ``page_location`` (a PDF) has no character offsets, and ``web_search_result_location`` cites
  no chunk of the store: both are refused, with their reason, never guessed.

The answer's text is its text blocks joined; a citation's sentence is the one its block covers
most of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exporter.capture import reading
from exporter.capture.building import AnswerBuilder, Captured, Refusal, check_event_fields
from exporter.capture.offsets import Unit, check_unit, to_code_points
from exporter.capture.reasons import RefusedError, reason_of
from exporter.records.limits import DEFAULT_LIMITS
from exporter.records.schema import Chunk

__all__ = ["from_anthropic"]

# A response with more content blocks than this is not read (real ones have tens).
MAX_BLOCKS = 10_000
_MAX_CITATIONS = DEFAULT_LIMITS.max_citations_per_answer


def from_anthropic(
    message: object,
    documents: Sequence[Chunk | Sequence[Chunk] | None],
    *,
    answer_id: str,
    search_results: Sequence[Sequence[Chunk] | None] = (),
    unit: Unit = "code_point",
    topic: str | None = None,
    emitted_at: str | None = None,
    fingerprints: Mapping[str, str] | None = None,
) -> Captured:
    """The answer event of ``message`` (an ``anthropic.types.Message`` or its JSON as a dict).

    Never raises on what the response holds: an unreadable response is ``Captured(None, ...)``
    with the reason, an unreadable or unplaceable citation a refusal beside the event.
    ``fingerprints`` maps a doc_id to its ``document_fingerprint`` (written as ``doc_sha256``
    beside ``doc_span`` for chunks that carry their ``doc_offset``).
    """
    check_event_fields(answer_id, topic, emitted_at, dict(fingerprints or {}))
    check_unit(unit)
    try:
        return _capture(
            message, documents, search_results, answer_id, unit, topic, emitted_at, fingerprints
        )
    except Exception as error:  # a hostile object's own code raised: refused, never re-raised
        return Captured(
            None, (Refusal("unreadable_response", f"reading it raised {type(error).__name__}"),)
        )


def _capture(  # noqa: PLR0917 - from_anthropic's arguments, once checked
    message: object,
    documents: Sequence[Chunk | Sequence[Chunk] | None],
    search_results: Sequence[Sequence[Chunk] | None],
    answer_id: str,
    unit: Unit,
    topic: str | None,
    emitted_at: str | None,
    fingerprints: Mapping[str, str] | None,
) -> Captured:
    try:
        blocks = [
            block
            for block in reading.items(message, "content", MAX_BLOCKS, required=True)
            if _is_text_block(block)
        ]
        texts = [reading.answer_text(block, "text") for block in blocks]
    except reading.UnreadableError as error:
        return Captured(None, (Refusal("unreadable_response", str(error)),))
    builder = AnswerBuilder(
        answer_id,
        "".join(texts),
        topic=topic,
        emitted_at=emitted_at,
        fingerprints=dict(fingerprints or {}),
    )
    sources = _Sources(documents, search_results)
    at = index = 0
    for block, block_text in zip(blocks, texts, strict=True):
        start, end = at, at + len(block_text)
        at = end
        lead = len(block_text) - len(block_text.lstrip())
        trail = len(block_text.rstrip())
        # the sentence the block's citations support, written or refused
        sentence = builder.sentence_at(start + lead, start + max(lead, trail))
        try:
            citations = reading.items(block, "citations", _MAX_CITATIONS)
        except Exception as error:  # unreadable, whatever it raised
            builder.refuse("unreadable_citation", _why(error), None, sentence)
            continue
        for citation in citations:
            try:
                _cite(builder, sources, citation, sentence, index, unit)
            except reading.UnreadableError as error:  # OffsetError too
                if builder.take(index, sentence):
                    builder.refuse(reason_of(error), str(error), index, sentence)
            except Exception as error:  # a hostile object: refused, never raised
                if builder.take(index, sentence):
                    builder.refuse("unreadable_citation", _why(error), index, sentence)
            index += 1
    return builder.build()


def _is_text_block(block: object) -> bool:
    kind = reading.field(block, "type", None)
    return type(kind) is str and kind == "text"


def _why(error: Exception) -> str:
    if isinstance(error, reading.UnreadableError):
        return str(error)
    return f"reading it raised {type(error).__name__}"


def _cite(  # noqa: PLR0917 - one private step of from_anthropic's loop
    builder: AnswerBuilder,
    sources: _Sources,
    citation: object,
    sentence: int | None,
    index: int,
    unit: Unit,
) -> None:
    kind = reading.field(citation, "type", None)
    if kind == "char_location":
        chunk = sources.document(reading.integer(citation, "document_index"))
        if not isinstance(chunk, Chunk):
            raise RefusedError(
                "not_plain_text", "a char_location needs a plain-text document's chunk"
            )
        said = reading.text(citation, "cited_text")
        start = to_code_points(chunk.text, reading.integer(citation, "start_char_index"), unit)
        end = to_code_points(chunk.text, reading.integer(citation, "end_char_index"), unit)
        if start >= end:
            raise RefusedError("offset_past_text", f"an empty or reversed span [{start}, {end}]")
        builder.cite(chunk, start, end, said=said, sentence_index=sentence, index=index)
    elif kind in ("content_block_location", "search_result_location"):
        if kind == "content_block_location":
            blocks = sources.document(reading.integer(citation, "document_index"))
        else:
            blocks = sources.search_result(reading.integer(citation, "search_result_index"))
        if isinstance(blocks, Chunk) or not isinstance(blocks, Sequence):
            raise RefusedError(
                "not_content_blocks", f"a {kind} needs a list of chunks, one a block"
            )
        first = reading.integer(citation, "start_block_index")
        last = reading.integer(citation, "end_block_index")
        if not 0 <= first < last <= len(blocks):
            raise RefusedError(
                "no_such_block", f"blocks [{first}, {last}) of a source with {len(blocks)}"
            )
        cited = list(blocks[first:last])
        said = reading.text(citation, "cited_text")
        if any(not isinstance(chunk, Chunk) for chunk in cited):
            raise RefusedError("bad_chunk", "a block's source must be an exporter.capture.Chunk")
        if "".join(chunk.text for chunk in cited).split() != said.split():
            raise RefusedError(
                "quote_not_in_source", "the cited blocks' texts joined are not the cited_text"
            )
        for chunk in cited:
            builder.cite(chunk, 0, len(chunk.text), said=None, sentence_index=sentence, index=index)
    elif kind == "page_location":
        raise RefusedError("page_location", "a page_location has no character offsets to record")
    elif kind == "web_search_result_location":
        raise RefusedError("web_search_result", "a web search result is no chunk of the store")
    else:
        raise RefusedError("unknown_location", f"a citation of type {str(kind)[:40]!r}")


class _Sources:
    """The caller's mapping of the request's sources, checked as it is used."""

    def __init__(self, documents: object, search_results: object) -> None:
        self._documents = documents
        self._search_results = search_results

    def document(self, index: int) -> object:
        return self._pick(self._documents, index, "document")

    def search_result(self, index: int) -> object:
        return self._pick(self._search_results, index, "search result")

    @staticmethod
    def _pick(sources: object, index: int, what: str) -> object:
        if isinstance(sources, str | bytes) or not isinstance(sources, Sequence):
            raise RefusedError("no_such_document", f"the {what}s given are not a list")
        if not 0 <= index < len(sources):
            raise RefusedError("no_such_document", f"{what} {index} of the {len(sources)} given")
        source = sources[index]
        if source is None:
            raise RefusedError("unmapped_document", f"{what} {index} is not from the store")
        return source
