"""What a batch of messages cites: the documents and chunks a lookup must fetch first.

Read leniently and cheaply, before the messages are checked: whatever is not a citation (bad
JSON, a wrong type, a message above the size limit) cites nothing here and is the check's to
refuse, with the reason it gives anyway. Only ids the decoder would accept (strings of at most
MAX_ID_CHARS) are collected, of at most ``max_citations_per_answer`` citations a message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from exporter.records.decode import RecordError, parse_json
from exporter.records.limits import MAX_ID_CHARS, Limits

__all__ = ["Cited", "cited_by"]


@dataclass(slots=True)
class Cited:
    """Document and chunk ids, each once, in the order first cited."""

    doc_ids: dict[str, None] = field(default_factory=dict)
    chunk_ids: dict[str, None] = field(default_factory=dict)

    def add(self, citation: Any) -> None:
        if type(citation) is not dict:
            return
        doc_id, chunk_id = citation.get("doc_id"), citation.get("chunk_id")
        if type(doc_id) is str and 0 < len(doc_id) <= MAX_ID_CHARS:
            self.doc_ids[doc_id] = None
        if type(chunk_id) is str and 0 < len(chunk_id) <= MAX_ID_CHARS:
            self.chunk_ids[chunk_id] = None


def cited_by(values: Iterable[bytes | None], limits: Limits) -> Cited:
    """The ids the messages ``values`` (citation records or answer events) cite."""
    cited = Cited()
    for value in values:
        if value is None or len(value) > limits.max_message_bytes:
            continue
        try:
            parsed = parse_json(value)
        except RecordError:
            continue
        if type(parsed) is not dict:
            continue
        citations = parsed.get("citations")
        if citations is None:
            cited.add(parsed)
        elif type(citations) is list and len(citations) <= limits.max_citations_per_answer:
            for citation in citations:
                cited.add(citation)
    return cited
