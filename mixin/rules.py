"""Recording rules and alerts for the exporter's metrics, as Prometheus rule groups.

Recording rules are named ``level:metric:operations`` and sum numerator and denominator
separately before dividing (never an average of ratios). Inline ratios select ``mode="inline"``
only, so a sweep of the archive never moves the live ratio.
"""

from __future__ import annotations

from typing import Any

from exporter import alerting as c

__all__ = ["rule_groups"]


def _percent(value: float) -> str:
    return f"{value * 100:g}%"


RECORDING: list[dict[str, Any]] = [
    {
        "record": "citation:checks:rate15m",
        "expr": 'sum by (job) (rate(citation_checks_total{mode="inline"}[15m]))',
    },
    {
        "record": "citation:drift_failures:rate15m",
        "expr": 'sum by (job) (rate(citation_drift_failures_total{mode="inline"}[15m]))',
    },
    {
        "record": "citation:superseded_failures:rate15m",
        "expr": 'sum by (job) (rate(citation_superseded_failures_total{mode="inline"}[15m]))',
    },
    {
        "record": "citation:drift_failures_per_check:ratio_rate15m",
        "expr": "citation:drift_failures:rate15m / citation:checks:rate15m",
    },
    {
        "record": "citation:superseded_failures_per_check:ratio_rate15m",
        "expr": "citation:superseded_failures:rate15m / citation:checks:rate15m",
    },
    {
        "record": "citation:sweep_drift_failures_per_citation:ratio",
        "expr": (
            'sum by (job) (citation_sweep_citations{status=~"drift_repaired|drift_unrepaired"})\n'
            '/\nsum by (job) (citation_sweep_citations{status!="invalid"})'
        ),
    },
]


def _alert(  # noqa: PLR0917 - one positional per part of an alert, read like a table
    name: str,
    expr: str,
    severity: str,
    summary: str,
    description: str,
    duration: str | None = None,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": c.runbook(name),
    }
    return rule


def _alerts() -> list[dict[str, Any]]:
    guard = f"citation:checks:rate15m > {c.MIN_CHECKS_PER_SECOND}"
    return [
        _alert(
            "CitationDriftRateHigh",
            f"citation:drift_failures_per_check:ratio_rate15m > {c.DRIFT_RATIO_PAGE}\n"
            f"and on (job) {guard}",
            "critical",
            "Citations are drifting: their spans no longer hold the quoted text.",
            "{{ $value | humanizePercentage }} of the inline citation checks of {{ $labels.job }} "
            "failed on the live document version over the last 15 minutes (page above "
            f"{_percent(c.DRIFT_RATIO_PAGE)}, normal about {_percent(c.DRIFT_RATIO_BASELINE)}). "
            "A parser or chunker change is the usual cause; superseded documents are not "
            "counted here.",
            c.DRIFT_FOR,
        ),
        _alert(
            "CitationSweepDriftHigh",
            f"citation:sweep_drift_failures_per_citation:ratio > {c.SWEEP_DRIFT_RATIO_PAGE}",
            "critical",
            "The last sweep of the citation archive found too much drift.",
            "The last completed sweep of {{ $labels.job }} found {{ $value | humanizePercentage }} "
            f"of the archived citations drifted (page above {_percent(c.SWEEP_DRIFT_RATIO_PAGE)}, "
            f"normal about {_percent(c.DRIFT_RATIO_BASELINE)}): the last re-index moved spans.",
        ),
        _alert(
            "CitationContentRefreshDetected",
            f"citation:superseded_failures_per_check:ratio_rate15m > {c.SUPERSEDED_RATIO_TICKET}\n"
            f"and on (job) {guard}",
            "warning",
            "Many cited documents were reissued under a new version (a content refresh).",
            "{{ $value | humanizePercentage }} of the inline citation checks of {{ $labels.job }} "
            "hit documents reissued under a new version over the last 15 minutes. This is a "
            "content refresh, not drift: those citations are pinned to the archived version and "
            "never relocated. No action is needed unless the refresh was not expected.",
            c.SUPERSEDED_FOR,
        ),
        _alert(
            "CitationExporterDown",
            f"up{{{c.JOB_SELECTOR}}} == 0",
            "warning",
            "A citation drift exporter cannot be scraped.",
            "{{ $labels.instance }} of {{ $labels.job }} has not answered scrapes for "
            f"{c.EXPORTER_DOWN_FOR}: its citations are not being checked.",
            c.EXPORTER_DOWN_FOR,
        ),
        _alert(
            "CitationExporterAbsent",
            f"absent(up{{{c.JOB_SELECTOR}}})",
            "warning",
            "No citation drift exporter is being scraped.",
            "Prometheus has had no target for job {{ $labels.job }} for "
            f"{c.EXPORTER_ABSENT_FOR}: drift would go unnoticed.",
            c.EXPORTER_ABSENT_FOR,
        ),
        _alert(
            "CitationExporterNotReady",
            "citation_exporter_ready == 0",
            "warning",
            "A citation drift exporter has not finished loading the chunk store.",
            "{{ $labels.instance }} has not caught up with the chunk topic for "
            f"{c.NOT_READY_FOR}; it checks no citation until it has.",
            c.NOT_READY_FOR,
        ),
        _alert(
            "CitationExporterStalled",
            "sum by (job, instance, topic)\n"
            "  (delta(citation_exporter_consumer_lag_messages[10m])) > 0\n"
            "and on (job, instance, topic)\n"
            "sum by (job, instance, topic) (rate(citation_exporter_events_total[10m])) == 0",
            "warning",
            "A citation drift exporter stopped consuming while its lag grows.",
            "{{ $labels.instance }} consumed nothing from {{ $labels.topic }} in 10 minutes while "
            "{{ $value }} more messages arrived.",
            c.STALLED_FOR,
        ),
        _alert(
            "CitationInvalidEventsHigh",
            "sum by (job, topic) (rate(citation_exporter_invalid_events_total[15m]))\n"
            "/\nsum by (job, topic) (rate(citation_exporter_events_total[15m]))\n"
            f"> {c.INVALID_EVENTS_RATIO}",
            "warning",
            "Many messages are malformed and go to the dead-letter topic.",
            "{{ $value | humanizePercentage }} of the messages of {{ $labels.topic }} could not "
            "be parsed or validated over 15 minutes; they are in the dead-letter topic with "
            "their error.",
            "15m",
        ),
        _alert(
            "CitationUnreadableMessages",
            "sum by (job, topic) (increase(citation_exporter_unreadable_messages_total[15m])) > 0",
            "warning",
            "Kafka delivered messages that could not be read at all; they were skipped.",
            "{{ $value }} messages of {{ $labels.topic }} could not be decoded (a compression "
            "codec the client lacks, a failed checksum) in the last 15 minutes and were skipped "
            "unchecked; the exporter's log names their partitions and offsets.",
        ),
        _alert(
            "CitationNoSweepSinceChunkerChange",
            "max by (job) (citation_store_last_chunker_change_timestamp_seconds)\n"
            "> max by (job) (citation_sweep_last_completed_timestamp_seconds)\n"
            "and on (job)\n"
            f"time() - max by (job) (citation_store_last_chunker_change_timestamp_seconds) > "
            f"{c.SWEEP_OVERDUE_SECONDS}",
            "warning",
            "No sweep has completed since the chunker changed.",
            "Chunks cut by a new chunker arrived at {{ $labels.job }} more than "
            f"{c.SWEEP_OVERDUE_SECONDS // 60} minutes ago and no sweep of the archive has "
            "completed since: the drift of stored citations is unknown.",
        ),
    ]


def rule_groups() -> dict[str, Any]:
    """The whole rule file."""
    return {
        "groups": [
            {"name": "citation-drift.rules", "rules": RECORDING},
            {"name": "citation-drift.alerts", "rules": _alerts()},
        ]
    }
