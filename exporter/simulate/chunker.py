"""A sentence-packing chunker, the kind most RAG pipelines run (LlamaIndex's SentenceSplitter).

Chunks start and end on sentence boundaries; whitespace between two chunks belongs to neither,
so ``doc_offset`` of chunk k+1 may be a little past the end of chunk k.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CutChunk", "cut_by_groups", "pack_sentences"]


@dataclass(frozen=True, slots=True)
class CutChunk:
    ordinal: int
    doc_offset: int
    text: str
    first_sentence: int
    last_sentence: int  # inclusive

    @property
    def end(self) -> int:
        return self.doc_offset + len(self.text)


def pack_sentences(spans: tuple[tuple[int, int], ...], size: int) -> list[tuple[int, int]]:
    """Group consecutive sentences so each group spans at most ``size`` characters."""
    groups: list[tuple[int, int]] = []
    first = 0
    for index in range(1, len(spans) + 1):
        if index == len(spans) or spans[index][1] - spans[first][0] > size:
            groups.append((first, index - 1))
            first = index
    return groups


def cut_by_groups(
    text: str, spans: tuple[tuple[int, int], ...], groups: list[tuple[int, int]]
) -> list[CutChunk]:
    """Cut ``text`` into one chunk per sentence group."""
    chunks = []
    for ordinal, (first, last) in enumerate(groups):
        start, end = spans[first][0], spans[last][1]
        chunks.append(CutChunk(ordinal, start, text[start:end], first, last))
    return chunks
