"""The sweep summary: what an engineer reads at a glance after a re-index, as text or JSON.

Drift and superseded are always reported apart: a content refresh (superseded) is routine, drift
is a fault in the parse/chunk pipeline. The shift distribution shows whether the drift has one
systematic cause (a tight cluster) or many (scattered shifts).
"""

from __future__ import annotations

from typing import Any

from exporter.checks.relocate import BY_POSITION_HINT
from exporter.checks.verdict import Status
from exporter.entailment.report import entailment_json, entailment_lines
from exporter.pipeline.gate import DRIFT, MISSING, UNREPAIRED, Gate, GateLine
from exporter.pipeline.shifts import histogram, shift_clusters
from exporter.pipeline.summary import CoverageSummary, SweepSummary

__all__ = ["coverage_json", "coverage_lines", "summary_json", "summary_text"]

_BAR_WIDTH = 40
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


def coverage_json(coverage: CoverageSummary) -> dict[str, Any]:
    return {
        "answers": coverage.answers,
        "claims": coverage.claims,
        "framing": coverage.framing,
        "uncited": coverage.uncited,
        "uncited_ratio": coverage.uncited_ratio,
        "invalid": coverage.invalid,
        "answers_with_uncited_claims": coverage.answers_uncited,
        "unjudged": coverage.unjudged,
        "answers_with_unreadable_citations": coverage.answers_unjudged,
        "uncited_by_topic": [
            {"topic": topic or None, "uncited": count}
            for topic, count in coverage.uncited_topics.most_common()
        ],
    }


def coverage_lines(coverage: CoverageSummary) -> list[str]:
    if not coverage.judged:
        return []
    lines = [
        "",
        f"  coverage: {_count(coverage.answers, 'answer')} judged; "
        f"{_count(coverage.claims, 'claim')}, {coverage.framing:,} framing",
        f"  uncited ratio     {coverage.uncited_ratio:7.2%}   {_count(coverage.uncited, 'claim')} "
        f"without a citation, in {_count(coverage.answers_uncited, 'answer')} (mark_uncited)",
    ]
    if coverage.unjudged:
        lines.append(
            f"  not judged        {_count(coverage.unjudged, 'claim')} in "
            f"{_count(coverage.answers_unjudged, 'answer')} whose citations could not be read: "
            "neither cited nor uncited (fix_record)"
        )
    if coverage.uncited_topics:
        top = ", ".join(
            f"{_shown_topic(topic)} {count:,}"
            for topic, count in coverage.uncited_topics.most_common(5)
        )
        lines.append(f"  uncited by topic: {top}")
    if coverage.invalid:
        lines.append(f"  answers whose sentences could not be used: {coverage.invalid:,}")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def _ratio_lines(summary: SweepSummary, gate: Gate | None) -> list[str]:
    """The ratios the gate reads, each with its line, then the gate's verdict and why."""
    result = None if gate is None else summary.judge(gate)
    gated: dict[str, GateLine] = {} if result is None else {g.name: g for g in result.lines}

    def line(name: str) -> str:
        if name not in gated:
            return ""
        held = gated[name]
        if held.waived is not None:
            return f"   not gated ({held.waived}; --allow-empty)"
        return f"   gate: fail above {held.limit:.2%} -> {'FAIL' if held.crossed else 'ok'}"

    lines = [
        f"  drift ratio       {summary.drift_ratio:7.2%}{line(DRIFT)}",
        f"    repaired        {summary.repaired_ratio:7.2%}   applying the repairs fixes these",
        f"    unrepaired      {summary.unrepaired_ratio:7.2%}{line(UNREPAIRED)}",
        f"  missing documents {summary.missing_ratio:7.2%}{line(MISSING)}",
        f"  superseded ratio  {summary.superseded_ratio:7.2%}   content refreshed upstream; "
        "not drift, pinned to archived versions",
    ]
    if result is not None:
        missing = summary.missing_input()
        verdict = "PASS" if result.passed else f"FAIL ({result.why()})"
        if result.passed and missing is not None:
            verdict += f" ({missing})"
        lines += ["", f"  gate: {verdict}"]
    return lines


def summary_json(summary: SweepSummary, gate: Gate) -> dict[str, Any]:
    result = summary.judge(gate)
    return {
        "citations": summary.citations,
        "valid_citations": summary.valid,
        "statuses": {status.value: summary.statuses[status] for status in Status},
        "reasons": [
            {"status": status, "reason": reason, "count": count}
            for (status, reason), count in sorted(summary.reasons.items())
        ],
        "drift_ratio": summary.drift_ratio,
        "repaired_drift_ratio": summary.repaired_ratio,
        "unrepaired_drift_ratio": summary.unrepaired_ratio,
        "document_missing_ratio": summary.missing_ratio,
        "superseded_ratio": summary.superseded_ratio,
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
        "repair_methods": dict(sorted(summary.methods.items())),
        "repairs_decided_by": dict(sorted(summary.decided_by.items())),
        "shift": {
            "known": sum(summary.shifts.values()),
            "unknown": summary.unknown_shifts,
            "histogram": [{"bucket": b, "count": c} for b, c in histogram(summary.shifts)],
            "clusters": [
                {
                    "center": c.center,
                    "low": c.low,
                    "high": c.high,
                    "count": c.count,
                    "share": round(c.share, 4),
                }
                for c in shift_clusters(summary.shifts)
            ],
        },
        "coverage": coverage_json(summary.coverage) if summary.coverage_judged else None,
        "entailment": None if summary.entailment is None else entailment_json(summary.entailment),
        "chunks_loaded": summary.chunks_loaded,
        "documents_loaded": summary.documents_loaded,
        "invalid_chunk_records": summary.invalid_chunk_records,
        "errors": summary.errors,
        "elapsed_seconds": round(summary.elapsed_seconds, 3),
        "citations_per_second": round(summary.citations_per_second, 1),
    }


def summary_text(summary: SweepSummary, gate: Gate | None, title: str = "citation sweep") -> str:
    """The report; without ``gate`` (a replay, the demo) there are no gate lines."""
    total = summary.citations
    lines = [
        f"{title}: {total:,} citations checked against {summary.documents_loaded:,} "
        f"live documents ({summary.chunks_loaded:,} chunks) in {summary.elapsed_seconds:.2f} s "
        f"({summary.citations_per_second:,.0f} citations/s)",
        "",
    ]
    for status in Status:
        count = summary.statuses[status]
        share = count / total if total else 0.0
        lines.append(f"  {status.value:<18}{count:>10,}  {share:7.2%}")
    lines += ["", *_ratio_lines(summary, gate)]
    if summary.reasons:
        lines += ["", "  reasons:"]
        for (status_name, reason), count in summary.reasons.most_common():
            lines.append(f"    {status_name:<18}{reason:<18}{count:>10,}")
    if summary.decided_by[BY_POSITION_HINT]:
        lines.append(
            f"  repaired where only the position hint told copies apart: "
            f"{summary.decided_by[BY_POSITION_HINT]:,} (repair.how position_hint)"
        )
    buckets = histogram(summary.shifts)
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
        if summary.unknown_shifts:
            lines.append(
                f"    {'unknown':>16} | {summary.unknown_shifts:,} "
                "(cited chunk gone, or no chunk offsets)"
            )
        clusters = shift_clusters(summary.shifts)
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
    if summary.coverage_judged:
        lines += coverage_lines(summary.coverage)
    else:
        lines += ["", f"  coverage: not judged ({summary.coverage_off})"]
    if summary.entailment is not None:
        lines += entailment_lines(summary.entailment)
    elif summary.entailment_off is not None:
        lines += ["", f"  entailment: not judged ({summary.entailment_off})"]
    if (
        summary.invalid_chunk_records
        or summary.statuses[Status.INVALID]
        or summary.coverage.invalid
    ):
        lines += [
            "",
            f"  invalid chunk records: {summary.invalid_chunk_records:,}; "
            f"invalid citations: {summary.statuses[Status.INVALID]:,}"
            + (
                f"; invalid sentences: {summary.coverage.invalid:,}"
                if summary.coverage.invalid
                else ""
            ),
        ]
        lines += [f"    {message}" for message in summary.errors]
    return "\n".join(lines)
