"""An answer's text cut into the sentences coverage judges, with where each one lies.

A line break ends a unit first (a markdown list item, a heading, a salutation or a signature
line stands alone in the answers coverage was measured on), then pysbd cuts each line into
sentences. pysbd, not a regular expression: it carries the Golden Rules of sentence boundaries
(abbreviations such as "e.g." and "Dr.", decimals, "$4.50/mo.", ellipses, quotations), is pure
Python with no dependency, and kept whole answers as their writers cut them more often than
syntok on the project's labelled answers (519 against 499 of 870; blingfire cut "1." off its
list item). Its cost grows faster than the length of a line, so a line above
:data:`MAX_LINE_CHARS` is cut at sentence punctuation followed by a space instead, and an answer
is read up to :data:`MAX_ANSWER_CHARS`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_LINE_CHARS",
    "MAX_SEGMENTED_CHARS",
    "MAX_SENTENCES",
    "sentence_spans",
]

#: What of an answer is cut into sentences; the rest is one last unit.
MAX_ANSWER_CHARS = 100_000
#: Longer lines are cut by :data:`_PLAIN_END` (pysbd takes about 100 ms on 5,000 characters).
MAX_LINE_CHARS = 2_000
#: pysbd reads at most this much of an answer; the lines after are cut by :data:`_PLAIN_END`.
MAX_SEGMENTED_CHARS = 20_000
#: Units cut before the rest of the answer is one last unit: the exporter judges the coverage of
#: answers of at most ``max_sentences_per_answer`` (1,000) sentences.
MAX_SENTENCES = 999
_PLAIN_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+")
_LINE = re.compile(r"[^\n]+")


@functools.cache
def _segmenter() -> Any:
    try:
        import pysbd  # type: ignore[import-untyped]  # noqa: PLC0415 - an extra, when asked
    except ImportError as error:  # pragma: no cover - the extra is installed in the tests
        raise ImportError(
            "exporter.capture needs pysbd: pip install 'citation-drift-exporter[capture]'"
        ) from error
    return pysbd.Segmenter(language="en", clean=False)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each sentence of ``text``, in order, without surrounding
    whitespace; whitespace-only text has none."""
    spans: list[tuple[int, int]] = []
    head = text[:MAX_ANSWER_CHARS]
    cut = len(head)
    segmented = 0
    for line in _LINE.finditer(head):
        start = line.start()
        size = line.end() - start
        if size <= MAX_LINE_CHARS and segmented + size <= MAX_SEGMENTED_CHARS:
            segmented += size
            pieces = _segmenter().segment(line.group())
        else:
            pieces = _PLAIN_END.split(line.group())
        cursor = 0
        for piece in pieces:
            stripped = piece.strip()
            if not stripped:
                continue
            found = line.group().find(stripped, cursor)
            if found < 0:  # a splitter that changed the text: keep what is left as one unit
                stripped = line.group()[cursor:].strip()
                if not stripped:
                    break
                found = line.group().index(stripped, cursor)
            spans.append((start + found, start + found + len(stripped)))
            cursor = found + len(stripped)
        if len(spans) >= MAX_SENTENCES:
            del spans[MAX_SENTENCES:]
            cut = spans[-1][1]
            break
    rest = text[cut:].strip()
    if rest:
        at = text.index(rest, cut)
        spans.append((at, at + len(rest)))
    return spans
