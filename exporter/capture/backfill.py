"""Backfill: logged responses, one a line, captured against the store's chunks.

A team that logged its model's responses (and which chunks each request showed) can write the
answer events after the fact. Each line is one object:

- ``answer_id`` (required), ``topic`` and ``emitted_at`` (optional): the event's own fields;
- ``response``: what the framework returned, as JSON (Anthropic's ``Message.model_dump()``,
  LangChain's ``CitedAnswer``/``QuotedAnswer``, LlamaIndex's ``{"response", "source_nodes"}``);
- ``documents``: the chunk ids the request showed, in order (Anthropic: a chunk id for a text
  document, a list of chunk ids for a custom-content one, null for one not from the store;
  LangChain: the retrieved documents' chunk ids); LlamaIndex needs none, its source nodes name
  their documents;
- ``search_results`` (Anthropic): a list of chunk ids for each search result block.

Chunks come from the store as the sweep reads it, and each document's ``doc_sha256`` is the
fingerprint of the document its chunks assemble (what the checks compare it with).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from exporter.capture.anthropic import from_anthropic
from exporter.capture.building import Captured, Refusal
from exporter.capture.langchain import from_langchain
from exporter.capture.llamaindex import MAX_NODES, cited_documents, from_llamaindex
from exporter.capture.offsets import Unit
from exporter.capture.reasons import Reason
from exporter.checks.store import ChunkStore
from exporter.records.limits import DEFAULT_LIMITS
from exporter.records.schema import Chunk

__all__ = ["FRAMEWORKS", "Framework", "LineError", "Tally", "capture_line"]

Framework = Literal["anthropic", "langchain", "llamaindex"]
FRAMEWORKS: tuple[Framework, ...] = ("anthropic", "langchain", "llamaindex")
# The chunk ids one line may name: as many as an answer may cite.
_MAX_IDS = DEFAULT_LIMITS.max_citations_per_answer


class LineError(ValueError):
    """A line that is not a logged response of the shape above: no event, one short reason."""


@dataclass(slots=True)
class Tally:
    """What a backfill did, line by line: every response accounted for."""

    responses: int = 0
    events: int = 0
    citations: int = 0
    not_captured: int = 0
    refused: Counter[Reason] = field(default_factory=Counter)
    unknown_chunks: int = 0

    def add(self, captured: Captured) -> None:
        self.responses += 1
        self.refused.update(refusal.reason for refusal in captured.refusals)
        if captured.event is None:
            self.not_captured += 1
        else:
            self.events += 1
            self.citations += len(captured.event["citations"])

    def unreadable(self) -> None:
        self.responses += 1
        self.not_captured += 1


def capture_line(
    framework: Framework, line: object, store: ChunkStore, tally: Tally, *, unit: Unit
) -> Captured:
    """The capture of one parsed line; raises :class:`LineError` for a line of the wrong shape
    (the caller counts it) and never for what the response holds."""
    if not isinstance(line, Mapping):
        raise LineError(f"expected an object, not {_kind(line)}")
    if "response" not in line:
        raise LineError("the line has no 'response'")
    fields: dict[str, Any] = {name: line.get(name) for name in ("answer_id", "topic", "emitted_at")}
    try:
        if framework == "llamaindex":
            response = line["response"]
            nodes = _nodes_of(cited_documents(response), store)
            fingerprints = _fingerprints(store, (chunk.doc_id for chunk in nodes))
            return from_llamaindex(response, nodes, fingerprints=fingerprints, **fields)
        resolver = _Resolver(store, tally)
        documents = resolver.list_of(line.get("documents"), "documents", nested=framework)
        if framework == "langchain":
            fingerprints = _fingerprints(store, resolver.doc_ids)
            return from_langchain(line["response"], documents, fingerprints=fingerprints, **fields)
        results = resolver.list_of(line.get("search_results"), "search_results", nested="all")
        fingerprints = _fingerprints(store, resolver.doc_ids)
        return from_anthropic(
            line["response"],
            documents,
            search_results=results,
            unit=unit,
            fingerprints=fingerprints,
            **fields,
        )
    except ValueError as error:  # the line's own answer_id, topic or emitted_at
        if isinstance(error, LineError):
            raise
        raise LineError(str(error)) from None


def refusal_record(number: int, answer_id: object, refusal: Refusal) -> dict[str, Any]:
    """One line of the refusals file."""
    return {
        "line": number,
        "answer_id": answer_id if isinstance(answer_id, str) else None,
        "reason": refusal.reason,
        "detail": refusal.detail,
        "index": refusal.index,
    }


@dataclass(slots=True)
class _Resolver:
    store: ChunkStore
    tally: Tally
    doc_ids: set[str] = field(default_factory=set)
    _named: int = 0

    def list_of(
        self, value: object, name: str, *, nested: Literal["anthropic", "langchain", "all"]
    ) -> list[Any]:
        """The chunks a line's list of chunk ids names; an unknown id is a source not from the
        store (``None``), refused by the capture with that reason."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise LineError(f"'{name}' must be a list of chunk ids, not {_kind(value)}")
        resolved: list[Any] = []
        for item in value:
            if nested == "all" or (nested == "anthropic" and isinstance(item, list)):
                if not isinstance(item, list):
                    raise LineError(f"'{name}' must be a list of lists of chunk ids")
                blocks = [self._chunk(block, name) for block in item]
                resolved.append(None if None in blocks else blocks)
            else:
                resolved.append(None if item is None else self._chunk(item, name))
        return resolved

    def _chunk(self, chunk_id: object, name: str) -> Chunk | None:
        self._named += 1
        if self._named > _MAX_IDS:
            raise LineError(f"'{name}' names more than {_MAX_IDS} chunks")
        if type(chunk_id) is not str:
            raise LineError(f"'{name}' holds {_kind(chunk_id)}, not a chunk id")
        chunk = self.store.chunk(chunk_id)
        if chunk is None:
            self.tally.unknown_chunks += 1
            return None
        self.doc_ids.add(chunk.doc_id)
        return chunk


def _nodes_of(doc_ids: Sequence[str], store: ChunkStore) -> list[Chunk]:
    """The live chunks of the documents a LlamaIndex response cites, in document order."""
    nodes: list[Chunk] = []
    for doc_id in doc_ids:
        view = store.document(doc_id)
        if view is not None:
            nodes.extend(placement.chunk for placement in view.placements)
        if len(nodes) >= MAX_NODES:
            break
    return nodes[:MAX_NODES]


def _fingerprints(store: ChunkStore, doc_ids: Any) -> dict[str, str]:
    """Each document's fingerprint, for those whose chunks carry their offsets (a doc_span
    needs one to be trusted as a hint)."""
    prints = {}
    for doc_id in set(doc_ids):
        view = store.document(doc_id)
        if view is not None and view.has_doc_offsets:
            prints[doc_id] = view.fingerprint
    return prints


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
