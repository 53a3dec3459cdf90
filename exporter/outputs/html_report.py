"""The sweep report as one self-contained HTML page: the gate's verdict, counts, the shift
chart with its clusters explained, examples, superseded documents, coverage, entailment, and
the arithmetic of a hand audit against the sweep.

The page is rendered by Jinja2 (autoescaping on: a quote holding ``<script>`` shows as text)
from a view computed here, so that every number it shows is the summary's, and testable
without reading HTML. No script, no stylesheet or font from elsewhere: it opens offline, and
as a CI artifact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jinja2
import markupsafe
from rapidfuzz.distance import Indel

from exporter import __version__
from exporter.checks.normalize import fold
from exporter.checks.verdict import Status
from exporter.checks.wording import counted
from exporter.entailment.report import entailment_json
from exporter.outputs.shift_chart import chart_bars, cluster_letter, shift_chart_svg
from exporter.pipeline.changes import Changes, PreviousSummary
from exporter.pipeline.details import NO_SOURCE, Example
from exporter.pipeline.gate import DRIFT, INVALID, MISSING, UNREPAIRED, Gate, GateResult
from exporter.pipeline.shifts import ShiftCluster, shift_bucket, shift_clusters
from exporter.pipeline.summary import SweepSummary

__all__ = ["AuditAssumptions", "render_report", "report_view"]

# sources shown in the table, the most drifted first
_SOURCES_SHOWN = 50
# differing text compared for highlighting: the evidence is cut at 300 characters already
_NEAR_ZERO = 4
# a cluster wider than this (or than half its distance from 0) is no single shift
_SPREAD_CHARS = 32
# words, runs of white space, and single other characters: what a highlight marks
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass(frozen=True, slots=True)
class AuditAssumptions:
    """What a weekly hand audit reads and catches (the report's defaults, each an option)."""

    answers_per_week: int = 50
    citations_per_answer: float = 2.6
    catch_rate: float = 0.25  # of near-topic mismatches, a reviewer notices about a quarter
    minutes_per_citation: float = 1.0


# Characters that print nothing but change the text, each shown as a visible mark the page's
# legend names (any other that prints nothing is shown as its escape, as below).
MARKS = {
    "\xa0": ("\u237d", "a no-break space"),
    "\xad": ("\xac", "a soft hyphen"),
    "\u200b": ("\u2300", "a zero-width space, joiner or non-joiner"),
    "\u200c": ("\u2300", "a zero-width space, joiner or non-joiner"),
    "\u200d": ("\u2300", "a zero-width space, joiner or non-joiner"),
    "\u2060": ("\u2300", "a zero-width space, joiner or non-joiner"),
    "\ufeff": ("\u2300", "a zero-width space, joiner or non-joiner"),
}


def marks_in(texts: Iterable[str | None]) -> list[tuple[str, str]]:
    """The marks (and what each stands for) that ``texts`` will show, for the legend."""
    used = {MARKS[c] for text in texts if text for c in text if c in MARKS}
    return sorted(used)


def shown(value: object) -> object:
    """Every value the page shows, made safe to read as well as to parse (autoescaping does the
    rest): a character that prints nothing or moves other text (a control character, a
    bidirectional override) is shown as its escape, so that an id cannot disguise the status
    beside it; a line break and a tab stay. A byte of a file name that is not UTF-8 (a lone
    surrogate, from the command line) shows as U+FFFD; the characters of :data:`MARKS` (a
    no-break space, a soft hyphen, a zero-width one) as their marks, which the page names."""
    if type(value) is not str or value.isprintable():
        return value
    return "".join(
        c
        if c.isprintable() or c in "\n\t"
        else MARKS[c][0]
        if c in MARKS
        else "\ufffd"
        if "\ud800" <= c <= "\udfff"
        else repr(c)[1:-1]
        for c in value
    )


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("exporter", "outputs/templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,  # every {{ value }} of the page
    )
    environment.globals["counted"] = counted  # "1 answer", "2,000 answers", as the summary says
    return environment


def explain_cluster(cluster: ShiftCluster, letter: str) -> str:
    """One sentence on what a cluster of shifts likely means."""
    size = f"{cluster.count:,} citations ({cluster.share:.0%} of repaired drift with a shift)"
    where = f"between {cluster.low:+d} and {cluster.high:+d}"
    if cluster.high - cluster.low > max(_SPREAD_CHARS, abs(cluster.center) // 2):
        return (
            f"Cluster {letter}: {size} spread {where} with no gap between them: no single shift, "
            "so no one systematic cause (several changes, or edits of varying length)."
        )
    if abs(cluster.center) <= _NEAR_ZERO:
        cause = (
            "moved by a few characters at most: a change of whitespace, quotes or "
            "normalisation rather than of structure"
        )
    elif cluster.center > 0:
        cause = (
            f"moved {cluster.center:+d} characters: text was added before them (a parser that "
            "now keeps a heading or boilerplate, a chunker with a new overlap)"
        )
    else:
        cause = (
            f"moved {cluster.center:+d} characters: text before them was dropped (a parser "
            "that strips more, a chunker that cuts elsewhere)"
        )
    systematic = " One cause explains most of the drift." if cluster.share >= 0.5 else ""
    return f"Cluster {letter}: {size} {cause}; {where}.{systematic}"


def _segments(text: str | None, other: str | None) -> list[tuple[str, bool]]:
    """``text`` split into (piece, differs from ``other``) for highlighting, word by word (a
    character diff of two unrelated sentences lights up every other letter)."""
    if text is None:
        return []
    if other is None:
        return [(text, False)]
    words, others = _WORDS.findall(text), _WORDS.findall(other)
    # rapidfuzz's bit-parallel alignment: difflib's matcher takes a quarter of a second on some
    # pairs of 300 characters, and a verdict file may hold thousands of them. Words are compared
    # folded, as the checks compare them: spacing or typography (a line break for a space,
    # curly quotes) is no difference to highlight
    pieces: list[tuple[str, bool]] = []
    for opcode in Indel.opcodes(_keys(words), _keys(others)):
        if opcode.src_start < opcode.src_end:
            piece = "".join(words[opcode.src_start : opcode.src_end])
            pieces.append((piece, opcode.tag != "equal"))
    return pieces


def _keys(words: list[str]) -> list[str]:
    """Each word as the highlighting compares it: folded, any run of spacing one space."""
    return [" " if word.isspace() else fold(word) for word in words]


def _example_view(example: Example) -> dict[str, Any]:
    evidence = example.evidence
    quote = evidence.quote if evidence else None
    recorded = evidence.recorded if evidence else None
    found = evidence.found if evidence else None
    return {
        "citation_id": example.citation_id,
        "doc_id": example.doc_id,
        "status": example.status,
        "reason": example.reason,
        "action": example.action,
        "shift": example.shift,
        "method": example.method,
        "how": example.how,
        "has_evidence": evidence is not None,
        "quote": _segments(quote, recorded),
        "recorded": _segments(recorded, quote),
        "recorded_missing": evidence is not None and recorded is None,
        "found": _segments(found, quote),
        "found_missing": evidence is not None and found is None,
    }


def _cluster_examples(summary: SweepSummary, cluster: ShiftCluster) -> list[Example]:
    buckets = range(shift_bucket(cluster.low), shift_bucket(cluster.high) + 1)
    examples = [
        example
        for bucket in buckets
        for example in summary.details.examples.get(f"shift {bucket}", [])
        if example.shift is not None and cluster.low <= example.shift <= cluster.high
    ]
    return sorted(examples, key=lambda e: e.key)[:5]


def _sources(summary: SweepSummary) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for named, counts in summary.details.by_source.items():
        source = NO_SOURCE if named is None else named
        citations = sum(counts.values())
        valid = citations - counts[Status.INVALID.value]
        drift = counts[Status.DRIFT_REPAIRED.value] + counts[Status.DRIFT_UNREPAIRED.value]
        superseded = counts[Status.SUPERSEDED.value]
        rows.append(
            {
                "source": source,
                "unnamed": named is None,
                "citations": citations,
                "drift": drift,
                "drift_ratio": drift / valid if valid else 0.0,
                "superseded": superseded,
                "superseded_ratio": superseded / valid if valid else 0.0,
                "missing": counts[Status.DOCUMENT_MISSING.value],
                "invalid": counts[Status.INVALID.value],
            }
        )
    rows.sort(key=lambda row: (-row["drift_ratio"], -row["citations"], row["source"]))
    return rows[:_SOURCES_SHOWN]


def expected_count(value: float) -> str:
    """An expected number of citations as people count them: whole, and said to be about
    (a week's audit reads whole citations; "13.8 drifted" reads as a measurement)."""
    if value <= 0:
        return "none"
    if value < 0.5:
        return "fewer than 1"
    return f"about {round(value):,}"


def _audit(summary: SweepSummary, assumptions: AuditAssumptions) -> dict[str, Any]:
    # a week's audit reads no more citations than the archive holds (a new user's archive of
    # 20 once "read" 130 and expected 62 of them drifted)
    planned = assumptions.answers_per_week * assumptions.citations_per_answer
    read = min(planned, float(summary.valid))
    drifted = read * summary.drift_ratio
    return {
        "answers_per_week": assumptions.answers_per_week,
        "citations_per_answer": assumptions.citations_per_answer,
        "catch_rate": assumptions.catch_rate,
        "minutes_per_citation": assumptions.minutes_per_citation,
        "citations_read": read,
        "whole_archive": read < planned,
        "drifted_read": drifted,
        "flagged": drifted * assumptions.catch_rate,
        "drifted_shown": expected_count(drifted),
        "flagged_shown": expected_count(drifted * assumptions.catch_rate),
        "reviewer_hours": read * assumptions.minutes_per_citation / 60,
        "weeks_to_read_archive": summary.valid / read if read else 0.0,
        "sweep_citations": summary.citations,
        "sweep_drift": summary.drift,
        "sweep_seconds": summary.elapsed_seconds,
    }


_LINE_IDS = {
    DRIFT: "gate-drift",
    UNREPAIRED: "gate-unrepaired",
    MISSING: "gate-missing",
    INVALID: "gate-invalid",
}


def _gate_lines(summary: SweepSummary, result: GateResult) -> list[dict[str, Any]]:
    """Each line of the gate as the verdict box shows it."""
    counts = {
        DRIFT: summary.drift,
        UNREPAIRED: summary.statuses[Status.DRIFT_UNREPAIRED],
        MISSING: summary.statuses[Status.DOCUMENT_MISSING],
        INVALID: summary.statuses[Status.INVALID],
    }
    return [
        {
            "id": _LINE_IDS[line.name],
            "name": line.name,
            "ratio": line.ratio,
            "limit": line.limit,
            "crossed": line.crossed,
            "count": counts[line.name],
            # the invalid line is a share of every citation read; the others of the valid ones
            "of": f"{summary.citations:,} citations read"
            if line.name == INVALID
            else f"{summary.valid:,} valid citations",
        }
        for line in result.lines
    ]


def _store(summary: SweepSummary) -> dict[str, Any] | None:
    """The store's chunker fingerprint and read time (None: not recorded)."""
    if summary.chunkers is None or summary.store_read_at is None:
        return None
    return {
        "read_at": summary.store_read_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "chunkers": [{"chunker": name, "chunks": count} for name, count in summary.chunkers],
        "unlisted": summary.chunkers_unlisted,
    }


def _changes(
    summary: SweepSummary, previous: Changes | PreviousSummary | None, name: str
) -> dict[str, Any] | None:
    """What changed since the previous sweep: by citation from its verdicts, by count from
    its summary."""
    if previous is None:
        return None
    if isinstance(previous, PreviousSummary):
        return {"name": name, "by_citation": False, "rows": previous.rows(summary.statuses)}
    rows = previous.rows()
    return {
        "name": name,
        "by_citation": True,
        "rows": rows,
        "moved": previous.moved(),
        "sources": previous.sources()[:_SOURCES_SHOWN],
        "sources_total": len(previous.by_source),
        "totals": previous.totals(),
        "gone": [(row["status"], row["gone"]) for row in rows if row["gone"]],
    }


def report_view(
    summary: SweepSummary,
    *,
    gate: Gate | None,
    assumptions: AuditAssumptions | None = None,
    title: str = "Citation sweep report",
    inputs: str = "",
    generated_at: datetime | None = None,
    from_verdicts: bool = False,
    unreadable: int = 0,
    judged: dict[str, Any] | None = None,
    previous: Changes | PreviousSummary | None = None,
    previous_name: str = "",
) -> dict[str, Any]:
    """Everything the page shows, as numbers and texts (the template only lays them out).
    ``from_verdicts``: drawn from verdict files (no store: no document counts, and no
    missing-input verdict); ``unreadable`` of their lines were no verdicts; ``judged``, the
    judged sample counted from them (see JudgedRecords), when the summary has none;
    ``previous``, the sweep before (read from ``previous_name``) this one is compared with."""
    result = None if gate is None else summary.judge(gate)
    clusters = shift_clusters(summary.shifts)
    bars = chart_bars(summary.shifts, clusters)
    statuses = [
        {
            "status": status.value,
            "count": summary.statuses[status],
            "share": summary.statuses[status] / summary.citations if summary.citations else 0.0,
        }
        for status in Status
    ]
    unrepaired = sorted(
        (
            (group.removeprefix("unrepaired "), examples)
            for group, examples in summary.details.examples.items()
            if group.startswith("unrepaired ")
        ),
        key=lambda item: -summary.reasons[(Status.DRIFT_UNREPAIRED.value, item[0])],
    )
    details = summary.details
    superseded = sorted(details.superseded.items(), key=lambda item: (-item[1].citations, item[0]))
    return {
        "title": title,
        "inputs": inputs,
        "version": __version__,
        "generated_at": (generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        "gated": result is not None,
        "passed": result is None or result.passed,
        "gate_lines": [] if result is None else _gate_lines(summary, result),
        "missing_input": None if from_verdicts else summary.missing_input(),
        "from_verdicts": from_verdicts,
        "store": _store(summary),
        "changes": _changes(summary, previous, previous_name),
        "unreadable": unreadable,
        "fail_above": None if gate is None else gate.drift_above,
        "drift_ratio": summary.drift_ratio,
        "repaired_ratio": summary.repaired_ratio,
        "unrepaired_ratio": summary.unrepaired_ratio,
        "missing_ratio": summary.missing_ratio,
        "missing": summary.statuses[Status.DOCUMENT_MISSING],
        "superseded_ratio": summary.superseded_ratio,
        "citations": summary.citations,
        "valid": summary.valid,
        "drift": summary.drift,
        "documents": summary.documents_loaded,
        "chunks": summary.chunks_loaded,
        "elapsed_seconds": summary.elapsed_seconds,
        "statuses": statuses,
        "reasons": [
            {"status": status, "reason": reason, "count": count}
            for (status, reason), count in summary.reasons.most_common()
        ],
        "sources": _sources(summary),
        "sources_total": len(details.by_source),
        # made by shift_chart_svg, which escapes every text it writes into the SVG
        "chart": markupsafe.Markup(shift_chart_svg(bars)),
        "bars": bars,
        "known_shifts": sum(summary.shifts.values()),
        "unknown_shifts": summary.unknown_shifts,
        "clusters": [
            {
                "letter": cluster_letter(i),
                "center": cluster.center,
                "low": cluster.low,
                "high": cluster.high,
                "count": cluster.count,
                "share": cluster.share,
                "sentence": explain_cluster(cluster, cluster_letter(i)),
                "examples": [_example_view(e) for e in _cluster_examples(summary, cluster)],
            }
            for i, cluster in enumerate(clusters)
        ],
        "marks": marks_in(
            text
            for group in summary.details.examples.values()
            for example in group
            if example.evidence is not None
            for text in (example.evidence.quote, example.evidence.recorded, example.evidence.found)
        ),
        "unrepaired": [
            {
                "reason": reason,
                "count": summary.reasons[(Status.DRIFT_UNREPAIRED.value, reason)],
                "examples": [_example_view(e) for e in examples],
            }
            for reason, examples in unrepaired
        ],
        "superseded": [
            {
                "doc_id": doc_id,
                "live_version": document.live_version,
                "citations": document.citations,
                "recorded_versions": document.recorded_versions.most_common(),
            }
            for doc_id, document in superseded
        ],
        "superseded_unlisted_citations": details.superseded_unlisted_citations,
        # the most cited first: the documents whose restoring mends the most citations
        "missing_documents": sorted(details.missing.items(), key=lambda item: (-item[1], item[0])),
        "missing_unlisted_citations": details.missing_unlisted_citations,
        "coverage": summary.coverage.as_json() if summary.coverage.judged else None,
        "entailment": judged if summary.entailment is None else entailment_json(summary.entailment),
        "audit": _audit(summary, assumptions or AuditAssumptions()),
        "errors": summary.errors,
        "invalid_chunk_records": summary.invalid_chunk_records,
    }


def render_report(summary: SweepSummary, **options: Any) -> str:
    """The page, from a summary (options as :func:`report_view` takes them)."""
    template = _environment().get_template("sweep_report.html.j2")
    return template.render(report_view(summary, **options))
