"""Decode JSON values into records, or say exactly what is wrong with them.

Validation is written out by hand rather than through a schema library: it runs once per
citation on the hottest path of a sweep, and its messages are what an engineer reads when a
producer ships a bad record, so both speed and wording are ours to control. A message quotes at
most a short preview of the offending value (a 10 MB field must not become a 10 MB log line),
and the :class:`~exporter.records.limits.Limits` are enforced here, each named in its error.
"""

from __future__ import annotations

import difflib
import itertools
import re
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson

from exporter.errors import InvalidJson, RecordError
from exporter.records.limits import DEFAULT_LIMITS, MAX_ID_CHARS, Limits, bounded, preview
from exporter.records.schema import (
    AnswerSentences,
    Chunk,
    ChunkDeletion,
    Citation,
    InvalidCitation,
)

__all__ = [
    "InvalidJson",
    "RecordError",
    "decode_chunk",
    "decode_citations",
    "decode_sentences",
    "is_sha256",
    "is_timestamp",
    "parse_json",
]


# Offsets are exact in every JSON reader up to here (JavaScript's Number.MAX_SAFE_INTEGER), and
# a shift computed from them still fits the 64-bit integers verdicts are written with.
MAX_OFFSET = 2**53 - 1


def parse_json(data: bytes | str) -> Any:
    """Parse one JSON value, turning decoder errors into :class:`RecordError`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        stripped = data.rstrip()
        if len(stripped) != len(data):  # report what is wrong with the record, not its newline
            return parse_json(stripped)
        raise InvalidJson(bounded(f"not valid JSON: {exc}")) from None


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _too_long(key: str, value: str) -> RecordError:
    return RecordError(f"'{key}' has {len(value):,} characters, more than {MAX_ID_CHARS:,}")


# A record's keys looked at for a misspelling of a missing one: the first few, each cut short
# (a record may hold any number of keys of any length; this runs only for a missing field).
_KEYS_COMPARED = 50
_KEY_CHARS = 64


def _missing(obj: dict[str, Any], key: str) -> RecordError:
    """A required field is missing: named, with a present key that looks like its misspelling
    (``chunk_spans`` for ``chunk_span``), when there is one."""
    present = [k[:_KEY_CHARS] for k in itertools.islice(obj, _KEYS_COMPARED) if type(k) is str]
    close = difflib.get_close_matches(key, present, n=1, cutoff=0.8)
    hint = f" (the record has {preview(close[0])}: misspelled?)" if close else ""
    return RecordError(f"missing required field {key!r}{hint}")


def _required_str(obj: dict[str, Any], key: str) -> str:
    """A required identifier: a non-empty string of at most MAX_ID_CHARS characters."""
    value = obj.get(key)
    if type(value) is str and value:
        if len(value) > MAX_ID_CHARS:
            raise _too_long(key, value)
        return value
    if value is None and key not in obj:
        raise _missing(obj, key)
    got = "an empty string" if value == "" else _type_name(value)
    raise RecordError(f"'{key}' must be a non-empty string, got {got}")


def _optional_str(
    obj: dict[str, Any], key: str, max_chars: int | None = MAX_ID_CHARS
) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is str:
        if max_chars is not None and len(value) > max_chars:
            raise _too_long(key, value)
        return value
    raise RecordError(f"'{key}' must be a string, got {_type_name(value)}")


def _optional_count(obj: dict[str, Any], key: str, maximum: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is int and value >= 0:
        if maximum is not None and value > maximum:
            raise RecordError(f"'{key}' {value:,} is more than the limit of {maximum:,}")
        return value
    raise RecordError(f"'{key}' must be a non-negative integer, got {preview(value)}")


def _optional_timestamp(obj: dict[str, Any], key: str) -> str | None:
    value = _optional_str(obj, key)
    if value is not None and not is_timestamp(value):
        raise RecordError(f"'{key}' must be an RFC 3339 timestamp, got {preview(value)}")
    return value


def _as_object(value: object, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise RecordError(f"{what} must be a JSON object, got {_type_name(value)}")
    return value


def decode_chunk(value: object, limits: Limits = DEFAULT_LIMITS) -> Chunk | ChunkDeletion:
    """Decode a chunk record (or a deletion) from a parsed JSON value."""
    obj = _as_object(value, "a chunk record")
    chunk_id = _required_str(obj, "chunk_id")
    if obj.get("deleted") is True:
        return ChunkDeletion(chunk_id)
    text = obj.get("text")
    if type(text) is not str:
        if "text" not in obj:
            raise _missing(obj, "text")
        raise RecordError(f"'text' must be a string, got {_type_name(text)}")
    if len(text) > limits.max_chunk_chars:
        raise RecordError(
            f"'text' has {len(text):,} characters, more than "
            f"max_chunk_chars={limits.max_chunk_chars:,}"
        )
    doc_offset = _optional_count(obj, "doc_offset")
    if doc_offset is not None and doc_offset > limits.max_doc_offset:
        raise RecordError(
            f"'doc_offset' {doc_offset:,} is more than max_doc_offset={limits.max_doc_offset:,}"
        )
    source, chunker = _optional_str(obj, "source"), _optional_str(obj, "chunker")
    # a store holds millions of chunks sharing a few documents' ids, versions, sources and
    # chunkers: one copy of each string instead of one per chunk
    return Chunk(
        doc_id=sys.intern(_required_str(obj, "doc_id")),
        doc_version=sys.intern(_required_str(obj, "doc_version")),
        chunk_id=chunk_id,
        text=text,
        ordinal=_optional_count(obj, "ordinal", MAX_OFFSET),
        doc_offset=doc_offset,
        source=None if source is None else sys.intern(source),
        chunker=None if chunker is None else sys.intern(chunker),
    )


def _span(obj: dict[str, Any], field: str = "chunk_span") -> tuple[int, int]:
    span = obj.get(field)
    if (
        type(span) is list
        and len(span) == 2
        and type(span[0]) is int
        and type(span[1]) is int
        and 0 <= span[0] < span[1] <= MAX_OFFSET
    ):
        return span[0], span[1]
    if span is None and field not in obj:
        raise _missing(obj, field)
    raise RecordError(
        f"{field!r} must be [start, end] with 0 <= start < end <= 2**53 - 1, got {preview(span)}"
    )


def _doc_span(obj: dict[str, Any], chunk_span: tuple[int, int]) -> tuple[int, int] | None:
    """The optional position hint: valid like ``chunk_span``, and as long, for both spans hold
    the same text (a hint of another length was computed on other text, or in other units)."""
    if obj.get("doc_span") is None:
        return None
    start, end = _span(obj, "doc_span")
    if end - start != chunk_span[1] - chunk_span[0]:
        raise RecordError(
            f"'doc_span' [{start}, {end}] must cover as many characters as 'chunk_span' "
            f"[{chunk_span[0]}, {chunk_span[1]}]: both point at the quote"
        )
    return start, end


def _quote(obj: dict[str, Any]) -> str:
    """The quote: text, of any length (long ones are checked verbatim, see Limits)."""
    quote = obj.get("quote")
    if type(quote) is not str or not quote:
        _required_str(obj, "quote")  # raises, naming what is wrong
    assert type(quote) is str
    if quote.isspace():
        raise RecordError("'quote' must contain text, got only whitespace")
    return quote


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def is_sha256(value: object) -> bool:
    return type(value) is str and len(value) == 64 and _SHA256.fullmatch(value) is not None


def _doc_sha256(obj: dict[str, Any]) -> str | None:
    """The optional fingerprint of the document at answer time (exporter.records.fingerprint)."""
    value = obj.get("doc_sha256")
    if value is None:
        return None
    if not is_sha256(value):
        raise RecordError(
            "'doc_sha256' must be 64 hexadecimal digits (the SHA-256 of the document's text), "
            f"got {preview(value)}"
        )
    assert type(value) is str
    return value.lower()


def is_timestamp(value: str) -> bool:
    if len(value) > 64:  # no RFC 3339 timestamp is this long; do not parse megabytes
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _citation(
    obj: dict[str, Any], answer_id: str | None, topic: str | None, sentences: int | None = None
) -> Citation:
    """Decode one citation: a straight-line check of a well-formed record, the common case.

    Anything unusual goes to :func:`_explained_citation`, which accepts exactly the same records
    and says precisely what is wrong with the others.
    """
    get = obj.get
    citation_id, doc_id, doc_version = get("citation_id"), get("doc_id"), get("doc_version")
    chunk_id, quote, span = get("chunk_id"), get("quote"), get("chunk_span")
    own_answer_id = get("answer_id", answer_id)
    prefix, suffix, own_topic, source = get("prefix"), get("suffix"), get("topic"), get("source")
    emitted_at, sentence_index, claim = get("emitted_at"), get("sentence_index"), get("claim")
    doc_span, doc_sha256 = get("doc_span"), get("doc_sha256")
    if (
        type(citation_id) is str
        and 0 < len(citation_id) <= MAX_ID_CHARS
        and type(doc_id) is str
        and 0 < len(doc_id) <= MAX_ID_CHARS
        and type(doc_version) is str
        and 0 < len(doc_version) <= MAX_ID_CHARS
        and type(chunk_id) is str
        and 0 < len(chunk_id) <= MAX_ID_CHARS
        and type(quote) is str
        and quote
        and not quote.isspace()
        and type(span) is list
        and len(span) == 2
        and type(span[0]) is int
        and type(span[1]) is int
        and 0 <= span[0] < span[1] <= MAX_OFFSET
        and type(own_answer_id) is str
        and 0 < len(own_answer_id) <= MAX_ID_CHARS
        and (answer_id is None or own_answer_id == answer_id)
        and (prefix is None or type(prefix) is str)
        and (suffix is None or type(suffix) is str)
        and (own_topic is None or (type(own_topic) is str and len(own_topic) <= MAX_ID_CHARS))
        and (source is None or (type(source) is str and len(source) <= MAX_ID_CHARS))
        and (
            sentence_index is None
            or (
                type(sentence_index) is int
                and 0 <= sentence_index < (MAX_OFFSET if sentences is None else sentences)
            )
        )
        and (emitted_at is None or (type(emitted_at) is str and is_timestamp(emitted_at)))
        and (claim is None or type(claim) is str)
        and (
            doc_span is None
            or (
                type(doc_span) is list
                and len(doc_span) == 2
                and type(doc_span[0]) is int
                and type(doc_span[1]) is int
                and doc_span[0] >= 0
                and doc_span[1] - doc_span[0] == span[1] - span[0]
                and doc_span[1] <= MAX_OFFSET
            )
        )
        and (doc_sha256 is None or is_sha256(doc_sha256))
    ):
        return Citation(
            citation_id,
            own_answer_id,
            doc_id,
            doc_version,
            chunk_id,
            span[0],
            span[1],
            quote,
            prefix,
            suffix,
            emitted_at,
            own_topic if own_topic is not None else topic,
            source,
            sentence_index,
            claim,
            None if doc_span is None else doc_span[0],
            None if doc_span is None else doc_span[1],
            None if doc_sha256 is None else doc_sha256.lower(),
        )
    return _explained_citation(obj, answer_id, topic, sentences)


def _sentence_index(obj: dict[str, Any], sentences: int | None) -> int | None:
    """The sentence a citation supports; within its answer's sentences when they are known."""
    index = _optional_count(obj, "sentence_index")
    if index is not None and sentences is not None and index >= sentences:
        have = f"{sentences:,} sentence" + ("" if sentences == 1 else "s")
        raise RecordError(f"'sentence_index' {index:,} is out of range: the answer has {have}")
    return index


def _explained_citation(
    obj: dict[str, Any], answer_id: str | None, topic: str | None, sentences: int | None
) -> Citation:
    """Decode one citation field by field, raising a RecordError that names the problem."""
    if answer_id is not None:
        own = obj.get("answer_id", answer_id)
        if own != answer_id:
            raise RecordError(
                f"'answer_id' {preview(own)} differs from its answer's {preview(answer_id)}"
            )
    else:
        answer_id = _required_str(obj, "answer_id")
    start, end = _span(obj)
    doc_span = _doc_span(obj, (start, end))
    doc_sha256 = _doc_sha256(obj)
    own_topic = _optional_str(obj, "topic")
    return Citation(
        citation_id=_required_str(obj, "citation_id"),
        answer_id=answer_id,
        doc_id=_required_str(obj, "doc_id"),
        doc_version=_required_str(obj, "doc_version"),
        chunk_id=_required_str(obj, "chunk_id"),
        start=start,
        end=end,
        quote=_quote(obj),
        prefix=_optional_str(obj, "prefix", None),
        suffix=_optional_str(obj, "suffix", None),
        emitted_at=_optional_timestamp(obj, "emitted_at"),
        topic=own_topic if own_topic is not None else topic,
        source=_optional_str(obj, "source"),
        sentence_index=_sentence_index(obj, sentences),
        claim=_optional_str(obj, "claim", None),
        doc_start=None if doc_span is None else doc_span[0],
        doc_end=None if doc_span is None else doc_span[1],
        doc_sha256=doc_sha256,
    )


def _identifier(value: object) -> str | None:
    """``value`` when it can be quoted back as an identifier, else None."""
    return value if type(value) is str and len(value) <= MAX_ID_CHARS else None


def _invalid(error: str, raw: object, answer_id: str | None, index: int | None) -> InvalidCitation:
    """Keep whatever identifies the broken citation, so its owner can find it."""
    obj = raw if type(raw) is dict else {}
    return InvalidCitation(
        error=bounded(error),
        citation_id=_identifier(obj.get("citation_id")),
        answer_id=_identifier(answer_id),
        doc_id=_identifier(obj.get("doc_id")),
        index=index,
    )


def _answer_header(obj: dict[str, Any]) -> tuple[str, str | None]:
    answer_id = _required_str(obj, "answer_id")
    _optional_timestamp(obj, "emitted_at")
    topic = _optional_str(obj, "topic")
    return answer_id, topic


def _sentences(sentences: object) -> list[str]:
    if type(sentences) is not list:
        raise RecordError(f"'sentences' must be a list of strings, got {_type_name(sentences)}")
    for sentence in sentences:
        if type(sentence) is not str:
            index = next(i for i, s in enumerate(sentences) if type(s) is not str)
            raise RecordError(
                f"'sentences' must be a list of strings, but item #{index} is "
                f"{_type_name(sentence)}"
            )
    return sentences


def decode_sentences(
    value: object, limits: Limits = DEFAULT_LIMITS, *, header_checked: bool = False
) -> AnswerSentences | None:
    """What coverage needs from an answer event: None unless it is one that carried
    ``sentences`` (a lone citation record cannot be judged for coverage).

    Never raises: sentences that cannot be used come back with ``sentences=None`` and the error,
    and so does an answer whose citations or header are unusable (coverage needs to know which
    sentences were cited, and by which answer). ``header_checked`` says
    :func:`decode_citations` already decoded a citation of this answer, so its header and its
    list of citations are known to be good and are not validated again.
    """
    if type(value) is not dict or "citations" not in value or value.get("sentences") is None:
        return None
    obj: dict[str, Any] = value
    if header_checked:
        sentences = obj["sentences"]
        if type(sentences) is list and len(sentences) <= limits.max_sentences_per_answer:
            for sentence in sentences:
                if type(sentence) is not str:
                    break
            else:  # the common case, straight through; anything else is explained below
                if _REFUSED not in obj:
                    return AnswerSentences(obj["answer_id"], obj.get("topic"), sentences)
        return _answer_sentences(obj, obj["answer_id"], obj.get("topic"), limits)
    own_id = _identifier(obj.get("answer_id"))
    own_topic = _identifier(obj.get("topic"))
    citations = obj["citations"]
    try:
        if type(citations) is not list:
            raise RecordError(f"'citations' must be a list, got {_type_name(citations)}")
        if len(citations) > limits.max_citations_per_answer:
            return AnswerSentences(
                own_id,
                own_topic,
                None,
                f"the answer has {len(citations):,} citations, more than "
                f"max_citations_per_answer={limits.max_citations_per_answer:,}",
                "oversized",
            )
        answer_id, topic = _answer_header(obj)
    except RecordError as exc:
        return AnswerSentences(own_id, own_topic, None, bounded(f"answer event: {exc}"))
    return _answer_sentences(obj, answer_id, topic, limits)


def _answer_sentences(
    obj: dict[str, Any], answer_id: str, topic: str | None, limits: Limits
) -> AnswerSentences:
    sentences = obj["sentences"]
    if type(sentences) is list and len(sentences) > limits.max_sentences_per_answer:
        error = (
            f"the answer has {len(sentences):,} sentences, more than "
            f"max_sentences_per_answer={limits.max_sentences_per_answer:,}"
        )
        return AnswerSentences(answer_id, topic, None, error, "oversized")
    try:
        decoded = _sentences(sentences)
        return AnswerSentences(
            answer_id, topic, decoded, refused=_refused_sentences(obj.get(_REFUSED), len(decoded))
        )
    except RecordError as exc:
        return AnswerSentences(answer_id, topic, None, bounded(str(exc)))


# the sentences named by citations capture refused (exporter.capture writes it; absent, none)
_REFUSED = "refused_citation_sentences"


def _refused_sentences(value: object, sentences: int) -> list[int] | None:
    """Each a sentence index of the answer; capture writes each once, so a list longer than the
    sentences is refused (it bounds what coverage reads)."""
    if value is None:
        return None
    if type(value) is not list or len(value) > sentences:
        raise RecordError(
            f"'{_REFUSED}' must be a list of at most {sentences:,} sentence indexes, got "
            f"{_type_name(value) if type(value) is not list else f'{len(value):,} items'}"
        )
    for item in value:
        if type(item) is not int or not 0 <= item < sentences:
            raise RecordError(
                f"'{_REFUSED}' must hold sentence indexes of the answer's {sentences:,} "
                f"sentences, but holds {'null' if item is None else preview(item)}"
            )
    return value


def decode_citations(
    value: object, limits: Limits = DEFAULT_LIMITS
) -> Iterator[Citation | InvalidCitation]:
    """Decode a citation record or an answer event into its citations.

    Yields one item per citation: a :class:`Citation`, or an :class:`InvalidCitation` saying
    why that one could not be used. A record that is not even an object, and an answer with more
    than ``max_citations_per_answer`` citations, yield exactly one invalid item.
    """
    if type(value) is not dict:
        yield InvalidCitation(f"a citation record must be a JSON object, got {_type_name(value)}")
        return
    obj: dict[str, Any] = value
    if "citations" not in obj:
        if obj.get("sentences") is not None:  # an answer event that lost its citations
            yield _invalid(
                "an answer event needs 'citations': a list, [] when the answer cites nothing",
                obj,
                _identifier(obj.get("answer_id")),
                None,
            )
            return
        try:
            yield _citation(obj, None, None)
        except RecordError as exc:
            yield _invalid(str(exc), obj, _identifier(obj.get("answer_id")), None)
        return

    citations = obj["citations"]
    own_id = _identifier(obj.get("answer_id"))
    if type(citations) is not list:
        yield InvalidCitation(
            f"'citations' must be a list, got {_type_name(citations)}", answer_id=own_id
        )
        return
    if len(citations) > limits.max_citations_per_answer:
        yield InvalidCitation(
            f"the answer has {len(citations):,} citations, more than "
            f"max_citations_per_answer={limits.max_citations_per_answer:,}",
            answer_id=own_id,
            reason="oversized",
        )
        return
    try:
        answer_id, topic = _answer_header(obj)
    except RecordError as exc:
        for index, raw in enumerate(citations):
            yield _invalid(f"answer event: {exc}", raw, own_id, index)
        return
    # a citation's sentence_index must name one of its answer's sentences (an item of the list,
    # whatever the items are: items that are not strings fail the answer's coverage, not its
    # citations)
    sentences = obj.get("sentences")
    count = len(sentences) if type(sentences) is list else None
    for index, raw in enumerate(citations):
        try:
            yield _citation(_as_object(raw, "a citation"), answer_id, topic, count)
        except RecordError as exc:
            yield _invalid(str(exc), raw, answer_id, index)
