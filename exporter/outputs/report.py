"""The sweep summary: what an engineer reads at a glance after a re-index, as text or JSON.

Drift and superseded are always reported apart: a content refresh (superseded) is routine, drift
is a fault in the parse/chunk pipeline. The shift distribution shows whether the drift has one
systematic cause (a tight cluster) or many (scattered shifts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from exporter.checks.coverage import CoverageStatus, CoverageVerdict
from exporter.checks.evidence import Evidence
from exporter.checks.relocate import BY_POSITION_HINT
from exporter.checks.verdict import Status, Verdict
from exporter.outputs.entailment_report import EntailmentSummary
from exporter.outputs.gate import DRIFT, MISSING, UNREPAIRED, Gate, GateLine, GateResult
from exporter.outputs.report_details import ReportDetails
from exporter.outputs.shifts import SHIFT_BOUNDS, ShiftCluster, histogram, shift_clusters
from exporter.pipeline.outcome import Outcome

__all__ = ["SHIFT_BOUNDS", "CoverageSummary", "ShiftCluster", "SweepSummary", "shift_clusters"]

_BAR_WIDTH = 40
_MAX_ERRORS_KEPT = 20
# Topics counted one by one in a summary; an archive's further topics are counted as "other"
# (a topic is the producer's free text: an archive may hold any number of them).
_MAX_TOPICS_KEPT = 50
_OTHER_TOPIC = "other"
# A topic in the text summary: at most this many characters (as long as a metric label's).
_TOPIC_SHOWN = 64


def _shown_topic(topic: str) -> str:
    """A topic for a terminal: cut short, and every character that is not printable (a newline,
    a carriage return, an escape sequence, a bidirectional override) shown escaped."""
    if not topic:
        return "(no topic)"
    cut = topic[:_TOPIC_SHOWN]
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
    return shown + ("..." if len(topic) > _TOPIC_SHOWN else "")


@dataclass
class CoverageSummary:
    """Coverage of the answers that carried sentences: claims, framing, uncited, per topic."""

    answers: int = 0
    claims: int = 0
    framing: int = 0
    uncited: int = 0
    invalid: int = 0
    answers_uncited: int = 0
    uncited_topics: Counter[str] = field(default_factory=Counter)
    # claims of answers some of whose citations could not be read: not known to be uncited
    unjudged: int = 0
    answers_unjudged: int = 0

    def add(self, verdict: CoverageVerdict) -> None:
        if verdict.status is CoverageStatus.INVALID:
            self.invalid += 1
            return
        self.answers += 1
        self.claims += len(verdict.claims)
        self.framing += len(verdict.framing)
        if verdict.unjudged:
            self.unjudged += len(verdict.unjudged)
            self.answers_unjudged += 1
        if verdict.uncited:
            self.uncited += len(verdict.uncited)
            self.answers_uncited += 1
            self.count_topic(verdict.topic or "", len(verdict.uncited))

    def count_topic(self, topic: str, count: int) -> None:
        if topic not in self.uncited_topics and len(self.uncited_topics) >= _MAX_TOPICS_KEPT:
            topic = _OTHER_TOPIC
        self.uncited_topics[topic] += count

    def merge(self, other: CoverageSummary) -> None:
        self.answers += other.answers
        self.claims += other.claims
        self.framing += other.framing
        self.uncited += other.uncited
        self.invalid += other.invalid
        self.answers_uncited += other.answers_uncited
        self.unjudged += other.unjudged
        self.answers_unjudged += other.answers_unjudged
        for topic, count in other.uncited_topics.items():
            self.count_topic(topic, count)

    @property
    def judged(self) -> bool:
        return bool(self.answers or self.invalid)

    @property
    def judged_claims(self) -> int:
        """Claims whose citations could be read: the ones that are covered or uncited."""
        return self.claims - self.unjudged

    @property
    def uncited_ratio(self) -> float:
        """Uncited claims per judged claim: the share of what answers asserted that nothing
        backs (claims whose citations could not be read are neither)."""
        return self.uncited / self.judged_claims if self.judged_claims else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "claims": self.claims,
            "framing": self.framing,
            "uncited": self.uncited,
            "uncited_ratio": self.uncited_ratio,
            "invalid": self.invalid,
            "answers_with_uncited_claims": self.answers_uncited,
            "unjudged": self.unjudged,
            "answers_with_unreadable_citations": self.answers_unjudged,
            "uncited_by_topic": [
                {"topic": topic or None, "uncited": count}
                for topic, count in self.uncited_topics.most_common()
            ],
        }

    def render_lines(self) -> list[str]:
        if not self.judged:
            return []
        lines = [
            "",
            f"  coverage: {_count(self.answers, 'answer')} judged; "
            f"{_count(self.claims, 'claim')}, {self.framing:,} framing",
            f"  uncited ratio     {self.uncited_ratio:7.2%}   {_count(self.uncited, 'claim')} "
            f"without a citation, in {_count(self.answers_uncited, 'answer')} (mark_uncited)",
        ]
        if self.unjudged:
            lines.append(
                f"  not judged        {_count(self.unjudged, 'claim')} in "
                f"{_count(self.answers_unjudged, 'answer')} whose citations could not be read: "
                "neither cited nor uncited (fix_record)"
            )
        if self.uncited_topics:
            top = ", ".join(
                f"{_shown_topic(topic)} {count:,}"
                for topic, count in self.uncited_topics.most_common(5)
            )
            lines.append(f"  uncited by topic: {top}")
        if self.invalid:
            lines.append(f"  answers whose sentences could not be used: {self.invalid:,}")
        return lines


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


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
    coverage: CoverageSummary = field(default_factory=CoverageSummary)
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

    def add_outcome(self, outcome: Outcome, where: str) -> None:
        """Add every citation of one message and its coverage; keep the errors of invalid ones,
        at ``where``."""
        for checked in outcome.checked:
            verdict = checked.verdict
            self.add(verdict, checked.evidence)
            if verdict.status is Status.INVALID:
                at = where if checked.index is None else f"{where} citation #{checked.index}"
                self.note_error(f"{at}: {verdict.error}")
        coverage = outcome.coverage
        if coverage is not None:
            self.coverage.add(coverage)
            if coverage.status is CoverageStatus.INVALID:
                self.note_error(f"{where} sentences: {coverage.error}")

    def merge(self, other: SweepSummary) -> None:
        """Add the counts of a partial summary (one batch of a sweep) to this one."""
        self.statuses.update(other.statuses)
        self.reasons.update(other.reasons)
        self.methods.update(other.methods)
        self.decided_by.update(other.decided_by)
        self.shifts.update(other.shifts)
        self.unknown_shifts += other.unknown_shifts
        self.coverage.merge(other.coverage)
        self.details.merge(other.details)
        self.invalid_chunk_records += other.invalid_chunk_records
        for message in other.errors:
            self.note_error(message)

    def _ratio_lines(self, gate: Gate | None) -> list[str]:
        """The ratios the gate reads, each with its line, then the gate's verdict and why."""
        result = None if gate is None else self.judge(gate)
        gated: dict[str, GateLine] = {} if result is None else {g.name: g for g in result.lines}

        def line(name: str) -> str:
            if name not in gated:
                return ""
            held = gated[name]
            if held.waived is not None:
                return f"   not gated ({held.waived}; --allow-empty)"
            return f"   gate: fail above {held.limit:.2%} -> {'FAIL' if held.crossed else 'ok'}"

        lines = [
            f"  drift ratio       {self.drift_ratio:7.2%}{line(DRIFT)}",
            f"    repaired        {self.repaired_ratio:7.2%}   applying the repairs fixes these",
            f"    unrepaired      {self.unrepaired_ratio:7.2%}{line(UNREPAIRED)}",
            f"  missing documents {self.missing_ratio:7.2%}{line(MISSING)}",
            f"  superseded ratio  {self.superseded_ratio:7.2%}   content refreshed upstream; "
            "not drift, pinned to archived versions",
        ]
        if result is not None:
            missing = self.missing_input()
            verdict = "PASS" if result.passed else f"FAIL ({result.why()})"
            if result.passed and missing is not None:
                verdict += f" ({missing})"
            lines += ["", f"  gate: {verdict}"]
        return lines

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
        """Drift that was repaired, per valid citation (applying the repairs fixes these)."""
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
        empty = None if gate.allow_empty else self.missing_input()
        return GateResult((drift, missing), empty)

    def passed(self, gate: Gate) -> bool:
        return self.judge(gate).passed

    def to_json(self, gate: Gate) -> dict[str, Any]:
        result = self.judge(gate)
        return {
            "citations": self.citations,
            "valid_citations": self.valid,
            "statuses": {status.value: self.statuses[status] for status in Status},
            "reasons": [
                {"status": status, "reason": reason, "count": count}
                for (status, reason), count in sorted(self.reasons.items())
            ],
            "drift_ratio": self.drift_ratio,
            "repaired_drift_ratio": self.repaired_ratio,
            "unrepaired_drift_ratio": self.unrepaired_ratio,
            "document_missing_ratio": self.missing_ratio,
            "superseded_ratio": self.superseded_ratio,
            "fail_above": gate.drift_above,
            "fail_missing_above": gate.missing_above,
            "gate_drift": UNREPAIRED if gate.unrepaired_only else DRIFT,
            "passed": result.passed,
            "gate": {
                "passed": result.passed,
                "crossed": [line.name for line in result.crossed],
                "why": result.why() or None,
                "lines": [
                    {
                        "name": line.name,
                        "ratio": line.ratio,
                        "fail_above": line.limit,
                        "crossed": line.crossed,
                        "waived": line.waived,
                    }
                    for line in result.lines
                ],
                "nothing_to_judge": result.empty,
            },
            "repair_methods": dict(sorted(self.methods.items())),
            "repairs_decided_by": dict(sorted(self.decided_by.items())),
            "shift": {
                "known": sum(self.shifts.values()),
                "unknown": self.unknown_shifts,
                "histogram": [{"bucket": b, "count": c} for b, c in histogram(self.shifts)],
                "clusters": [
                    {
                        "center": c.center,
                        "low": c.low,
                        "high": c.high,
                        "count": c.count,
                        "share": round(c.share, 4),
                    }
                    for c in shift_clusters(self.shifts)
                ],
            },
            "coverage": self.coverage.to_json() if self.coverage_judged else None,
            "entailment": None if self.entailment is None else self.entailment.to_json(),
            "chunks_loaded": self.chunks_loaded,
            "documents_loaded": self.documents_loaded,
            "invalid_chunk_records": self.invalid_chunk_records,
            "errors": self.errors,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "citations_per_second": round(self.citations_per_second, 1),
        }

    def render_text(self, gate: Gate | None, title: str = "citation sweep") -> str:
        """The report; without ``gate`` (a replay, the demo) there are no gate lines."""
        total = self.citations
        lines = [
            f"{title}: {total:,} citations checked against {self.documents_loaded:,} "
            f"live documents ({self.chunks_loaded:,} chunks) in {self.elapsed_seconds:.2f} s "
            f"({self.citations_per_second:,.0f} citations/s)",
            "",
        ]
        for status in Status:
            count = self.statuses[status]
            share = count / total if total else 0.0
            lines.append(f"  {status.value:<18}{count:>10,}  {share:7.2%}")
        lines += ["", *self._ratio_lines(gate)]
        if self.reasons:
            lines += ["", "  reasons:"]
            for (status_name, reason), count in self.reasons.most_common():
                lines.append(f"    {status_name:<18}{reason:<18}{count:>10,}")
        if self.decided_by[BY_POSITION_HINT]:
            lines.append(
                f"  repaired where only the position hint told copies apart: "
                f"{self.decided_by[BY_POSITION_HINT]:,} (repair.how position_hint)"
            )
        buckets = histogram(self.shifts)
        if buckets:
            peak = max(c for _, c in buckets)
            lines += [
                "",
                "  shift of repaired drift (characters; where the quote is now minus "
                "where the span points):",
            ]
            for label, count in buckets:
                bar = "#" * max(1 if count else 0, round(count / peak * _BAR_WIDTH))
                lines.append(f"    {label:>16} | {bar:<{_BAR_WIDTH}} {count:,}")
            if self.unknown_shifts:
                lines.append(
                    f"    {'unknown':>16} | {self.unknown_shifts:,} "
                    "(cited chunk gone, or no chunk offsets)"
                )
            clusters = shift_clusters(self.shifts)
            if clusters:
                described = ", ".join(
                    f"{c.center:+d} ({c.low:+d}..{c.high:+d}, {c.share:.0%})" for c in clusters
                )
                lines.append(f"  main shift clusters: {described}")
                if clusters[0].share >= 0.5:
                    lines.append(
                        "  one cluster holds most of the drift: a systematic cause "
                        "(a chunker or parser change) is likely"
                    )
        if self.coverage_judged:
            lines += self.coverage.render_lines()
        else:
            lines += ["", f"  coverage: not judged ({self.coverage_off})"]
        if self.entailment is not None:
            lines += self.entailment.render_lines()
        elif self.entailment_off is not None:
            lines += ["", f"  entailment: not judged ({self.entailment_off})"]
        if self.invalid_chunk_records or self.statuses[Status.INVALID] or self.coverage.invalid:
            lines += [
                "",
                f"  invalid chunk records: {self.invalid_chunk_records:,}; "
                f"invalid citations: {self.statuses[Status.INVALID]:,}"
                + (
                    f"; invalid sentences: {self.coverage.invalid:,}"
                    if self.coverage.invalid
                    else ""
                ),
            ]
            lines += [f"    {message}" for message in self.errors]
        return "\n".join(lines)
