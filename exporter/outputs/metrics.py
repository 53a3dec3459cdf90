"""Every metric the exporter exports, defined on an injected registry; recording, not deciding.

Names are a public contract (rules and dashboards depend on them). Drift and superseded failures
are separate counters so that alerts can threshold drift alone: a content refresh must never
page. Labels are bounded: ``mode`` (inline or sweep), ``source`` (an allow-list or the first N
seen, everything else ``other``), ``outcome``, ``kind``, ``reason``, ``status``, ``topic`` and
``partition`` of our own Kafka topics. No label ever carries a document, chunk, answer or
citation id.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from exporter.checks.coverage import COVERAGE_METRICS
from exporter.checks.plugins import AnswerCheck, CitationCheck, MetricSpec
from exporter.checks.relocate import UNREPAIRED_OUTCOMES
from exporter.checks.verdict import FailedCheck, Status
from exporter.entailment.results import EntailmentResult, Judgement
from exporter.outputs.histograms import BatchHistogram
from exporter.outputs.state import ExporterState, StateCollector
from exporter.pipeline.outcome import Mode, Outcome
from exporter.pipeline.shifts import SHIFT_BOUNDS

__all__ = ["MAX_LABEL_LENGTH", "MODES", "ExporterMetrics", "SourceLabels"]

MODES = tuple(mode.value for mode in Mode)
MAX_LABEL_LENGTH = 64
JUDGES = ("lexical", "openai")
DROP_REASONS = ("queue_full", "budget")
# Time to judge one citation: microseconds for the lexical judge, a tenth of a second to
# seconds for a model (retries included, up to judge_timeout_seconds).
JUDGE_BUCKETS = (
    0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, math.inf,
)  # fmt: skip
OTHER = "other"
_DRIFT_REASONS = (*(check.value for check in FailedCheck), *UNREPAIRED_OUTCOMES)
# Signed character shifts: fine near 0, up to 8192 either way, so a chunk-size change shows as
# one tight band (the same bounds as the sweep report's histogram).
SHIFT_BUCKETS = (*(float(b) for b in SHIFT_BOUNDS), math.inf)
# Similarity 0-1 at the recorded span: coarse below 0.9 (shifted spans land near 0.2-0.5),
# fine above it (where typography-only changes and the 0.98 threshold live).
SIMILARITY_BUCKETS = (
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
    0.95, 0.96, 0.97, 0.98, 0.985, 0.99, 0.995, 0.999, 1.0, math.inf,
)  # fmt: skip
# Inline check time per citation: tens of microseconds normally, milliseconds for fuzzy search.
DURATION_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, math.inf,
)  # fmt: skip
# A lookup's queries: a millisecond on a warm index, seconds for a scan or a slow database.
LOOKUP_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    math.inf,
)  # fmt: skip
LOOKUP_KINDS = ("documents", "chunks")


# A metric and the values of its labels: what one count goes to.
_Key = tuple[Any, tuple[str, ...]]

log = logging.getLogger(__name__)


class SourceLabels:
    """Maps a citation's source to a bounded label value.

    With an allow-list, only those values pass; without one, the first ``limit`` distinct
    values seen pass. Everything else (and a missing source) becomes ``other``. Values are cut
    to :data:`MAX_LABEL_LENGTH` characters: the number of series is bounded, and so is the size
    of each.
    """

    def __init__(self, allowed: Iterable[str] = (), limit: int = 20) -> None:
        self._allowed = frozenset(value[:MAX_LABEL_LENGTH] for value in allowed)
        self._seen: set[str] = set(self._allowed)
        self._limit = limit
        self.on_new: Callable[[str], None] | None = None

    @property
    def known(self) -> frozenset[str]:
        return frozenset(self._seen | {OTHER})

    def __call__(self, source: str | None) -> str:
        if source is None:
            return OTHER
        if len(source) > MAX_LABEL_LENGTH:
            source = source[:MAX_LABEL_LENGTH]  # every sample carries it: bound its size too
        if source in self._seen:
            return source
        if not self._allowed and len(self._seen) < self._limit:
            self._seen.add(source)
            if self.on_new is not None:
                self.on_new(source)
            return source
        return OTHER


class ExporterMetrics:
    """The exporter's metrics: the only code that touches metric objects.

    Counters and histograms are recorded from outcomes, a batch at a time (:meth:`record`);
    the state gauges are read from :class:`ExporterState` at scrape time. ``checks`` are the
    plug-in checks beyond coverage whose counters to declare (a policy's ``checks``). Pass a
    fresh ``CollectorRegistry()`` in tests.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        sources: SourceLabels,
        version: str,
        state: ExporterState | None = None,
        topics: SourceLabels | None = None,
        *,
        checks: Iterable[AnswerCheck | CitationCheck] = (),
    ) -> None:
        self.sources = sources
        self.topics = topics if topics is not None else SourceLabels()
        self.state = state if state is not None else ExporterState()
        registry.register(StateCollector(self.state))
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.checks = Counter(
            "citation_checks",
            "Citations checked.",
            ["mode", "source"],
            registry=registry,
        )
        self.drift_failures = Counter(
            "citation_drift_failures",
            "Citations whose span no longer holds the quote on the live document version "
            "(drift), by whether the offsets could be repaired.",
            ["mode", "source", "outcome"],
            registry=registry,
        )
        self.superseded_failures = Counter(
            "citation_superseded_failures",
            "Citations whose span no longer holds the quote because the document was "
            "reissued under a new version (content refresh, not drift).",
            ["mode", "source"],
            registry=registry,
        )
        self.document_missing = Counter(
            "citation_document_missing",
            "Citations of documents with no live chunk.",
            ["mode", "source"],
            registry=registry,
        )
        self.failure_reasons = Counter(
            "citation_failure_reasons",
            "Drift and superseded failures by reason.",
            ["mode", "kind", "reason"],
            registry=registry,
        )
        self.shift = BatchHistogram(
            "citation_offset_shift_characters",
            "Signed shift of repaired drift: where the quote is now minus where the span "
            "pointed, in characters.",
            ["mode"],
            SHIFT_BUCKETS,
            registry,
        )
        self.similarity = BatchHistogram(
            "citation_quote_similarity_ratio",
            "Folded similarity (0-1) between the quote and the text at the recorded span.",
            ["mode"],
            SIMILARITY_BUCKETS,
            registry,
        )
        self.check_duration = BatchHistogram(
            "citation_check_duration_seconds",
            "Time to check one citation inline.",
            [],
            DURATION_BUCKETS,
            registry,
        )
        self.check_duration.labels()
        self.build_info = Gauge(
            "citation_exporter_build_info",
            "The exporter's version; always 1.",
            ["version"],
            registry=registry,
        )
        self.events = Counter(
            "citation_exporter_events",
            "Kafka messages consumed, by topic.",
            ["topic"],
            registry=registry,
        )
        self.invalid_events = Counter(
            "citation_exporter_invalid_events",
            "Messages (or citations within them) that could not be parsed or validated; each "
            "went to the dead-letter topic.",
            ["topic", "reason"],
            registry=registry,
        )
        self.unreadable_messages = Counter(
            "citation_exporter_unreadable_messages",
            "Messages that could not be read from Kafka at all (a compression codec the client "
            "lacks, a failed checksum) and were skipped; each skip is logged with its offsets.",
            ["topic", "reason"],
            registry=registry,
        )
        self.last_event = Gauge(
            "citation_exporter_last_event_timestamp_seconds",
            "When the last message of a topic was consumed (Unix time).",
            ["topic"],
            registry=registry,
        )
        # the plug-in checks' counters (coverage's first), where coverage's always were
        self._check_metrics: dict[str, tuple[Counter, MetricSpec]] = {}
        for spec in (*COVERAGE_METRICS, *(spec for check in checks for spec in check.metrics)):
            if spec.name not in self._check_metrics:
                counter = Counter(
                    spec.name, spec.documentation, ["mode", *spec.labels], registry=registry
                )
                self._check_metrics[spec.name] = (counter, spec)
        self._unknown_metrics: set[str] = set()
        self.entailment_checks = Counter(
            "citation_entailment_checks",
            "Citations judged for entailment (does the quote establish its claim?), by the "
            "judge that decided and its result.",
            ["mode", "judge", "result"],
            registry=registry,
        )
        self.entailment_cost = Counter(
            "citation_entailment_cost_dollars",
            "What the model judge's calls cost, from the tokens it reported and the configured "
            "prices.",
            ["mode"],
            registry=registry,
        )
        self.entailment_tokens = Counter(
            "citation_entailment_tokens",
            "Tokens the model judge reported, by direction (prompt or completion).",
            ["mode", "direction"],
            registry=registry,
        )
        self.entailment_duration = BatchHistogram(
            "citation_entailment_duration_seconds",
            "Time to judge one citation, retries included, by judge.",
            ["judge"],
            JUDGE_BUCKETS,
            registry,
        )
        self.entailment_dropped = Counter(
            "citation_entailment_dropped",
            "Sampled citations not judged behind the response, by reason: queue_full (the "
            "judge is behind) or budget (the hourly budget is spent).",
            ["reason"],
            registry=registry,
        )
        # lookup mode: the queries for what each batch cites, their time, the rows they gave
        self.lookups = Counter(
            "citation_lookups",
            "Lookup mode: queries for the documents (kind documents) or the chunks by id "
            "(kind chunks) a batch cites, by result: ok, or error (the database did not "
            "answer; checking paused and the batch is fetched again).",
            ["kind", "result"],
            registry=registry,
        )
        self.lookup_duration = BatchHistogram(
            "citation_lookup_duration_seconds",
            "Lookup mode: time for one batch's lookup of a kind, its queries together.",
            ["kind"],
            LOOKUP_BUCKETS,
            registry,
        )
        self.lookup_rows = Counter(
            "citation_lookup_rows",
            "Lookup mode: rows the lookups read, by outcome: chunk, or bad (no valid chunk "
            "record: left out, as a sweep counts it).",
            ["outcome"],
            registry=registry,
        )
        for kind in LOOKUP_KINDS:
            self.lookup_duration.labels(kind)
            for result in ("ok", "error"):
                self.lookups.labels(kind, result)
        for outcome in ("chunk", "bad"):
            self.lookup_rows.labels(outcome)
        self.build_info.labels(version).set(1)
        for mode in MODES:
            self._initialise(mode)
        for judge in JUDGES:
            self.entailment_duration.labels(judge)
        for reason in DROP_REASONS:
            self.entailment_dropped.labels(reason)
        # a source seen for the first time gets all its series at 0 at once: a drift counter
        # born later at its first failure would hide that first burst from rate()
        sources.on_new = self._initialise_source
        self.topics.on_new = self._initialise_topic

    def _initialise_topic(self, topic: str) -> None:
        for mode in MODES:
            self._initialise_checks(mode, (topic,), topics_only=True)

    def _initialise_checks(
        self, mode: str, topics: Iterable[str], *, topics_only: bool = False
    ) -> None:
        """Start the plug-in checks' series at 0: each spec's initial label values, and for a
        spec by topic, those with each of ``topics``."""
        for counter, spec in self._check_metrics.values():
            if spec.topic:
                for values in spec.initial:
                    for topic in topics:
                        counter.labels(mode, *values, topic)
            elif not topics_only:
                for values in spec.initial:
                    counter.labels(mode, *values)

    def _initialise_source(self, source: str) -> None:
        for mode in MODES:
            self.checks.labels(mode, source)
            self.superseded_failures.labels(mode, source)
            self.document_missing.labels(mode, source)
            for outcome in ("repaired", "unrepaired"):
                self.drift_failures.labels(mode, source, outcome)

    def _initialise(self, mode: str) -> None:
        """Start every known series at 0, so rates and absent() behave from the first scrape."""
        for source in self.sources.known:
            self._initialise_source(source)
        for reason in _DRIFT_REASONS:
            self.failure_reasons.labels(mode, "drift", reason)
        for check in FailedCheck:
            self.failure_reasons.labels(mode, "superseded", check.value)
        self.shift.labels(mode)
        self.similarity.labels(mode)
        self.entailment_cost.labels(mode)
        for judge in JUDGES:
            for result in EntailmentResult:
                self.entailment_checks.labels(mode, judge, result.value)
        for direction in ("prompt", "completion"):
            self.entailment_tokens.labels(mode, direction)
        self._initialise_checks(mode, self.topics.known)

    def initialise_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self.events.labels(topic)

    def _child(self, metric: Any, labels: tuple[str, ...]) -> Any:
        """``metric.labels(*labels)``, remembered: looked up for every recorded batch."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def record(self, outcomes: Sequence[Outcome]) -> None:
        """Count a batch of handled messages: checks, failures, reasons, histograms, events
        and dead letters, each series updated once per batch.

        Inline, every message is a consumed event and its dead letter an invalid event; a
        sweep re-reads messages that were counted (and dead-lettered) when first consumed, so
        only its checks are counted, under ``mode="sweep"``.
        """
        # per citation only a tally and the values to observe; the series are updated below
        tally: dict[tuple[Mode, str | None, Status, str | None], int] = {}
        messages: dict[_Key, int] = {}
        key: _Key
        similarities: dict[Mode, list[float]] = {mode: [] for mode in Mode}
        shifts: dict[Mode, list[float]] = {mode: [] for mode in Mode}
        durations: list[float] = []
        invalid, repaired = Status.INVALID, Status.DRIFT_REPAIRED
        for outcome in outcomes:
            mode = outcome.mode
            for result in outcome.results:
                for name, values, count in result.counts():
                    if count:
                        found = self._result_key(mode, name, values)
                        if found is not None:
                            messages[found] = messages.get(found, 0) + count
            inline = mode is Mode.INLINE
            if inline:
                topic = outcome.origin.topic
                key = (self.events, (topic,))
                messages[key] = messages.get(key, 0) + 1
                if outcome.dead_letter is not None:
                    key = (self.invalid_events, (topic, outcome.dead_letter.reason))
                    messages[key] = messages.get(key, 0) + 1
            similarity = similarities[mode]
            for checked in outcome.checked:
                verdict = checked.verdict
                status = verdict.status
                if status is invalid:
                    continue  # counted with its message's dead letter
                counted = (mode, verdict.source, status, verdict.reason)
                tally[counted] = tally.get(counted, 0) + 1
                if verdict.similarity is not None:
                    similarity.append(verdict.similarity / 100.0)
                if inline:
                    durations.append(checked.seconds)
                if status is repaired and verdict.repair is not None:
                    shift = verdict.repair.shift
                    if shift is not None:
                        shifts[mode].append(shift)
        for (metric, labels), count in messages.items():
            self._child(metric, labels).inc(count)
        for (mode, source, status, reason), count in tally.items():
            for metric, labels in self._keys(status, reason, mode, self.sources(source)):
                self._child(metric, labels).inc(count)
        for mode in Mode:
            self.similarity.observe_many(similarities[mode], mode)
            self.shift.observe_many(shifts[mode], mode)
        self.check_duration.observe_many(durations)
        self._stamp_events(messages)

    def _stamp_events(self, counted: dict[_Key, int]) -> None:
        """When the last message of each topic in a batch was consumed: now."""
        now = time.time()
        for metric, labels in counted:
            if metric is self.events:
                self._child(self.last_event, labels).set(now)

    def _result_key(self, mode: Mode, name: str, values: tuple[str | None, ...]) -> _Key | None:
        """The counter and labels of one count a check's result made (its topic bounded);
        None for a metric no check declared (logged once: a plug-in's bug, not the batch's)."""
        found = self._check_metrics.get(name)
        if found is None:
            if name not in self._unknown_metrics:
                self._unknown_metrics.add(name)
                log.warning("a check counted into %r, which no check declared: not counted", name)
            return None
        counter, spec = found
        labels = tuple("" if value is None else value for value in values)
        if spec.topic:
            labels = (*labels[:-1], self.topics(values[-1]))
        return counter, (mode, *labels)

    def _keys(self, status: Status, reason: str | None, mode: str, source: str) -> tuple[_Key, ...]:
        """The counters (and their labels) one checked citation increments."""
        checks = (self.checks, (mode, source))
        if status is Status.OK:
            return (checks,)
        reason = reason or ""
        if status is Status.DOCUMENT_MISSING:
            return checks, (self.document_missing, (mode, source))
        if status is Status.SUPERSEDED:
            return (
                checks,
                (self.superseded_failures, (mode, source)),
                (self.failure_reasons, (mode, "superseded", reason)),
            )
        outcome = "repaired" if status is Status.DRIFT_REPAIRED else "unrepaired"
        return (
            checks,
            (self.drift_failures, (mode, source, outcome)),
            (self.failure_reasons, (mode, "drift", reason)),
        )

    def judged(self, mode: Mode, judgements: Sequence[Judgement], called: Sequence[bool]) -> None:
        """Count judgements: by deciding judge and result, and the model judge's calls (their
        cost, tokens and time; ``called`` says which judgement called it)."""
        checks: dict[tuple[str, str], int] = {}
        durations: dict[str, list[float]] = {}
        cost, prompt, completion = 0.0, 0, 0
        for judgement, was_called in zip(judgements, called, strict=True):
            key = (judgement.judge, judgement.result.value)
            checks[key] = checks.get(key, 0) + 1
            if was_called:
                durations.setdefault(judgement.judge, []).append(judgement.seconds)
                cost += judgement.cost_usd
                prompt += judgement.prompt_tokens
                completion += judgement.completion_tokens
        for (judge, result), count in checks.items():
            self._child(self.entailment_checks, (mode, judge, result)).inc(count)
        for judge, seconds in durations.items():
            self.entailment_duration.observe_many(seconds, judge)
        if cost:
            self._child(self.entailment_cost, (mode,)).inc(cost)
        for direction, tokens in (("prompt", prompt), ("completion", completion)):
            if tokens:
                self._child(self.entailment_tokens, (mode, direction)).inc(tokens)

    def dropped(self, reason: str, count: int = 1) -> None:
        """Count samples the judge behind the response did not take (queue full, budget)."""
        self._child(self.entailment_dropped, (reason,)).inc(count)

    def looked_up(
        self, kind: str, seconds: float, *, ok: bool, chunks: int = 0, bad: int = 0
    ) -> None:
        """Count one batch's lookup of ``kind`` (its queries together) and the rows it read."""
        self._child(self.lookups, (kind, "ok" if ok else "error")).inc()
        self.lookup_duration.observe_many((seconds,), kind)
        if chunks:
            self._child(self.lookup_rows, ("chunk",)).inc(chunks)
        if bad:
            self._child(self.lookup_rows, ("bad",)).inc(bad)

    def unreadable(self, topic: str, reason: str, count: int) -> None:
        """Count messages skipped because they could not be read from Kafka at all."""
        self._child(self.unreadable_messages, (topic, reason)).inc(count)
