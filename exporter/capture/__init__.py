"""Capture at answer time: an LLM's cited answer -> an answer event the exporter can check.

Every check and every repair downstream reads what was written when the answer was made: the
``quote``, a span that indexes the chunk the store holds, and the hints that tell copies of a
quote apart. This package writes them from what a framework returned, so a team does not
compute them by hand: ``from_anthropic``, ``from_langchain`` and ``from_llamaindex``. Each returns a
:class:`Captured`: the event, and every citation it refused with its reason; it never raises
on what the framework's objects hold.
"""

from typing import TYPE_CHECKING

from exporter.capture.anthropic import from_anthropic
from exporter.capture.building import Captured, Refusal
from exporter.capture.langchain import chunk_of_document, from_langchain
from exporter.capture.llamaindex import chunk_of_node, cited_documents, from_llamaindex
from exporter.capture.offsets import UNITS, Unit
from exporter.capture.reasons import REASONS, Reason
from exporter.records.fingerprint import document_fingerprint
from exporter.records.schema import Chunk

if TYPE_CHECKING:
    from exporter.capture.sender import AnswerSender

__all__ = [
    "REASONS",
    "UNITS",
    "AnswerSender",
    "Captured",
    "Chunk",
    "Reason",
    "Refusal",
    "Unit",
    "chunk_of_document",
    "chunk_of_node",
    "cited_documents",
    "document_fingerprint",
    "from_anthropic",
    "from_langchain",
    "from_llamaindex",
]


def __getattr__(name: str) -> object:
    """``AnswerSender`` on first use: only a caller that sends pays for aiokafka's import."""
    if name == "AnswerSender":
        from exporter.capture.sender import AnswerSender  # noqa: PLC0415

        return AnswerSender
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
