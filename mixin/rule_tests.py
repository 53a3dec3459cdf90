"""promtool unit tests of the rules, both sides of every line.

Generated rather than hand-written so the expected annotations are the shipped templates
rendered with the expected values: promtool then checks that Prometheus renders them the same.
"""

from __future__ import annotations

import re
from typing import Any

from exporter import alerting as c
from mixin.rules import rule_groups

__all__ = ["rule_tests"]

JOB = {"job": c.JOB}
EXPORTER = {**JOB, "instance": "exporter-1:9877"}


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    rendered = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{rendered}}}", "values": values}


def _annotations(alert: str, value: str, labels: dict[str, str]) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them for ``value`` and ``labels``."""
    rule = next(r for g in rule_groups()["groups"] for r in g["rules"] if r.get("alert") == alert)

    def render(text: str) -> str:
        text = text.replace("{{ $value | humanizePercentage }}", value)
        text = text.replace("{{ $value }}", value)
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)

    return {key: render(text) for key, text in rule["annotations"].items()}


def _firing(alert: str, labels: dict[str, str], value: str) -> list[dict[str, Any]]:
    severity = next(
        r["labels"]["severity"]
        for g in rule_groups()["groups"]
        for r in g["rules"]
        if r.get("alert") == alert
    )
    return [
        {
            "exp_labels": {**labels, "severity": severity},
            "exp_annotations": _annotations(alert, value, labels),
        }
    ]


def _quiet(alert: str, at: str) -> dict[str, Any]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": []}


def _fires(alert: str, at: str, labels: dict[str, str], value: str) -> dict[str, Any]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": _firing(alert, labels, value)}


def _quiet_then_fires(
    alert: str, quiet_at: str, fires_at: str, labels: dict[str, str], value: str
) -> list[dict[str, Any]]:
    """Both sides of the line: nothing yet at ``quiet_at``, firing at ``fires_at``."""
    return [_quiet(alert, quiet_at), _fires(alert, fires_at, labels, value)]


def _inline(
    checks_per_minute: float, drift: float = 0.0, superseded: float = 0.0, minutes: int = 60
) -> list[dict[str, str]]:
    """Inline traffic: checks per minute, and drift / superseded failures as shares."""
    labels = {**EXPORTER, "mode": "inline", "source": "acme"}
    series = [_series("citation_checks_total", labels, f"0+{checks_per_minute:g}x{minutes}")]
    if drift:
        series.append(
            _series(
                "citation_drift_failures_total",
                {**labels, "outcome": "repaired"},
                f"0+{checks_per_minute * drift:g}x{minutes}",
            )
        )
    if superseded:
        series.append(
            _series(
                "citation_superseded_failures_total",
                labels,
                f"0+{checks_per_minute * superseded:g}x{minutes}",
            )
        )
    # a sweep of the archive in the same window: must not move the inline ratio
    sweep = {**EXPORTER, "mode": "sweep", "source": "acme"}
    series.append(
        _series("citation_checks_total", sweep, f"0+{checks_per_minute * 10:g}x{minutes}")
    )
    series.append(
        _series(
            "citation_drift_failures_total",
            {**sweep, "outcome": "repaired"},
            f"0+{checks_per_minute * 5:g}x{minutes}",
        )
    )
    return series


def _sweep(ok: int, drift: int, invalid: int = 0) -> list[dict[str, str]]:
    return [
        _series("citation_sweep_citations", {**EXPORTER, "status": "ok"}, f"{ok}x30"),
        _series(
            "citation_sweep_citations", {**EXPORTER, "status": "drift_repaired"}, f"{drift}x30"
        ),
        _series("citation_sweep_citations", {**EXPORTER, "status": "invalid"}, f"{invalid}x30"),
    ]


def _growing_lag(consumed: str) -> list[dict[str, str]]:
    """Lag that grows by 10 a minute, with the consumed-messages counter given."""
    topic = {**EXPORTER, "topic": "rag.answers"}
    return [
        _series("citation_exporter_consumer_lag_messages", {**topic, "partition": "0"}, "0+10x40"),
        _series("citation_exporter_events_total", topic, consumed),
    ]


def _case(
    name: str,
    series: list[dict[str, str]],
    alerts: list[dict[str, Any]],
    exprs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    case: dict[str, Any] = {
        "name": name,
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": alerts,
    }
    if exprs:
        case["promql_expr_test"] = exprs
    return case


def rule_tests() -> dict[str, Any]:
    drift_page = "CitationDriftRateHigh"
    refresh = "CitationContentRefreshDetected"
    return {
        "rule_files": ["../citation-drift.rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            _case(
                "drift at 2.5% pages once it has lasted the window, not before",
                _inline(600, drift=0.025),
                _quiet_then_fires(drift_page, "15m", "17m", JOB, "2.5%"),
                [
                    {
                        "expr": "citation:drift_failures_per_check:ratio_rate15m",
                        "eval_time": "20m",
                        "exp_samples": [
                            {
                                "labels": "citation:drift_failures_per_check:ratio_rate15m"
                                f'{{job="{c.JOB}"}}',
                                "value": 0.025,
                            }
                        ],
                    }
                ],
            ),
            _case(
                "drift at 1.5% never pages",
                _inline(600, drift=0.015),
                [_quiet(drift_page, "50m")],
            ),
            _case(
                "a 70% superseded burst (a vendor reissue) opens a ticket and never pages",
                _inline(600, drift=0.003, superseded=0.70),
                [
                    _quiet(drift_page, "40m"),
                    _fires(refresh, "40m", JOB, "70%"),
                ],
            ),
            _case(
                "1 failure in 10 checks at night is below the traffic guard",
                _inline(10 / 15, drift=0.10),
                [_quiet(drift_page, "50m")],
            ),
            _case(
                "a sweep that found 0.9% drift does not page",
                _sweep(ok=9910, drift=90, invalid=500),
                [_quiet("CitationSweepDriftHigh", "5m")],
            ),
            _case(
                "a sweep that found 1.1% drift pages (invalid citations do not dilute it)",
                _sweep(ok=9890, drift=110, invalid=500),
                [_fires("CitationSweepDriftHigh", "5m", JOB, "1.1%")],
            ),
            _case(
                "an exporter that cannot be scraped",
                [_series("up", EXPORTER, "1 1 0x20")],
                _quiet_then_fires("CitationExporterDown", "5m", "10m", EXPORTER, "0"),
            ),
            _case(
                "no exporter target at all",
                [_series("up", {"job": "something-else", "instance": "x"}, "1x30")],
                _quiet_then_fires("CitationExporterAbsent", "10m", "20m", JOB, "1"),
            ),
            _case(
                "an exporter that never catches up with the chunk store",
                [_series("citation_exporter_ready", EXPORTER, "0x30")],
                _quiet_then_fires("CitationExporterNotReady", "10m", "20m", EXPORTER, "0"),
            ),
            _case(
                "lag grows while nothing is consumed",
                _growing_lag(consumed="500x40"),
                _quiet_then_fires(
                    "CitationExporterStalled",
                    "9m",
                    "25m",
                    {**EXPORTER, "topic": "rag.answers"},
                    "100",
                ),
            ),
            _case(
                "lag that grows while messages are consumed is just load",
                _growing_lag(consumed="0+500x40"),
                [_quiet("CitationExporterStalled", "30m")],
            ),
            _case(
                "2% of messages dead-lettered",
                [
                    _series(
                        "citation_exporter_events_total",
                        {**EXPORTER, "topic": "rag.answers"},
                        "0+1000x40",
                    ),
                    _series(
                        "citation_exporter_invalid_events_total",
                        {**EXPORTER, "topic": "rag.answers", "reason": "invalid_json"},
                        "0+20x40",
                    ),
                ],
                [
                    _quiet("CitationInvalidEventsHigh", "10m"),
                    {
                        "eval_time": "20m",
                        "alertname": "CitationInvalidEventsHigh",
                        "exp_alerts": _firing(
                            "CitationInvalidEventsHigh", {**JOB, "topic": "rag.answers"}, "2%"
                        ),
                    },
                ],
            ),
            _case(
                "a corrupt batch of 12 messages skipped",
                [
                    _series(
                        "citation_exporter_unreadable_messages_total",
                        {**EXPORTER, "topic": "rag.answers", "reason": "corrupt_record"},
                        "0x10 12x40",
                    ),
                ],
                [
                    _quiet("CitationUnreadableMessages", "9m"),
                    _fires(
                        "CitationUnreadableMessages",
                        "15m",
                        {**JOB, "topic": "rag.answers"},
                        "12",
                    ),
                    _quiet("CitationUnreadableMessages", "40m"),
                ],
            ),
            _case(
                "a re-index an hour ago and no sweep since",
                [
                    _series(
                        "citation_store_last_chunker_change_timestamp_seconds", EXPORTER, "60x80"
                    ),
                    _series("citation_sweep_last_completed_timestamp_seconds", EXPORTER, "0x80"),
                ],
                _quiet_then_fires("CitationNoSweepSinceChunkerChange", "50m", "65m", JOB, "60"),
            ),
            _case(
                "a re-index followed by a sweep",
                [
                    _series(
                        "citation_store_last_chunker_change_timestamp_seconds", EXPORTER, "60x80"
                    ),
                    _series(
                        "citation_sweep_last_completed_timestamp_seconds", EXPORTER, "0 0 0 200x77"
                    ),
                ],
                [_quiet("CitationNoSweepSinceChunkerChange", "70m")],
            ),
        ],
    }
