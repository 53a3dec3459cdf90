"""Bounds on what one input may cost, so that no single record can stop the monitor.

Every input is read by a long-running process that a whole deployment relies on: a record that
makes it allocate a terabyte, or spend a minute of CPU, silences every alert while it is down.
Each bound is named (by its setting) in the error it causes, so an operator who meets a real
record above one knows which knob to turn. Defaults are far above what real answer systems
produce and far below what would hurt the process.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_ERROR_BYTES",
    "MAX_ERROR_CHARS",
    "MAX_ID_CHARS",
    "MAX_SENTENCES_PER_ANSWER",
    "Limits",
    "Oversized",
    "bounded",
    "failure",
    "preview",
]

# Identifiers (citation, answer, document, chunk, version), topics, sources and chunker
# fingerprints are copied into every verdict and some into labels: a megabyte id repeated in the
# verdict of each of an answer's citations would turn one message into gigabytes of output.
MAX_ID_CHARS = 1024
# An error message is read by a person and travels in a DLQ header and a verdict line: at most
# this many characters, and this many bytes of UTF-8 (four-byte emoji ids would quadruple it).
MAX_ERROR_CHARS = 480
MAX_ERROR_BYTES = 1000
# The highest max_sentences_per_answer may be set: an answer's coverage verdict lists its
# sentences' indices (each claim's, and again each uncited one's), so at this many its verdict is
# still ~120 kB at worst, far inside a Kafka producer's max_request_size (1 MiB at least); at
# 100,000 a 400 kB answer of one-letter claims had a verdict of 1.2 MB, which the producer
# refused, rewinding the poll to check the same answer again, forever. It also bounds the
# classifier's work per answer.
MAX_SENTENCES_PER_ANSWER = 10_000


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds, with their defaults; the field names are the settings' names."""

    # A Kafka message value, or a line of an input file, above this is not parsed.
    max_message_bytes: int = 1_048_576
    # A chunk's text above this is rejected: spans and views are built from chunk texts.
    max_chunk_chars: int = 200_000
    # A chunk placed further into its document than this is rejected (documents of more than
    # a hundred million characters are not real; the padding would be).
    max_doc_offset: int = 100_000_000
    # An answer with more citations than this is rejected whole, in one error.
    max_citations_per_answer: int = 500
    # An answer with more sentences than this has its coverage judged invalid (its citations
    # are still checked): each sentence is classified, and no real answer has a thousand.
    max_sentences_per_answer: int = 1_000
    # Quotes above this are compared and searched verbatim (raw or folded) only, never
    # approximately: approximate alignment grows with the square of the quote's length.
    max_quote_chars: int = 1_000
    # CPU time one citation's relocation may take; past it the citation is left unrepaired
    # (reason relocation_budget_exceeded) rather than holding up every other citation.
    relocation_budget_ms: float = 10.0

    def __post_init__(self) -> None:
        for name in (
            "max_message_bytes",
            "max_chunk_chars",
            "max_doc_offset",
            "max_citations_per_answer",
            "max_sentences_per_answer",
            "max_quote_chars",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_sentences_per_answer > MAX_SENTENCES_PER_ANSWER:
            raise ValueError(
                f"max_sentences_per_answer must be at most {MAX_SENTENCES_PER_ANSWER:,} (a "
                f"coverage verdict lists every sentence), got {self.max_sentences_per_answer:,}"
            )
        if not self.relocation_budget_ms > 0:
            budget = self.relocation_budget_ms
            raise ValueError(f"relocation_budget_ms must be positive, got {budget}")


DEFAULT_LIMITS = Limits()

_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def preview(value: object) -> str:
    """A short representation of any value, however large or deeply nested, for an error."""
    shown = _REPR.repr(value)
    if isinstance(value, str) and len(value) > _REPR.maxstring:
        shown += f" ({len(value):,} characters)"
    elif isinstance(value, list | dict) and len(value) > _REPR.maxlist:
        shown += f" ({len(value):,} items)"
    return shown


def bounded(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``message`` cut to ``limit`` characters and MAX_ERROR_BYTES of UTF-8, saying so when cut."""
    cut = message if len(message) <= limit else message[: limit - 12] + " [truncated]"
    encoded = cut.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_ERROR_BYTES:
        return cut
    head = encoded[: MAX_ERROR_BYTES - 12].decode("utf-8", "ignore")
    return head + " [truncated]"


def failure(doing: str, exc: BaseException) -> str:
    """The error of an input whose handling raised (a bug): short, and naming the exception."""
    return bounded(f"{doing} failed: {type(exc).__name__}: {preview(str(exc))}")


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit: skipped, and accounted for by its size."""

    size: int

    def describe(self, limit: int | None = None) -> str:
        """The error of the line, for its verdict or its report."""
        named = "max_message_bytes" if limit is None else f"max_message_bytes={limit:,}"
        return f"line of {self.size:,} bytes is longer than {named}; not read"
