"""``apply --from-kafka``: the verdicts topic applied as it streams, in a consumer group.

Each fetch (at most one transaction's worth of verdicts) is decided and applied in the target
(:class:`~exporter.postgres.apply.PostgresTarget`), and only once its transaction committed
are the fetch's offsets committed: a restart re-reads at most the last fetch, whose changes are
then ``already`` applied (nothing twice), and a target that fails is retried with backoff from
the same offsets (nothing lost). Its own metrics: changes per action and decision, skips per
reason, batches per result, and lag per partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry, Counter, Gauge

from exporter.config.kafka import KafkaConnection
from exporter.errors import ExporterError
from exporter.kafka.clients import lags, make_consumer
from exporter.pipeline.repairs import ApplyPolicy, Change, Tally, plan
from exporter.records.decode import RecordError, parse_json

__all__ = ["ApplyMetrics", "stream_apply"]

log = logging.getLogger(__name__)

FETCH_RECORDS = 500
_MAX_BACKOFF_SECONDS = 30.0


class ApplyMetrics:
    """What the streaming apply did, on a registry of its own."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.changes = Counter(
            "citation_apply_changes",
            "Verdicts acted on, by action and decision: apply (changed), already (held what "
            "the verdict writes), conflict (changed since the sweep: left alone), not_found.",
            ["action", "decision"],
            registry=registry,
        )
        self.skipped = Counter(
            "citation_apply_skipped",
            "Verdicts not acted on, by reason (keep, fix_record, a policy, not JSON, ...).",
            ["reason"],
            registry=registry,
        )
        self.batches = Counter(
            "citation_apply_batches",
            "Fetched batches, by result: ok (applied, offsets committed) or error (retried).",
            ["result"],
            registry=registry,
        )
        self.lag = Gauge(
            "citation_apply_lag_messages",
            "Verdicts on the topic not yet applied, per partition.",
            ["partition"],
            registry=registry,
        )
        for result in ("ok", "error"):
            self.batches.labels(result)

    def record(self, tally: Tally) -> None:
        for (action, decision), count in tally.decisions.items():
            self.changes.labels(action, decision).inc(count)
        if tally.not_found:
            self.changes.labels("any", "not_found").inc(tally.not_found)
        for reason, count in tally.skipped.items():
            self.skipped.labels(reason).inc(count)


def _changes(records: list[Any], policy: ApplyPolicy, tally: Tally) -> list[Change]:
    by_citation: dict[str, Change] = {}
    for record in records:
        try:
            verdict = parse_json(record.value or b"")
        except RecordError:
            tally.skip("not_json")
            continue
        made = plan(verdict, policy)
        if isinstance(made, Change):
            by_citation[made.citation_id] = made
        else:
            tally.skip(made.reason)
    return list(by_citation.values())


async def stream_apply(
    connection: KafkaConnection,
    topic: str,
    target: Any,
    policy: ApplyPolicy,
    *,
    group_id: str,
    commit: bool,
    stop: asyncio.Event,
    metrics: ApplyMetrics,
    now: Callable[[], str] = lambda: datetime.now(UTC).isoformat(timespec="seconds"),
) -> None:
    """Apply the verdicts topic until ``stop``; a dry run (no ``commit``) commits no offset."""
    consumer = make_consumer(connection, "apply", group_id=group_id)
    await consumer.start()
    consumer.subscribe([topic])
    backoff = 0.5
    try:
        while not stop.is_set():
            fetched = await consumer.getmany(timeout_ms=1000, max_records=FETCH_RECORDS)
            if not fetched:
                await _report_lag(consumer, metrics)
                continue
            records = [record for part in fetched.values() for record in part]
            tally = Tally()
            changes = _changes(records, policy, tally)
            try:
                await asyncio.to_thread(
                    target.apply, changes, tally, sweep=f"stream:{topic}", now=now(), commit=commit
                )
            except ExporterError as exc:
                metrics.batches.labels("error").inc()
                log.error(
                    "apply of %d verdicts failed: %s; retrying in %.1f s",
                    len(records),
                    exc,
                    backoff,
                )
                for tp, part in fetched.items():
                    consumer.seek(tp, part[0].offset)  # the same verdicts again
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(_MAX_BACKOFF_SECONDS, backoff * 2)
                continue
            backoff = 0.5
            metrics.record(tally)
            metrics.batches.labels("ok").inc()
            if commit:
                await consumer.commit(
                    {TopicPartition(tp.topic, tp.partition): part[-1].offset + 1
                     for tp, part in fetched.items()}
                )  # fmt: skip
            await _report_lag(consumer, metrics)
    finally:
        await consumer.stop()


async def _report_lag(consumer: Any, metrics: ApplyMetrics) -> None:
    for (_, partition), lag in (await lags(consumer)).items():
        metrics.lag.labels(str(partition)).set(lag)
