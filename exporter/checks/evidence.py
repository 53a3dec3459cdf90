"""What a drifted citation looks like: its stored quote, what its recorded span holds now, and
the text where the quote was found. A sweep's report shows these as examples, and its verdict
file keeps them, so that a report drawn from the file alone shows them too.

Only for drift (a few in a hundred citations at worst), and each text cut at EVIDENCE_CHARS:
whatever a quote's length, a verdict grows by a bounded amount.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Verdict
from exporter.records.schema import Citation

__all__ = ["EVIDENCE_CHARS", "Evidence", "drift_evidence"]

# Characters of each text kept: enough to see what moved, bounded whatever the quote.
EVIDENCE_CHARS = 300


@dataclass(frozen=True, slots=True)
class Evidence:
    """The stored quote; what the recorded span holds now (None: its chunk is gone, belongs to
    another document, or ends before the span); the text at the repaired span (None: the quote
    was not found). Each at most EVIDENCE_CHARS characters."""

    quote: str
    recorded: str | None
    found: str | None


def drift_evidence(citation: Citation, verdict: Verdict, store: ChunkStore) -> Evidence:
    """The evidence of a citation checked against ``store`` into ``verdict``."""
    cut = EVIDENCE_CHARS
    cited = store.chunk(citation.chunk_id)
    recorded = None
    if cited is not None and cited.doc_id == citation.doc_id and citation.end <= len(cited.text):
        recorded = cited.text[citation.start : min(citation.end, citation.start + cut)]
    found = None
    repair = verdict.repair
    if repair is not None:
        chunk = store.chunk(repair.chunk_id)
        if chunk is not None:
            found = chunk.text[repair.start : min(repair.end, repair.start + cut)]
    return Evidence(citation.quote[:cut], recorded, found)
