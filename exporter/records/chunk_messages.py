"""A chunk record as the Kafka message that carries it: keyed by ``chunk_id``.

The chunk topic is compacted, so the key is what makes a newer record of a chunk replace the
older one, and a deletion travels as a tombstone (the key, no value). Producing a scenario,
replaying a file, the demo and the tests all turn chunk lines into messages here, one way.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["chunk_message"]

# Fields that make a line a citation or an answer event: such a line is never a chunk record,
# whatever else it carries (a citation must never be applied to the store as a chunk).
_CITATION_FIELDS = ("quote", "chunk_span", "citations")


def chunk_message(line: bytes) -> tuple[bytes, bytes | None] | None:
    """``(key, value)`` of a chunk record line (value None for a deletion), or None when the
    line is not a chunk record: it has neither ``text`` nor ``"deleted": true``, or it has a
    field of a citation."""
    try:
        record: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict or any(field in record for field in _CITATION_FIELDS):
        return None
    deleted = record.get("deleted") is True
    if "text" not in record and not deleted:
        return None
    chunk_id = record.get("chunk_id")
    key = chunk_id.encode() if type(chunk_id) is str else b""
    return key, None if deleted else line
