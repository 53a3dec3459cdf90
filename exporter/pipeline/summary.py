"""What a sweep came to, in constant memory: counts per status and reason, shifts, coverage,
the judged sample, and the gate's decision on them.

The data of a summary belongs to the core: every engine (the file sweep, the sweeps over the
answer topic, Spark) adds to one and merges the partial ones of its batches.
:mod:`exporter.outputs.report` renders it, as text or JSON.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from exporter.checks.coverage import COVERAGE, CoverageSummary
from exporter.checks.evidence import Evidence
from exporter.checks.plugins import CheckResult, ResultSummary
from exporter.checks.verdict import Status, Verdict
from exporter.entailment.summary import EntailmentSummary
from exporter.pipeline.details import ReportDetails
from exporter.pipeline.gate import (
    DRIFT,
    INVALID,
    MISSING,
    UNREPAIRED,
    Gate,
    GateLine,
    GateResult,
)
from exporter.pipeline.outcome import Outcome

__all__ = ["EXAMPLE_CITATION", "MAX_CHUNKERS", "SweepSummary"]

_MAX_ERRORS_KEPT = 20
# chunkers of the store listed by name, the most chunks first; further ones only counted
MAX_CHUNKERS = 10
# One line of a citations file, as the error of a file with none shows it (a test decodes it).
EXAMPLE_CITATION = (
    '{"citation_id": "c1", "answer_id": "a1", "doc_id": "refunds", "doc_version": "v3", '
    '"chunk_id": "refunds#0", "chunk_span": [0, 20], "quote": "Refunds take 5 days."}'
)


def _results() -> dict[str, ResultSummary]:
    """The checks' parts of a new summary: coverage's always (reported when it judged
    nothing), a plug-in's from its first result."""
    return {COVERAGE: CoverageSummary()}


@dataclass
class SweepSummary:
    """Accumulates verdicts in constant memory (shifts are kept as a value -> count map)."""

    statuses: Counter[str] = field(default_factory=Counter)
    reasons: Counter[tuple[str, str]] = field(default_factory=Counter)
    methods: Counter[str] = field(default_factory=Counter)
    # what told each repair's place apart: unique, context, position_hint
    decided_by: Counter[str] = field(default_factory=Counter)
    shifts: Counter[int] = field(default_factory=Counter)
    unknown_shifts: int = 0
    # each plug-in check's part, by its name, in the order they were first seen
    results: dict[str, ResultSummary] = field(default_factory=_results)
    coverage_judged: bool = True  # False with --no-coverage: reported as not judged, not as 0
    coverage_off: str = "switched off"  # why it was not judged, when it was not
    # why no sample was judged, when that is worth a line (an engine that cannot judge one)
    entailment_off: str | None = None
    entailment: EntailmentSummary | None = None  # a judged sample, when the sweep drew one
    invalid_chunk_records: int = 0
    errors: list[str] = field(default_factory=list)
    chunks_loaded: int = 0
    documents_loaded: int = 0
    elapsed_seconds: float = 0.0
    # the live store's chunkers (its chunker fingerprint) with their chunks, the most first,
    # and when it was read: None when not recorded (a summary read back from an older sweep)
    chunkers: list[tuple[str | None, int]] | None = None
    chunkers_unlisted: int = 0  # chunks of further chunkers, past MAX_CHUNKERS
    store_read_at: datetime | None = None
    # counted from verdict files (citation-exporter report): no chunk store was read
    from_verdicts: bool = False
    # per source, superseded documents and drift examples, for the HTML report
    details: ReportDetails = field(default_factory=ReportDetails)

    def add(self, verdict: Verdict, evidence: Evidence | None = None) -> None:
        status = verdict.status
        self.statuses[status] += 1
        # the report's counts per source, inline: once per citation of a sweep
        details = self.details
        counts = details.by_source.get(verdict.source)
        if counts is None:
            counts = details.source(verdict.source)
        counts[status] += 1
        if status is Status.OK:
            return
        details.add_failure(verdict, evidence)
        if verdict.reason is not None:
            self.reasons[(status.value, verdict.reason)] += 1
        repair = verdict.repair
        if repair is not None:
            self.methods[repair.method] += 1
            self.decided_by[repair.how] += 1
            if repair.shift is None:
                self.unknown_shifts += 1
            else:
                self.shifts[repair.shift] += 1

    @property
    def coverage(self) -> CoverageSummary:
        """Coverage's part (always there)."""
        return cast(CoverageSummary, self.results[COVERAGE])

    def add_outcome(self, outcome: Outcome, where: str) -> None:
        """Add every citation of one message and the results of its checks; keep the errors of
        invalid ones, at ``where``."""
        for checked in outcome.checked:
            verdict = checked.verdict
            self.add(verdict, checked.evidence)
            if verdict.status is Status.INVALID:
                at = where if checked.index is None else f"{where} citation #{checked.index}"
                self.note_error(f"{at}: {verdict.error}")
        for result in outcome.results:
            self.add_result(result, where)

    def add_result(self, result: CheckResult, where: str) -> None:
        """Add one plug-in check's result to its check's part (one that could not be judged is
        counted there as invalid, its error kept, at ``where``)."""
        part = self.results.get(result.check)
        if part is None:
            part = self.results[result.check] = result.new_summary()
        unusable = result.unusable
        if unusable is None:
            part.add(result)
        else:
            part.invalid += 1
            self.note_error(f"{where} {unusable.what}: {unusable.error}")

    def add_counted(
        self,
        status: Status,
        count: int,
        *,
        reason: str | None = None,
        method: str | None = None,
        how: str | None = None,
        shift: int | None = None,
    ) -> None:
        """What :meth:`add` adds for ``count`` verdicts alike, added by count (an engine that
        aggregates, as Spark does, and never holds the verdicts)."""
        self.statuses[status] += count
        if status is Status.OK:
            return
        if reason is not None:
            self.reasons[(status.value, reason)] += count
        if method is not None:
            self.methods[method] += count
            self.decided_by[how or ""] += count
            if shift is None:
                self.unknown_shifts += count
            else:
                self.shifts[shift] += count

    def invalid_chunks(self, count: int, errors: Iterable[str] = ()) -> None:
        """``count`` chunk records that could not be used; the first of their ``errors`` kept
        (each as ``where: why``)."""
        self.invalid_chunk_records += count
        for message in errors:
            self.note_error(message)

    def store_loaded(self, chunks: int, documents: int) -> None:
        """What the live store held once loaded, for the summary's first line."""
        self.chunks_loaded = chunks
        self.documents_loaded = documents

    def store_read(
        self, chunkers: Mapping[str | None, int], at: datetime, chunks: int | None = None
    ) -> None:
        """The store's chunkers (chunks per chunker; ``chunks`` in all, when ``chunkers`` are
        only the largest) and when it was read, for the report."""
        ranked = sorted(
            chunkers.items(), key=lambda item: (-item[1], item[0] is None, item[0] or "")
        )
        self.chunkers = ranked[:MAX_CHUNKERS]
        total = sum(chunkers.values()) if chunks is None else chunks
        self.chunkers_unlisted = total - sum(count for _, count in self.chunkers)
        self.store_read_at = at

    def took(self, seconds: float) -> None:
        """Time spent sweeping (added: a sweep may be timed in parts)."""
        self.elapsed_seconds += seconds

    def merge(self, other: SweepSummary) -> None:
        """Add the counts of a partial summary (one batch of a sweep) to this one."""
        self.statuses.update(other.statuses)
        self.reasons.update(other.reasons)
        self.methods.update(other.methods)
        self.decided_by.update(other.decided_by)
        self.shifts.update(other.shifts)
        self.unknown_shifts += other.unknown_shifts
        for name, part in other.results.items():
            mine = self.results.get(name)
            if mine is None:  # a copy: the batch's part is its own
                self.results[name] = copy.deepcopy(part)
            else:
                mine.merge(part)
        self.details.merge(other.details)
        self.invalid_chunk_records += other.invalid_chunk_records
        for message in other.errors:
            self.note_error(message)

    def note_error(self, message: str) -> None:
        """Keep the first few error messages for the report (all of them are counted)."""
        if len(self.errors) < _MAX_ERRORS_KEPT:
            self.errors.append(message)

    @property
    def citations(self) -> int:
        return sum(self.statuses.values())

    @property
    def valid(self) -> int:
        return self.citations - self.statuses[Status.INVALID]

    @property
    def drift(self) -> int:
        return self.statuses[Status.DRIFT_REPAIRED] + self.statuses[Status.DRIFT_UNREPAIRED]

    @property
    def drift_ratio(self) -> float:
        return self.drift / self.valid if self.valid else 0.0

    @property
    def repaired_ratio(self) -> float:
        """Drift that was repaired, per valid citation (citation-exporter apply fixes these)."""
        return self._share(Status.DRIFT_REPAIRED)

    @property
    def unrepaired_ratio(self) -> float:
        """Drift that could not be repaired, per valid citation (readers see these broken)."""
        return self._share(Status.DRIFT_UNREPAIRED)

    @property
    def missing_ratio(self) -> float:
        """Citations whose document is gone, per valid citation."""
        return self._share(Status.DOCUMENT_MISSING)

    @property
    def invalid_ratio(self) -> float:
        """Citations that could not be checked (broken records), per citation read: over the
        valid ones it would exceed 100%."""
        return self.statuses[Status.INVALID] / self.citations if self.citations else 0.0

    @property
    def superseded_ratio(self) -> float:
        return self._share(Status.SUPERSEDED)

    def _share(self, status: Status) -> float:
        return self.statuses[status] / self.valid if self.valid else 0.0

    @property
    def citations_per_second(self) -> float:
        return self.citations / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    def missing_input(self) -> str | None:
        """Why this sweep read nothing to judge by, when it did (a gate must not pass then)."""
        if self.from_verdicts:
            return None if self.valid else "no valid verdicts were read: is this the right file?"
        if not self.chunks_loaded:
            return "no chunk was loaded: is this the right --chunks file?"
        if not self.valid:
            invalid = self.statuses[Status.INVALID]
            if invalid and self.reasons[(Status.INVALID.value, "invalid_json")] == invalid:
                # not one line was JSON (a CSV, a JSON array pretty-printed): say what is taken
                return (
                    "no valid citations were read: no line of the --citations file is JSON; it "
                    "takes JSON Lines, one citation (or answer event) a line, such as "
                    + EXAMPLE_CITATION
                )
            return "no valid citations were read: is this the right --citations file?"
        return None

    def judge(self, gate: Gate) -> GateResult:
        """Each line of the gate against this sweep; without ``gate.allow_empty``, a sweep with
        nothing to judge by fails it."""
        drift = (
            GateLine(UNREPAIRED, self.unrepaired_ratio, gate.drift_above)
            if gate.unrepaired_only
            else GateLine(DRIFT, self.drift_ratio, gate.drift_above)
        )
        no_store = not self.chunks_loaded and not self.from_verdicts
        waived = "no chunk was loaded" if no_store and gate.allow_empty else None
        missing = GateLine(MISSING, self.missing_ratio, gate.missing_above, waived)
        # --allow-empty passes a sweep that read nothing valid: its invalid line waits too
        nothing_valid = "nothing valid was read" if not self.valid and gate.allow_empty else None
        invalid = GateLine(INVALID, self.invalid_ratio, gate.invalid_above, nothing_valid)
        empty = None if gate.allow_empty else self.missing_input()
        return GateResult((drift, missing, invalid), empty)

    def passed(self, gate: Gate) -> bool:
        return self.judge(gate).passed
