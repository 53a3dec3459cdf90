"""The fingerprint of a document's text that makes a position hint trustworthy.

A citation's ``doc_span`` says where its quote was in the whole document at answer time; it may
be trusted only if the document still has the same text at the same positions. Its length does
not prove that (a re-extraction that reads two columns in the other order keeps it), a hash of
the text does. The hash is taken with every whitespace character as a space: a chunker that
drops the whitespace between two chunks leaves a gap the live store fills with spaces, and a
re-wrap that only swaps spaces for line breaks moves nothing; anything that moves a character
changes it.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["document_fingerprint"]

_WHITESPACE = re.compile(r"\s")


def document_fingerprint(text: str) -> str:
    """SHA-256 (lower-case hex) of ``text`` in UTF-8 with each whitespace character (one for
    which ``str.isspace()`` is true) replaced by a space: what ``doc_sha256`` holds."""
    canonical = _WHITESPACE.sub(" ", text)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
