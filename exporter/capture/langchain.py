"""LangChain: an answer with its retrieved ``Document``s -> one answer event.

LangChain has no citation type of its own; its how-to on citations has the model return the
answer with either the ids of the sources it used (``CitedAnswer``: ``citations`` a list of
integers) or a quote from each (``QuotedAnswer``: ``citations`` a list of ``{source_id,
quote}``), the id being the document's position in the list it was shown. Both are read, as
the pydantic objects or their dicts:

- a source id alone cites its chunk whole;
- a model-written quote may not be verbatim: it is located in the source with the checks' own
  matcher and recorded as the text actually found there, or refused (``quote_not_in_source``).

A ``Document`` becomes the chunk the store holds as the Postgres layouts read it: ``id`` is the
chunk id, and the metadata keys name the document, its version and its offset
(``start_index``, which a splitter with ``add_start_index=True`` writes; -1, a splitter that
lost the chunk, is no offset). The answer says nothing of which sentence a citation supports:
a citation is given the sentence its quote most resembles (token set similarity, case and
punctuation aside, at least :data:`MIN_SENTENCE_SIMILARITY`), or none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rapidfuzz import fuzz, utils

from exporter.capture import reading
from exporter.capture.building import AnswerBuilder, Captured, Refusal, check_event_fields
from exporter.capture.reasons import RefusedError, reason_of
from exporter.records.limits import DEFAULT_LIMITS
from exporter.records.schema import Chunk

__all__ = ["MIN_SENTENCE_SIMILARITY", "chunk_of_document", "from_langchain"]

# Below this, no sentence of the answer is taken for the one a quote supports.
MIN_SENTENCE_SIMILARITY = 50.0
_MAX_CITATIONS = DEFAULT_LIMITS.max_citations_per_answer


def chunk_of_document(
    document: object,
    *,
    doc_id_key: str = "source",
    doc_version_key: str = "doc_version",
    offset_key: str = "start_index",
) -> Chunk:
    """The chunk a LangChain ``Document`` (or its dict) is, read as the Postgres layouts read
    it; raises :class:`~exporter.capture.reading.UnreadableError` naming what is missing. A
    :class:`~exporter.records.schema.Chunk` is taken as it is; ``None`` is a document not from
    the store."""
    if isinstance(document, Chunk):
        return document
    if document is None:
        raise RefusedError("unmapped_document", "the document is not from the store")
    metadata = reading.field(document, "metadata", None) or {}
    if not isinstance(metadata, Mapping):
        raise reading.UnreadableError("the document's metadata is not an object")
    chunk_id = reading.field(document, "id", None)
    if type(chunk_id) is not str or not chunk_id:
        raise reading.UnreadableError("the document has no id (the store's chunk id)")
    values = {}
    for name, key in (("doc_id", doc_id_key), ("doc_version", doc_version_key)):
        value = metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise reading.UnreadableError(f"the document's metadata has no {key!r}")
        values[name] = str(value)
    offset = metadata.get(offset_key)
    if type(offset) is not int or offset < 0:
        offset = None
    return Chunk(
        doc_id=values["doc_id"],
        doc_version=values["doc_version"],
        chunk_id=chunk_id,
        text=reading.text(document, "page_content"),
        doc_offset=offset,
    )


def from_langchain(
    answer: object,
    documents: Sequence[object],
    *,
    answer_id: str,
    doc_id_key: str = "source",
    doc_version_key: str = "doc_version",
    offset_key: str = "start_index",
    topic: str | None = None,
    emitted_at: str | None = None,
    fingerprints: Mapping[str, str] | None = None,
) -> Captured:
    """The answer event of ``answer`` (a ``CitedAnswer`` or ``QuotedAnswer`` of LangChain's
    citation pattern, or its dict) over ``documents``, the ``Document``s in the order the model
    was shown them. Never raises on what the answer or the documents hold."""
    check_event_fields(answer_id, topic, emitted_at, dict(fingerprints or {}))
    keys = {"doc_id_key": doc_id_key, "doc_version_key": doc_version_key, "offset_key": offset_key}
    try:
        return _capture(answer, documents, answer_id, keys, topic, emitted_at, fingerprints)
    except Exception as error:  # a hostile object's own code raised: refused, never re-raised
        return Captured(
            None, (Refusal("unreadable_response", f"reading it raised {type(error).__name__}"),)
        )


def _capture(  # noqa: PLR0917 - from_langchain's arguments, once checked
    answer: object,
    documents: Sequence[object],
    answer_id: str,
    keys: dict[str, str],
    topic: str | None,
    emitted_at: str | None,
    fingerprints: Mapping[str, str] | None,
) -> Captured:
    try:
        text = reading.answer_text(answer, "answer")
        citations = reading.items(answer, "citations", _MAX_CITATIONS)
    except reading.UnreadableError as error:
        return Captured(None, (Refusal("unreadable_response", str(error)),))
    builder = AnswerBuilder(
        answer_id, text, topic=topic, emitted_at=emitted_at, fingerprints=dict(fingerprints or {})
    )
    for index, citation in enumerate(citations):
        quote: str | None = None
        try:
            source_id, quote = _source_and_quote(citation)
            if isinstance(documents, str | bytes) or not 0 <= source_id < len(documents):
                raise _no_such_document(source_id, documents)
            chunk = chunk_of_document(documents[source_id], **keys)
        except Exception as error:  # unreadable, whatever it raised
            # a quote read names its sentence, as it would have written
            sentence = _resembling(builder.sentences, quote) if quote else None
            if builder.take(index, sentence):
                reason = reason_of(error)
                detail = (
                    str(error)
                    if isinstance(error, reading.UnreadableError)
                    else f"reading it raised {type(error).__name__}"
                )
                builder.refuse(reason, detail, index, sentence)
            continue
        builder.cite(
            chunk,
            0,
            len(chunk.text),
            said=quote,
            sentence_index=_resembling(builder.sentences, quote or chunk.text),
            index=index,
            search=True,
        )
    return builder.build()


def _source_and_quote(citation: object) -> tuple[int, str | None]:
    if type(citation) is int:
        return citation, None
    return reading.integer(citation, "source_id"), reading.text(citation, "quote")


def _no_such_document(source_id: int, documents: object) -> RefusedError:
    count = len(documents) if isinstance(documents, Sequence) else 0
    return RefusedError("no_such_document", f"source {source_id} of the {count} documents given")


def _resembling(sentences: list[str], quote: str) -> int | None:
    """The sentence most like the quote (the first of equals), if any is like enough."""
    best, score = None, MIN_SENTENCE_SIMILARITY
    probe = quote[:2000]
    for index, sentence in enumerate(sentences):
        similarity = fuzz.token_set_ratio(sentence[:2000], probe, processor=utils.default_process)
        if similarity > score or (best is None and similarity == score):
            best, score = index, similarity
    return best
