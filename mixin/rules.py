"""Recording rules and alerts for the exporter's metrics, as Prometheus rule groups.

Recording rules are named ``level:metric:operations``, the level being the finest label kept
(``instance`` or ``job``; the configured aggregation labels, coarser than job, are kept at
both). Numerator and denominator are summed separately before dividing (never an average of
ratios). Inline ratios select ``mode="inline"`` only, so a sweep of the archive never moves the
live ratio. Every series selector carries the configured job selector.
"""

from __future__ import annotations

from typing import Any

from exporter import alerting as c
from mixin.config import DEFAULT, MixinConfig, duration_seconds

__all__ = ["JUDGED_RESULTS", "MODEL_CALL_RESULTS", "Names", "rule_groups", "spoken"]

# Results of a citation a judge read: the not-entailed ratio's denominator.
JUDGED_RESULTS = "entailed|not_entailed|unknown"
# Results of a call to the model judge (skipped samples called nothing): the error share's.
MODEL_CALL_RESULTS = "entailed|not_entailed|unknown|error"


def _percent(value: float) -> str:
    return f"{value * 100:g}%"


def spoken(duration: str) -> str:
    """A whole-minute duration in words, for annotations: ``15m`` -> ``15 minutes``."""
    minutes = int(duration_seconds(duration) // 60)
    if minutes % 60 == 0:
        hours = minutes // 60
        return f"{hours} hour" + ("s" if hours != 1 else "")
    return f"{minutes} minute" + ("s" if minutes != 1 else "")


class Names:
    """The recording rules' names for one config (the window is part of the name)."""

    def __init__(self, config: MixinConfig) -> None:
        rate = f"rate{config.rate_window}"
        self.instance_checks = f"instance:citation_checks:{rate}"
        self.instance_drift = f"instance:citation_drift_failures:{rate}"
        self.instance_superseded = f"instance:citation_superseded_failures:{rate}"
        self.checks = f"job:citation_checks:{rate}"
        self.drift = f"job:citation_drift_failures:{rate}"
        self.superseded = f"job:citation_superseded_failures:{rate}"
        self.drift_ratio = f"job:citation_drift_failures_per_check:ratio_{rate}"
        self.superseded_ratio = f"job:citation_superseded_failures_per_check:ratio_{rate}"
        self.sweep_drift_ratio = "job:citation_sweep_drift_failures_per_citation:ratio"
        self.sweep_missing_ratio = "job:citation_sweep_document_missing_per_citation:ratio"
        coverage = f"rate{config.coverage_window}"
        self.instance_claims = f"instance:citation_answer_claim_sentences:{coverage}"
        self.instance_uncited = f"instance:citation_uncited_claims:{coverage}"
        self.claims = f"job:citation_answer_claim_sentences:{coverage}"
        self.uncited = f"job:citation_uncited_claims:{coverage}"
        self.uncited_ratio = f"job:citation_uncited_claims_per_claim:ratio_{coverage}"
        entailment = f"rate{config.entailment_window}"
        self.instance_judged = f"instance:citation_entailment_judged:{entailment}"
        self.instance_not_entailed = f"instance:citation_entailment_not_entailed:{entailment}"
        self.judged = f"job:citation_entailment_judged:{entailment}"
        self.not_entailed = f"job:citation_entailment_not_entailed:{entailment}"
        self.not_entailed_ratio = (
            f"job:citation_entailment_not_entailed_per_judged:ratio_{entailment}"
        )


def _recording(config: MixinConfig) -> list[dict[str, Any]]:
    n, sel, window = Names(config), config.selector, config.rate_window
    inline = f'mode="inline", {sel}'
    by_instance, by_job = config.by("instance"), config.by()

    def per_instance(
        record: str, counter: str, matchers: str = inline, over: str = window
    ) -> dict[str, Any]:
        expr = f"sum by {by_instance} (rate({counter}{{{matchers}}}[{over}]))"
        return {"record": record, "expr": expr}

    def per_job(record: str, source: str) -> dict[str, Any]:
        return {"record": record, "expr": f"sum by {by_job} ({source}{{{sel}}})"}

    def ratio(record: str, numerator: str, denominator: str) -> dict[str, Any]:
        return {"record": record, "expr": f"{numerator}{{{sel}}}\n/\n{denominator}{{{sel}}}"}

    return [
        # per exporter, for the board's instance filter
        per_instance(n.instance_checks, "citation_checks_total"),
        per_instance(n.instance_drift, "citation_drift_failures_total"),
        per_instance(n.instance_superseded, "citation_superseded_failures_total"),
        # per job: the replicas share the answers through the consumer group
        per_job(n.checks, n.instance_checks),
        per_job(n.drift, n.instance_drift),
        per_job(n.superseded, n.instance_superseded),
        ratio(n.drift_ratio, n.drift, n.checks),
        ratio(n.superseded_ratio, n.superseded, n.checks),
        {
            "record": n.sweep_drift_ratio,
            "expr": (
                f"sum by {by_job} "
                f'(citation_sweep_citations{{status=~"drift_repaired|drift_unrepaired", {sel}}})\n'
                f'/\nsum by {by_job} (citation_sweep_citations{{status!="invalid", {sel}}})'
            ),
        },
        {
            "record": n.sweep_missing_ratio,
            "expr": (
                f"sum by {by_job} "
                f'(citation_sweep_citations{{status="document_missing", {sel}}})\n'
                f'/\nsum by {by_job} (citation_sweep_citations{{status!="invalid", {sel}}})'
            ),
        },
        # coverage: claim sentences no citation supports, per claim sentence (framing is
        # neither), over its own window
        per_instance(
            n.instance_claims,
            "citation_answer_sentences_total",
            f'mode="inline", kind="claim", {sel}',
            config.coverage_window,
        ),
        per_instance(
            n.instance_uncited, "citation_uncited_claims_total", over=config.coverage_window
        ),
        per_job(n.claims, n.instance_claims),
        per_job(n.uncited, n.instance_uncited),
        ratio(n.uncited_ratio, n.uncited, n.claims),
        # entailment, for the board only (no alert reads it: a judge errs): not_entailed per
        # judged citation, across judges (each citation is counted once, by the judge that
        # decided). Judged is entailed, not_entailed or unknown (the judge read it and could
        # not tell); error and skipped judged nothing, so an endpoint outage does not dilute
        # the ratio (CitationJudgeErrorsHigh watches that).
        per_instance(
            n.instance_judged,
            "citation_entailment_checks_total",
            f'mode="inline", result=~"{JUDGED_RESULTS}", {sel}',
            config.entailment_window,
        ),
        per_instance(
            n.instance_not_entailed,
            "citation_entailment_checks_total",
            f'mode="inline", result="not_entailed", {sel}',
            config.entailment_window,
        ),
        per_job(n.judged, n.instance_judged),
        per_job(n.not_entailed, n.instance_not_entailed),
        ratio(n.not_entailed_ratio, n.not_entailed, n.judged),
    ]


def _alert(  # noqa: PLR0917 - one positional per part of an alert, read like a table
    config: MixinConfig,
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
        "runbook_url": config.runbook(name),
    }
    return rule


def _alerts(config: MixinConfig) -> list[dict[str, Any]]:
    n, sel = Names(config), config.selector
    window, stall, coverage = config.rate_window, config.stall_window, config.coverage_window
    job, job_topic, instance_topic = config.by(), config.by("topic"), config.by("instance", "topic")
    guard = f"{n.checks}{{{sel}}} > {c.MIN_CHECKS_PER_SECOND}"
    drops = config.judge_drops_window

    def model_judge(result: str) -> str:
        """Inline model-judge checks of ``result`` (a matcher), summed per job over the window."""
        selector = f'mode="inline", judge="openai", {result}, {sel}'
        return f"sum by {job} (rate(citation_entailment_checks_total{{{selector}}}[{window}]))"

    calls = model_judge(f'result=~"{MODEL_CALL_RESULTS}"')  # skipped samples called nothing
    errors = model_judge('result="error"')
    return [
        _alert(
            config,
            "CitationDriftRateHigh",
            f"{n.drift_ratio}{{{sel}}} > {c.DRIFT_RATIO_PAGE}\nand on {job}\n{guard}",
            "critical",
            "Citations are drifting: their spans no longer hold the quoted text.",
            "{{ $value | humanizePercentage }} of the inline citation checks of {{ $labels.job }} "
            f"failed on the live document version over the last {spoken(window)} (page above "
            f"{_percent(c.DRIFT_RATIO_PAGE)}, normal about {_percent(c.DRIFT_RATIO_BASELINE)}). "
            "A parser or chunker change is the usual cause; superseded documents are not "
            "counted here.",
            config.drift_for,
        ),
        _alert(
            config,
            "CitationSweepDriftHigh",
            f"{n.sweep_drift_ratio}{{{sel}}} > {c.SWEEP_DRIFT_RATIO_PAGE}",
            "critical",
            "The last sweep of the citation archive found too much drift.",
            "The last completed sweep of {{ $labels.job }} found {{ $value | humanizePercentage }} "
            f"of the archived citations drifted (page above {_percent(c.SWEEP_DRIFT_RATIO_PAGE)}, "
            f"normal about {_percent(c.DRIFT_RATIO_BASELINE)}): the last re-index moved spans.",
        ),
        _alert(
            config,
            "CitationSweepDocumentsMissing",
            f"{n.sweep_missing_ratio}{{{sel}}} > {c.SWEEP_MISSING_RATIO_PAGE}",
            "critical",
            "The last sweep found citations whose documents are gone from the live store.",
            "The last completed sweep of {{ $labels.job }} found {{ $value | humanizePercentage }} "
            "of the archived citations pointing at documents the live store no longer has (page "
            f"above {_percent(c.SWEEP_MISSING_RATIO_PAGE)}): the last re-index lost documents, "
            "and answers citing them show sources that open nothing.",
        ),
        _alert(
            config,
            "CitationContentRefreshDetected",
            f"{n.superseded_ratio}{{{sel}}} > {c.SUPERSEDED_RATIO_TICKET}\nand on {job}\n{guard}",
            "warning",
            "Many cited documents were reissued under a new version (a content refresh).",
            "{{ $value | humanizePercentage }} of the inline citation checks of {{ $labels.job }} "
            f"hit documents reissued under a new version over the last {spoken(window)}. This is "
            "a content refresh, not drift: those citations are pinned to the archived version "
            "and never relocated. No action is needed unless the refresh was not expected.",
            config.superseded_for,
        ),
        _alert(
            config,
            "CitationExporterDown",
            f"up{{{sel}}} == 0",
            "warning",
            "A citation drift exporter cannot be scraped.",
            "{{ $labels.instance }} of {{ $labels.job }} has not answered scrapes for "
            f"{spoken(config.exporter_down_for)}: its citations are not being checked.",
            config.exporter_down_for,
        ),
        _alert(
            config,
            "CitationExporterAbsent",
            f"absent(up{{{sel}}})",
            "warning",
            "No citation drift exporter is being scraped.",
            "Prometheus has had no target for job {{ $labels.job }} for "
            f"{spoken(config.exporter_absent_for)}: drift would go unnoticed.",
            config.exporter_absent_for,
        ),
        _alert(
            config,
            "CitationExporterNotReady",
            f"citation_exporter_ready{{{sel}}} == 0",
            "warning",
            "A citation drift exporter has not finished loading the chunk store.",
            "{{ $labels.instance }} has not caught up with the chunk topic for "
            f"{spoken(config.not_ready_for)}; it checks no citation until it has.",
            config.not_ready_for,
        ),
        _alert(
            config,
            "CitationExporterStalled",
            f"sum by {instance_topic}\n"
            f"  (delta(citation_exporter_consumer_lag_messages{{{sel}}}[{stall}])) > 0\n"
            f"and on {instance_topic}\n"
            f"sum by {instance_topic} (rate(citation_exporter_events_total{{{sel}}}[{stall}])) "
            "== 0",
            "warning",
            "A citation drift exporter stopped consuming while its lag grows.",
            "{{ $labels.instance }} consumed nothing from {{ $labels.topic }} in "
            f"{spoken(stall)} while {{{{ $value }}}} more messages arrived.",
            config.stalled_for,
        ),
        _alert(
            config,
            "CitationInvalidEventsHigh",
            f"sum by {job_topic} "
            f"(rate(citation_exporter_invalid_events_total{{{sel}}}[{window}]))\n"
            f"/\nsum by {job_topic} (rate(citation_exporter_events_total{{{sel}}}[{window}]))\n"
            f"> {c.INVALID_EVENTS_RATIO}",
            "warning",
            "Many messages are malformed and go to the dead-letter topic.",
            "{{ $value | humanizePercentage }} of the messages of {{ $labels.topic }} could not "
            f"be parsed or validated over {spoken(window)}; they are in the dead-letter topic "
            "with their error.",
            config.invalid_events_for,
        ),
        _alert(
            config,
            "CitationUnreadableMessages",
            f"sum by {job_topic} "
            f"(increase(citation_exporter_unreadable_messages_total{{{sel}}}[{window}])) > 0",
            "warning",
            "Kafka delivered messages that could not be read at all; they were skipped.",
            "{{ $value }} messages of {{ $labels.topic }} could not be decoded (a compression "
            f"codec the client lacks, a failed checksum) in the last {spoken(window)} and were "
            "skipped unchecked; the exporter's log names their partitions and offsets.",
        ),
        _alert(
            config,
            "CitationNoSweepSinceChunkerChange",
            f"max by {job} (citation_store_last_chunker_change_timestamp_seconds{{{sel}}})\n"
            f"> max by {job} (citation_sweep_last_completed_timestamp_seconds{{{sel}}})\n"
            f"and on {job}\n"
            f"time() - max by {job} "
            f"(citation_store_last_chunker_change_timestamp_seconds{{{sel}}}) > "
            f"{c.SWEEP_OVERDUE_SECONDS}",
            "warning",
            "No sweep has completed since the chunker changed.",
            "Chunks cut by a new chunker arrived at {{ $labels.job }} more than "
            f"{c.SWEEP_OVERDUE_SECONDS // 60} minutes ago and no sweep of the archive has "
            "completed since: the drift of stored citations is unknown.",
        ),
        _alert(
            config,
            "CitationUncitedClaimsHigh",
            f"{n.uncited_ratio}{{{sel}}} > {c.UNCITED_CLAIMS_RATIO_TICKET}\nand on {job}\n"
            f"{n.claims}{{{sel}}} > {c.MIN_CLAIMS_PER_SECOND}",
            "warning",
            "Many claim sentences of the answers are supported by no citation.",
            "{{ $value | humanizePercentage }} of the claim sentences in the live answers of "
            f"{{{{ $labels.job }}}} had no citation over the last {spoken(coverage)} (ticket "
            f"above {_percent(c.UNCITED_CLAIMS_RATIO_TICKET)}). A model or prompt change that "
            "stopped citing, a new sentence splitter or claim classifier, or one topic's "
            "retrieval returning nothing is the usual cause.",
            config.coverage_for,
        ),
        _alert(
            config,
            "CitationJudgeErrorsHigh",
            f"{errors}\n/\n{calls}\n"
            f"> {c.JUDGE_ERRORS_RATIO_TICKET}\nand on {job}\n"
            f"{calls} > {c.MIN_JUDGE_CALLS_PER_SECOND}",
            "warning",
            "Many calls to the model judge end in an error.",
            "{{ $value | humanizePercentage }} of the inline calls of {{ $labels.job }} to the "
            f"model judge came to no usable answer over the last {spoken(window)} (ticket above "
            f"{_percent(c.JUDGE_ERRORS_RATIO_TICKET)}), so those samples went unjudged. An "
            "endpoint that is down, a wrong model name, a rotated key or rate limits are the "
            "usual cause.",
            config.judge_errors_for,
        ),
        _alert(
            config,
            "CitationJudgeBudgetExhausted",
            f"sum by {job} (increase(citation_entailment_dropped_total"
            f'{{reason="budget", {sel}}}[{drops}])) > 0',
            "warning",
            "The model judge's hourly budget is spent: sampled citations go unjudged.",
            "{{ $labels.job }} dropped {{ $value | humanize }} sampled citations in the last "
            f"{spoken(drops)} because the hourly budget of the model judge "
            "(judge_budget_usd_per_hour) is spent: judging behind the response has stopped "
            "until the hour is over. The budget is too small for the sample rate and the "
            "traffic, or the price went up.",
            config.judge_budget_for,
        ),
    ]


def rule_groups(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """The whole rule file."""
    return {
        "groups": [
            {"name": "citation-drift.rules", "rules": _recording(config)},
            {"name": "citation-drift.alerts", "rules": _alerts(config)},
        ]
    }
