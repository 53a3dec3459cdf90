"""promtool unit tests of the rules, both sides of every line, for any config.

Generated rather than hand-written so the expected annotations are the shipped templates
rendered with the expected values: promtool then checks that Prometheus renders them the same.
The expected labels come from the config (its job, one value per aggregation label), not from
the rules' text, so rules that lost a label from an aggregation fail here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from exporter import alerting as c
from mixin.config import DEFAULT, MixinConfig, duration_seconds
from mixin.rules import Names, rule_groups

__all__ = ["OTHER_JOB", "rule_tests"]

# a job that is not the exporter's: its series must never reach a rule
OTHER_JOB = "something-else"


def _minutes(duration: str) -> int:
    return int(duration_seconds(duration) // 60)


def _at(minutes: int) -> str:
    return f"{minutes}m"


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    rendered = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{rendered}}}", "values": values}


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


class _Tests:
    """The test cases of one config; ``job`` and ``exporter`` are the labels they expect."""

    def __init__(self, config: MixinConfig) -> None:
        self.config = config
        self.rules = [r for g in rule_groups(config)["groups"] for r in g["rules"]]
        self.names = Names(config)
        # one example value per aggregation label: the level every job-level rule keeps
        self.job = {"job": config.job} | {
            label: f"{label}-1" for label in config.aggregation_labels
        }
        self.exporter = {**self.job, "instance": "exporter-1:9877"}
        self.window = _minutes(config.rate_window)
        self.stall = _minutes(config.stall_window)
        self.coverage_window = _minutes(config.coverage_window)
        self.entailment_window = _minutes(config.entailment_window)
        self.drops_window = _minutes(config.judge_drops_window)

    # --- expectations ---------------------------------------------------------------------

    def _rule(self, alert: str) -> dict[str, Any]:
        return next(r for r in self.rules if r.get("alert") == alert)

    def annotations(self, alert: str, value: str, labels: dict[str, str]) -> dict[str, str]:
        """The alert's annotations as Prometheus renders them for ``value`` and ``labels``."""

        def render(text: str) -> str:
            text = text.replace("{{ $value | humanizePercentage }}", value)
            text = text.replace("{{ $value | humanize }}", value)
            text = text.replace("{{ $value }}", value)
            return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)

        return {key: render(text) for key, text in self._rule(alert)["annotations"].items()}

    def firing(self, alert: str, labels: dict[str, str], value: str) -> dict[str, Any]:
        return {
            "exp_labels": {**labels, "severity": self._rule(alert)["labels"]["severity"]},
            "exp_annotations": self.annotations(alert, value, labels),
        }

    def fires(self, alert: str, at: int, *firing: tuple[dict[str, str], str]) -> dict[str, Any]:
        """At minute ``at``, exactly the given (labels, value) alerts."""
        exp = [self.firing(alert, labels, value) for labels, value in firing]
        return {"eval_time": _at(at), "alertname": alert, "exp_alerts": exp}

    @staticmethod
    def quiet(alert: str, at: int) -> dict[str, Any]:
        return {"eval_time": _at(at), "alertname": alert, "exp_alerts": []}

    def quiet_then_fires(
        self, alert: str, quiet_at: int, fires_at: int, labels: dict[str, str], value: str
    ) -> list[dict[str, Any]]:
        """Both sides of the line: nothing yet at ``quiet_at``, firing at ``fires_at``."""
        return [self.quiet(alert, quiet_at), self.fires(alert, fires_at, (labels, value))]

    # --- input series ---------------------------------------------------------------------

    def inline(
        self,
        checks_per_minute: float,
        drift: float = 0.0,
        superseded: float = 0.0,
        minutes: int = 60,
        exporter: dict[str, str] | None = None,
    ) -> list[dict[str, str]]:
        """Inline traffic: checks per minute, and drift / superseded failures as shares."""
        exporter = exporter or self.exporter
        labels = {**exporter, "mode": "inline", "source": "acme"}
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
        sweep = {**exporter, "mode": "sweep", "source": "acme"}
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

    def sweep(
        self, ok: int, drift: int, invalid: int = 0, exporter: dict[str, str] | None = None
    ) -> list[dict[str, str]]:
        gauge, exporter = "citation_sweep_citations", exporter or self.exporter
        return [
            _series(gauge, {**exporter, "status": "ok"}, f"{ok}x30"),
            _series(gauge, {**exporter, "status": "drift_repaired"}, f"{drift}x30"),
            _series(gauge, {**exporter, "status": "invalid"}, f"{invalid}x30"),
        ]

    def sweep_missing(self, ok: int, missing: int, invalid: int = 0) -> list[dict[str, str]]:
        """A completed sweep whose citations are ok or point at vanished documents."""
        gauge, exporter = "citation_sweep_citations", self.exporter
        return [
            _series(gauge, {**exporter, "status": "ok"}, f"{ok}x30"),
            _series(gauge, {**exporter, "status": "document_missing"}, f"{missing}x30"),
            _series(gauge, {**exporter, "status": "invalid"}, f"{invalid}x30"),
        ]

    def shared_sweep(self, shares: list[tuple[int, int]]) -> list[dict[str, str]]:
        """A sweep the group shared (sweeps_topic): each instance reports its partitions'
        (ok, drift) share."""
        series = []
        for number, (ok, drift) in enumerate(shares):
            instance = {**self.exporter, "instance": f"exporter-{number}:9877"}
            series += self.sweep(ok, drift, exporter=instance)
        return series

    def answers(
        self,
        claims_per_minute: float,
        uncited: float,
        minutes: int,
        exporter: dict[str, str] | None = None,
    ) -> list[dict[str, str]]:
        """Inline answers: claim sentences per minute and the share of them uncited, split
        over two topics; twice as many framing sentences, and a sweep that finds half of its
        claims uncited, neither of which may move the inline ratio."""
        exporter = exporter or self.exporter
        inline, sweep = {**exporter, "mode": "inline"}, {**exporter, "mode": "sweep"}
        claims, sentences = f"0+{claims_per_minute:g}x{minutes}", "citation_answer_sentences_total"
        return [
            _series(
                "citation_answers_checked_total", inline, f"0+{claims_per_minute / 4:g}x{minutes}"
            ),
            _series(sentences, {**inline, "kind": "claim"}, claims),
            _series(
                sentences, {**inline, "kind": "framing"}, f"0+{claims_per_minute * 2:g}x{minutes}"
            ),
            _series(
                "citation_uncited_claims_total",
                {**inline, "topic": "billing"},
                f"0+{claims_per_minute * uncited * 0.75:g}x{minutes}",
            ),
            _series(
                "citation_uncited_claims_total",
                {**inline, "topic": "security"},
                f"0+{claims_per_minute * uncited * 0.25:g}x{minutes}",
            ),
            _series(
                sentences, {**sweep, "kind": "claim"}, f"0+{claims_per_minute * 10:g}x{minutes}"
            ),
            _series(
                "citation_uncited_claims_total",
                {**sweep, "topic": "billing"},
                f"0+{claims_per_minute * 5:g}x{minutes}",
            ),
        ]

    def judged(
        self,
        per_minute: Mapping[tuple[str, str], float],
        minutes: int,
        exporter: dict[str, str] | None = None,
        mode: str = "inline",
    ) -> list[dict[str, str]]:
        """Entailment checks per minute by (judge, result); every other (judge, result) at 0,
        as the exporter starts them."""
        exporter = exporter or self.exporter
        return [
            _series(
                "citation_entailment_checks_total",
                {**exporter, "mode": mode, "judge": judge, "result": result},
                f"0+{per_minute.get((judge, result), 0):g}x{minutes}",
            )
            for judge in ("lexical", "openai")
            for result in ("entailed", "not_entailed", "unknown", "error", "skipped")
        ]

    def model_calls(
        self,
        calls_per_minute: float,
        errors: float,
        minutes: int,
        exporter: dict[str, str] | None = None,
    ) -> list[dict[str, str]]:
        """Inline calls to the model judge, ``errors`` of them (a share) errors; beside them as
        many skipped samples (called nothing) and twice as many lexical verdicts (no call), and
        a sweep whose every call fails: none of which may move the share."""
        rest = calls_per_minute * (1 - errors)
        inline = {
            ("openai", "error"): calls_per_minute * errors,
            ("openai", "entailed"): rest / 2,
            ("openai", "not_entailed"): rest / 4,
            ("openai", "unknown"): rest / 4,
            ("openai", "skipped"): calls_per_minute,
            ("lexical", "entailed"): calls_per_minute,
            ("lexical", "not_entailed"): calls_per_minute,
        }
        sweep = {("openai", "error"): calls_per_minute * 10}
        return self.judged(inline, minutes, exporter) + self.judged(
            sweep, minutes, exporter, mode="sweep"
        )

    def drops(self, reason: str, values: str, minutes: int) -> list[dict[str, str]]:
        """Sampled citations dropped for ``reason`` (``values`` in promtool's notation); the
        other reason at 0, as the exporter starts it."""
        other = "queue_full" if reason == "budget" else "budget"
        counter = "citation_entailment_dropped_total"
        return [
            _series(counter, {**self.exporter, "reason": reason}, values),
            _series(counter, {**self.exporter, "reason": other}, f"0x{minutes}"),
        ]

    def growing_lag(self, consumed: str, minutes: int) -> list[dict[str, str]]:
        """Lag that grows by 10 a minute, with the consumed-messages counter given."""
        topic = {**self.exporter, "topic": "rag.answers"}
        lag = {**topic, "partition": "0"}
        return [
            _series("citation_exporter_consumer_lag_messages", lag, f"0+10x{minutes}"),
            _series("citation_exporter_events_total", topic, consumed),
        ]

    def ratio_sample(self, record: str, at: int, value: float) -> dict[str, Any]:
        """A recorded ratio, rounded to 1e-4: rate() extrapolates over the window, and for some
        windows (30m) the ratio of two rates is off from the exact share in its last bit, which
        promtool compares exactly. round() drops the name, so the sample has the labels only."""
        labels = ", ".join(f'{key}="{v}"' for key, v in self.job.items())
        return {
            "expr": f"round({record}, 0.0001)",
            "eval_time": _at(at),
            "exp_samples": [{"labels": f"{{{labels}}}", "value": value}],
        }

    # --- the cases ------------------------------------------------------------------------

    def drift(self) -> list[dict[str, Any]]:
        page, refresh = "CitationDriftRateHigh", "CitationContentRefreshDetected"
        drift_for = _minutes(self.config.drift_for)
        superseded_for = _minutes(self.config.superseded_for)
        # the ratio exists from the second sample (minute 1): pending from then on
        horizon = drift_for + self.window + 20
        other = {"job": OTHER_JOB, "instance": "elsewhere:9877"}
        burst_at = max(drift_for, superseded_for) + 5
        night_rate = 10 / self.window  # 10 checks in the window: far below the traffic guard
        return [
            _case(
                f"drift at 2.5% pages once it has lasted {self.config.drift_for}, not before",
                self.inline(600, drift=0.025, minutes=horizon),
                self.quiet_then_fires(page, drift_for, drift_for + 2, self.job, "2.5%"),
                [self.ratio_sample(self.names.drift_ratio, drift_for + 5, 0.025)],
            ),
            _case(
                "drift at 1.5% never pages",
                self.inline(600, drift=0.015, minutes=horizon),
                [self.quiet(page, horizon - 5)],
            ),
            _case(
                "drift of another job is not ours",
                self.inline(600, drift=0.5, minutes=horizon, exporter=other),
                [self.quiet(page, horizon - 5)],
                [
                    {"expr": record, "eval_time": _at(horizon - 5), "exp_samples": []}
                    for record in (
                        self.names.instance_checks,
                        self.names.instance_drift,
                        self.names.drift_ratio,
                    )
                ],
            ),
            _case(
                "a 70% superseded burst (a vendor reissue) opens a ticket and never pages",
                self.inline(600, drift=0.003, superseded=0.70, minutes=burst_at + 10),
                [self.quiet(page, burst_at), self.fires(refresh, burst_at, (self.job, "70%"))],
            ),
            _case(
                "1 failure in 10 checks at night is below the traffic guard",
                self.inline(night_rate, drift=0.10, minutes=horizon),
                [self.quiet(page, horizon - 5)],
            ),
        ]

    def per_aggregation_label(self) -> list[dict[str, Any]]:
        """With aggregation labels, two deployments of one job are judged apart."""
        if not self.config.aggregation_labels:
            return []
        drift_for, label = _minutes(self.config.drift_for), self.config.aggregation_labels[0]
        calm = {**self.exporter, label: f"{label}-2", "instance": "exporter-2:9877"}
        horizon = drift_for + self.window + 20
        return [
            _case(
                f"drift in one {label} pages for that {label} alone, not pooled with a calm one",
                self.inline(600, drift=0.025, minutes=horizon)
                + self.inline(600, minutes=horizon, exporter=calm),
                [self.fires("CitationDriftRateHigh", drift_for + 2, (self.job, "2.5%"))],
            )
        ]

    def sweeps(self) -> list[dict[str, Any]]:
        alert = "CitationSweepDriftHigh"
        return [
            _case(
                "a sweep that found 0.9% drift does not page",
                self.sweep(ok=9910, drift=90, invalid=500),
                [self.quiet(alert, 5)],
            ),
            _case(
                "a sweep that found 1.1% drift pages (invalid citations do not dilute it)",
                self.sweep(ok=9890, drift=110, invalid=500),
                [self.fires(alert, 5, (self.job, "1.1%"))],
            ),
            _case(
                "a sweep three instances shared pages once, on the group's 1.1%, though two "
                "of their shares alone were calm",
                self.shared_sweep([(3000, 10), (3000, 20), (3890, 80)]),
                [self.fires(alert, 5, (self.job, "1.1%"))],
            ),
            _case(
                "a shared sweep whose one share drifted 2% does not page on the group's 0.9%",
                self.shared_sweep([(3000, 10), (3000, 0), (3910, 80)]),
                [self.quiet(alert, 5)],
            ),
            _case(
                "a sweep whose documents are all there does not page for missing ones, nor a "
                "sweep with 0.9% of them gone",
                self.sweep_missing(ok=9910, missing=90, invalid=500),
                [self.quiet("CitationSweepDocumentsMissing", 5)],
            ),
            _case(
                "a re-index that lost 30% of the cited documents pages, with drift at 0%",
                self.sweep_missing(ok=7000, missing=3000, invalid=500),
                [
                    self.fires("CitationSweepDocumentsMissing", 5, (self.job, "30%")),
                    self.quiet(alert, 5),
                ],
            ),
        ]

    def meta(self) -> list[dict[str, Any]]:
        cfg, other = self.config, {"job": OTHER_JOB, "instance": "elsewhere:9877"}
        down, absent = _minutes(cfg.exporter_down_for), _minutes(cfg.exporter_absent_for)
        not_ready, stalled = _minutes(cfg.not_ready_for), _minutes(cfg.stalled_for)
        stall_fires = stalled + self.stall + 5  # a full stall window after the first sample
        return [
            _case(
                "an exporter that cannot be scraped (another job's failed target is not ours)",
                [
                    _series("up", self.exporter, f"1 1 0x{down + 10}"),
                    _series("up", other, f"0x{down + 10}"),
                ],
                # down from minute 2
                self.quiet_then_fires("CitationExporterDown", down, down + 3, self.exporter, "0"),
            ),
            _case(
                "no exporter target at all",
                [_series("up", other, f"1x{absent + 10}")],
                self.quiet_then_fires(
                    "CitationExporterAbsent", absent - 1, absent + 1, {"job": cfg.job}, "1"
                ),
            ),
            _case(
                "an exporter that never catches up with the chunk store (another job's "
                "readiness is not ours)",
                [
                    _series("citation_exporter_ready", self.exporter, f"0x{not_ready + 10}"),
                    _series("citation_exporter_ready", other, f"0x{not_ready + 10}"),
                ],
                self.quiet_then_fires(
                    "CitationExporterNotReady", not_ready - 1, not_ready + 1, self.exporter, "0"
                ),
            ),
            _case(
                "lag grows while nothing is consumed",
                self.growing_lag(consumed=f"500x{stall_fires + 5}", minutes=stall_fires + 5),
                self.quiet_then_fires(
                    "CitationExporterStalled",
                    stalled - 1,
                    stall_fires,
                    {**self.exporter, "topic": "rag.answers"},
                    f"{10 * self.stall}",
                ),
            ),
            _case(
                "lag that grows while messages are consumed is just load",
                self.growing_lag(consumed=f"0+500x{stall_fires + 5}", minutes=stall_fires + 5),
                [self.quiet("CitationExporterStalled", stall_fires)],
            ),
        ]

    def messages(self) -> list[dict[str, Any]]:
        invalid_for = _minutes(self.config.invalid_events_for)
        topic = {**self.exporter, "topic": "rag.answers"}
        job_topic = {**self.job, "topic": "rag.answers"}
        length = invalid_for + self.window + 10
        jump = max(10, self.window)  # the corrupt batch arrives at minute jump + 1
        unreadable = "CitationUnreadableMessages"
        return [
            _case(
                "2% of messages dead-lettered",
                [
                    _series("citation_exporter_events_total", topic, f"0+1000x{length}"),
                    _series(
                        "citation_exporter_invalid_events_total",
                        {**topic, "reason": "invalid_json"},
                        f"0+20x{length}",
                    ),
                ],
                self.quiet_then_fires(
                    "CitationInvalidEventsHigh", invalid_for - 1, invalid_for + 5, job_topic, "2%"
                ),
            ),
            _case(
                "a corrupt batch of 12 messages skipped",
                [
                    _series(
                        "citation_exporter_unreadable_messages_total",
                        {**topic, "reason": "corrupt_record"},
                        f"0x{jump} 12x{jump + self.window + 10}",
                    ),
                ],
                [
                    self.quiet(unreadable, jump - 1),
                    self.fires(unreadable, jump + max(1, self.window // 2), (job_topic, "12")),
                    self.quiet(unreadable, jump + self.window + 5),
                ],
            ),
        ]

    def reindex(self) -> list[dict[str, Any]]:
        alert = "CitationNoSweepSinceChunkerChange"
        overdue = c.SWEEP_OVERDUE_SECONDS // 60
        change = "citation_store_last_chunker_change_timestamp_seconds"
        completed = "citation_sweep_last_completed_timestamp_seconds"
        length = overdue + 20
        return [
            _case(
                f"a re-index {overdue} minutes ago and no sweep since",
                [
                    _series(change, self.exporter, f"60x{length}"),
                    _series(completed, self.exporter, f"0x{length}"),
                ],
                # the chunker changed at time() = 60 s: overdue after minute overdue + 1
                self.quiet_then_fires(alert, overdue - 10, overdue + 5, self.job, "60"),
            ),
            _case(
                "a re-index followed by a sweep",
                [
                    _series(change, self.exporter, f"60x{length}"),
                    _series(completed, self.exporter, f"0 0 0 200x{length - 3}"),
                ],
                [self.quiet(alert, overdue + 10)],
            ),
        ]

    def coverage(self) -> list[dict[str, Any]]:
        alert, names = "CitationUncitedClaimsHigh", self.names
        coverage_for = _minutes(self.config.coverage_for)
        horizon = coverage_for + self.coverage_window + 20
        line = c.UNCITED_CLAIMS_RATIO_TICKET
        above, below = round(line + 0.02, 4), round(line - 0.01, 4)
        # well above the traffic guard, and half of it (a quiet night)
        busy = c.MIN_CLAIMS_PER_SECOND * 60 * 20
        night = c.MIN_CLAIMS_PER_SECOND * 60 / 2
        # rate() over the window of a counter that starts at 0 climbs for a whole window; at
        # 20 times the guard it passes the guard after a twentieth of the window: pending from
        # then on
        fires_at = coverage_for + self.coverage_window // 20 + 3
        other = {"job": OTHER_JOB, "instance": "elsewhere:9877"}
        return [
            _case(
                f"{above:.0%} of claims uncited opens a ticket once it has lasted "
                f"{self.config.coverage_for}, not before, and never pages",
                self.answers(busy, above, horizon),
                self.quiet_then_fires(alert, coverage_for, fires_at, self.job, f"{above * 100:g}%"),
                [
                    self.ratio_sample(names.uncited_ratio, coverage_for + 5, above),
                    # a whole window after the start: the rate is the traffic's
                    self.ratio_sample(names.claims, horizon - 5, round(busy / 60, 4)),
                ],
            ),
            _case(
                f"{below:.0%} of claims uncited, just below the line, opens no ticket",
                self.answers(busy, below, horizon),
                [self.quiet(alert, horizon - 5)],
                [self.ratio_sample(names.uncited_ratio, horizon - 5, below)],
            ),
            _case(
                "half of the claims uncited at night, below the traffic guard, opens no ticket",
                self.answers(night, 0.5, horizon),
                [self.quiet(alert, horizon - 5)],
                [self.ratio_sample(names.uncited_ratio, horizon - 5, 0.5)],
            ),
            _case(
                "uncited claims of another job are not ours",
                self.answers(busy, 0.5, horizon, exporter=other),
                [self.quiet(alert, horizon - 5)],
                [
                    {"expr": record, "eval_time": _at(horizon - 5), "exp_samples": []}
                    for record in (
                        names.instance_claims,
                        names.instance_uncited,
                        names.uncited_ratio,
                    )
                ],
            ),
        ]

    def entailment(self) -> list[dict[str, Any]]:
        """The not-entailed ratio (recorded, read by no alert) and the judge's two tickets."""
        names, window = self.names, self.entailment_window
        horizon = window + 20
        other = {"job": OTHER_JOB, "instance": "elsewhere:9877"}
        judge_alerts = ("CitationJudgeErrorsHigh", "CitationJudgeBudgetExhausted")
        # 40 judged a minute: 12 not entailed (8 by the lexical judge, 4 by the model), 20
        # entailed, 8 unknown: 30%. Errors and skipped samples judged nothing; a sweep that
        # finds nearly everything not entailed is not live traffic.
        inline = {
            ("lexical", "not_entailed"): 8,
            ("openai", "not_entailed"): 4,
            ("lexical", "entailed"): 5,
            ("openai", "entailed"): 15,
            ("lexical", "unknown"): 2,
            ("openai", "unknown"): 6,
            ("openai", "error"): 30,
            ("openai", "skipped"): 30,
        }
        sweep = {("openai", "not_entailed"): 400, ("openai", "entailed"): 1}
        return [
            _case(
                "30% of judged citations not entailed (across judges; errors, skipped samples "
                "and sweeps left out) is recorded, and opens nothing",
                self.judged(inline, horizon) + self.judged(sweep, horizon, mode="sweep"),
                # the model judge's errors (30 of 55 calls) are CitationJudgeErrorsHigh's: only
                # the budget ticket is asked to stay quiet here
                [self.quiet(judge_alerts[1], horizon - 5)],
                [
                    self.ratio_sample(names.not_entailed_ratio, 5, 0.3),
                    self.ratio_sample(names.not_entailed_ratio, horizon - 5, 0.3),
                    # a whole window after the start: the rate is the traffic's
                    self.ratio_sample(names.judged, horizon - 5, round(40 / 60, 4)),
                ],
            ),
            _case(
                "every judged citation not entailed opens nothing: no alert reads a verdict",
                self.judged({("openai", "not_entailed"): 600}, horizon),
                [self.quiet(alert, horizon - 5) for alert in judge_alerts],
                [self.ratio_sample(names.not_entailed_ratio, horizon - 5, 1.0)],
            ),
            _case(
                "entailment checks of another job are not ours",
                self.judged(inline, horizon, exporter=other),
                [self.quiet(judge_alerts[0], horizon - 5)],
                [
                    {"expr": record, "eval_time": _at(horizon - 5), "exp_samples": []}
                    for record in (
                        names.instance_judged,
                        names.instance_not_entailed,
                        names.not_entailed_ratio,
                    )
                ],
            ),
        ]

    def judge_errors(self) -> list[dict[str, Any]]:
        alert = "CitationJudgeErrorsHigh"
        errors_for = _minutes(self.config.judge_errors_for)
        horizon = errors_for + self.window + 20
        line = c.JUDGE_ERRORS_RATIO_TICKET
        above, below = round(line + 0.05, 4), round(line - 0.05, 4)
        # calls at 20 times the traffic guard, and at half of it (a quiet night)
        busy = c.MIN_JUDGE_CALLS_PER_SECOND * 60 * 20
        night = c.MIN_JUDGE_CALLS_PER_SECOND * 60 / 2
        # at 20 times the guard the rate passes it after a twentieth of the window
        fires_at = errors_for + self.window // 20 + 3
        other = {"job": OTHER_JOB, "instance": "elsewhere:9877"}
        return [
            _case(
                f"{above:.0%} of the model judge's calls in error opens a ticket once it has "
                f"lasted {self.config.judge_errors_for}, not before (skipped samples, lexical "
                "verdicts and a failing sweep do not move the share)",
                self.model_calls(busy, above, horizon),
                self.quiet_then_fires(alert, errors_for, fires_at, self.job, f"{above * 100:g}%"),
            ),
            _case(
                f"{below:.0%} of the model judge's calls in error opens no ticket",
                self.model_calls(busy, below, horizon),
                [self.quiet(alert, horizon - 5)],
            ),
            _case(
                "half of a few calls in error at night, below the traffic guard, opens no ticket",
                self.model_calls(night, 0.5, horizon),
                [self.quiet(alert, horizon - 5)],
            ),
            _case(
                "the model judge's errors of another job are not ours",
                self.model_calls(busy, 1.0, horizon, exporter=other),
                [self.quiet(alert, horizon - 5)],
            ),
        ]

    def judge_budget(self) -> list[dict[str, Any]]:
        alert = "CitationJudgeBudgetExhausted"
        budget_for, drops = _minutes(self.config.judge_budget_for), self.drops_window
        start = 10  # the budget is spent after minute `start`: 2 samples dropped a minute
        stop = start + budget_for + drops + 10  # the hour is over: the budget is back
        length = stop + drops + 10
        dropping = f"0x{start} 2+2x{stop - start - 1} {2 * (stop - start)}x{length - stop}"
        cases = [
            _case(
                "samples dropped for the budget open a ticket once the drops have lasted "
                f"{self.config.judge_budget_for}, and it clears once the hour's budget is back",
                self.drops("budget", dropping, length),
                [
                    # dropping from minute start + 1 on
                    self.quiet(alert, start + budget_for),
                    self.fires(alert, start + budget_for + 2, (self.job, f"{2 * drops}")),
                    self.quiet(alert, stop + drops + 2),
                ],
            ),
            _case(
                "samples dropped because the queue is full are not the budget's",
                self.drops("queue_full", f"0+5x{length}", length),
                [self.quiet(alert, length - 5)],
            ),
        ]
        if budget_for > drops + 2:
            # drops over 2 minutes keep the condition for drops + 2 minutes, short of `for:`
            brief = f"0x{start} 2 4x{length - start - 1}"
            cases.append(
                _case(
                    "a budget spent in the hour's last 2 minutes opens no ticket",
                    self.drops("budget", brief, length),
                    [self.quiet(alert, at) for at in range(start + 1, start + drops + 6)],
                )
            )
        return cases


def rule_tests(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """The promtool test file, written to rules/tests/ beside the rules."""
    tests = _Tests(config)
    return {
        "rule_files": ["../citation-drift.rules.yml"],
        "evaluation_interval": "1m",
        # the recording rules before the alerts that read them, at every step: without an
        # order promtool evaluates the groups in random order, and an alert lagging its ratio
        # by a step at random made a test that checks it one step after its `for:` flaky
        "group_eval_order": [group["name"] for group in rule_groups(config)["groups"]],
        "tests": [
            *tests.drift(),
            *tests.per_aggregation_label(),
            *tests.sweeps(),
            *tests.meta(),
            *tests.messages(),
            *tests.reindex(),
            *tests.coverage(),
            *tests.entailment(),
            *tests.judge_errors(),
            *tests.judge_budget(),
        ],
    }
