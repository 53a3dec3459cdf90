"""The sweep summary: what an engineer reads at a glance after a re-index, as text or JSON.

Drift and superseded are always reported apart: a content refresh (superseded) is routine, drift
is a fault in the parse/chunk pipeline. The shift distribution shows whether the drift has one
systematic cause (a tight cluster) or many (scattered shifts).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from exporter.checks.coverage import COVERAGE
from exporter.checks.relocate import BY_POSITION_HINT
from exporter.checks.verdict import Status
from exporter.checks.wording import counted
from exporter.entailment.report import entailment_json, entailment_lines
from exporter.pipeline.gate import DRIFT, INVALID, MISSING, UNREPAIRED, Gate, GateLine
from exporter.pipeline.shifts import histogram, shift_clusters
from exporter.pipeline.summary import SweepSummary

__all__ = ["store_json", "summary_json", "summary_text"]

_BAR_WIDTH = 40


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
        f"    repaired        {summary.repaired_ratio:7.2%}   citation-exporter apply fixes these",
        f"    unrepaired      {summary.unrepaired_ratio:7.2%}{line(UNREPAIRED)}",
        f"  missing documents {summary.missing_ratio:7.2%}{line(MISSING)}",
        f"  invalid records   {summary.invalid_ratio:7.2%}{line(INVALID)}",
        f"  superseded ratio  {summary.superseded_ratio:7.2%}   content refreshed upstream; "
        "not drift, pinned to archived versions",
    ]
    if result is not None:
        missing = summary.missing_input()
        verdict = result.verdict()
        if result.passed and missing is not None:
            verdict += f" ({missing})"
        lines += ["", f"  gate: {verdict}"]
    return lines


def _checks_json(summary: SweepSummary) -> dict[str, Any]:
    """Each plug-in check's part, by its name (coverage's null when it was switched off)."""
    return {
        name: None if name == COVERAGE and not summary.coverage_judged else part.as_json()
        for name, part in summary.results.items()
    }


def _check_lines(summary: SweepSummary) -> list[str]:
    """Each plug-in check's lines, coverage first (saying why when it was not judged)."""
    lines: list[str] = []
    for name, part in summary.results.items():
        if name == COVERAGE and not summary.coverage_judged:
            lines += ["", f"  coverage: not judged ({summary.coverage_off})"]
        else:
            lines += part.lines()
    return lines


def store_json(summary: SweepSummary) -> dict[str, Any]:
    """The store's chunker fingerprint and when it was read (null: not recorded), for a report
    drawn later from the verdict files, which do not carry them."""
    chunkers = summary.chunkers
    read_at = summary.store_read_at
    return {
        "chunkers": None
        if chunkers is None
        else [{"chunker": name, "chunks": count} for name, count in chunkers],
        "chunkers_unlisted": summary.chunkers_unlisted,
        "store_read_at": None
        if read_at is None
        else read_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


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
        "invalid_ratio": summary.invalid_ratio,
        "superseded_ratio": summary.superseded_ratio,
        "fail_above": gate.drift_above,
        "fail_missing_above": gate.missing_above,
        "fail_invalid_above": gate.invalid_above,
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
        **_checks_json(summary),
        "entailment": None if summary.entailment is None else entailment_json(summary.entailment),
        "chunks_loaded": summary.chunks_loaded,
        "documents_loaded": summary.documents_loaded,
        **store_json(summary),
        "invalid_chunk_records": summary.invalid_chunk_records,
        "errors": summary.errors,
        "elapsed_seconds": round(summary.elapsed_seconds, 3),
        "citations_per_second": round(summary.citations_per_second, 1),
    }


def summary_text(summary: SweepSummary, gate: Gate | None, title: str = "citation sweep") -> str:
    """The report; without ``gate`` (a replay, the demo) there are no gate lines."""
    total = summary.citations
    lines = [
        f"{title}: {counted(total, 'citation')} checked against "
        f"{counted(summary.documents_loaded, 'live document')} "
        f"({counted(summary.chunks_loaded, 'chunk')}) in {summary.elapsed_seconds:.2f} s "
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
    lines += _check_lines(summary)
    if summary.entailment is not None:
        lines += entailment_lines(summary.entailment)
    elif summary.entailment_off is not None:
        lines += ["", f"  entailment: not judged ({summary.entailment_off})"]
    # what the plug-in checks could not judge ("invalid sentences: 3")
    unjudged = [phrase for part in summary.results.values() if (phrase := part.invalid_phrase())]
    if summary.invalid_chunk_records or summary.statuses[Status.INVALID] or unjudged:
        lines += [
            "",
            f"  invalid chunk records: {summary.invalid_chunk_records:,}; "
            f"invalid citations: {summary.statuses[Status.INVALID]:,}"
            + "".join(f"; {phrase}" for phrase in unjudged),
        ]
        lines += [f"    {message}" for message in summary.errors]
    return "\n".join(lines)
