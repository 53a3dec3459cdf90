"""What a sweep's HTML report shows beyond the summary's counts: counts per source, the
superseded documents, and examples of drift. Gathered as verdicts arrive, in bounded memory
whatever the archive's size, and mergeable (a sweep's worker processes each gather their
batches', merged in input order), so the report of a sweep and the report of its verdict file
are the same.

Examples are a bottom-k sample: per group (a shift bucket of repaired drift, a reason of
unrepaired drift), the EXAMPLES_PER_GROUP verdicts whose citation id hashes lowest. That keeps
the same examples however the work was split, and picks them without reading the archive twice.
"""

from __future__ import annotations

import zlib
from bisect import insort
from collections import Counter
from dataclasses import dataclass, field

from exporter.checks.evidence import Evidence
from exporter.checks.verdict import Status, Verdict
from exporter.pipeline.shifts import shift_bucket

__all__ = [
    "EXAMPLES_PER_GROUP",
    "MAX_MISSING_DOCUMENTS",
    "Example",
    "ReportDetails",
    "SupersededDocument",
    "example_group",
]

EXAMPLES_PER_GROUP = 5
# sources counted one by one; an archive's further sources are counted as "other"
MAX_SOURCES = 50
OTHER_SOURCE = "other"
NO_SOURCE = "(no source)"
# superseded documents listed one by one; further ones only counted
MAX_SUPERSEDED_DOCUMENTS = 200
# documents gone from the store listed one by one (the first seen, in input order); further
# ones only counted: "restore the documents" needs their names
MAX_MISSING_DOCUMENTS = 200
# versions of one document listed; a document cited at more versions only counts them
MAX_VERSIONS_LISTED = 5


@dataclass(frozen=True, slots=True)
class Example:
    """One drifted citation, as the report shows it."""

    key: int  # the bottom-k order (a hash of the citation id)
    citation_id: str | None
    doc_id: str | None
    status: str
    reason: str | None
    action: str
    shift: int | None
    method: str | None
    evidence: Evidence | None
    how: str | None = None  # what told the place apart from copies of the quote


@dataclass(slots=True)
class SupersededDocument:
    """A document cited at versions that are no longer live."""

    live_version: str | None
    citations: int = 0
    recorded_versions: Counter[str] = field(default_factory=Counter)

    def add(self, recorded: str | None, count: int = 1) -> None:
        self.citations += count
        version = recorded or "(none)"
        if version in self.recorded_versions or len(self.recorded_versions) < MAX_VERSIONS_LISTED:
            self.recorded_versions[version] += count


def example_group(verdict: Verdict) -> str | None:
    """The example group of a verdict: ``shift <bucket>`` for repaired drift (``shift
    unknown`` without one), ``unrepaired <reason>``; None for a verdict that is no example."""
    if verdict.status is Status.DRIFT_REPAIRED:
        repair = verdict.repair
        if repair is None or repair.shift is None:
            return "shift unknown"
        return f"shift {shift_bucket(repair.shift)}"
    if verdict.status is Status.DRIFT_UNREPAIRED:
        return f"unrepaired {verdict.reason or 'unknown'}"
    return None


# characters of an id hashed for the sample: a verdict file read back keeps ids this long, and
# the sweep's page and its verdict file's must pick the same examples
_ID_HASHED = 500


def _key(verdict: Verdict) -> int:
    citation_id, doc_id = verdict.citation_id, verdict.doc_id
    text = f"{citation_id and citation_id[:_ID_HASHED]}\x00{doc_id and doc_id[:_ID_HASHED]}"
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


@dataclass
class ReportDetails:
    """Counts per source, superseded documents, and examples, each bounded."""

    # per source (None: no source named), citations per status; "other" past MAX_SOURCES
    by_source: dict[str | None, Counter[str]] = field(default_factory=dict)
    superseded: dict[str, SupersededDocument] = field(default_factory=dict)
    superseded_unlisted_citations: int = 0  # of documents past MAX_SUPERSEDED_DOCUMENTS
    # citations per document gone from the live store
    missing: Counter[str] = field(default_factory=Counter)
    missing_unlisted_citations: int = 0  # of documents past MAX_MISSING_DOCUMENTS
    examples: dict[str, list[Example]] = field(default_factory=dict)

    # A verdict's source is counted by SweepSummary.add, inline on the sweep's hot path:
    # source(name) for a name not seen yet, then its counts[status] += 1.

    def add_failure(self, verdict: Verdict, evidence: Evidence | None = None) -> None:
        """A verdict that is not ok (its source counted already): superseded documents and
        drift examples."""
        status = verdict.status
        if status is Status.SUPERSEDED:
            self._supersede(verdict.doc_id or "", verdict.live_version, verdict.recorded_version)
        elif status is Status.DOCUMENT_MISSING:
            self._miss(verdict.doc_id or "")
        group = example_group(verdict)
        if group is not None:
            repair = verdict.repair
            self._offer(
                group,
                Example(
                    _key(verdict),
                    verdict.citation_id,
                    verdict.doc_id,
                    verdict.status.value,
                    verdict.reason,
                    verdict.action.value,
                    None if repair is None else repair.shift,
                    None if repair is None else repair.method,
                    evidence,
                    None if repair is None else repair.how,
                ),
            )

    def source(self, source: str | None) -> Counter[str]:
        """The counts of a source not seen yet: its own, or "other" past MAX_SOURCES."""
        if len(self.by_source) >= MAX_SOURCES:
            source = OTHER_SOURCE
        counts = self.by_source.get(source)
        if counts is None:
            counts = self.by_source[source] = Counter()
        return counts

    def _supersede(
        self, doc_id: str, live: str | None, recorded: str | None, count: int = 1
    ) -> None:
        document = self.superseded.get(doc_id)
        if document is None:
            if len(self.superseded) >= MAX_SUPERSEDED_DOCUMENTS:
                self.superseded_unlisted_citations += count
                return
            document = self.superseded[doc_id] = SupersededDocument(live)
        document.add(recorded, count)

    def _miss(self, doc_id: str, count: int = 1) -> None:
        if doc_id in self.missing or len(self.missing) < MAX_MISSING_DOCUMENTS:
            self.missing[doc_id] += count
        else:
            self.missing_unlisted_citations += count

    def _offer(self, group: str, example: Example) -> None:
        kept = self.examples.setdefault(group, [])
        if len(kept) < EXAMPLES_PER_GROUP:
            insort(kept, example, key=lambda e: e.key)
        elif example.key < kept[-1].key:
            kept.pop()
            insort(kept, example, key=lambda e: e.key)

    def merge(self, other: ReportDetails) -> None:
        """Add another part's details (a later batch of the same sweep)."""
        for source, counts in other.by_source.items():
            mine = self.by_source.get(source)
            (self.source(source) if mine is None else mine).update(counts)
        for doc_id, document in other.superseded.items():
            listed = self.superseded.get(doc_id)
            if listed is None and len(self.superseded) >= MAX_SUPERSEDED_DOCUMENTS:
                self.superseded_unlisted_citations += document.citations
                continue
            if listed is None:
                listed = self.superseded[doc_id] = SupersededDocument(document.live_version)
            for version, count in document.recorded_versions.items():
                listed.add(version, count)
            # citations of versions past MAX_VERSIONS_LISTED: counted, not listed
            listed.citations += document.citations - sum(document.recorded_versions.values())
        self.superseded_unlisted_citations += other.superseded_unlisted_citations
        for doc_id, count in other.missing.items():
            self._miss(doc_id, count)
        self.missing_unlisted_citations += other.missing_unlisted_citations
        for group, examples in other.examples.items():
            for example in examples:
                self._offer(group, example)
