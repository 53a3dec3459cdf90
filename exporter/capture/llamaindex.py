"""LlamaIndex: a query engine's ``Response`` over the store's nodes -> one answer event.

A response holds the answer text and its ``source_nodes`` (``NodeWithScore``s). Two engines
cite differently:

- **CitationQueryEngine** re-splits each retrieved node into pieces shown to the model as
  ``Source N:\\n<piece>``, and the answer cites them by number: ``... 14 days [1].``. Up to
  llama-index-core 0.14.23 each piece keeps its parent node's id (and the parent's whole
  offsets, which do not describe the piece); from 0.14.24 each gets a fresh id and no offsets,
  and only ``ref_doc_id`` and the metadata survive. Either way the piece is found in the
  store's text: in the node of that id when the store has it, else in the nodes of its
  document, and recorded as the text found there (verbatim; else refused).
- **Any other engine** gives no numbers: each source node is cited whole, with no sentence.

The store's nodes are passed as ``nodes`` (a ``TextNode``, its ``model_dump()``, or a
:class:`~exporter.records.schema.Chunk`), read as the Postgres ``llamaindex`` layout reads a
row: the node id is the chunk id, ``ref_doc_id`` the document, ``metadata[doc_version_key]``
its version, ``start_char_idx`` the chunk's offset in the document. A source node that is a
whole node, not a piece, is its own chunk when ``nodes`` does not hold it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.capture import reading
from exporter.capture.building import AnswerBuilder, Captured, Refusal, check_event_fields
from exporter.capture.reasons import RefusedError, reason_of
from exporter.config.postgres import DEFAULT_VERSION_KEY
from exporter.records.limits import DEFAULT_LIMITS
from exporter.records.schema import Chunk

__all__ = ["MAX_NODES", "chunk_of_node", "cited_documents", "from_llamaindex"]

#: The store's nodes read for one answer: the nodes of the documents it cites, not an index.
MAX_NODES = 10_000
_MAX_SOURCES = DEFAULT_LIMITS.max_citations_per_answer
# "[1]", "[2, 3]": the numbers CitationQueryEngine's prompt asks the model to cite by.
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4}){0,15})\]")
# the numbers (and spaces) a sentence opens with: the splitter puts "30 days. [1] Plans" in the
# second sentence, but [1] cites the first
_LEADING_MARKERS = re.compile(rf"(?:\s*{_MARKER.pattern})+")
# How CitationQueryEngine labels each piece it shows the model.
_PIECE = re.compile(r"Source (\d{1,4}):\n")
# NodeRelationship.SOURCE, a str enum: the key a node names its document under.
_SOURCE = "1"


def chunk_of_node(node: object, *, doc_version_key: str = DEFAULT_VERSION_KEY) -> Chunk:
    """The chunk a LlamaIndex node (or its ``model_dump()``) is; raises
    :class:`~exporter.capture.reading.UnreadableError` naming what is missing."""
    if isinstance(node, Chunk):
        return node
    chunk_id = _node_id(node)
    doc_id = _ref_doc_id(node)
    if doc_id is None:
        raise reading.UnreadableError(f"node {chunk_id[:40]!r} names no document (ref_doc_id)")
    metadata = reading.field(node, "metadata", None) or {}
    if not isinstance(metadata, Mapping):
        raise reading.UnreadableError("the node's metadata is not an object")
    version = metadata.get(doc_version_key)
    if isinstance(version, bool) or not isinstance(version, str | int) or version == "":
        raise reading.UnreadableError(f"node {chunk_id[:40]!r} has no {doc_version_key!r}")
    offset = reading.field(node, "start_char_idx", None)
    return Chunk(
        doc_id=doc_id,
        doc_version=str(version),
        chunk_id=chunk_id,
        text=reading.text(node, "text"),
        doc_offset=offset if type(offset) is int and offset >= 0 else None,
    )


def from_llamaindex(
    response: object,
    nodes: Iterable[object] | Any = (),
    *,
    answer_id: str,
    doc_version_key: str = DEFAULT_VERSION_KEY,
    topic: str | None = None,
    emitted_at: str | None = None,
    fingerprints: Mapping[str, str] | None = None,
) -> Captured:
    """The answer event of ``response`` (a LlamaIndex ``Response`` or its dict: ``response``
    and ``source_nodes``) over ``nodes``: the store's nodes of the documents it cites (at most
    :data:`MAX_NODES`), or the index's docstore (``index.docstore``), from which those nodes
    are read. Never raises on what the response or the nodes hold."""
    check_event_fields(answer_id, topic, emitted_at, dict(fingerprints or {}))
    try:
        if _is_docstore(nodes):
            nodes = _nodes_in(nodes, cited_documents(response))
        store = _Store.of(nodes, doc_version_key)
        return _capture(response, store, answer_id, topic, emitted_at, fingerprints)
    except Exception as error:  # a hostile object's own code raised: refused, never re-raised
        return Captured(
            None, (Refusal("unreadable_response", f"reading it raised {type(error).__name__}"),)
        )


def _is_docstore(nodes: object) -> bool:
    return callable(getattr(nodes, "get_ref_doc_info", None)) and callable(
        getattr(nodes, "get_nodes", None)
    )


def _nodes_in(docstore: Any, doc_ids: list[str]) -> list[object]:
    """The nodes a LlamaIndex docstore holds of these documents (at most :data:`MAX_NODES`)."""
    nodes: list[object] = []
    for doc_id in doc_ids:
        info = docstore.get_ref_doc_info(doc_id)
        node_ids = getattr(info, "node_ids", None) if info is not None else None
        if not isinstance(node_ids, list) or not node_ids:
            continue
        wanted = [i for i in node_ids[: MAX_NODES - len(nodes)] if type(i) is str]
        found = docstore.get_nodes(wanted, raise_error=False)
        nodes.extend(node for node in found[: len(wanted)] if node is not None)
        if len(nodes) >= MAX_NODES:
            break
    return nodes


def cited_documents(response: object) -> list[str]:
    """The documents a response's source nodes name (``ref_doc_id``), first seen first: whose
    nodes :func:`from_llamaindex` needs. Never raises; what it cannot read it leaves out."""
    try:
        sources = reading.items(response, "source_nodes", _MAX_SOURCES)
    except Exception:  # unreadable: from_llamaindex says why
        return []
    found: dict[str, None] = {}
    for source in sources:
        try:
            doc_id = _ref_doc_id(reading.field(source, "node", source))
        except Exception:  # one unreadable node: from_llamaindex refuses it
            continue
        if doc_id is not None:
            found[doc_id] = None
    return list(found)


@dataclass(slots=True)
class _Store:
    """The nodes given, by id and by document (in document order)."""

    doc_version_key: str
    by_id: dict[str, Chunk] = field(default_factory=dict)
    by_doc: dict[str, list[Chunk]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, nodes: Iterable[object], doc_version_key: str) -> _Store:
        store = cls(doc_version_key)
        if isinstance(nodes, str | bytes | Mapping):
            store.unreadable.append(f"nodes must be a list of nodes, not {type(nodes).__name__}")
            return store
        for count, node in enumerate(nodes):
            if count >= MAX_NODES:
                store.unreadable.append(f"nodes past the first {MAX_NODES:,} were not read")
                break
            try:
                chunk = chunk_of_node(node, doc_version_key=doc_version_key)
            except reading.UnreadableError as error:
                store.unreadable.append(str(error))
                continue
            if type(chunk.chunk_id) is str and chunk.chunk_id not in store.by_id:
                store.by_id[chunk.chunk_id] = chunk
                store.by_doc.setdefault(str(chunk.doc_id), []).append(chunk)
        for chunks in store.by_doc.values():
            chunks.sort(key=lambda chunk: -1 if chunk.doc_offset is None else chunk.doc_offset)
        return store

    def why_missing(self) -> str:
        if not self.unreadable:
            return ""
        return f" ({len(self.unreadable):,} nodes given were not read: {self.unreadable[0]})"


def _capture(  # noqa: PLR0917 - from_llamaindex's arguments, once checked
    response: object,
    store: _Store,
    answer_id: str,
    topic: str | None,
    emitted_at: str | None,
    fingerprints: Mapping[str, str] | None,
) -> Captured:
    try:
        text = reading.answer_text(response, "response")
        sources = reading.items(response, "source_nodes", _MAX_SOURCES)
    except reading.UnreadableError as error:
        return Captured(None, (Refusal("unreadable_response", str(error)),))
    builder = AnswerBuilder(
        answer_id, text, topic=topic, emitted_at=emitted_at, fingerprints=dict(fingerprints or {})
    )
    for number, sentence_index in _cited(builder, text, len(sources)):
        index = number - 1
        if not 0 <= index < len(sources):
            if builder.take(index, sentence_index):
                builder.refuse(
                    "no_such_source",
                    f"the answer cites [{number}] of the {len(sources)} source nodes",
                    index,
                    sentence_index,
                )
            continue
        try:
            chunk, start, end, piece = _place(sources[index], store)
        except Exception as error:  # unreadable, refused, or a hostile object's own code raised
            if builder.take(index, sentence_index):
                detail = (
                    str(error)
                    if isinstance(error, reading.UnreadableError)
                    else f"reading it raised {type(error).__name__}"
                )
                builder.refuse(reason_of(error), detail, index, sentence_index)
            continue
        builder.cite(
            chunk, start, end, said=piece, sentence_index=sentence_index, index=index, search=True
        )
    return builder.build()


def _cited(builder: AnswerBuilder, text: str, sources: int) -> list[tuple[int, int | None]]:
    """(source number, sentence) for each number the answer cites, once per sentence; with no
    number in the answer, every source node once, with no sentence."""
    cited: dict[tuple[int, int | None], None] = {}
    # where each sentence's leading numbers end, found once a sentence (a sentence of numbers
    # alone would otherwise be scanned again for each of them)
    leading: dict[int, int] = {}
    for match in _MARKER.finditer(text):
        sentence = builder.sentence_at(match.start(), match.end())
        if sentence:
            if sentence not in leading:
                run = _LEADING_MARKERS.match(text, builder.sentence_start(sentence))
                leading[sentence] = run.end() if run else 0
            if match.start() < leading[sentence]:
                # "30 days. [1] Plans ...": written after the stop, it cites what came before
                sentence -= 1
        if len(cited) > _MAX_SOURCES:
            # past the bound: not read, but its sentence is known (the builder keeps it for
            # the event, and says how many were left, once)
            for _ in match.group(1).split(","):
                builder.left_unread(sentence)
            continue
        for number in match.group(1).split(","):
            cited[(int(number), sentence)] = None
    if not cited:
        return [(number, None) for number in range(1, sources + 1)]
    return list(cited)


def _place(source: object, store: _Store) -> tuple[Chunk, int, int, str]:
    """The chunk a source node's text is in, the span of that text in it, and the text."""
    node = reading.field(source, "node", source)
    content = reading.text(node, "text")
    piece_match = _PIECE.match(content)
    piece = content[piece_match.end() :] if piece_match else content
    if piece_match and piece.endswith("\n"):
        piece = piece[:-1]
    node_id = reading.field(node, "node_id", None) or reading.field(node, "id_", None)
    held = store.by_id.get(node_id) if type(node_id) is str else None
    if held is not None:
        return held, 0, len(held.text), piece
    doc_id = _ref_doc_id(node)
    if doc_id is not None and doc_id in store.by_doc:
        for chunk in store.by_doc[doc_id]:
            at = chunk.text.find(piece) if piece.strip() else -1
            if at >= 0:
                return chunk, at, at + len(piece), piece
        raise RefusedError(
            "quote_not_in_source",
            f"the text of source {_preview(content)} is in none of the "
            f"{len(store.by_doc[doc_id])} nodes given of document {doc_id[:40]!r}",
        )
    if piece_match is None:
        chunk = chunk_of_node(node, doc_version_key=store.doc_version_key)
        return chunk, 0, len(chunk.text), piece
    raise RefusedError(
        "chunk_not_given",
        f"no node given holds source {_preview(content)} (its document "
        f"{(doc_id or 'unnamed')[:40]!r}){store.why_missing()}",
    )


def _node_id(node: object) -> str:
    node_id = reading.field(node, "node_id", None) or reading.field(node, "id_", None)
    if type(node_id) is not str or not node_id:
        raise reading.UnreadableError("the node has no id (node_id)")
    return node_id


def _ref_doc_id(node: object) -> str | None:
    """The node's document: ``ref_doc_id`` of a node, its SOURCE relationship in a dump."""
    doc_id = reading.field(node, "ref_doc_id", None)
    if doc_id is None:
        relationships = reading.field(node, "relationships", None)
        related = relationships.get(_SOURCE) if isinstance(relationships, Mapping) else None
        doc_id = reading.field(related, "node_id", None) if related is not None else None
    return doc_id if type(doc_id) is str and doc_id else None


def _preview(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
